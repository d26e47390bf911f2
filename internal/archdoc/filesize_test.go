package archdoc

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// maxFileLines is the most lines a product file holds: past it, a file
// holds several concerns, each of which wants a file of its own.
const maxFileLines = 450

// TestNoProductFileIsOverLong holds every Go file of the product (tests,
// test/ and hack/ left out) to maxFileLines.
func TestNoProductFileIsOverLong(t *testing.T) {
	dir := root(t)
	for _, rel := range productFiles(t, dir) {
		b, err := os.ReadFile(filepath.Join(dir, rel))
		if err != nil {
			t.Fatal(err)
		}
		if n := bytes.Count(b, []byte("\n")); n > maxFileLines {
			t.Errorf("%s has %d lines, more than %d: split it by concern", rel, n, maxFileLines)
		}
	}
}

// productFiles are the Go files of the product, relative to the module's
// root dir and slash-separated: tests, test/ and hack/, testdata, hidden
// folders and other modules left out.
func productFiles(t *testing.T, dir string) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			name := d.Name()
			if p != dir && (strings.HasPrefix(name, ".") || name == "testdata" || slices.Contains(leftOut, rel+"/")) {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(p, "go.mod")); err == nil && p != dir {
				return filepath.SkipDir // another module
			}
			return nil
		}
		if strings.HasSuffix(rel, ".go") && !strings.HasSuffix(rel, "_test.go") {
			files = append(files, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatalf("no Go file of the product under %s", dir)
	}
	return files
}
