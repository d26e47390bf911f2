package ociimage

import (
	"fmt"
	"runtime"
	"sort"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// DefaultPath is the PATH of every image.
const DefaultPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// Config is what an image runs, as a Dockerfile's ENTRYPOINT, CMD, USER,
// ENV, WORKDIR and EXPOSE say it.
type Config struct {
	Entrypoint   []string
	Cmd          []string
	User         string
	Env          []string
	WorkingDir   string
	ExposedPorts []string // "8080/tcp"
	Labels       map[string]string
}

// LayerSpec is one layer with the line of history that describes it.
type LayerSpec struct {
	Tree      *Tree
	CreatedBy string
}

// Platform is the platform of the images: linux and this program's
// architecture.
func Platform() v1.Platform {
	return v1.Platform{OS: "linux", Architecture: runtime.GOARCH}
}

// NewImage assembles an OCI image (OCI manifest and config media types,
// gzip layers) for Platform from its layers, bottom first, and config. The
// creation time of the image and of every history entry is Epoch.
func NewImage(cfg Config, layers ...LayerSpec) (v1.Image, error) {
	if len(layers) == 0 {
		return nil, fmt.Errorf("ociimage: an image needs a layer")
	}
	p := Platform()
	ports := map[string]struct{}{}
	for _, port := range cfg.ExposedPorts {
		ports[port] = struct{}{}
	}
	cf := &v1.ConfigFile{
		Architecture: p.Architecture,
		OS:           p.OS,
		Created:      v1.Time{Time: Epoch},
		Config: v1.Config{
			Entrypoint:   cfg.Entrypoint,
			Cmd:          cfg.Cmd,
			User:         cfg.User,
			Env:          cfg.Env,
			WorkingDir:   cfg.WorkingDir,
			Labels:       cfg.Labels,
			ExposedPorts: ports,
		},
		RootFS: v1.RootFS{Type: "layers"},
	}
	if len(ports) == 0 {
		cf.Config.ExposedPorts = nil
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err := mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, err
	}
	adds := make([]mutate.Addendum, 0, len(layers))
	for i, l := range layers {
		layer, err := l.Tree.Layer()
		if err != nil {
			return nil, fmt.Errorf("layer %d (%s): %w", i+1, l.CreatedBy, err)
		}
		adds = append(adds, mutate.Addendum{
			Layer:     layer,
			MediaType: types.OCILayer,
			History:   v1.History{Created: v1.Time{Time: Epoch}, CreatedBy: l.CreatedBy, Comment: "ociimage"},
		})
	}
	return mutate.Append(img, adds...)
}

// PortList returns an image's exposed ports, sorted.
func PortList(cf *v1.ConfigFile) []string {
	var ports []string
	for p := range cf.Config.ExposedPorts {
		ports = append(ports, p)
	}
	sort.Strings(ports)
	return ports
}
