// Command render writes config/knative: the chart charts/tesk-knative
// rendered with config/knative/values.yaml, a file per template (make
// manifests). With -check it writes nothing and fails if config/knative
// differs from the rendering.
package main

import (
	"flag"
	"fmt"
	"log"
	"maps"
	"os"
	"path/filepath"
	"slices"

	"github.com/elixir-cloud-aai/tesk-knative/test/helm"
)

func main() {
	check := flag.Bool("check", false, "compare config/knative with the rendering instead of writing it")
	flag.Parse()
	files, err := helm.Manifests()
	if err != nil {
		log.Fatal(err)
	}
	if !*check {
		for _, name := range slices.Sorted(maps.Keys(files)) {
			if err := os.WriteFile(filepath.Join(helm.ConfigDir(), name), []byte(files[name]), 0o644); err != nil {
				log.Fatal(err)
			}
		}
	}
	problems, err := helm.ManifestsDiffer(files)
	if err != nil {
		log.Fatal(err)
	}
	for _, p := range problems {
		fmt.Fprintln(os.Stderr, p)
	}
	if len(problems) > 0 {
		os.Exit(1)
	}
}
