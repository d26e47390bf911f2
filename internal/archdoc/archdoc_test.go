// Package archdoc holds docs/architecture.md to the code: its list of the
// product's packages, on their floors, and of every arrow between them (A
// → B: A imports B) is what go list gives, both ways, and every arrow goes
// down a floor. It holds the product's files to a length too (filesize_test.go),
// and their functions (funcsize_test.go).
package archdoc

import (
	"bufio"
	"bytes"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// module is the project's module path.
const module = "github.com/elixir-cloud-aai/tesk-knative"

// doc is the document, and heading the section whose first fenced block
// lists the floors and the arrows.
const (
	doc     = "docs/architecture.md"
	heading = "## Floors and arrows"
)

// left out of the document: the tests' and the tools' trees.
var leftOut = []string{"test/", "hack/"}

// root is the module's root, two folders above this package's.
func root(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		t.Fatalf("no go.mod at the module's root: %v", err)
	}
	return dir
}

// goTool is the go command: on PATH, else the one of the toolchain that
// built the test.
func goTool(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	p := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("no go command on PATH, nor at %s: %v", p, err)
	}
	return p
}

// goList is every package of the product (not the trees left out, nor a
// package of tests only) with the project's packages it imports, by their
// paths in the module ("steps", "internal/kubeapi").
func goList(t *testing.T, dir string) map[string][]string {
	t.Helper()
	cmd := exec.Command(goTool(t), "list", "-deps=false",
		"-f", "{{if .GoFiles}}{{.ImportPath}}{{range .Imports}} {{.}}{{end}}{{end}}", "./...")
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.Bytes())
	}
	pkgs := map[string][]string{}
	for line := range strings.Lines(string(out)) {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		pkg, ok := strings.CutPrefix(f[0], module+"/")
		if !ok || slices.ContainsFunc(leftOut, func(p string) bool { return strings.HasPrefix(pkg, p) }) {
			continue
		}
		deps := []string{}
		for _, imp := range f[1:] {
			if dep, ok := strings.CutPrefix(imp, module+"/"); ok {
				deps = append(deps, dep)
			}
		}
		pkgs[pkg] = deps
	}
	if len(pkgs) == 0 {
		t.Fatalf("go list found no package of the product:\n%s", out)
	}
	return pkgs
}

// entry is a package as the document lists it.
type entry struct {
	floor int
	deps  []string
	line  int // in the document
}

var (
	floorRE = regexp.MustCompile(`^floor (\d+)(\s.*)?$`)
	entryRE = regexp.MustCompile(`^(\S+)\s*→\s*(.*)$`)
)

// parseArrows reads the document's block: lines "floor N  pkg → dep, dep"
// or "pkg → dep, dep" (on the floor above them), "→ nothing" for a package
// that imports nothing of the project, and lines that go on with the
// previous package's list.
func parseArrows(t *testing.T, text string) map[string]*entry {
	t.Helper()
	sc := bufio.NewScanner(strings.NewReader(text))
	n, inSection, inBlock, done := 0, false, false, false
	pkgs := map[string]*entry{}
	floor := -1
	var last *entry
	for sc.Scan() && !done {
		n++
		line := sc.Text()
		switch {
		case !inSection:
			inSection = line == heading
			continue
		case !inBlock && strings.HasPrefix(line, "## "):
			t.Fatalf("%s: the section %q has no fenced block", doc, heading)
		case !inBlock:
			inBlock = strings.HasPrefix(line, "```")
			continue
		case strings.HasPrefix(line, "```"):
			done = true
			continue
		}
		s := strings.TrimSpace(line)
		if s == "" {
			continue
		}
		if m := floorRE.FindStringSubmatch(s); m != nil {
			floor, _ = strconv.Atoi(m[1])
			if s = strings.TrimSpace(m[2]); s == "" {
				continue
			}
		}
		m := entryRE.FindStringSubmatch(s)
		if m == nil {
			if last == nil {
				t.Fatalf("%s:%d: %q is neither a floor, a package and its arrows, nor their continuation", doc, n, s)
			}
			last.deps = append(last.deps, splitDeps(s)...)
			continue
		}
		if floor < 0 {
			t.Fatalf("%s:%d: %s is on no floor (a line \"floor N ...\" comes first)", doc, n, m[1])
		}
		if prev, ok := pkgs[m[1]]; ok {
			t.Errorf("%s:%d: %s is listed again (first on line %d)", doc, n, m[1], prev.line)
		}
		last = &entry{floor: floor, line: n}
		if strings.TrimSpace(m[2]) != "nothing" {
			last.deps = splitDeps(m[2])
		}
		pkgs[m[1]] = last
	}
	if !inSection {
		t.Fatalf("%s has no section %q", doc, heading)
	}
	if !done {
		t.Fatalf("%s: the section %q has no whole fenced block", doc, heading)
	}
	return pkgs
}

// splitDeps splits "a, b," into a and b.
func splitDeps(s string) []string {
	var deps []string
	for d := range strings.SplitSeq(s, ",") {
		if d = strings.TrimSpace(d); d != "" {
			deps = append(deps, d)
		}
	}
	return deps
}

// readTree opens every folder of the packages go list reads, so that go
// test's cache takes their files as the test's inputs: a Go file added,
// removed or changed runs the test again rather than repeating its last
// result.
func readTree(t *testing.T, dir string) {
	t.Helper()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() || p == dir {
			return err
		}
		name := d.Name()
		if strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" {
			return filepath.SkipDir
		}
		if _, err := os.Stat(filepath.Join(p, "go.mod")); err == nil {
			return filepath.SkipDir // another module
		}
		rel, _ := filepath.Rel(dir, p)
		if slices.Contains(leftOut, filepath.ToSlash(rel)+"/") {
			return filepath.SkipDir
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestArchitectureArrows holds docs/architecture.md's floors and arrows to
// go list: every package of the product is listed once, every import
// between them is an arrow and every arrow an import, and every arrow goes
// down to a lower floor.
func TestArchitectureArrows(t *testing.T) {
	dir := root(t)
	readTree(t, dir)
	text, err := os.ReadFile(filepath.Join(dir, doc))
	if err != nil {
		t.Fatal(err)
	}
	listed := parseArrows(t, string(text))
	actual := goList(t, dir)

	for _, pkg := range slices.Sorted(maps.Keys(actual)) {
		if _, ok := listed[pkg]; !ok {
			t.Errorf("package %s is missing from %s (its arrows: %s)", pkg, doc, arrows(pkg, actual[pkg]))
		}
	}
	for _, pkg := range slices.Sorted(maps.Keys(listed)) {
		e := listed[pkg]
		deps, ok := actual[pkg]
		if !ok {
			t.Errorf("%s:%d: %s is not a package of the product (go list ./..., but for %s)", doc, e.line, pkg, strings.Join(leftOut, ", "))
			continue
		}
		for _, dep := range slices.Sorted(slices.Values(deps)) {
			if !slices.Contains(e.deps, dep) {
				t.Errorf("%s:%d: arrow %s → %s is missing: %s imports %s", doc, e.line, pkg, dep, pkg, dep)
			}
		}
		for _, dep := range e.deps {
			if !slices.Contains(deps, dep) {
				t.Errorf("%s:%d: arrow %s → %s is extra: %s does not import %s", doc, e.line, pkg, dep, pkg, dep)
			}
			if d, ok := listed[dep]; ok && d.floor >= e.floor {
				t.Errorf("%s:%d: arrow %s → %s does not go down: %s is on floor %d, %s on floor %d", doc, e.line, pkg, dep, pkg, e.floor, dep, d.floor)
			}
		}
		if sorted := slices.Sorted(slices.Values(e.deps)); len(slices.Compact(sorted)) < len(e.deps) {
			t.Errorf("%s:%d: %s lists an arrow twice", doc, e.line, pkg)
		}
	}
}

// arrows renders a package's line as the document would hold it.
func arrows(pkg string, deps []string) string {
	if len(deps) == 0 {
		return pkg + " → nothing"
	}
	return fmt.Sprintf("%s → %s", pkg, strings.Join(deps, ", "))
}
