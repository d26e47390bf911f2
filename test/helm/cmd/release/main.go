// Command release installs, upgrades or uninstalls charts/tesk-knative on a
// cluster with the Helm v4 SDK, as helm install, helm upgrade and helm
// uninstall do (test/knative's chart test runs it):
//
//	release -kubeconfig FILE -namespace NS -name NAME [-values FILE.json] [-manifest OUT] install|upgrade|uninstall
//
// -values holds the values over values.yaml as JSON; -manifest receives the
// release's manifest after an install or an upgrade.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"

	"github.com/elixir-cloud-aai/tesk-knative/test/helm"
)

func main() {
	kubeconfig := flag.String("kubeconfig", os.Getenv("KUBECONFIG"), "the cluster's kubeconfig")
	namespace := flag.String("namespace", "", "the namespace of the release's record")
	name := flag.String("name", "tesk-knative", "the release's name")
	valuesFile := flag.String("values", "", "values over values.yaml, as JSON")
	manifestOut := flag.String("manifest", "", "file to write the release's manifest into")
	flag.Parse()
	if err := run(*kubeconfig, *namespace, *name, *valuesFile, *manifestOut, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}

func run(kubeconfig, namespace, name, valuesFile, manifestOut string, args []string) error {
	if len(args) != 1 {
		return fmt.Errorf("want one of install, upgrade, uninstall; got %q", args)
	}
	if namespace == "" {
		return fmt.Errorf("-namespace is required")
	}
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
	ctx := context.Background()
	var manifest string
	var err error
	switch args[0] {
	case "install":
		manifest, err = helm.Install(ctx, kubeconfig, namespace, name, vals)
	case "upgrade":
		manifest, err = helm.Upgrade(ctx, kubeconfig, namespace, name, vals)
	case "uninstall":
		return helm.Uninstall(kubeconfig, namespace, name)
	default:
		return fmt.Errorf("%q: want install, upgrade or uninstall", args[0])
	}
	if err != nil {
		return err
	}
	if manifestOut != "" {
		return os.WriteFile(manifestOut, []byte(manifest), 0o644)
	}
	return nil
}
