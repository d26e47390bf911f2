package archdoc

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// maxFuncLines is the most lines a function of the product holds, from its
// func keyword to its closing brace: past it, a function does several
// things, each of which wants a name of its own.
const maxFuncLines = 80

// TestNoProductFunctionIsOverLong holds every function and method of the
// product's Go files (as TestNoProductFileIsOverLong's) to maxFuncLines.
func TestNoProductFunctionIsOverLong(t *testing.T) {
	dir := root(t)
	for _, rel := range productFiles(t, dir) {
		for _, f := range overLongFuncs(t, filepath.Join(dir, rel), maxFuncLines) {
			t.Errorf("%s:%d: func %s has %d lines, more than %d: split it into named helpers that say what each part does", rel, f.line, f.name, f.lines, maxFuncLines)
		}
	}
}

// TestOverLongFuncs: a function of maxFuncLines lines passes, one of a line
// more is found, with its name (a method's with its receiver) and line.
func TestOverLongFuncs(t *testing.T) {
	body := func(lines int) string { return strings.Repeat("\t_ = 0\n", lines-2) }
	src := "package p\n\nfunc fits() {\n" + body(maxFuncLines) + "}\n\n" +
		"type T struct{}\n\nfunc (t *T) tooLong() {\n" + body(maxFuncLines+1) + "}\n"
	file := filepath.Join(t.TempDir(), "p.go")
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	got := overLongFuncs(t, file, maxFuncLines)
	want := []longFunc{{name: "(*T).tooLong", line: maxFuncLines + 6, lines: maxFuncLines + 1}}
	if !slices.Equal(got, want) {
		t.Errorf("overLongFuncs = %+v, want %+v", got, want)
	}
}

// longFunc is a function found over long: its name, the line of its func
// keyword, and its length in lines.
type longFunc struct {
	name        string
	line, lines int
}

// overLongFuncs are the functions of a Go file longer than limit lines.
func overLongFuncs(t *testing.T, file string, limit int) []longFunc {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, file, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	var out []longFunc
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || fd.Body == nil {
			continue
		}
		from, to := fset.Position(fd.Type.Func).Line, fset.Position(fd.Body.Rbrace).Line
		if n := to - from + 1; n > limit {
			out = append(out, longFunc{name: funcName(fd), line: from, lines: n})
		}
	}
	return out
}

// funcName is a function's name, a method's with its receiver's type:
// "(*Runner).Sweep".
func funcName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	typ := fd.Recv.List[0].Type
	star := ""
	if s, ok := typ.(*ast.StarExpr); ok {
		typ, star = s.X, "*"
	}
	switch x := typ.(type) {
	case *ast.IndexExpr:
		typ = x.X
	case *ast.IndexListExpr:
		typ = x.X
	}
	name := "?"
	if id, ok := typ.(*ast.Ident); ok {
		name = id.Name
	}
	if star != "" {
		return fmt.Sprintf("(*%s).%s", name, fd.Name.Name)
	}
	return name + "." + fd.Name.Name
}
