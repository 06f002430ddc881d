package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// PushOptions say which layouts go where.
type PushOptions struct {
	Dir, Registry, Tag string
	Names              []string
	// Transport options (tests); the default keychain reads the Docker
	// config file.
	Remote []remote.Option
}

// Push uploads the tagged index of <Dir>/<name> to <Registry>/<name>:<Tag>
// for every name and returns the references with their digests.
func Push(ctx context.Context, o PushOptions) ([]string, error) {
	switch {
	case o.Dir == "":
		return nil, errors.New("--dir is required")
	case o.Registry == "":
		return nil, errors.New("--registry is required (IMAGE_REGISTRY)")
	case o.Tag == "":
		return nil, errors.New("--tag is required (IMAGE_TAG)")
	case len(o.Names) == 0:
		return nil, errors.New("name at least one image")
	}
	opts := append([]remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)}, o.Remote...)
	var pushed []string
	for _, n := range o.Names {
		ref, err := name.NewTag(o.Registry + "/" + n + ":" + o.Tag)
		if err != nil {
			return pushed, fmt.Errorf("image %s: reference: %w", n, err)
		}
		idx, err := TaggedIndex(filepath.Join(o.Dir, n), o.Tag)
		if err != nil {
			return pushed, fmt.Errorf("image %s: %w", n, err)
		}
		if err := remote.WriteIndex(ref, idx, opts...); err != nil {
			return pushed, fmt.Errorf("push %s: %w", ref, err)
		}
		d, err := idx.Digest()
		if err != nil {
			return pushed, err
		}
		pushed = append(pushed, ref.String()+"@"+d.String())
	}
	return pushed, nil
}

// TaggedIndex is the image index tagged tag in the OCI layout at dir.
func TaggedIndex(dir, tag string) (v1.ImageIndex, error) {
	lp, err := layout.FromPath(dir)
	if err != nil {
		return nil, fmt.Errorf("no OCI layout at %s (run make image): %w", dir, err)
	}
	root, err := lp.ImageIndex()
	if err != nil {
		return nil, err
	}
	m, err := root.IndexManifest()
	if err != nil {
		return nil, err
	}
	var tags []string
	for _, d := range m.Manifests {
		t := d.Annotations[RefNameAnnotation]
		if t == tag {
			return root.ImageIndex(d.Digest)
		}
		tags = append(tags, t)
	}
	return nil, fmt.Errorf("%s holds no index tagged %q (it has %q): build with the same IMAGE_TAG", dir, tag, tags)
}
