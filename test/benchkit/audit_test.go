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

func TestReadAudit(t *testing.T) {
	sa := "system:serviceaccount:ns-1:tesk-handler"
	log := strings.Join([]string{
		// A request: its ResponseComplete only.
		`{"auditID":"a","stage":"ResponseComplete","verb":"get","requestURI":"/api/v1/namespaces/ns-1/configmaps/t","user":{"username":"` + sa + `"},"objectRef":{"resource":"configmaps","namespace":"ns-1","name":"t","apiVersion":"v1"},"responseStatus":{"code":200}}`,
		// A watch: started, then complete; one request, the answer of the end.
		`{"auditID":"w","stage":"ResponseStarted","verb":"watch","requestURI":"/apis/batch/v1/namespaces/ns-1/jobs?watch=true","user":{"username":"` + sa + `"},"objectRef":{"resource":"jobs","namespace":"ns-1","apiGroup":"batch","apiVersion":"v1"},"responseStatus":{"code":200}}`,
		`{"auditID":"w","stage":"ResponseComplete","verb":"watch","requestURI":"/apis/batch/v1/namespaces/ns-1/jobs?watch=true","user":{"username":"` + sa + `"},"objectRef":{"resource":"jobs","namespace":"ns-1","apiGroup":"batch","apiVersion":"v1"},"responseStatus":{"code":500}}`,
		// A watch still open: no answer yet.
		`{"auditID":"o","stage":"ResponseStarted","verb":"watch","user":{"username":"` + sa + `"},"objectRef":{"resource":"pods","namespace":"ns-1"}}`,
		// A subresource, denied.
		`{"auditID":"l","stage":"ResponseComplete","verb":"get","user":{"username":"` + sa + `"},"objectRef":{"resource":"pods","subresource":"log","namespace":"ns-1","name":"p"},"responseStatus":{"code":403}}`,
		// A non-resource URL.
		`{"auditID":"v","stage":"ResponseComplete","verb":"get","requestURI":"/version","user":{"username":"` + sa + `"},"responseStatus":{"code":200}}`,
		// Left out: RequestReceived, and what keep refuses.
		`{"auditID":"r","stage":"RequestReceived","verb":"get","user":{"username":"` + sa + `"},"objectRef":{"resource":"secrets","namespace":"ns-1"}}`,
		`{"auditID":"x","stage":"ResponseComplete","verb":"create","user":{"username":"system:admin"},"objectRef":{"resource":"jobs","namespace":"ns-1","apiGroup":"batch"},"responseStatus":{"code":201}}`,
		``,
	}, "\n")
	got, err := ReadAudit(strings.NewReader(log), func(r AuditRequest) bool { return r.User == sa })
	if err != nil {
		t.Fatal(err)
	}
	want := []AuditRequest{
		{User: sa, Verb: "get", Resource: "configmaps", Namespace: "ns-1", Name: "t", URL: "/api/v1/namespaces/ns-1/configmaps/t", Code: 200},
		{User: sa, Verb: "watch", Group: "batch", Resource: "jobs", Namespace: "ns-1", URL: "/apis/batch/v1/namespaces/ns-1/jobs?watch=true", Code: 500},
		{User: sa, Verb: "watch", Resource: "pods", Namespace: "ns-1"},
		{User: sa, Verb: "get", Resource: "pods/log", Namespace: "ns-1", Name: "p", Code: 403},
		{User: sa, Verb: "get", URL: "/version", Code: 200},
	}
	if len(got) != len(want) {
		t.Fatalf("ReadAudit = %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("request %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	if _, err := ReadAudit(strings.NewReader("{}\nnot json\n"), func(AuditRequest) bool { return true }); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("err = %v, want an error naming line 2", err)
	}
}
