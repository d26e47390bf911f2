package docs

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// The chart the pages install, and the manifests `make manifests` renders
// from it: what a page's helm and kubectl commands must name.
const (
	chartDir     = "charts/tesk-knative"
	manifestsDir = "config/knative"
)

// knativeNamespaces are Knative's own namespaces, where the pages patch
// Eventing's features and reach the Broker's ingress: not the manifests'.
var knativeNamespaces = []string{"knative-eventing", "knative-serving"}

// object is one object of the manifests.
type object struct{ kind, namespace, name string }

// manifests are the objects of config/knative, ksvc for a Knative Service.
func manifests(t *testing.T) []object {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(root, manifestsDir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var objs []object
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(b), -1) {
			var m struct {
				APIVersion string `json:"apiVersion"`
				Kind       string `json:"kind"`
				Metadata   struct {
					Name, Namespace string
				} `json:"metadata"`
			}
			if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if m.Kind == "" || m.Metadata.Name == "" {
				continue
			}
			kind := strings.ToLower(m.Kind)
			if kind == "service" && strings.HasPrefix(m.APIVersion, "serving.knative.dev/") {
				kind = "ksvc"
			}
			objs = append(objs, object{kind, m.Metadata.Namespace, m.Metadata.Name})
		}
	}
	return objs
}

// kubectlKinds are kubectl's names of the kinds of the manifests: a
// command's kind is one of them or one the manifests never hold (pods,
// jobs, events: made at run time), which is not checked.
var kubectlKinds = map[string]string{
	"ksvc": "ksvc", "kservice": "ksvc", "services.serving.knative.dev": "ksvc",
	"broker": "broker", "brokers": "broker",
	"trigger": "trigger", "triggers": "trigger",
	"apiserversource": "apiserversource", "apiserversources": "apiserversource",
	"pingsource": "pingsource", "pingsources": "pingsource",
	"sinkbinding": "sinkbinding", "sinkbindings": "sinkbinding",
	"eventpolicy": "eventpolicy", "eventpolicies": "eventpolicy",
	"configmap": "configmap", "configmaps": "configmap", "cm": "configmap",
	"serviceaccount": "serviceaccount", "serviceaccounts": "serviceaccount", "sa": "serviceaccount",
	"role": "role", "roles": "role", "rolebinding": "rolebinding", "rolebindings": "rolebinding",
	"networkpolicy": "networkpolicy", "networkpolicies": "networkpolicy", "netpol": "networkpolicy",
}

// runtimeKinds are kinds whose objects in the manifests' namespaces are
// made at run time (a task's anchor is a ConfigMap in the tasks'
// namespace): a list of them is not checked.
var runtimeKinds = map[string]bool{"configmap": true}

// docCommand is a command line of a page, where it is.
type docCommand struct{ where, text string }

// pageCommands returns the command lines of the README and docs/*.md: the
// lines of their code blocks (fenced or indented, continuation lines
// joined) and their inline code spans.
func pageCommands(t *testing.T) []docCommand {
	t.Helper()
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(pages)
	pages = append([]string{filepath.Join(root, "README.md")}, pages...)
	span := regexp.MustCompile("`([^`]+)`")
	var cmds []docCommand
	for _, p := range pages {
		name, _ := filepath.Rel(root, p)
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		fence, cur, start := false, "", 0
		for i, line := range strings.Split(string(b), "\n") {
			trimmed := strings.TrimSpace(line)
			if strings.HasPrefix(trimmed, "```") {
				fence = !fence
				continue
			}
			if !fence && !strings.HasPrefix(line, "    ") && cur == "" {
				for _, m := range span.FindAllStringSubmatch(line, -1) {
					cmds = append(cmds, docCommand{fmt.Sprintf("%s:%d", name, i+1), m[1]})
				}
				continue
			}
			if cur == "" {
				start = i + 1
			}
			if strings.HasSuffix(trimmed, "\\") {
				cur += strings.TrimSuffix(trimmed, "\\") + " "
				continue
			}
			cmds = append(cmds, docCommand{fmt.Sprintf("%s:%d", name, start), cur + trimmed})
			cur = ""
		}
	}
	return cmds
}

// toolCall finds a call of kubectl or helm in a command line: at its start,
// after a space, a $( or a shell operator.
var toolCall = regexp.MustCompile(`(?:^|[\s(;&|])(kubectl|helm)\s`)

// calls returns the arguments of each call of tool in a command line, up to
// the end of its command (an unquoted |, ;, &, ), or a comment).
func calls(line, tool string) [][]string {
	var out [][]string
	for _, m := range toolCall.FindAllStringSubmatchIndex(line, -1) {
		if line[m[2]:m[3]] == tool {
			out = append(out, shellWords(line[m[3]:]))
		}
	}
	return out
}

// shellWords splits s into words as a shell would (quotes kept apart,
// removed), stopping at the end of the command.
func shellWords(s string) []string {
	var words []string
	var cur strings.Builder
	inWord := false
	var quote rune
	for i, r := range s {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			} else {
				cur.WriteRune(r)
			}
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case r == ' ' || r == '\t':
			if inWord {
				words, inWord = append(words, cur.String()), false
				cur.Reset()
			}
		case strings.ContainsRune("|;&)", r), r == '#' && !inWord && i > 0:
			if inWord {
				words = append(words, cur.String())
			}
			return words
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words
}

// helmValueFlags are helm's flags that take a value.
var helmValueFlags = []string{"--set", "--set-string", "--set-file", "--set-json", "-f", "--values", "-n", "--namespace", "--version", "--repo", "--kube-context"}

// checkHelm returns what is wrong with a helm install, upgrade or template
// of args: a chart that is not the chart's folder, a --set of a key
// values.yaml does not have. A mention without arguments is not a command.
func checkHelm(args []string, values map[string]any) []string {
	if len(args) < 2 || !slices.Contains([]string{"install", "upgrade", "template"}, args[0]) {
		return nil
	}
	var errs, pos []string
	for i := 1; i < len(args); i++ {
		a := args[i]
		flag, val, eq := strings.Cut(a, "=")
		if !strings.HasPrefix(a, "-") {
			pos = append(pos, a)
			continue
		}
		if !slices.Contains(helmValueFlags, flag) {
			continue
		}
		if !eq {
			if i+1 >= len(args) {
				errs = append(errs, flag+" has no value")
				break
			}
			i++
			val = args[i]
		}
		if strings.HasPrefix(flag, "--set") {
			for _, kv := range splitUnescaped(val, ',') {
				key, _, _ := strings.Cut(kv, "=")
				if err := walkKey(values, key); err != "" {
					errs = append(errs, fmt.Sprintf("%s %s: %s", flag, kv, err))
				}
			}
		}
	}
	want := 2 // release and chart
	if args[0] == "template" {
		want = 1
	}
	switch {
	case len(pos) < want:
		errs = append(errs, fmt.Sprintf("helm %s names no chart", args[0]))
	case pos[len(pos)-1] != chartDir:
		errs = append(errs, fmt.Sprintf("the chart %q is not %s", pos[len(pos)-1], chartDir))
	}
	return errs
}

// splitUnescaped splits s at each sep not escaped with a backslash, the
// escapes of sep removed.
func splitUnescaped(s string, sep byte) []string {
	var parts []string
	var cur strings.Builder
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '\\' && i+1 < len(s) && s[i+1] == sep:
			cur.WriteByte(sep)
			i++
		case s[i] == sep:
			parts = append(parts, cur.String())
			cur.Reset()
		default:
			cur.WriteByte(s[i])
		}
	}
	return append(parts, cur.String())
}

// walkKey walks a --set key (a.b[0].c, \. for a dot in a key) down values:
// "" when values.yaml has it, or is free-form there (an empty map, null);
// else what is missing.
func walkKey(values map[string]any, key string) string {
	var node any = values
	path := ""
	for _, part := range splitUnescaped(key, '.') {
		name, index, _ := strings.Cut(part, "[")
		path = strings.TrimPrefix(path+"."+name, ".")
		m, ok := node.(map[string]any)
		switch {
		case node == nil, ok && len(m) == 0:
			return "" // free-form
		case !ok:
			return fmt.Sprintf("%s is not a map in %s/values.yaml", strings.TrimSuffix(path, "."+name), chartDir)
		}
		v, has := m[name]
		if !has {
			return fmt.Sprintf("%s/values.yaml has no key %s", chartDir, path)
		}
		node = v
		if index != "" {
			l, ok := node.([]any)
			if !ok {
				return fmt.Sprintf("%s is not a list in %s/values.yaml", path, chartDir)
			}
			if len(l) == 0 {
				return ""
			}
			node = l[0]
		}
	}
	return ""
}

// kubectlCheck holds what a kubectl command may name: the manifests'
// objects and namespaces.
type kubectlCheck struct {
	objs       []object
	namespaces []string
}

func (k kubectlCheck) has(kind, ns, name string) bool {
	for _, o := range k.objs {
		if o.kind == kind && o.namespace == ns && (name == "" || o.name == name) {
			return true
		}
	}
	return false
}

// check returns what is wrong with a kubectl command of args: a namespace
// neither the manifests nor Knative make, an object of the manifests'
// kinds they do not hold there, a Knative Service of a label selector or a
// service account of --as that is not theirs. Placeholders (<task>) and
// objects made at run time are not checked; nor is a command without -n.
func (k kubectlCheck) check(args []string) []string {
	var errs, pos []string
	ns := ""
	for i := 0; i < len(args); i++ {
		a := args[i]
		flag, val, eq := strings.Cut(a, "=")
		if !strings.HasPrefix(a, "-") {
			pos = append(pos, a)
			continue
		}
		switch flag {
		case "-n", "--namespace", "-l", "--selector", "--as", "-o", "--output", "-c", "--container", "--type", "-p", "--patch", "--tail", "--field-selector", "--from-file", "--from-literal":
			if !eq && i+1 < len(args) {
				i++
				val = args[i]
			}
		}
		switch flag {
		case "-n", "--namespace":
			ns = val
		case "-l", "--selector":
			if svc, ok := strings.CutPrefix(val, "serving.knative.dev/service="); ok && !k.has("ksvc", ns, svc) && slices.Contains(k.namespaces, ns) {
				errs = append(errs, fmt.Sprintf("no Knative Service %s in the namespace %s of %s", svc, ns, manifestsDir))
			}
		case "--as":
			if sa, ok := strings.CutPrefix(val, "system:serviceaccount:"); ok {
				sns, name, _ := strings.Cut(sa, ":")
				if !k.has("serviceaccount", sns, name) {
					errs = append(errs, fmt.Sprintf("no service account %s in the namespace %s of %s", name, sns, manifestsDir))
				}
			}
		}
	}
	switch {
	case ns == "":
		return errs
	case slices.Contains(knativeNamespaces, ns):
		return errs
	case !slices.Contains(k.namespaces, ns):
		return append(errs, fmt.Sprintf("-n %s: %s makes the namespaces %v (and Knative its own, %v)", ns, manifestsDir, k.namespaces, knativeNamespaces))
	}
	if len(pos) < 2 || !slices.Contains([]string{"get", "describe", "patch", "delete", "edit", "label", "annotate", "logs", "port-forward", "rollout"}, pos[0]) {
		return errs
	}
	res := pos[1:]
	if pos[0] == "rollout" && len(pos) > 2 {
		res = pos[2:]
	}
	var kinds []string
	if kind, name, ok := strings.Cut(res[0], "/"); ok {
		kinds, res = []string{kind}, []string{name}
	} else {
		kinds, res = strings.Split(res[0], ","), res[1:]
	}
	for _, kind := range kinds {
		kk, known := kubectlKinds[kind]
		if !known {
			continue
		}
		if len(kinds) == 1 && len(res) > 0 {
			if !strings.Contains(res[0], "<") && !k.has(kk, ns, res[0]) {
				errs = append(errs, fmt.Sprintf("%s makes no %s %s in the namespace %s", manifestsDir, kind, res[0], ns))
			}
			continue
		}
		if len(res) == 0 && !runtimeKinds[kk] && !k.has(kk, ns, "") {
			errs = append(errs, fmt.Sprintf("%s makes no %s in the namespace %s", manifestsDir, kind, ns))
		}
	}
	return errs
}

func chartValues(t *testing.T) map[string]any {
	t.Helper()
	var values map[string]any
	if err := yaml.Unmarshal([]byte(read(t, chartDir+"/values.yaml")), &values); err != nil {
		t.Fatal(err)
	}
	return values
}

func newKubectlCheck(t *testing.T) kubectlCheck {
	t.Helper()
	k := kubectlCheck{objs: manifests(t)}
	for _, o := range k.objs {
		if o.kind == "namespace" {
			k.namespaces = append(k.namespaces, o.name)
		}
	}
	if len(k.namespaces) == 0 {
		t.Fatalf("%s makes no namespace", manifestsDir)
	}
	return k
}

// Every helm install, upgrade and template of the README and docs/ installs
// charts/tesk-knative with --set keys its values.yaml has; every kubectl
// command with -n names a namespace config/knative (or Knative) makes and,
// of the kinds config/knative holds, objects it makes there. The pages'
// commands against a deployment cannot run here (no Knative): this holds
// them to the chart and the manifests they speak of.
func TestDocCommandsNameWhatExists(t *testing.T) {
	values, k := chartValues(t), newKubectlCheck(t)
	nHelm, nKubectl := 0, 0
	for _, c := range pageCommands(t) {
		for _, args := range calls(c.text, "helm") {
			if len(args) >= 2 && slices.Contains([]string{"install", "upgrade", "template"}, args[0]) {
				nHelm++
			}
			for _, e := range checkHelm(args, values) {
				t.Errorf("%s: %s\n  %s", c.where, e, c.text)
			}
		}
		for _, args := range calls(c.text, "kubectl") {
			nKubectl++
			for _, e := range k.check(args) {
				t.Errorf("%s: %s\n  %s", c.where, e, c.text)
			}
		}
	}
	t.Logf("%d helm, %d kubectl commands", nHelm, nKubectl)
	// The README's install, docs/helm.md's three and its upgrade, and
	// docs/getting-started.md's and operations.md's kubectl commands.
	if nHelm < 5 || nKubectl < 30 {
		t.Errorf("found %d helm and %d kubectl commands in README.md and docs/, want at least 5 and 30", nHelm, nKubectl)
	}
}

func TestCheckHelm(t *testing.T) {
	values := map[string]any{
		"auth":   map[string]any{"mode": "", "oidc": map[string]any{"issuer": ""}},
		"images": map[string]any{"handler": map[string]any{"tag": ""}},
		"tasks":  map[string]any{"nodeSelector": map[string]any{}, "tolerations": []any{}},
		"env":    nil,
	}
	for _, tc := range []struct {
		cmd  string
		errs int
	}{
		{"helm install tesk charts/tesk-knative --set auth.mode=oidc --set auth.oidc.issuer=https://x/", 0},
		{`helm install tesk charts/tesk-knative --set auth.mode=oidc\,basic`, 0},
		{"helm upgrade tesk charts/tesk-knative -n tesk --reuse-values --set images.handler.tag=v1", 0},
		{"helm template charts/tesk-knative --set=auth.mode=none,images.handler.tag=v1", 0},
		{"helm install tesk charts/tesk-knative --set tasks.nodeSelector.pool=a --set env.X=1 --set tasks.tolerations[0].key=k", 0},
		{"helm install tesk charts/tesk-knative -f production.yaml", 0},
		{"helm template", 0}, // a mention
		{"helm install tesk charts/tesk-knative --set auth.modes=oidc", 1},
		{"helm install tesk charts/tesk-knative --set auth.mode=none,auth.nope=1", 1},
		{"helm install tesk charts/tesk-knative --set auth.mode.x=1", 1},
		{"helm install tesk charts/tesk --set auth.mode=none", 1},
		{"helm install charts/tesk-knative --set auth.mode=none", 1},
		{"helm upgrade tesk charts/tesk-knative --set images.handler.version=v1", 1},
	} {
		args := calls(tc.cmd, "helm")
		if len(args) != 1 {
			t.Fatalf("%s: %d calls of helm", tc.cmd, len(args))
		}
		if errs := checkHelm(args[0], values); len(errs) != tc.errs {
			t.Errorf("%s: %q, want %d errors", tc.cmd, errs, tc.errs)
		}
	}
}

func TestKubectlCheck(t *testing.T) {
	k := kubectlCheck{namespaces: []string{"tesk", "tesk-tasks"}, objs: []object{
		{"ksvc", "tesk", "tesk-handler"}, {"ksvc", "tesk", "tesk-tes"}, {"broker", "tesk", "default"},
		{"serviceaccount", "tesk", "tesk-handler"}, {"configmap", "tesk", "tesk-tes-config"},
	}}
	for _, tc := range []struct {
		cmd  string
		errs int
	}{
		{"kubectl -n tesk get ksvc,broker", 0},
		{"kubectl -n tesk patch ksvc tesk-handler --type merge -p '{}'", 0},
		{"export TES_URL=$(kubectl -n tesk get ksvc tesk-tes -o jsonpath='{.status.url}') TES_TOKEN=x", 0},
		{"kubectl -n tesk logs -l serving.knative.dev/service=tesk-handler -c handler --tail=100 | grep x", 0},
		{"kubectl -n tesk-tasks get configmap <task> -o yaml", 0},
		{"kubectl -n tesk-tasks get cm -l taskmaster-name", 0},
		{"kubectl -n tesk get configmap tesk-tes-config", 0},
		{"kubectl auth can-i --list -n tesk-tasks --as system:serviceaccount:tesk:tesk-handler", 0},
		{"kubectl -n knative-eventing patch configmap config-features --type merge -p '{}'", 0},
		{"kubectl get configmap <task>", 0},
		{"kubectl -n tesk create secret generic tes-users --from-file=users", 0},
		{"kubectl -n tesk get broker default -o jsonpath='{.status.policies}'", 0},
		{"kubectl -n tesk-system get pods", 1},
		{"kubectl -n tesk get ksvc tesk-api", 1},
		{"kubectl -n tesk-tasks get ksvc,pingsources", 2},
		{"kubectl -n tesk logs -l serving.knative.dev/service=handler", 1},
		{"kubectl auth can-i --list -n tesk-tasks --as system:serviceaccount:tesk:handler", 1},
		{"kubectl -n tesk get configmap tesk-config", 1},
	} {
		args := calls(tc.cmd, "kubectl")
		if len(args) != 1 {
			t.Fatalf("%s: %d calls of kubectl", tc.cmd, len(args))
		}
		if errs := k.check(args[0]); len(errs) != tc.errs {
			t.Errorf("%s: %q, want %d errors", tc.cmd, errs, tc.errs)
		}
	}
}
