package readme

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
)

// The pages whose examples the tests run, in the order they are run: the
// README's, then those of the pages the rest moved to.
var (
	handlerPages = []string{"README.md", "docs/events.md"}
	tesPages     = []string{"README.md", "docs/getting-started.md", "docs/tes-api.md"}
)

// shCommands returns the commands of a Markdown file's sh blocks that keep
// (continuation lines joined, in their order).
func shCommands(t *testing.T, file string, keep func(string) bool) []string {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var cmds []string
	inSh, cur := false, ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "```sh"):
			inSh = true
			continue
		case strings.HasPrefix(line, "```"):
			inSh = false
			continue
		case !inSh:
			continue
		}
		if strings.HasSuffix(line, "\\") {
			cur += strings.TrimSuffix(line, "\\") + " "
			continue
		}
		cmd := strings.TrimSpace(cur + line)
		cur = ""
		if keep(cmd) {
			cmds = append(cmds, cmd)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return cmds
}

// handlerExamples are the curl commands to the handler on localhost:8080
// of handlerPages; commands with <placeholders> are templates, not
// examples.
func handlerExamples(t *testing.T, root string) []string {
	t.Helper()
	var cmds []string
	for _, p := range handlerPages {
		cmds = append(cmds, shCommands(t, filepath.Join(root, p), func(cmd string) bool {
			return strings.HasPrefix(cmd, "curl ") && strings.Contains(cmd, "localhost:8080") && !strings.Contains(cmd, "<")
		})...)
	}
	return cmds
}

// tesExamples are the one-line curl commands to the TES API on
// localhost:8081 of tesPages.
func tesExamples(t *testing.T, root string) []string {
	t.Helper()
	var cmds []string
	for _, p := range tesPages {
		cmds = append(cmds, shCommands(t, filepath.Join(root, p), func(cmd string) bool {
			return strings.HasPrefix(cmd, "curl ") && strings.Contains(cmd, "localhost:8081/ga4gh/")
		})...)
	}
	return cmds
}

// The examples the cluster tests run are where the pages keep them: the
// four step types, the view and structured mode for the handler, and for
// the TES API one per endpoint and paging, the README's own among them, a
// task created before any example reads one.
func TestExamplesAreFound(t *testing.T) {
	root, _ := filepath.Abs("../..")
	h := handlerExamples(t, root)
	for _, want := range []string{"task.submitted", "job.finished", "pod.stuck", "task.cancelled", "/tasks/default/", "cloudevents+json"} {
		if !containsOne(h, want) {
			t.Errorf("no handler example has %q in %v: %q", want, handlerPages, h)
		}
	}
	if len(h) == 0 || !strings.Contains(h[0], "task.submitted") {
		t.Errorf("the first handler example does not submit the task the others speak of: %q", h)
	}
	cmds := tesExamples(t, root)
	for _, want := range []string{"/service-info", "-X POST localhost:8081/ga4gh/tes/v1/tasks ", "view=FULL", "/events", "openapi.json", "page_token=<next_page_token>", ":cancel"} {
		if !containsOne(cmds, want) {
			t.Errorf("no TES API example has %q in %v: %q", want, tesPages, cmds)
		}
	}
	readme := shCommands(t, filepath.Join(root, "README.md"), func(cmd string) bool {
		return strings.HasPrefix(cmd, "curl ") && strings.Contains(cmd, "localhost:8081/ga4gh/")
	})
	if !containsOne(readme, "-X POST localhost:8081/ga4gh/tes/v1/tasks ") {
		t.Errorf("the README submits no task with curl: %q", readme)
	}
	created := false
	for _, c := range cmds {
		created = created || strings.Contains(c, "-X POST localhost:8081/ga4gh/tes/v1/tasks ")
		if strings.Contains(c, "<id>") && !created {
			t.Errorf("%q reads a task before any example created one", c)
		}
	}
}

func containsOne(cmds []string, s string) bool {
	for _, c := range cmds {
		if strings.Contains(c, s) {
			return true
		}
	}
	return false
}

// docTaskID is the task id the pages' tesctl commands name; the cluster
// test puts in its place (and in place of <id>) the id of the task the
// first submit command made.
const docTaskID = "task-1a2b3c4d"

// tesctlCall matches tesctl at the start of a command, after any VAR=value
// assignments: bin/tesctl as make builds it, or tesctl on the PATH.
var tesctlCall = regexp.MustCompile(`^((?:[A-Z_]+=\S+\s+)*)(?:bin/)?tesctl\s`)

// tesctlPages are the README and every page of docs/, in that order.
func tesctlPages(t *testing.T, root string) []string {
	t.Helper()
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(docs)
	pages := []string{"README.md"}
	for _, d := range docs {
		rel, _ := filepath.Rel(root, d)
		pages = append(pages, rel)
	}
	return pages
}

// tesctlExamples are the tesctl commands of the sh blocks of tesctlPages.
func tesctlExamples(t *testing.T, root string) []string {
	t.Helper()
	var cmds []string
	for _, p := range tesctlPages(t, root) {
		cmds = append(cmds, shCommands(t, filepath.Join(root, p), tesctlCall.MatchString)...)
	}
	return cmds
}

// tesctlArgs are the words of a tesctl command after tesctl: its
// subcommand first.
func tesctlArgs(cmd string) []string {
	loc := tesctlCall.FindStringIndex(cmd)
	if loc == nil {
		return nil
	}
	return strings.Fields(cmd[loc[1]:])
}

// The tesctl commands the cluster test runs are where the pages keep them:
// the README's quick start, every subcommand of docs/tesctl.md with its
// forms, the one of docs/deploying.md's check; a task is submitted before
// any command names one.
func TestTesctlExamplesAreFound(t *testing.T) {
	root, _ := filepath.Abs("../..")
	cmds := tesctlExamples(t, root)
	readme := shCommands(t, filepath.Join(root, "README.md"), tesctlCall.MatchString)
	if !slices.Contains(readme, "TES_URL=http://localhost:8081 bin/tesctl submit --wait examples/tes-task.json") {
		t.Errorf("the README's quick start submits no task with tesctl: %q", readme)
	}
	for _, want := range []string{"submit --wait --image alpine -- echo hello", "submit examples/tes-task.json", "--name hello --tag project=demo -- echo hello",
		"-i s3://", "wait " + docTaskID, "get " + docTaskID + " --view FULL", "list --state RUNNING", "logs " + docTaskID + " --executor 1", "--follow", "cancel " + docTaskID} {
		if !containsOne(cmds, want) {
			t.Errorf("no tesctl example has %q: %q", want, cmds)
		}
	}
	submitted := false
	for _, c := range cmds {
		args := tesctlArgs(c)
		if len(args) == 0 {
			t.Errorf("%q: no subcommand", c)
			continue
		}
		submitted = submitted || args[0] == "submit"
		if (strings.Contains(c, docTaskID) || strings.Contains(c, "<id>")) && !submitted {
			t.Errorf("%q names a task before any example submitted one", c)
		}
	}
}

// kubectlPage is the page whose troubleshooting gives the kubectl commands
// a reader runs against make dev's local cluster.
const kubectlPage = "docs/getting-started.md"

// docTask is the placeholder the kubectl commands leave for the task; the
// cluster test puts in its place the id of a task that ended COMPLETE.
const docTask = "<task>"

// kubectlExamples are the lines of kubectlPage's sh blocks that set up
// kubectl for make dev's cluster (export KUBECONFIG, export PATH) and the
// kubectl commands for its namespace, default (those without -n: the
// others are for a deployment's namespaces).
// handlerViewExample begins the troubleshooting's curl of the handler's
// view of a task, which runs with the kubectl commands.
const handlerViewExample = "curl -sS localhost:8080/tasks/default/"

func kubectlExamples(t *testing.T, root string) []string {
	t.Helper()
	return shCommands(t, filepath.Join(root, kubectlPage), func(cmd string) bool {
		return strings.HasPrefix(cmd, "export KUBECONFIG=") || strings.HasPrefix(cmd, "export PATH=") ||
			strings.HasPrefix(cmd, "kubectl ") && !strings.Contains(cmd, " -n ") ||
			strings.HasPrefix(cmd, handlerViewExample)
	})
}

// The kubectl commands the cluster test runs are where the page keeps
// them: make dev's kubeconfig and the kubectl built with the control plane
// first, then the anchor, the task's objects, an executor's log and the
// outputs filer's record of the uploaded files, each naming the task.
func TestKubectlExamplesAreFound(t *testing.T) {
	root, _ := filepath.Abs("../..")
	cmds := kubectlExamples(t, root)
	if len(cmds) < 2 || withoutComment(cmds[0]) != "export KUBECONFIG=.cluster/kubeconfig" || withoutComment(cmds[1]) != `export PATH="$(./test/cluster/build.sh | tail -1)/bin:$PATH"` {
		t.Errorf("%s does not set make dev's kubeconfig and the cluster build's kubectl before its kubectl commands: %q", kubectlPage, cmds)
	}
	kubectl := 0
	var code []string
	for _, c := range cmds {
		code = append(code, withoutComment(c))
		if strings.HasPrefix(c, "kubectl ") {
			kubectl++
			if !strings.Contains(c, docTask) {
				t.Errorf("%q names no %s", c, docTask)
			}
		}
	}
	for _, want := range []string{handlerViewExample + "<task>", "kubectl get configmap <task> -o yaml", "kubectl get jobs,pods,pvc -l taskmaster-name=<task>",
		"kubectl logs job/<task>-ex-00", "kubectl get job <task>-outputs-filer -o jsonpath='{.metadata.annotations.output-file-logs}'"} {
		if !slices.Contains(code, want) {
			t.Errorf("no kubectl example of %s has %q: %q", kubectlPage, want, cmds)
		}
	}
	// The cluster test finds that kwok's pods have no log, as make dev
	// plays them: the page says so.
	page, err := os.ReadFile(filepath.Join(root, kubectlPage))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(page), "`kubectl logs` answers `no logs found for container`") {
		t.Errorf("%s does not say that kubectl logs finds no log on kwok's nodes", kubectlPage)
	}
	if kubectl != 4 {
		t.Errorf("%s has %d kubectl commands for make dev's cluster, the test knows 4: %q", kubectlPage, kubectl, cmds)
	}
}

// withoutComment is a command line without its trailing # comment.
func withoutComment(cmd string) string {
	if i := strings.Index(cmd, " #"); i >= 0 {
		cmd = cmd[:i]
	}
	return strings.TrimSpace(cmd)
}
