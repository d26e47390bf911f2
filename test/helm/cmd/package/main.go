// Command package packages charts/tesk-knative into a .tgz in -out.
package main

import (
	"flag"
	"fmt"
	"log"
	"os"

	"helm.sh/helm/v4/pkg/action"

	"github.com/elixir-cloud-aai/tesk-knative/test/helm"
)

func main() {
	out := flag.String("out", "dist", "folder to write the package into")
	flag.Parse()
	if err := os.MkdirAll(*out, 0o755); err != nil {
		log.Fatal(err)
	}
	p := action.NewPackage()
	p.Destination = *out
	path, err := p.Run(helm.ChartDir(), nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(path)
}
