// Package image checks the OCI image layouts `make image` writes, reading
// them with the standard library alone (not with the library that wrote
// them): the index holds linux/amd64 and linux/arm64, every image runs as
// 65532 with its binary as entrypoint, carries CA certificates and no shell,
// every blob matches its digest, and the amd64 binary, unpacked from the
// layers, runs and reports the stamped version.
//
// `make test-image` builds the images and runs this with AZLB_IMAGE_DIR,
// AZLB_IMAGE_TAG and AZLB_IMAGE_VERSION set; without them the test skips.
package image

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"crypto/x509"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// images are the images make image builds.
var images = []string{"azlb-controller-manager", "azlb-node-manager", "azlb-emulator"}

// wantPlatforms are the platforms of every index.
var wantPlatforms = []string{"linux/amd64", "linux/arm64"}

type descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Annotations map[string]string `json:"annotations"`
	Platform    *struct {
		OS           string `json:"os"`
		Architecture string `json:"architecture"`
	} `json:"platform"`
}

type index struct {
	MediaType string       `json:"mediaType"`
	Manifests []descriptor `json:"manifests"`
}

type manifest struct {
	MediaType string       `json:"mediaType"`
	Config    descriptor   `json:"config"`
	Layers    []descriptor `json:"layers"`
}

type config struct {
	OS           string `json:"os"`
	Architecture string `json:"architecture"`
	Config       struct {
		User       string            `json:"User"`
		Entrypoint []string          `json:"Entrypoint"`
		Cmd        []string          `json:"Cmd"`
		Env        []string          `json:"Env"`
		Labels     map[string]string `json:"Labels"`
	} `json:"config"`
	RootFS struct {
		DiffIDs []string `json:"diff_ids"`
	} `json:"rootfs"`
}

// layout is one OCI image layout directory.
type layout struct {
	t   *testing.T
	dir string
}

// blob reads a blob and checks it against its descriptor.
func (l layout) blob(d descriptor) []byte {
	l.t.Helper()
	algo, hexDigest, ok := strings.Cut(d.Digest, ":")
	if !ok || algo != "sha256" {
		l.t.Fatalf("digest %q is not sha256", d.Digest)
	}
	b, err := os.ReadFile(filepath.Join(l.dir, "blobs", "sha256", hexDigest))
	if err != nil {
		l.t.Fatal(err)
	}
	if sum := sha256.Sum256(b); hex.EncodeToString(sum[:]) != hexDigest {
		l.t.Fatalf("blob %s does not match its digest", d.Digest)
	}
	if int64(len(b)) != d.Size {
		l.t.Fatalf("blob %s has %d bytes, descriptor says %d", d.Digest, len(b), d.Size)
	}
	return b
}

func (l layout) json(d descriptor, v any) {
	l.t.Helper()
	if err := json.Unmarshal(l.blob(d), v); err != nil {
		l.t.Fatalf("blob %s: %v", d.Digest, err)
	}
}

func env(t *testing.T) (dir, tag, version string) {
	dir, tag, version = os.Getenv("AZLB_IMAGE_DIR"), os.Getenv("AZLB_IMAGE_TAG"), os.Getenv("AZLB_IMAGE_VERSION")
	if dir == "" || tag == "" || version == "" {
		t.Skip("run through `make test-image` (AZLB_IMAGE_DIR, AZLB_IMAGE_TAG, AZLB_IMAGE_VERSION)")
	}
	return dir, tag, version
}

func TestImages(t *testing.T) {
	dir, tag, version := env(t)
	for _, name := range images {
		t.Run(name, func(t *testing.T) {
			l := layout{t: t, dir: filepath.Join(dir, name)}
			idx := taggedIndex(t, l, tag)
			if idx.MediaType != "application/vnd.oci.image.index.v1+json" {
				t.Errorf("index media type %q, want the OCI image index", idx.MediaType)
			}
			var platforms []string
			for _, d := range idx.Manifests {
				if d.Platform == nil {
					t.Fatalf("manifest %s has no platform", d.Digest)
				}
				p := d.Platform.OS + "/" + d.Platform.Architecture
				platforms = append(platforms, p)
				t.Run(p, func(t *testing.T) { checkImage(t, l, d, name, version) })
			}
			slices.Sort(platforms)
			if !slices.Equal(platforms, wantPlatforms) {
				t.Errorf("index platforms %v, want %v", platforms, wantPlatforms)
			}
		})
	}
}

// taggedIndex is the index index.json tags tag.
func taggedIndex(t *testing.T, l layout, tag string) index {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(l.dir, "index.json"))
	if err != nil {
		t.Fatalf("no OCI layout (run make image): %v", err)
	}
	var root index
	if err := json.Unmarshal(b, &root); err != nil {
		t.Fatal(err)
	}
	for _, d := range root.Manifests {
		if d.Annotations["org.opencontainers.image.ref.name"] == tag {
			var idx index
			l.json(d, &idx)
			return idx
		}
	}
	t.Fatalf("index.json has no index tagged %q", tag)
	return index{}
}

func checkImage(t *testing.T, l layout, d descriptor, name, version string) {
	var m manifest
	l.json(d, &m)
	if m.MediaType != "application/vnd.oci.image.manifest.v1+json" {
		t.Errorf("manifest media type %q", m.MediaType)
	}
	var c config
	l.json(m.Config, &c)
	if c.OS != d.Platform.OS || c.Architecture != d.Platform.Architecture {
		t.Errorf("config is for %s/%s, index says %s/%s", c.OS, c.Architecture, d.Platform.OS, d.Platform.Architecture)
	}
	if c.Config.User != "65532:65532" {
		t.Errorf("user %q, want 65532:65532 (non-root)", c.Config.User)
	}
	entry := "/usr/local/bin/" + name
	if !slices.Equal(c.Config.Entrypoint, []string{entry}) || len(c.Config.Cmd) != 0 {
		t.Errorf("entrypoint %q cmd %q, want [%s] and no cmd", c.Config.Entrypoint, c.Config.Cmd, entry)
	}
	if got := c.Config.Labels["org.opencontainers.image.version"]; got != version {
		t.Errorf("version label %q, want %q", got, version)
	}
	if len(m.Layers) != len(c.RootFS.DiffIDs) {
		t.Fatalf("%d layers, %d diff ids", len(m.Layers), len(c.RootFS.DiffIDs))
	}

	root := t.TempDir()
	for i, ld := range m.Layers {
		if ld.MediaType != "application/vnd.oci.image.layer.v1.tar+gzip" {
			t.Errorf("layer %d media type %q", i, ld.MediaType)
		}
		unpack(t, l.blob(ld), c.RootFS.DiffIDs[i], root)
	}
	checkFilesystem(t, root, entry)

	bin := filepath.Join(root, entry)
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	wantMachine := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[c.Architecture]
	if f.Machine != wantMachine {
		t.Errorf("%s is built for %s, want %s", entry, f.Machine, wantMachine)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("%s is dynamically linked; the image has no libc", entry)
		}
	}
	if c.Architecture != "amd64" {
		return // runs only on this machine's architecture
	}
	out, err := exec.Command(bin, "--version").CombinedOutput()
	if err != nil {
		t.Fatalf("%s --version: %v\n%s", entry, err, out)
	}
	if want := name + " " + version + " ("; !strings.HasPrefix(string(out), want) {
		t.Errorf("%s --version printed %q, want it to start with %q", entry, out, want)
	}
}

// unpack extracts a gzip-compressed layer into root after checking its
// uncompressed digest against the config's diff id.
func unpack(t *testing.T, blob []byte, diffID, root string) {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(blob))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	if sum := sha256.Sum256(raw); "sha256:"+hex.EncodeToString(sum[:]) != diffID {
		t.Fatalf("layer does not match diff id %s", diffID)
	}
	tr := tar.NewReader(bytes.NewReader(raw))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		clean := path.Clean("/" + h.Name)
		if strings.HasPrefix(path.Base(clean), ".wh.") {
			t.Fatalf("unexpected whiteout %s", h.Name)
		}
		dst := filepath.Join(root, filepath.FromSlash(clean))
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(dst, 0o755); err != nil {
				t.Fatal(err)
			}
		case tar.TypeReg:
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(dst, b, os.FileMode(h.Mode)&0o755|0o600); err != nil {
				t.Fatal(err)
			}
		default:
			t.Errorf("%s: entry type %q (links and devices are not expected)", h.Name, h.Typeflag)
		}
	}
}

// checkFilesystem checks what the unpacked image holds besides its binary.
func checkFilesystem(t *testing.T, root, entry string) {
	t.Helper()
	var files []string
	if err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			rel, _ := filepath.Rel(root, p)
			files = append(files, "/"+filepath.ToSlash(rel))
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	slices.Sort(files)
	want := []string{"/etc/group", "/etc/passwd", "/etc/ssl/certs/ca-certificates.crt", entry}
	slices.Sort(want)
	if !slices.Equal(files, want) {
		t.Errorf("image files %q, want exactly %q (no shell, nothing else)", files, want)
	}
	passwd, err := os.ReadFile(filepath.Join(root, "etc", "passwd"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(passwd), "nonroot:x:65532:65532:") {
		t.Errorf("/etc/passwd has no nonroot user 65532:\n%s", passwd)
	}
	checkCAs(t, filepath.Join(root, "etc", "ssl", "certs", "ca-certificates.crt"))
}

// checkCAs parses the bundle and looks for the roots Azure's endpoints
// chain to.
func checkCAs(t *testing.T, file string) {
	t.Helper()
	rest, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	subjects := map[string]bool{}
	for {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			t.Fatalf("CA bundle: %v", err)
		}
		if !c.IsCA {
			t.Errorf("CA bundle holds a non-CA certificate %s", c.Subject)
		}
		subjects[c.Subject.CommonName] = true
	}
	if len(subjects) < 100 {
		t.Errorf("CA bundle has %d roots, want the public roots (more than 100)", len(subjects))
	}
	for _, cn := range []string{"DigiCert Global Root G2", "Microsoft RSA Root Certificate Authority 2017", "Microsoft ECC Root Certificate Authority 2017"} {
		if !subjects[cn] {
			t.Errorf("CA bundle lacks %q, a root of Azure's endpoints", cn)
		}
	}
}
