package main

import (
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync/atomic"
)

// roundRobin is a reverse proxy that sends each request to the next backend
// in turn and counts the requests each got.
type roundRobin struct {
	backends []*url.URL
	next     atomic.Uint64
	served   []atomic.Int64
	proxy    *httputil.ReverseProxy
}

func newRoundRobin(backends ...string) (*roundRobin, error) {
	rr := &roundRobin{served: make([]atomic.Int64, len(backends))}
	for _, b := range backends {
		u, err := url.Parse(b)
		if err != nil {
			return nil, err
		}
		rr.backends = append(rr.backends, u)
	}
	rr.proxy = &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			i := int(rr.next.Add(1)-1) % len(rr.backends)
			rr.served[i].Add(1)
			r.SetURL(rr.backends[i])
		},
		Transport: &http.Transport{MaxIdleConnsPerHost: 256},
	}
	return rr, nil
}

func (rr *roundRobin) ServeHTTP(w http.ResponseWriter, r *http.Request) { rr.proxy.ServeHTTP(w, r) }

// counts returns how many requests each backend got.
func (rr *roundRobin) counts() []int64 {
	out := make([]int64, len(rr.served))
	for i := range rr.served {
		out[i] = rr.served[i].Load()
	}
	return out
}
