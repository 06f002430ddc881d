package main

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// ArchiveOptions say how to pack a root filesystem directory into an image
// archive (the tarball `docker save` writes and `ctr images import` reads).
type ArchiveOptions struct {
	// RootFS is the directory that becomes the image's one layer, as it is
	// (regular files, directories and symbolic links; modes kept, owned by
	// root).
	RootFS string
	// Ref names the image in the archive, e.g.
	// registry.k8s.io/e2e-test-images/agnhost:2.66.1.
	Ref string
	// Entrypoint, Cmd and Env are the image configuration's.
	Entrypoint, Cmd, Env []string
	// Out is the archive written.
	Out string
	// Platform is the image's (linux/amd64 by default).
	Platform v1.Platform
	// Created stamps the image and every file, so the same tree gives the
	// same digest.
	Created time.Time
}

// Archive writes o.Out: a single-platform image of o.RootFS named o.Ref.
// The test images of the real cluster (internal/localcluster) are made so,
// since its nodes never pull.
func Archive(o ArchiveOptions) (v1.Hash, error) {
	switch {
	case o.RootFS == "":
		return v1.Hash{}, errors.New("--rootfs is required")
	case o.Out == "":
		return v1.Hash{}, errors.New("--out is required")
	case len(o.Entrypoint) == 0 && len(o.Cmd) == 0:
		return v1.Hash{}, errors.New("--entrypoint or --cmd is required")
	}
	ref, err := name.ParseReference(o.Ref, name.StrictValidation)
	if err != nil {
		return v1.Hash{}, fmt.Errorf("--ref %q: %w", o.Ref, err)
	}
	if _, ok := ref.(name.Tag); !ok {
		return v1.Hash{}, fmt.Errorf("--ref %q: want a tag, not a digest", o.Ref)
	}
	if o.Platform.OS == "" {
		o.Platform = v1.Platform{OS: "linux", Architecture: "amd64"}
	}
	layer, err := dirLayer(o.RootFS, o.Created)
	if err != nil {
		return v1.Hash{}, err
	}
	img, err := mutate.AppendLayers(mutate.MediaType(empty.Image, types.DockerManifestSchema2), layer)
	if err != nil {
		return v1.Hash{}, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return v1.Hash{}, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = o.Platform.OS, o.Platform.Architecture
	cf.Created = v1.Time{Time: o.Created}
	cf.Config.Entrypoint, cf.Config.Cmd, cf.Config.Env = o.Entrypoint, o.Cmd, o.Env
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return v1.Hash{}, err
	}
	tmp := o.Out + ".tmp"
	if err := tarball.WriteToFile(tmp, ref, img); err != nil {
		_ = os.Remove(tmp)
		return v1.Hash{}, err
	}
	if err := os.Rename(tmp, o.Out); err != nil {
		return v1.Hash{}, err
	}
	return img.Digest()
}

// dirLayer tars the tree under root (sorted, every entry stamped mtime and
// owned by root) as an uncompressed Docker layer.
func dirLayer(root string, mtime time.Time) (v1.Layer, error) {
	var paths []string
	err := filepath.WalkDir(root, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != root {
			paths = append(paths, p)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(paths) == 0 {
		return nil, fmt.Errorf("--rootfs %s is empty", root)
	}
	sort.Strings(paths)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, p := range paths {
		if err := addEntry(tw, root, p, mtime); err != nil {
			return nil, err
		}
	}
	return closeLayer(tw, &buf, types.DockerUncompressedLayer)
}

func addEntry(tw *tar.Writer, root, p string, mtime time.Time) error {
	fi, err := os.Lstat(p)
	if err != nil {
		return err
	}
	rel, err := filepath.Rel(root, p)
	if err != nil {
		return err
	}
	h := &tar.Header{Name: filepath.ToSlash(rel), Mode: int64(fi.Mode().Perm()), ModTime: mtime, Format: tar.FormatPAX}
	var data []byte
	switch m := fi.Mode(); {
	case m.IsDir():
		h.Typeflag, h.Name = tar.TypeDir, h.Name+"/"
	case m&fs.ModeSymlink != 0:
		h.Typeflag = tar.TypeSymlink
		if h.Linkname, err = os.Readlink(p); err != nil {
			return err
		}
	case m.IsRegular():
		if data, err = os.ReadFile(p); err != nil {
			return err
		}
		h.Typeflag, h.Size = tar.TypeReg, int64(len(data))
		if m&fs.ModeSetuid != 0 || m&fs.ModeSetgid != 0 {
			return fmt.Errorf("%s: set-user-ID or set-group-ID files are not packed", p)
		}
	default:
		return fmt.Errorf("%s: not a regular file, directory or symbolic link (mode %s): not packed", p, m)
	}
	if err := tw.WriteHeader(h); err != nil {
		return err
	}
	_, err = tw.Write(data)
	return err
}
