// Command template writes charts/tesk-knative rendered with the Helm v4
// SDK, as helm template does, to standard output (the e2e tests apply parts
// of it to their local cluster):
//
//	template [-values FILE.json] [-show-only NAME.yaml]
//
// -values holds the values over values.yaml as JSON; -show-only writes one
// template's rendering (tasks.yaml) instead of all of them, which are
// written in the order of their file names, each after a "---" line.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/elixir-cloud-aai/tesk-knative/test/helm"
)

func main() {
	valuesFile := flag.String("values", "", "values over values.yaml, as JSON")
	showOnly := flag.String("show-only", "", "the one template to write, by file name (tasks.yaml)")
	flag.Parse()
	if err := run(os.Stdout, *valuesFile, *showOnly); err != nil {
		fmt.Fprintln(os.Stderr, "template:", err)
		os.Exit(1)
	}
}

func run(out io.Writer, valuesFile, showOnly string) error {
	vals := map[string]any{}
	if valuesFile != "" {
		b, err := os.ReadFile(valuesFile)
		if err != nil {
			return err
		}
		if err := json.Unmarshal(b, &vals); err != nil {
			return fmt.Errorf("%s: %w", valuesFile, err)
		}
	}
	files, err := helm.RenderFiles(vals)
	if err != nil {
		return err
	}
	names := slices.Sorted(maps.Keys(files))
	if showOnly != "" {
		if _, ok := files[showOnly]; !ok {
			return fmt.Errorf("-show-only %s: no such template rendered; the chart renders %s", showOnly, strings.Join(names, ", "))
		}
		names = []string{showOnly}
	}
	for _, name := range names {
		if _, err := fmt.Fprintf(out, "---\n# Source: %s\n%s\n", name, strings.Trim(files[name], "\n")); err != nil {
			return err
		}
	}
	return nil
}
