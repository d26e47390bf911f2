// Package helm renders, lints, installs, upgrades and uninstalls the chart
// charts/tesk-knative with the Helm v4 SDK (no helm binary).
package helm

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path"
	"path/filepath"
	"runtime"
	"strings"

	"helm.sh/helm/v4/pkg/action"
	ci "helm.sh/helm/v4/pkg/chart"
	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/common/util"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/cli"
	"helm.sh/helm/v4/pkg/engine"
	"helm.sh/helm/v4/pkg/kube"
	kubefake "helm.sh/helm/v4/pkg/kube/fake"
	release "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage"
	"helm.sh/helm/v4/pkg/storage/driver"
)

// ChartDir is the chart's folder in the repository.
func ChartDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "charts", "tesk-knative")
}

// Render renders the chart as helm template does, with vals over
// values.yaml, and returns its manifest.
func Render(vals map[string]any) (string, error) {
	chrt, err := loader.Load(ChartDir())
	if err != nil {
		return "", err
	}
	return renderChart(chrt, vals)
}

// renderChart renders a loaded chart as helm template does.
func renderChart(chrt ci.Charter, vals map[string]any) (string, error) {
	cfg := action.NewConfiguration()
	cfg.KubeClient = &kubefake.PrintingKubeClient{Out: io.Discard}
	cfg.Releases = storage.Init(driver.NewMemory())
	inst := action.NewInstall(cfg)
	inst.DryRunStrategy = action.DryRunClient
	inst.ReleaseName = "tesk-knative"
	inst.Namespace = "tesk"
	inst.Replace = true
	kv, err := common.ParseKubeVersion("v1.33.0")
	if err != nil {
		return "", err
	}
	inst.KubeVersion = kv
	r, err := inst.Run(chrt, vals)
	if err != nil {
		return "", err
	}
	return manifest(r)
}

// RenderFiles renders the chart's templates as an install does, with vals
// over values.yaml (checked against values.schema.json), and returns each
// template's text by its file name (config.yaml), as written, comments
// included; a template that renders nothing but blanks is left out.
func RenderFiles(vals map[string]any) (map[string]string, error) {
	chrt, err := loader.Load(ChartDir())
	if err != nil {
		return nil, err
	}
	caps := common.DefaultCapabilities.Copy()
	kv, err := common.ParseKubeVersion("v1.33.0")
	if err != nil {
		return nil, err
	}
	caps.KubeVersion = *kv
	opts := common.ReleaseOptions{Name: "tesk-knative", Namespace: "tesk", Revision: 1, IsInstall: true}
	values, err := util.ToRenderValuesWithSchemaValidation(chrt, vals, opts, caps, false)
	if err != nil {
		return nil, err
	}
	rendered, err := engine.Render(chrt, values)
	if err != nil {
		return nil, err
	}
	files := map[string]string{}
	for name, text := range rendered {
		if path.Ext(name) != ".yaml" || strings.TrimSpace(text) == "" {
			continue
		}
		files[path.Base(name)] = text
	}
	return files, nil
}

// Lint lints the chart with vals, as helm lint --strict does; it returns
// every error and warning. vals is left as it is.
func Lint(vals map[string]any) []string {
	l := action.NewLint()
	l.Strict = true
	// The lint merges values.yaml into the values it is given: a copy, so
	// that the caller's stay as they are.
	res := l.Run([]string{ChartDir()}, clone(vals).(map[string]any))
	var out []string
	for _, e := range res.Errors {
		out = append(out, e.Error())
	}
	for _, m := range res.Messages {
		if m.Severity > 1 {
			out = append(out, m.Error())
		}
	}
	return out
}

func config(kubeconfig, namespace string) (*action.Configuration, error) {
	settings := cli.New()
	settings.KubeConfig = kubeconfig
	cfg := action.NewConfiguration(action.ConfigurationSetLogger(slog.DiscardHandler))
	if err := cfg.Init(settings.RESTClientGetter(), namespace, "secret"); err != nil {
		return nil, err
	}
	return cfg, nil
}

// releaseSetup is what installing or upgrading a release takes: the cluster's
// configuration and the chart.
func releaseSetup(kubeconfig, namespace string) (*action.Configuration, *chart.Chart, error) {
	cfg, err := config(kubeconfig, namespace)
	if err != nil {
		return nil, nil, err
	}
	chrt, err := loader.Load(ChartDir())
	return cfg, chrt, err
}

// Install installs the chart as release name (its record in namespace) on
// the cluster of kubeconfig, with vals over values.yaml, and returns the
// release's manifest.
func Install(ctx context.Context, kubeconfig, namespace, name string, vals map[string]any) (string, error) {
	cfg, chrt, err := releaseSetup(kubeconfig, namespace)
	if err != nil {
		return "", err
	}
	inst := action.NewInstall(cfg)
	inst.ReleaseName = name
	inst.Namespace = namespace
	inst.CreateNamespace = true
	// The caller waits for what it needs (Knative objects' Ready).
	inst.WaitStrategy = kube.HookOnlyStrategy
	r, err := inst.RunWithContext(ctx, chrt, vals)
	if err != nil {
		return "", err
	}
	return manifest(r)
}

// Upgrade upgrades release name to the chart with vals over values.yaml,
// as helm upgrade --force-conflicts does, and returns the release's new
// manifest.
func Upgrade(ctx context.Context, kubeconfig, namespace, name string, vals map[string]any) (string, error) {
	cfg, chrt, err := releaseSetup(kubeconfig, namespace)
	if err != nil {
		return "", err
	}
	up := action.NewUpgrade(cfg)
	up.Namespace = namespace
	up.WaitStrategy = kube.HookOnlyStrategy
	// As helm upgrade --force-conflicts: Knative's webhooks write fields
	// of the Knative Services (Serving's defaults in the containers, the
	// SinkBinding's K_SINK), so a server-side apply of the chart's own
	// values conflicts with them (docs/helm.md).
	up.ServerSideApply = "auto"
	up.ForceConflicts = true
	r, err := up.RunWithContext(ctx, name, chrt, vals)
	if err != nil {
		return "", err
	}
	return manifest(r)
}

func manifest(r any) (string, error) {
	rel, ok := r.(*release.Release)
	if !ok {
		return "", fmt.Errorf("unexpected release type %T", r)
	}
	return rel.Manifest, nil
}

// Uninstall uninstalls release name.
func Uninstall(kubeconfig, namespace, name string) error {
	cfg, err := config(kubeconfig, namespace)
	if err != nil {
		return err
	}
	un := action.NewUninstall(cfg)
	un.WaitStrategy = kube.HookOnlyStrategy
	_, err = un.Run(name)
	return err
}

// clone is a deep copy of a value of values.
func clone(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[k] = clone(e)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = clone(e)
		}
		return out
	}
	return v
}
