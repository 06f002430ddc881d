package main

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// TestArchiveRoundTrips packs a small tree and reads the archive back as
// `ctr images import` would: the tag, the configuration and every entry
// (file, directory, symbolic link) are there, and the same tree gives the
// same digest.
func TestArchiveRoundTrips(t *testing.T) {
	root := t.TempDir()
	mustWrite(t, filepath.Join(root, "bin", "tool"), "#!/bin/sh\n", 0o755)
	mustWrite(t, filepath.Join(root, "etc", "wgetrc"), "tries = 1\n", 0o644)
	if err := os.Symlink("tool", filepath.Join(root, "bin", "sh")); err != nil {
		t.Fatal(err)
	}
	o := ArchiveOptions{RootFS: root, Ref: "registry.k8s.io/e2e-test-images/agnhost:2.66.1", Entrypoint: []string{"/bin/tool"},
		Env: []string{"PATH=/bin"}, Out: filepath.Join(t.TempDir(), "agnhost.tar"), Created: time.Unix(1700000000, 0).UTC()}
	d1, err := Archive(o)
	if err != nil {
		t.Fatal(err)
	}
	tag, err := name.NewTag(o.Ref)
	if err != nil {
		t.Fatal(err)
	}
	img, err := tarball.ImageFromPath(o.Out, &tag)
	if err != nil {
		t.Fatalf("the archive has no image %s: %v", o.Ref, err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.OS != "linux" || cf.Architecture != "amd64" || !reflect.DeepEqual(cf.Config.Entrypoint, o.Entrypoint) || !reflect.DeepEqual(cf.Config.Env, o.Env) {
		t.Errorf("config %s/%s entrypoint %q env %q", cf.OS, cf.Architecture, cf.Config.Entrypoint, cf.Config.Env)
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers %d, %v", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rc.Close() }()
	got := map[string]string{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		_, _ = io.Copy(&b, tr)
		got[h.Name] = strings.Join([]string{string(h.Typeflag), h.Linkname, b.String(), os.FileMode(h.Mode).String()}, "|")
	}
	want := map[string]string{
		"bin/":       "5|||-rwxr-xr-x",
		"bin/sh":     "2|tool||-rwxrwxrwx",
		"bin/tool":   "0||#!/bin/sh\n|-rwxr-xr-x",
		"etc/":       "5|||-rwxr-xr-x",
		"etc/wgetrc": "0||tries = 1\n|-rw-r--r--",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("layer entries\n got %q\nwant %q", got, want)
	}
	o.Out = filepath.Join(t.TempDir(), "again.tar")
	if d2, err := Archive(o); err != nil || d2 != d1 {
		t.Errorf("second archive of the same tree: %s, %v; first %s", d2, err, d1)
	}
}

// TestArchiveRefusesWhatItCannotPack: a bad reference, an empty tree, a
// special file, no entrypoint; nothing is written.
func TestArchiveRefusesWhatItCannotPack(t *testing.T) {
	full := t.TempDir()
	mustWrite(t, filepath.Join(full, "f"), "x", 0o644)
	fifo := t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(fifo, "pipe"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "out.tar")
	for _, c := range []struct {
		o    ArchiveOptions
		want string
	}{
		{ArchiveOptions{RootFS: full, Ref: "Bad Name:1", Cmd: []string{"x"}}, `--ref "Bad Name:1"`},
		{ArchiveOptions{RootFS: full, Ref: "registry.k8s.io/pause@sha256:" + strings.Repeat("a", 64), Cmd: []string{"x"}}, "want a tag"},
		{ArchiveOptions{RootFS: t.TempDir(), Ref: "registry.k8s.io/pause:3.10.2", Cmd: []string{"x"}}, "is empty"},
		{ArchiveOptions{RootFS: fifo, Ref: "registry.k8s.io/pause:3.10.2", Cmd: []string{"x"}}, "not a regular file"},
		{ArchiveOptions{RootFS: full, Ref: "registry.k8s.io/pause:3.10.2"}, "--entrypoint or --cmd is required"},
	} {
		c.o.Out = out
		if _, err := Archive(c.o); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Archive(%+v) = %v, want an error with %q", c.o, err, c.want)
		}
		if _, err := os.Stat(out); !os.IsNotExist(err) {
			t.Errorf("Archive(%+v) wrote %s", c.o, out)
		}
	}
}

func mustWrite(t *testing.T, p, data string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(data), mode); err != nil {
		t.Fatal(err)
	}
}
