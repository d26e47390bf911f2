package events

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRequireSinkToken(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, c := range []struct {
		name, file, wantErr string
	}{
		{name: "mounted", file: write("token", "abc.def\n")},
		{name: "not mounted yet", file: filepath.Join(dir, "none"), wantErr: "no token in"},
		{name: "empty", file: write("empty", " \n"), wantErr: "no token in"},
		{name: "no file named", file: "", wantErr: "no token in"},
		{name: "a directory", file: dir, wantErr: "cannot be read"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := RequireSinkToken(c.file)
			if c.wantErr == "" {
				if err != nil {
					t.Fatalf("RequireSinkToken(%q): %v", c.file, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.wantErr) || !strings.Contains(err.Error(), "SINK_TOKEN_REQUIRED") {
				t.Fatalf("RequireSinkToken(%q): %v, want an error naming SINK_TOKEN_REQUIRED and %q", c.file, err, c.wantErr)
			}
		})
	}
}
