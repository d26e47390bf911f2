package tes

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestCrossSiteRequests: a create or a cancel a browser sends from a page
// of another site is refused with 403 and changes nothing, with Basic
// credentials or none; the same from the service's own pages, from a
// client that is not a browser, or with a bearer token passes. A create
// whose body does not say it is JSON (what an HTML form sends) is a 415.
func TestCrossSiteRequests(t *testing.T) {
	a := newAPITest(t)
	send := func(method, path, body string, header map[string]string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, a.url+path, strings.NewReader(body))
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b := make([]byte, 4096)
		n, _ := resp.Body.Read(b)
		return resp.StatusCode, string(b[:n])
	}
	jsonType := map[string]string{"Content-Type": "application/json"}
	with := func(extra map[string]string) map[string]string {
		h := map[string]string{"Content-Type": "application/json"}
		for k, v := range extra {
			h[k] = v
		}
		return h
	}
	code, body := send(http.MethodPost, "/tasks", helloTask, jsonType)
	if code != http.StatusOK {
		t.Fatalf("a create: %d %s", code, body)
	}
	for name, c := range map[string]struct {
		method, path, body string
		header             map[string]string
		want               int
	}{
		"create from another site":           {http.MethodPost, "/tasks", helloTask, with(map[string]string{"Sec-Fetch-Site": "cross-site"}), http.StatusForbidden},
		"create from another origin":         {http.MethodPost, "/tasks", helloTask, with(map[string]string{"Origin": "https://evil.example"}), http.StatusForbidden},
		"create as a form":                   {http.MethodPost, "/tasks", helloTask, map[string]string{"Content-Type": "text/plain"}, http.StatusUnsupportedMediaType},
		"create without a type":              {http.MethodPost, "/tasks", helloTask, nil, http.StatusUnsupportedMediaType},
		"create from another site, Basic":    {http.MethodPost, "/tasks", helloTask, with(map[string]string{"Sec-Fetch-Site": "cross-site", "Authorization": basicAuth("alice", "pw")}), http.StatusForbidden},
		"cancel from another site":           {http.MethodPost, "/tasks/task-x:cancel", "", map[string]string{"Sec-Fetch-Site": "cross-site"}, http.StatusForbidden},
		"create from the service's own page": {http.MethodPost, "/tasks", helloTask, with(map[string]string{"Sec-Fetch-Site": "same-origin"}), http.StatusOK},
		"create with a JSON charset":         {http.MethodPost, "/tasks", helloTask, map[string]string{"Content-Type": "application/json; charset=utf-8"}, http.StatusOK},
		"create with a token, elsewhere":     {http.MethodPost, "/tasks", helloTask, with(map[string]string{"Sec-Fetch-Site": "cross-site", "Authorization": "Bearer x"}), http.StatusOK},
		"list from another site":             {http.MethodGet, "/service-info", "", map[string]string{"Sec-Fetch-Site": "cross-site"}, http.StatusOK},
	} {
		before := len(a.anchors(t))
		code, body := send(c.method, c.path, c.body, c.header)
		if code != c.want {
			t.Errorf("%s: %d %s, want %d", name, code, body, c.want)
			continue
		}
		if c.want != http.StatusOK {
			if !strings.Contains(body, `"error"`) {
				t.Errorf("%s: %s is not a JSON error", name, body)
			}
			if n := len(a.anchors(t)); n != before {
				t.Errorf("%s: a refused request wrote %d anchors", name, n-before)
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if cms, _ := a.client.CoreV1().ConfigMaps("tes").List(ctx, metaListAll); len(cms.Items) != 4 {
		t.Errorf("%d anchors, want the 4 creates that passed", len(cms.Items))
	}
}
