package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRun(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		f := filepath.Join(dir, name)
		if err := os.WriteFile(f, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return f
	}
	vals := write("values.json", `{"auth": {"mode": "none"}, "namespaces": {"tasks": "t1"},
		"tasks": {"resourceQuota": {"requests.cpu": "2"}, "limitRange": [{"type": "Container", "defaultRequest": {"cpu": "100m"}}]}}`)
	plain := write("plain.json", `{"auth": {"mode": "none"}}`)
	cases := []struct {
		name, values, showOnly string
		want, notWant          []string
		err                    string
	}{
		{name: "one template", values: vals, showOnly: "tasks.yaml",
			want:    []string{"---\n# Source: tasks.yaml\n", "kind: ResourceQuota\nmetadata:\n  name: tesk-tasks\n  namespace: t1", "requests.cpu: \"2\"", "kind: LimitRange", "cpu: 100m"},
			notWant: []string{"# Source: config.yaml"}},
		{name: "all templates", values: vals,
			want: []string{"# Source: config.yaml", "# Source: tasks.yaml", `NAMESPACE: "t1"`}},
		{name: "no quota nor limit range", values: plain, showOnly: "tasks.yaml",
			want: []string{"kind: NetworkPolicy"}, notWant: []string{"kind: ResourceQuota", "kind: LimitRange"}},
		{name: "a template the chart does not render", values: vals, showOnly: "nothing.yaml",
			err: "-show-only nothing.yaml: no such template rendered; the chart renders "},
		{name: "values that are not JSON", values: "main.go", err: "main.go: invalid character"},
		{name: "values the schema refuses", values: write("bad.json", `{"auth": {"mode": "nobody"}}`), err: "/auth/mode"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var out bytes.Buffer
			err := run(&out, c.values, c.showOnly)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("error %v, want one with %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range c.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("the output has no %q:\n%s", w, out.String())
				}
			}
			for _, w := range c.notWant {
				if strings.Contains(out.String(), w) {
					t.Errorf("the output has %q", w)
				}
			}
		})
	}
}
