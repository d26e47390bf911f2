package benchkit

import (
	"strings"
	"testing"
)

const handler = "system:serviceaccount:scale-1:tesk-handler"

func TestCountAudit(t *testing.T) {
	log := strings.Join([]string{
		// Counted: ResponseComplete of the handler in its namespace.
		`{"kind":"Event","stage":"ResponseComplete","verb":"create","user":{"username":"` + handler + `"},"objectRef":{"resource":"jobs","namespace":"scale-1","name":"t-ex-00"},"responseStatus":{"code":201}}`,
		`{"kind":"Event","stage":"ResponseComplete","verb":"create","user":{"username":"` + handler + `"},"objectRef":{"resource":"jobs","namespace":"scale-1","name":"t-ex-01"},"responseStatus":{"code":201}}`,
		`{"kind":"Event","stage":"ResponseComplete","verb":"create","user":{"username":"` + handler + `"},"objectRef":{"resource":"jobs","namespace":"scale-1","name":"t-ex-01"},"responseStatus":{"code":201}}`,
		`{"kind":"Event","stage":"ResponseComplete","verb":"create","user":{"username":"` + handler + `"},"objectRef":{"resource":"jobs","namespace":"scale-1","name":"t-ex-01"},"responseStatus":{"code":409}}`,
		`{"kind":"Event","stage":"ResponseComplete","verb":"get","user":{"username":"` + handler + `"},"objectRef":{"resource":"configmaps","namespace":"scale-1","name":"t"},"responseStatus":{"code":200}}`,
		`{"kind":"Event","stage":"ResponseComplete","verb":"get","user":{"username":"` + handler + `"},"objectRef":{"resource":"pods","subresource":"log","namespace":"scale-1","name":"p"},"responseStatus":{"code":200}}`,
		``,
		// Not counted: another stage, another user, another namespace, no object.
		`{"kind":"Event","stage":"ResponseStarted","verb":"watch","user":{"username":"` + handler + `"},"objectRef":{"resource":"jobs","namespace":"scale-1"}}`,
		`{"kind":"Event","stage":"ResponseComplete","verb":"create","user":{"username":"system:admin"},"objectRef":{"resource":"jobs","namespace":"scale-1","name":"x"},"responseStatus":{"code":201}}`,
		`{"kind":"Event","stage":"ResponseComplete","verb":"create","user":{"username":"` + handler + `"},"objectRef":{"resource":"jobs","namespace":"scale-2","name":"t-ex-00"},"responseStatus":{"code":201}}`,
		`{"kind":"Event","stage":"ResponseComplete","verb":"get","user":{"username":"` + handler + `"},"responseStatus":{"code":200}}`,
	}, "\n")
	c, err := CountAudit(strings.NewReader(log), handler, "scale-1")
	if err != nil {
		t.Fatal(err)
	}
	if c.Total != 6 {
		t.Errorf("Total = %d, want 6", c.Total)
	}
	want := map[string]int{"create jobs": 4, "get configmaps": 1, "get pods/log": 1}
	if len(c.ByVerb) != len(want) {
		t.Errorf("ByVerb = %v, want %v", c.ByVerb, want)
	}
	for k, n := range want {
		if c.ByVerb[k] != n {
			t.Errorf("ByVerb[%q] = %d, want %d", k, c.ByVerb[k], n)
		}
	}
	if c.JobCreates["t-ex-00"] != 1 || c.JobCreates["t-ex-01"] != 2 || len(c.JobCreates) != 2 {
		t.Errorf("JobCreates = %v", c.JobCreates)
	}
	if c.JobCreateConflicts != 1 {
		t.Errorf("JobCreateConflicts = %d, want 1", c.JobCreateConflicts)
	}
	if got := c.CreatedTwice(); len(got) != 1 || got[0] != "t-ex-01" {
		t.Errorf("CreatedTwice = %v, want [t-ex-01]", got)
	}
	if got := c.Keys(); strings.Join(got, ",") != "create jobs,get configmaps,get pods/log" {
		t.Errorf("keys = %v", got)
	}
}

func TestCountAuditBadLine(t *testing.T) {
	_, err := CountAudit(strings.NewReader("{\"stage\":\"ResponseComplete\"}\nnot json\n"), handler, "scale-1")
	if err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Fatalf("err = %v, want an error naming line 2", err)
	}
}

func TestAuditPolicy(t *testing.T) {
	p := AuditPolicy([]string{handler})
	for _, want := range []string{"kind: Policy", "level: Metadata", `- "` + handler + `"`, "- level: None"} {
		if !strings.Contains(p, want) {
			t.Errorf("policy lacks %q:\n%s", want, p)
		}
	}
}

func TestAuditFlagsKeepOneFile(t *testing.T) {
	flags := strings.Join(AuditFlags("/p.yaml", "/a.log"), " ")
	for _, want := range []string{"--audit-policy-file=/p.yaml", "--audit-log-path=/a.log", "--audit-log-format=json", "--audit-log-maxsize=1000000"} {
		if !strings.Contains(flags, want) {
			t.Errorf("AuditFlags = %q, lacks %q", flags, want)
		}
	}
}
