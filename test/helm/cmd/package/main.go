// Command package packages charts/tesk-knative into a .tgz in -out, as the
// build's -version (make chart passes git describe --tags --always
// --dirty): the chart's version is the version without its v, its
// appVersion and its images' tags are the version.
package main

import (
	"flag"
	"fmt"
	"log"
	"os"

	"github.com/elixir-cloud-aai/tesk-knative/test/helm"
)

func main() {
	out := flag.String("out", "dist", "folder to write the package into")
	version := flag.String("version", "", "the build's version (e.g. v0.3.0)")
	flag.Parse()
	if *version == "" {
		log.Fatal("package: -version is required (make chart passes the build's)")
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		log.Fatal(err)
	}
	path, err := helm.Package(*out, *version)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(path)
}
