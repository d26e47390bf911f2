// Package kingress is a stand-in for a Knative ingress (Kourier, Contour,
// Istio), which cannot be built here: it reads Knative Serving's
// KIngress objects (networking.internal.knative.dev/v1alpha1 Ingress) of
// its class, marks them ready with its own Service as their load balancer,
// and proxies HTTP/1.1 requests by their Host header and path to the
// backends the rules name, adding the headers they ask for, with the
// traffic split by percent. It does no TLS, no HTTP/2, no header matching
// and no retries: what the local cluster's Knative Services need, and no
// more. It is for the local cluster's tests only.
package kingress

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"sort"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GVR is the KIngress resource.
var GVR = schema.GroupVersionResource{Group: "networking.internal.knative.dev", Version: "v1alpha1", Resource: "ingresses"}

// ClassAnnotation names the ingress class of a KIngress; Class is the
// stand-in's, as config-network's ingress-class names it.
const (
	ClassAnnotation = "networking.knative.dev/ingress.class"
	Class           = "standin.ingress.tesk.test"
)

// Spec is the part of a KIngress the stand-in reads.
type Spec struct {
	Rules []Rule `json:"rules"`
}

// Rule routes the requests for its hosts.
type Rule struct {
	Hosts []string `json:"hosts"`
	HTTP  *struct {
		Paths []Path `json:"paths"`
	} `json:"http"`
}

// Path routes the requests below its path (all, if empty) to its splits.
type Path struct {
	Path          string            `json:"path"`
	RewriteHost   string            `json:"rewriteHost"`
	AppendHeaders map[string]string `json:"appendHeaders"`
	Splits        []Split           `json:"splits"`
}

// Split is a backend with its share of the traffic.
type Split struct {
	ServiceNamespace string            `json:"serviceNamespace"`
	ServiceName      string            `json:"serviceName"`
	ServicePort      json.RawMessage   `json:"servicePort"`
	Percent          int               `json:"percent"`
	AppendHeaders    map[string]string `json:"appendHeaders"`
}

// Target is where one request goes.
type Target struct {
	// Host:port of the backend Service, by its cluster DNS name.
	Addr string
	// Host is the Host header to send (the request's, or the rule's
	// rewriteHost).
	Host    string
	Headers map[string]string
}

// Table routes requests by host and path. It is safe for concurrent use.
type Table struct {
	mu     sync.RWMutex
	byKey  map[string][]route // KIngress namespace/name -> its routes
	byHost map[string][]route
}

type route struct {
	key, host string
	path      Path
}

// NewTable is an empty table.
func NewTable() *Table {
	return &Table{byKey: map[string][]route{}, byHost: map[string][]route{}}
}

// Set replaces the routes of one KIngress; an error leaves them as they
// were.
func (t *Table) Set(key string, spec Spec) error {
	var routes []route
	for _, r := range spec.Rules {
		if r.HTTP == nil {
			continue
		}
		for _, p := range r.HTTP.Paths {
			if len(p.Splits) == 0 {
				return fmt.Errorf("%s: a path without backends", key)
			}
			for _, s := range p.Splits {
				if _, err := port(s.ServicePort); err != nil {
					return fmt.Errorf("%s: %s/%s: %v", key, s.ServiceNamespace, s.ServiceName, err)
				}
			}
			for _, h := range r.Hosts {
				routes = append(routes, route{key: key, host: strings.ToLower(h), path: p})
			}
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.remove(key)
	t.byKey[key] = routes
	for _, r := range routes {
		t.byHost[r.host] = append(t.byHost[r.host], r)
		// The longest path first.
		sort.SliceStable(t.byHost[r.host], func(i, j int) bool {
			return len(t.byHost[r.host][i].path.Path) > len(t.byHost[r.host][j].path.Path)
		})
	}
	return nil
}

// Delete drops the routes of one KIngress.
func (t *Table) Delete(key string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.remove(key)
}

func (t *Table) remove(key string) {
	for _, r := range t.byKey[key] {
		var kept []route
		for _, o := range t.byHost[r.host] {
			if o.key != key {
				kept = append(kept, o)
			}
		}
		if len(kept) == 0 {
			delete(t.byHost, r.host)
		} else {
			t.byHost[r.host] = kept
		}
	}
	delete(t.byKey, key)
}

// Lookup finds where a request for host (with or without a port) and path
// goes; pick chooses a split from 0 to 99 (rand if nil).
func (t *Table) Lookup(host, path string, pick func() int) (Target, bool) {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.ToLower(host)
	t.mu.RLock()
	defer t.mu.RUnlock()
	for _, r := range t.byHost[host] {
		if r.path.Path != "" && !strings.HasPrefix(path, r.path.Path) {
			continue
		}
		n := 0
		if pick != nil {
			n = pick()
		} else {
			n = rand.IntN(100)
		}
		s := choose(r.path.Splits, n)
		p, _ := port(s.ServicePort)
		tg := Target{
			Addr:    net.JoinHostPort(s.ServiceName+"."+s.ServiceNamespace+".svc.cluster.local", p),
			Host:    host,
			Headers: map[string]string{},
		}
		if r.path.RewriteHost != "" {
			tg.Host = r.path.RewriteHost
		}
		for k, v := range r.path.AppendHeaders {
			tg.Headers[k] = v
		}
		for k, v := range s.AppendHeaders {
			tg.Headers[k] = v
		}
		return tg, true
	}
	return Target{}, false
}

// choose picks the split in whose share n (0-99) falls; splits without a
// percent share the rest equally.
func choose(splits []Split, n int) Split {
	total := 0
	for _, s := range splits {
		total += s.Percent
	}
	if total == 0 {
		return splits[n*len(splits)/100]
	}
	acc := 0
	for _, s := range splits {
		acc += s.Percent
		if n*total < acc*100 {
			return s
		}
	}
	return splits[len(splits)-1]
}

func port(raw json.RawMessage) (string, error) {
	var n int
	if err := json.Unmarshal(raw, &n); err == nil && n > 0 && n < 65536 {
		return fmt.Sprint(n), nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil && s != "" {
		// A named port: Knative names its Services' ports http/http2.
		switch s {
		case "http", "http2":
			return "80", nil
		}
		return "", fmt.Errorf("service port %q is not a number nor http", s)
	}
	return "", fmt.Errorf("service port %s is not a port", raw)
}

// SpecOf reads the spec of a KIngress.
func SpecOf(u *unstructured.Unstructured) (Spec, error) {
	var s Spec
	raw, ok := u.Object["spec"]
	if !ok {
		return s, nil
	}
	b, err := json.Marshal(raw)
	if err != nil {
		return s, err
	}
	return s, json.Unmarshal(b, &s)
}
