package main

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Image user and paths.
const (
	// NonRootUID is the user (and group) every image runs as.
	NonRootUID = 65532
	// BinaryDir holds the image's one binary.
	BinaryDir = "/usr/local/bin"
	// CACertsFile is where Go's crypto/x509 looks first on Linux.
	CACertsFile = "/etc/ssl/certs/ca-certificates.crt"
	// RefNameAnnotation tags an index inside an OCI layout.
	RefNameAnnotation = "org.opencontainers.image.ref.name"
)

// BuildOptions say which images to assemble from which binaries.
type BuildOptions struct {
	BinDir, OutDir, Tag string
	Names               []string
	Platforms           []v1.Platform
	Version, Revision   string
	Created             time.Time
}

// BuildResult describes one written OCI layout.
type BuildResult struct {
	Name, Dir string
	Digest    v1.Hash
	Platforms []string
}

// ParsePlatforms reads "linux/amd64,linux/arm64".
func ParsePlatforms(s string) ([]v1.Platform, error) {
	var out []v1.Platform
	for _, p := range strings.Split(s, ",") {
		osName, arch, ok := strings.Cut(strings.TrimSpace(p), "/")
		if !ok || osName != "linux" || arch == "" || strings.Contains(arch, "/") {
			return nil, fmt.Errorf("platform %q: want linux/<arch>", p)
		}
		if _, known := elfMachines[arch]; !known {
			return nil, fmt.Errorf("platform %q: architecture %s is not one of %s", p, arch, strings.Join(knownArches(), ", "))
		}
		out = append(out, v1.Platform{OS: osName, Architecture: arch})
	}
	return out, nil
}

// elfMachines maps GOARCH to the ELF machine its binaries carry, to catch a
// binary built for the wrong platform.
var elfMachines = map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}

func knownArches() []string { return []string{"amd64", "arm64"} }

// Build writes <OutDir>/<name> for every name: an OCI layout holding one
// image index, tagged Tag, with one image per platform.
func Build(o BuildOptions) ([]BuildResult, error) {
	switch {
	case o.BinDir == "":
		return nil, errors.New("--bin-dir is required")
	case o.OutDir == "":
		return nil, errors.New("--out is required")
	case o.Tag == "":
		return nil, errors.New("--tag is required")
	case len(o.Names) == 0:
		return nil, errors.New("name at least one image (binary)")
	case len(o.Platforms) == 0:
		return nil, errors.New("name at least one platform")
	}
	base, err := rootFSLayer(o.Created)
	if err != nil {
		return nil, err
	}
	var results []BuildResult
	for _, name := range o.Names {
		r, err := buildOne(o, base, name)
		if err != nil {
			return nil, fmt.Errorf("image %s: %w", name, err)
		}
		results = append(results, r)
	}
	return results, nil
}

func buildOne(o BuildOptions, base v1.Layer, name string) (BuildResult, error) {
	if name == "" || strings.ContainsAny(name, "/\\") || name == "." || name == ".." {
		return BuildResult{}, fmt.Errorf("%q is not a binary name", name)
	}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	var platforms []string
	for _, p := range o.Platforms {
		img, err := platformImage(o, base, name, p)
		if err != nil {
			return BuildResult{}, fmt.Errorf("%s/%s: %w", p.OS, p.Architecture, err)
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
			Add:        img,
			Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: p.OS, Architecture: p.Architecture}},
		})
		platforms = append(platforms, p.OS+"/"+p.Architecture)
	}
	idx = mutate.Annotations(idx, annotations(o, name)).(v1.ImageIndex)
	dir := filepath.Join(o.OutDir, name)
	if err := os.RemoveAll(dir); err != nil {
		return BuildResult{}, err
	}
	lp, err := layout.Write(dir, empty.Index)
	if err != nil {
		return BuildResult{}, err
	}
	if err := lp.AppendIndex(idx, layout.WithAnnotations(map[string]string{RefNameAnnotation: o.Tag})); err != nil {
		return BuildResult{}, err
	}
	d, err := idx.Digest()
	if err != nil {
		return BuildResult{}, err
	}
	return BuildResult{Name: name, Dir: dir, Digest: d, Platforms: platforms}, nil
}

// annotations are the OCI labels of an image and its index.
func annotations(o BuildOptions, name string) map[string]string {
	a := map[string]string{
		"org.opencontainers.image.title":    name,
		"org.opencontainers.image.version":  o.Version,
		"org.opencontainers.image.created":  o.Created.Format(time.RFC3339),
		"org.opencontainers.image.licenses": "Apache-2.0",
	}
	if o.Revision != "" {
		a["org.opencontainers.image.revision"] = o.Revision
	}
	return a
}

// platformImage is the image of one binary for one platform.
func platformImage(o BuildOptions, base v1.Layer, name string, p v1.Platform) (v1.Image, error) {
	bin := filepath.Join(o.BinDir, p.OS+"_"+p.Architecture, name)
	data, err := os.ReadFile(bin)
	if err != nil {
		return nil, err
	}
	if err := checkStatic(data, elfMachines[p.Architecture]); err != nil {
		return nil, fmt.Errorf("%s: %w", bin, err)
	}
	binLayer, err := tarLayer(o.Created, []tarEntry{
		{path: "usr/", dir: true, mode: 0o755},
		{path: "usr/local/", dir: true, mode: 0o755},
		{path: "usr/local/bin/", dir: true, mode: 0o755},
		{path: strings.TrimPrefix(BinaryDir, "/") + "/" + name, mode: 0o755, data: data},
	})
	if err != nil {
		return nil, err
	}
	img, err := mutate.AppendLayers(mutate.MediaType(empty.Image, types.OCIManifestSchema1), base, binLayer)
	if err != nil {
		return nil, err
	}
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = p.OS, p.Architecture
	cf.Created = v1.Time{Time: o.Created}
	cf.Author = "azlb"
	user := fmt.Sprintf("%d:%d", NonRootUID, NonRootUID)
	cf.Config = v1.Config{
		Entrypoint: []string{BinaryDir + "/" + name},
		User:       user,
		WorkingDir: "/",
		Env:        []string{"PATH=" + BinaryDir, "SSL_CERT_FILE=" + CACertsFile},
		Labels:     annotations(o, name),
	}
	cf.History = []v1.History{
		{Created: cf.Created, CreatedBy: "azlb-image: root filesystem (passwd, CA certificates, /tmp)", Comment: "rootfs"},
		{Created: cf.Created, CreatedBy: "azlb-image: " + BinaryDir + "/" + name, Comment: "binary"},
	}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, err
	}
	return mutate.Annotations(img, annotations(o, name)).(v1.Image), nil
}

// checkStatic accepts an ELF executable for machine without a dynamic
// loader (a static binary: the image has no libc).
func checkStatic(data []byte, machine elf.Machine) error {
	f, err := elf.NewFile(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("not an ELF binary: %w", err)
	}
	defer func() { _ = f.Close() }() // a reader over memory: nothing to release
	if f.Machine != machine {
		return fmt.Errorf("built for %s, want %s", f.Machine, machine)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return errors.New("dynamically linked (build with CGO_ENABLED=0): the image has no libc")
		}
	}
	return nil
}

// tarEntry is one file or directory of a layer.
type tarEntry struct {
	path     string
	dir      bool
	mode     int64
	uid, gid int
	data     []byte
}

// tarLayer builds a gzip-compressed OCI layer; every entry gets mtime, so
// the same entries give the same digest.
func tarLayer(mtime time.Time, entries []tarEntry) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e.path, Mode: e.mode, Uid: e.uid, Gid: e.gid, ModTime: mtime}
		if e.dir {
			h.Typeflag = tar.TypeDir
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(e.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, err
		}
	}
	return closeLayer(tw, &buf, types.OCILayer)
}

// closeLayer closes tw, which wrote a layer's tar stream into buf, and
// returns the layer of that media type.
func closeLayer(tw *tar.Writer, buf *bytes.Buffer, mt types.MediaType) (v1.Layer, error) {
	if err := tw.Close(); err != nil {
		return nil, err
	}
	b := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(b)), nil
	}, tarball.WithMediaType(mt))
}
