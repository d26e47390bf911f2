package cluster

import (
	"context"
	"os"

	"github.com/elixir-cloud-aai/tesk-knative/hack/ociimage/ociimage"
)

// ProjectImages returns a BuildNodeImages function that builds, from the
// module at repoRoot, the images a task needs on the real node: the pause
// image, the filer as filerRef (as the Dockerfile describes it) and the
// local stand-ins for busybox, alpine and ubuntu (ociimage.StandIns).
func ProjectImages(repoRoot, filerRef string) func(ctx context.Context, dir string) ([]NodeImage, error) {
	return func(ctx context.Context, dir string) ([]NodeImage, error) {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		built, err := ociimage.BuildAll(ctx, ociimage.Options{
			RepoRoot:   repoRoot,
			OutDir:     dir,
			FilerImage: filerRef,
			Only:       []string{ociimage.Pause, ociimage.Filer, ociimage.Busybox, ociimage.Alpine, ociimage.Ubuntu},
		})
		if err != nil {
			return nil, err
		}
		var out []NodeImage
		for _, b := range built {
			for _, ref := range b.Refs {
				out = append(out, NodeImage{Ref: ref, Tar: b.Path})
			}
		}
		return out, nil
	}
}
