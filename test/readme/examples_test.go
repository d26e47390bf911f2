package readme

import (
	"bufio"
	"os"
	"path/filepath"
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
