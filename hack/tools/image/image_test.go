package main

import (
	"bytes"
	"context"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// fakeBinaries cross-compiles a tiny static program for both platforms into
// dir/<os>_<arch>/<name>: real ELF files of the right machine, built in
// seconds.
func fakeBinaries(t *testing.T, names ...string) string {
	t.Helper()
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	if err := os.MkdirAll(src, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(p, s string) {
		if err := os.WriteFile(filepath.Join(src, p), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module fake\n\ngo 1.26\n")
	write("main.go", "package main\n\nfunc main() { println(\"fake\") }\n")
	for _, arch := range []string{"amd64", "arm64"} {
		for _, n := range names {
			cmd := exec.Command("go", "build", "-trimpath", "-o", filepath.Join(dir, "linux_"+arch, n), ".")
			cmd.Dir = src
			cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch, "GOFLAGS=-buildvcs=false")
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("build fake %s for %s: %v\n%s", n, arch, err, out)
			}
		}
	}
	return dir
}

func buildOptions(t *testing.T, bin string) BuildOptions {
	t.Helper()
	platforms, err := ParsePlatforms("linux/amd64,linux/arm64")
	if err != nil {
		t.Fatal(err)
	}
	return BuildOptions{BinDir: bin, OutDir: t.TempDir(), Tag: "v1.2.3", Names: []string{"one", "two"},
		Platforms: platforms, Version: "v1.2.3", Revision: "abc", Created: time.Unix(1700000000, 0).UTC()}
}

func TestBuildIsReproducibleAndPushRoundTrips(t *testing.T) {
	bin := fakeBinaries(t, "one", "two")
	o := buildOptions(t, bin)
	first, err := Build(o)
	if err != nil {
		t.Fatal(err)
	}
	o2 := o
	o2.OutDir = t.TempDir()
	second, err := Build(o2)
	if err != nil {
		t.Fatal(err)
	}
	for i := range first {
		if first[i].Digest != second[i].Digest {
			t.Errorf("%s: two builds of the same binaries gave %s and %s", first[i].Name, first[i].Digest, second[i].Digest)
		}
	}
	if first[0].Digest == first[1].Digest {
		t.Errorf("images one and two share digest %s", first[0].Digest)
	}

	// Push to go-containerregistry's registry, served on loopback, and read
	// the index back by tag.
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	refs, err := Push(context.Background(), PushOptions{Dir: o.OutDir, Registry: host + "/azlb", Tag: "v1.2.3", Names: []string{"one", "two"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(refs) != 2 {
		t.Fatalf("pushed %v, want two references", refs)
	}
	for _, r := range first {
		ref, err := name.NewTag(host + "/azlb/" + r.Name + ":v1.2.3")
		if err != nil {
			t.Fatal(err)
		}
		idx, err := remote.Index(ref)
		if err != nil {
			t.Fatalf("pull %s: %v", ref, err)
		}
		d, err := idx.Digest()
		if err != nil {
			t.Fatal(err)
		}
		if d != r.Digest {
			t.Errorf("%s: registry has %s, built %s", ref, d, r.Digest)
		}
		m, err := idx.IndexManifest()
		if err != nil {
			t.Fatal(err)
		}
		if len(m.Manifests) != 2 {
			t.Fatalf("%s: %d manifests, want 2", ref, len(m.Manifests))
		}
		for _, md := range m.Manifests {
			img, err := idx.Image(md.Digest)
			if err != nil {
				t.Fatalf("%s %s: %v", ref, md.Platform, err)
			}
			cf, err := img.ConfigFile()
			if err != nil {
				t.Fatal(err)
			}
			if cf.Config.User != "65532:65532" || cf.Architecture != md.Platform.Architecture {
				t.Errorf("%s %s: user %q arch %q", ref, md.Platform, cf.Config.User, cf.Architecture)
			}
		}
	}
}

func TestBuildRefusesWrongOrDynamicBinaries(t *testing.T) {
	bin := fakeBinaries(t, "one")
	o := buildOptions(t, bin)
	o.Names = []string{"one"}
	// The arm64 slot holds the amd64 binary.
	amd, err := os.ReadFile(filepath.Join(bin, "linux_amd64", "one"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bin, "linux_arm64", "one"), amd, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := Build(o); err == nil || !strings.Contains(err.Error(), "built for EM_X86_64, want EM_AARCH64") {
		t.Errorf("Build with an amd64 binary for arm64 = %v, want a machine mismatch", err)
	}
	if err := os.WriteFile(filepath.Join(bin, "linux_arm64", "one"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := Build(o); err == nil || !strings.Contains(err.Error(), "not an ELF binary") {
		t.Errorf("Build with a script = %v, want not an ELF binary", err)
	}
	if _, err := Build(BuildOptions{BinDir: bin, OutDir: t.TempDir(), Tag: "x", Names: []string{"../one"}, Platforms: o.Platforms}); err == nil {
		t.Error("Build accepted the name ../one")
	}
}

func TestPushNamesWhatIsMissing(t *testing.T) {
	o := buildOptions(t, fakeBinaries(t, "one", "two"))
	if _, err := Build(o); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := Push(ctx, PushOptions{Dir: o.OutDir, Tag: "v1.2.3", Names: []string{"one"}}); err == nil || !strings.Contains(err.Error(), "IMAGE_REGISTRY") {
		t.Errorf("Push without a registry = %v, want it to name IMAGE_REGISTRY", err)
	}
	_, err := Push(ctx, PushOptions{Dir: o.OutDir, Registry: "127.0.0.1:1", Tag: "v9", Names: []string{"one"}})
	if err == nil || !strings.Contains(err.Error(), `no index tagged "v9"`) {
		t.Errorf("Push of a tag never built = %v, want the tag named", err)
	}
}

func TestParsePlatformsAndTime(t *testing.T) {
	for _, bad := range []string{"", "linux", "windows/amd64", "linux/s390x", "linux/arm64/v8"} {
		if _, err := ParsePlatforms(bad); err == nil {
			t.Errorf("ParsePlatforms(%q) accepted", bad)
		}
	}
	for in, want := range map[string]int64{"0": 0, "1700000000": 1700000000, "2023-11-14T22:13:20Z": 1700000000} {
		got, err := parseTime(in)
		if err != nil || got.Unix() != want {
			t.Errorf("parseTime(%q) = %v, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "yesterday", "12x"} {
		if _, err := parseTime(bad); err == nil {
			t.Errorf("parseTime(%q) accepted", bad)
		}
	}
}

func TestRunReportsUsage(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"frobnicate"}, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), "unknown command") {
		t.Errorf("run frobnicate = %d, %q", code, errOut.String())
	}
	errOut.Reset()
	if code := run(context.Background(), []string{"build", "--platforms", "linux/mips"}, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), "--platforms") {
		t.Errorf("run build --platforms linux/mips = %d, %q", code, errOut.String())
	}
}
