package cluster

import (
	"context"
	"fmt"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// MirrorRef is where the node's registry holds ref: the same repository
// path and tag (or digest) on the registry host:port, whatever registry ref
// names, as containerd asks a mirror for it.
func MirrorRef(ref, registry string) (name.Reference, error) {
	r, err := name.ParseReference(ref)
	if err != nil {
		return nil, err
	}
	suffix := ""
	switch r := r.(type) {
	case name.Tag:
		suffix = ":" + r.TagStr()
	case name.Digest:
		suffix = "@" + r.DigestStr()
	}
	return name.ParseReference(registry+"/"+r.Context().RepositoryStr()+suffix, name.Insecure)
}

// pushToRegistry writes the image of img.Tar to the node's registry.
func pushToRegistry(ctx context.Context, img NodeImage, registry string) error {
	dst, err := MirrorRef(img.Ref, registry)
	if err != nil {
		return fmt.Errorf("reference %q: %w", img.Ref, err)
	}
	image, err := tarball.ImageFromPath(img.Tar, nil)
	if err != nil {
		return fmt.Errorf("read %s: %w", img.Tar, err)
	}
	return remote.Write(dst, image, remote.WithContext(ctx))
}
