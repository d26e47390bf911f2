package taskspec

import (
	"net/url"
	"strings"
	"testing"
)

func TestURLFor(t *testing.T) {
	for _, tc := range []struct {
		name string
		out  Output
		file string
		want string // "" for a file that does not belong to the output
	}{
		{"file", Output{URL: "s3://b/k", Path: "/data/out.txt"}, "/data/out.txt", "s3://b/k"},
		{"file, other path", Output{URL: "s3://b/k", Path: "/data/out.txt"}, "/data/other.txt", ""},
		{"directory", Output{URL: "s3://b/dir", Path: "/data/out", Type: TypeDirectory}, "/data/out/a/b.txt", "s3://b/dir/a/b.txt"},
		{"directory, slash in URL", Output{URL: "s3://b/dir/", Path: "/data/out/", Type: TypeDirectory}, "/data/out/x", "s3://b/dir/x"},
		{"directory itself", Output{URL: "s3://b/dir", Path: "/data/out", Type: TypeDirectory}, "/data/out", "s3://b/dir"},
		{"directory, sibling prefix", Output{URL: "s3://b/dir", Path: "/data/out", Type: TypeDirectory}, "/data/outer/x", ""},
		{"wildcard pruned", Output{URL: "s3://b/res", Path: "/data/*/out.txt", PathPrefix: "/data"}, "/data/s1/out.txt", "s3://b/res/s1/out.txt"},
		{"wildcard, prefix with slash", Output{URL: "s3://b/res/", Path: "/data/*/out.txt", PathPrefix: "/data/"}, "/data/s1/out.txt", "s3://b/res/s1/out.txt"},
		{"wildcard, deeper prefix", Output{URL: "ftp://h/r", Path: "/data/run/*.log", PathPrefix: "/data/run"}, "/data/run/a.log", "ftp://h/r/a.log"},
		{"wildcard, root prefix", Output{URL: "s3://b/r", Path: "/data/*.log", PathPrefix: "/"}, "/data/a.log", "s3://b/r/data/a.log"},
		{"wildcard, no match", Output{URL: "s3://b/r", Path: "/data/*.log", PathPrefix: "/data"}, "/data/a.txt", ""},
		{"wildcard, * stops at /", Output{URL: "s3://b/r", Path: "/data/*.log", PathPrefix: "/data"}, "/data/x/a.log", ""},
		{"wildcard, outside prefix", Output{URL: "s3://b/r", Path: "/data/*.log", PathPrefix: "/other"}, "/data/a.log", ""},
		{"s3 key taken literally", Output{URL: "s3://b/d", Path: "/data", Type: TypeDirectory}, "/data/a b?c%.txt", "s3://b/d/a b?c%.txt"},
		{"http escaped", Output{URL: "https://h/d", Path: "/data", Type: TypeDirectory}, "/data/a b?c#%.txt", "https://h/d/a%20b%3Fc%23%25.txt"},
		{"http query kept after the path", Output{URL: "https://h/c?sv=1&sig=x", Path: "/data", Type: TypeDirectory}, "/data/s/f.txt", "https://h/c/s/f.txt?sv=1&sig=x"},
		{"ftp non-ASCII", Output{URL: "ftp://h/d/", Path: "/data", Type: TypeDirectory}, "/data/é.txt", "ftp://h/d/%C3%A9.txt"},
		{"file URL", Output{URL: "file:///base/out", Path: "/data/*", PathPrefix: "/data"}, "/data/x y", "file:///base/out/x%20y"},
		{"a bracket without path_prefix is a name", Output{URL: "s3://b/k", Path: "/work/x[1].txt"}, "/work/x[1].txt", "s3://b/k"},
		{"a bracket without path_prefix matches nothing else", Output{URL: "s3://b/k", Path: "/work/x[1].txt"}, "/work/x1.txt", ""},
		{"a bracket with path_prefix is a pattern", Output{URL: "s3://b/w", Path: "/work/x[1].txt", PathPrefix: "/work"}, "/work/x1.txt", "s3://b/w/x1.txt"},
	} {
		got, ok := tc.out.URLFor(tc.file)
		if ok != (tc.want != "") || got != tc.want {
			t.Errorf("%s: URLFor(%q) = %q, %v; want %q", tc.name, tc.file, got, ok, tc.want)
			continue
		}
		// The escaped URL names the file: it parses back to its path.
		if ok && !strings.HasPrefix(got, "s3://") && tc.out.Type == TypeDirectory {
			u, err := url.Parse(got)
			if err != nil || !strings.HasSuffix(u.Path, strings.TrimPrefix(tc.file, tc.out.Path)) {
				t.Errorf("%s: %q parses to %q, %v", tc.name, got, u.Path, err)
			}
		}
	}
}

func TestStaticDirAndFilerPath(t *testing.T) {
	for p, want := range map[string]string{"/data/*/out.txt": "/data", "/data/run/*.log": "/data/run", "/data/a/b/c?.txt": "/data/a/b", "/*.txt": "/"} {
		if got := StaticDir(p); got != want {
			t.Errorf("StaticDir(%q) = %q, want %q", p, got, want)
		}
	}
	for p, want := range map[string]string{"/data/x": "/tesk/task/data/x", "/data/../x": "/tesk/task/x", "data/x": "/tesk/task/data/x"} {
		if got := FilerPath(p); got != want {
			t.Errorf("FilerPath(%q) = %q, want %q", p, got, want)
		}
	}
}

func TestOutputFileLogsLine(t *testing.T) {
	for _, tc := range []struct {
		files []UploadedFile
		want  string
	}{
		{nil, `TESK_OUTPUT_FILE_LOGS []`},
		{[]UploadedFile{}, `TESK_OUTPUT_FILE_LOGS []`},
		{[]UploadedFile{{Output: 0, Path: "/data/a", SizeBytes: "12"}, {Output: 0, Path: "/data/a", SizeBytes: "12"}, {Output: 3, Path: "/data/dir/\"q\".txt", SizeBytes: "0"}},
			`TESK_OUTPUT_FILE_LOGS [{"output":0,"path":"/data/a","size_bytes":"12"},{"output":0,"path":"/data/a","size_bytes":"12"},{"output":3,"path":"/data/dir/\"q\".txt","size_bytes":"0"}]`},
	} {
		line := FormatOutputFileLogs(tc.files)
		if line != tc.want {
			t.Errorf("got %s, want %s", line, tc.want)
		}
		back, err := ParseOutputFileLogs(line)
		if err != nil || len(back) != len(tc.files) {
			t.Errorf("parse back %s: %v, %v", line, back, err)
		}
	}
	for _, bad := range []string{"OTHER []", "TESK_OUTPUT_FILE_LOGS {", `TESK_OUTPUT_FILE_LOGS [{"url":"x"}]`} {
		if _, err := ParseOutputFileLogs(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}
