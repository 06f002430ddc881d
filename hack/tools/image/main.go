// Command azlb-image assembles azlb's container images with
// go-containerregistry, without a container daemon and without pulling a base
// image, and pushes them.
//
//	azlb-image build --bin-dir _out/bin --out _out/images --tag v0.1.0 \
//	    --platforms linux/amd64,linux/arm64 azlb-controller-manager azlb-emulator
//	azlb-image push --dir _out/images --registry registry.example:5000 --tag v0.1.0 \
//	    azlb-controller-manager azlb-emulator
//
// build reads the static binaries <bin-dir>/<os>_<arch>/<name> (the Makefile
// cross-compiles them) and writes one OCI image layout per image under
// <out>/<name>: an image index with one manifest per platform, tagged --tag.
// Each image has two layers: a shared root filesystem (an /etc/passwd with
// the nonroot user 65532, /tmp, and the CA certificates of the pinned
// golang.org/x/crypto/x509roots/fallback module, see rootfs.go) and the
// binary at /usr/local/bin/<name>, its entrypoint. No shell, no package
// manager, nothing else. Timestamps come from --created (the Makefile passes
// the commit time), so the same binaries give the same digests.
//
// push copies each layout's index to <registry>/<name>:<tag> (credentials
// from the Docker config file, as docker login writes it; plain HTTP for
// localhost and loopback registries).
//
// archive packs a root filesystem directory as a single-layer image in the
// archive format `docker save` writes and `ctr images import` reads, named
// --ref: the test images the real cluster's nodes import instead of pulling
// (hack/test-images.sh).
//
// This module lives under hack/tools so that go-containerregistry stays out
// of azlb's own go.mod.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

const usage = `usage:
  azlb-image build --bin-dir DIR --out DIR --tag TAG [--platforms linux/amd64,linux/arm64] [--version V] [--revision R] [--created RFC3339|unix-seconds] NAME...
  azlb-image push --dir DIR --registry HOST[:PORT][/PATH] --tag TAG NAME...
  azlb-image archive --rootfs DIR --ref NAME:TAG --out FILE.tar [--entrypoint PATH[,ARG...]] [--cmd ARG[,ARG...]] [--env K=V[,K=V...]] [--created T]
`

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	var err error
	switch args[0] {
	case "build":
		err = runBuild(args[1:], stdout, stderr)
	case "push":
		err = runPush(ctx, args[1:], stdout, stderr)
	case "archive":
		err = runArchive(args[1:], stdout, stderr)
	default:
		fmt.Fprintf(stderr, "azlb-image: unknown command %q\n%s", args[0], usage)
		return 2
	}
	if errors.Is(err, flag.ErrHelp) || errors.Is(err, errUsage) {
		return 2
	}
	if err != nil {
		fmt.Fprintf(stderr, "azlb-image %s: %v\n", args[0], err)
		return 1
	}
	return 0
}

// errUsage reports bad arguments (already printed).
var errUsage = errors.New("usage")

func runBuild(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("build", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o BuildOptions
	fs.StringVar(&o.BinDir, "bin-dir", "", "directory with <os>_<arch>/<name> binaries")
	fs.StringVar(&o.OutDir, "out", "", "directory receiving one OCI layout per image")
	fs.StringVar(&o.Tag, "tag", "", "tag recorded in each layout (org.opencontainers.image.ref.name)")
	platforms := fs.String("platforms", "linux/amd64,linux/arm64", "comma-separated os/arch list")
	fs.StringVar(&o.Version, "version", "", "org.opencontainers.image.version label (default: --tag)")
	fs.StringVar(&o.Revision, "revision", "", "org.opencontainers.image.revision label (the commit)")
	created := createdFlag(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	o.Names = fs.Args()
	var err error
	if o.Platforms, err = ParsePlatforms(*platforms); err != nil {
		fmt.Fprintf(stderr, "--platforms: %v\n", err)
		return errUsage
	}
	if o.Created, err = created.parse(stderr); err != nil {
		return err
	}
	if o.Version == "" {
		o.Version = o.Tag
	}
	results, err := Build(o)
	if err != nil {
		return err
	}
	for _, r := range results {
		fmt.Fprintf(stdout, "%s:%s %s (%s) -> %s\n", r.Name, o.Tag, r.Digest, strings.Join(r.Platforms, ", "), r.Dir)
	}
	return nil
}

func runPush(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("push", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o PushOptions
	fs.StringVar(&o.Dir, "dir", "", "directory holding the OCI layouts azlb-image build wrote")
	fs.StringVar(&o.Registry, "registry", "", "registry (and optional path) to push to, e.g. myregistry.azurecr.io/azlb")
	fs.StringVar(&o.Tag, "tag", "", "tag to push")
	if err := fs.Parse(args); err != nil {
		return err
	}
	o.Names = fs.Args()
	refs, err := Push(ctx, o)
	if err != nil {
		return err
	}
	for _, r := range refs {
		fmt.Fprintln(stdout, "pushed", r)
	}
	return nil
}

// createdValue is the --created flag of build and archive.
type createdValue struct{ s *string }

func createdFlag(fs *flag.FlagSet) createdValue {
	return createdValue{fs.String("created", "0", "image creation time and file timestamps: RFC 3339 or Unix seconds")}
}

// parse reads the flag's time, or prints why not and returns errUsage.
func (c createdValue) parse(stderr io.Writer) (time.Time, error) {
	t, err := parseTime(*c.s)
	if err != nil {
		fmt.Fprintf(stderr, "--created: %v\n", err)
		return time.Time{}, errUsage
	}
	return t, nil
}

// parseTime reads an RFC 3339 time or Unix seconds (SOURCE_DATE_EPOCH).
func parseTime(s string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t.UTC(), nil
	}
	var sec int64
	if _, err := fmt.Sscanf(s, "%d", &sec); err != nil || fmt.Sprint(sec) != s {
		return time.Time{}, fmt.Errorf("%q is neither RFC 3339 nor Unix seconds", s)
	}
	return time.Unix(sec, 0).UTC(), nil
}

func runArchive(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("archive", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o ArchiveOptions
	fs.StringVar(&o.RootFS, "rootfs", "", "directory packed as the image's one layer")
	fs.StringVar(&o.Ref, "ref", "", "image name and tag recorded in the archive")
	fs.StringVar(&o.Out, "out", "", "archive file to write")
	entrypoint := fs.String("entrypoint", "", "comma-separated entrypoint")
	cmd := fs.String("cmd", "", "comma-separated command (arguments of the entrypoint)")
	env := fs.String("env", "", "comma-separated K=V environment")
	created := createdFlag(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "unexpected arguments %q\n", fs.Args())
		return errUsage
	}
	split := func(s string) []string {
		if s == "" {
			return nil
		}
		return strings.Split(s, ",")
	}
	o.Entrypoint, o.Cmd, o.Env = split(*entrypoint), split(*cmd), split(*env)
	var err error
	if o.Created, err = created.parse(stderr); err != nil {
		return err
	}
	d, err := Archive(o)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s %s -> %s\n", o.Ref, d, o.Out)
	return nil
}
