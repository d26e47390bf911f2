package benchkit

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
)

// AuditFlags are the API server flags that write the audit log of policy
// to path as JSON lines, in one file: the API server's log rotation (at
// 100 MB unless told otherwise) would move the first requests of a long run
// out of the file that CountAudit reads.
func AuditFlags(policy, path string) []string {
	return []string{"--audit-policy-file=" + policy, "--audit-log-path=" + path, "--audit-log-format=json",
		"--audit-log-maxsize=1000000"}
}

// AuditPolicy logs, at level Metadata and once per request (when its answer
// is complete), the requests of the given users only.
func AuditPolicy(users []string) string {
	var b strings.Builder
	b.WriteString("apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived, ResponseStarted, Panic]\nrules:\n- level: Metadata\n  users:\n")
	for _, u := range users {
		fmt.Fprintf(&b, "  - %q\n", u)
	}
	b.WriteString("- level: None\n")
	return b.String()
}

// ServiceAccountsPolicy logs, at level Metadata, the requests of every
// ServiceAccount: once when a watch (or another long request) starts, once
// when a request's answer is complete.
const ServiceAccountsPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived, Panic]
rules:
- level: Metadata
  userGroups: ["system:serviceaccounts"]
- level: None
`

// auditEvent is the part of an audit.k8s.io/v1 Event that is read.
type auditEvent struct {
	AuditID    string `json:"auditID"`
	Stage      string `json:"stage"`
	Verb       string `json:"verb"`
	RequestURI string `json:"requestURI"`
	User       struct {
		Username string `json:"username"`
	} `json:"user"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
		APIGroup    string `json:"apiGroup"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
}

// AuditCounts are the requests of one user in one namespace.
type AuditCounts struct {
	// ByVerb counts requests by verb and resource ("create jobs").
	ByVerb map[string]int
	// JobCreates counts the successful (201) creates of each job by name;
	// JobCreateConflicts the creates answered 409 (the job existed).
	JobCreates         map[string]int
	JobCreateConflicts int
	Total              int
}

// CountAudit reads a JSON-lines audit log and counts the ResponseComplete
// events of user in namespace ns. A line that is not an audit event is an
// error.
func CountAudit(r io.Reader, user, ns string) (AuditCounts, error) {
	c := AuditCounts{ByVerb: map[string]int{}, JobCreates: map[string]int{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	line := 0
	for sc.Scan() {
		line++
		if len(strings.TrimSpace(sc.Text())) == 0 {
			continue
		}
		var ev auditEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			return c, fmt.Errorf("audit log line %d: %w", line, err)
		}
		if ev.Stage != "ResponseComplete" || ev.User.Username != user || ev.ObjectRef == nil || ev.ObjectRef.Namespace != ns {
			continue
		}
		res := ev.ObjectRef.Resource
		if ev.ObjectRef.Subresource != "" {
			res += "/" + ev.ObjectRef.Subresource
		}
		c.ByVerb[ev.Verb+" "+res]++
		c.Total++
		if ev.Verb == "create" && res == "jobs" && ev.ResponseStatus != nil {
			switch ev.ResponseStatus.Code {
			case 201:
				// A create's objectRef has the name of the object once it is known.
				c.JobCreates[ev.ObjectRef.Name]++
			case 409:
				c.JobCreateConflicts++
			}
		}
	}
	return c, sc.Err()
}

// CreatedTwice lists the jobs created more than once.
func (c AuditCounts) CreatedTwice() []string {
	var twice []string
	for name, n := range c.JobCreates {
		if n > 1 {
			twice = append(twice, name)
		}
	}
	sort.Strings(twice)
	return twice
}

// Keys returns the verbs of ByVerb, sorted.
func (c AuditCounts) Keys() []string {
	k := make([]string, 0, len(c.ByVerb))
	for v := range c.ByVerb {
		k = append(k, v)
	}
	sort.Strings(k)
	return k
}

// AuditRequest is one request of an audit log.
type AuditRequest struct {
	User string
	Verb string
	// Group, Resource ("pods/log" with its subresource), Namespace and
	// Name are the object's; Resource is empty for a request without an
	// object (a non-resource URL such as /version), whose path is URL.
	Group, Resource, Namespace, Name string
	URL                              string
	// Code is the answer's status, 0 if the log holds none (a watch that
	// had not ended).
	Code int
}

// ReadAudit reads a JSON-lines audit log and returns each request once (by
// its audit ID, from its ResponseStarted or ResponseComplete event, the
// latter's answer winning) for which keep says yes, in the order of their
// first event. A line that is not an audit event is an error.
func ReadAudit(r io.Reader, keep func(AuditRequest) bool) ([]AuditRequest, error) {
	var out []AuditRequest
	index := map[string]int{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	line := 0
	for sc.Scan() {
		line++
		if len(strings.TrimSpace(sc.Text())) == 0 {
			continue
		}
		var ev auditEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			return out, fmt.Errorf("audit log line %d: %w", line, err)
		}
		if ev.Stage != "ResponseStarted" && ev.Stage != "ResponseComplete" {
			continue
		}
		req := AuditRequest{User: ev.User.Username, Verb: ev.Verb, URL: ev.RequestURI}
		if o := ev.ObjectRef; o != nil {
			req.Group, req.Resource, req.Namespace, req.Name = o.APIGroup, o.Resource, o.Namespace, o.Name
			if o.Subresource != "" {
				req.Resource += "/" + o.Subresource
			}
		}
		if ev.ResponseStatus != nil {
			req.Code = ev.ResponseStatus.Code
		}
		if i, seen := index[ev.AuditID]; seen && ev.AuditID != "" {
			if req.Code != 0 {
				out[i].Code = req.Code
			}
			continue
		}
		if !keep(req) {
			continue
		}
		if ev.AuditID != "" {
			index[ev.AuditID] = len(out)
		}
		out = append(out, req)
	}
	return out, sc.Err()
}
