package tes

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestAllowedCreators: with allowed groups and subjects set, a member of an
// allowed group, a named subject and an administrator create tasks; anyone
// else the issuer knows is refused with 403 naming who is admitted, and
// nothing is written, but still lists (and so sees) its own tasks.
func TestAllowedCreators(t *testing.T) {
	is := newIssuer(t)
	auth, err := NewOIDC(context.Background(), OIDCConfig{
		Issuer: is.url, Audience: "tesk", GroupsClaim: "groups", AdminGroup: "tes-admins",
		AllowedGroups: []string{"lab-a", " lab-b "}, AllowedSubjects: []string{"bob"},
	})
	if err != nil {
		t.Fatal(err)
	}
	a := newAPITestWith(t, auth)
	hour := time.Now().Add(time.Hour)
	for name, tc := range map[string]struct {
		token string
		want  int
	}{
		"member of an allowed group": {is.token("ann", "tesk", hour, `,"groups":["other","lab-b"]`), http.StatusOK},
		"one group as a string":      {is.token("amy", "tesk", hour, `,"groups":"lab-a"`), http.StatusOK},
		"a named subject":            {is.token("bob", "tesk", hour, ""), http.StatusOK},
		"an administrator":           {is.token("carol", "tesk", hour, `,"groups":["tes-admins"]`), http.StatusOK},
		"no group":                   {is.token("mallory", "tesk", hour, ""), http.StatusForbidden},
		"another group":              {is.token("eve", "tesk", hour, `,"groups":["lab-c"]`), http.StatusForbidden},
		"a group of the same prefix": {is.token("ed", "tesk", hour, `,"groups":["lab-a-guests"]`), http.StatusForbidden},
	} {
		before := len(a.anchors(t))
		code, body := a.as(tc.token, http.MethodPost, "/tasks", helloTask)
		if code != tc.want {
			t.Errorf("%s: %d %v, want %d", name, code, body, tc.want)
			continue
		}
		if tc.want != http.StatusForbidden {
			continue
		}
		msg, _ := body["error"].(string)
		if !strings.Contains(msg, "lab-a, lab-b") || !strings.Contains(msg, `"groups"`) || !strings.Contains(msg, "may not create tasks") {
			t.Errorf("%s: %q does not say who may create tasks", name, msg)
		}
		if n := len(a.anchors(t)); n != before {
			t.Errorf("%s: a refused create wrote %d anchors", name, n-before)
		}
		a.withMetadata()
		if code, body := a.as(tc.token, http.MethodGet, "/tasks", ""); code != http.StatusOK || len(body["tasks"].([]any)) != 0 {
			t.Errorf("%s: list: %d %v, want 200 with none of the others' tasks", name, code, body)
		}
	}
	if _, err := NewOIDC(context.Background(), OIDCConfig{Issuer: is.url, Audience: "tesk", AllowedGroups: []string{"lab-a"}}); err == nil {
		t.Error("allowed groups without a groups claim accepted")
	}
}

// anchors lists the tasks' anchors written so far.
func (a *apiTest) anchors(t *testing.T) []string {
	t.Helper()
	l, err := a.client.CoreV1().ConfigMaps("tes").List(context.Background(), metaListAll)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, cm := range l.Items {
		names = append(names, cm.Name)
	}
	return names
}
