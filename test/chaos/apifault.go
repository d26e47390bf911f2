package chaos

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"time"
)

// APIFaultProxy sits in front of the Kubernetes API server. It answers a
// WriteFaultRate share of writes (POST, PUT, PATCH, DELETE) itself with 429
// (with Retry-After), 500 and 409 in turn, so that a few faults are enough
// for each answer to be given, without forwarding them; it delays a
// ReadDelayRate share of reads by up to MaxReadDelay, and forwards all other
// requests, credentials included, to the API server through Transport. A
// LostAnswerRate share of writes is forwarded and done, and then answered
// 500 all the same, as when a connection breaks after the API server acted.
type APIFaultProxy struct {
	WriteFaultRate float64
	LostAnswerRate float64
	ReadDelayRate  float64
	MaxReadDelay   time.Duration

	proxy *httputil.ReverseProxy

	mu          sync.Mutex
	rng         *rand.Rand
	faulted     map[string]int // "VERB code" -> count
	lost        map[string]int // VERB -> count
	faults      int            // the writes answered so far, for the turn of the codes
	writes      int
	delayed     int
	proxyErrors int
}

// NewAPIFaultProxy returns a proxy to the API server at target.
func NewAPIFaultProxy(target *url.URL, transport http.RoundTripper, seed uint64) *APIFaultProxy {
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.Transport = transport
	rp.FlushInterval = -1 // watches stream
	p := &APIFaultProxy{
		WriteFaultRate: 0.05, ReadDelayRate: 0.1, MaxReadDelay: 300 * time.Millisecond,
		proxy:   rp,
		rng:     rand.New(rand.NewPCG(seed, seed^0x5851f42d4c957f2d)),
		faulted: map[string]int{},
		lost:    map[string]int{},
	}
	// A request its client gave up on (a killed handler, a step's timeout)
	// is counted, not logged.
	rp.ErrorHandler = func(w http.ResponseWriter, r *http.Request, err error) {
		p.mu.Lock()
		p.proxyErrors++
		p.mu.Unlock()
		w.WriteHeader(http.StatusBadGateway)
	}
	return p
}

var faultCodes = []int{http.StatusTooManyRequests, http.StatusInternalServerError, http.StatusConflict}

// ServeHTTP implements http.Handler.
func (p *APIFaultProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		p.mu.Lock()
		p.writes++
		code, lost := 0, false
		switch x := p.rng.Float64(); {
		case x < p.WriteFaultRate:
			code = faultCodes[p.faults%len(faultCodes)]
			p.faults++
			p.faulted[fmt.Sprintf("%s %d", r.Method, code)]++
		case x < p.WriteFaultRate+p.LostAnswerRate:
			lost = true
			p.lost[r.Method]++
		}
		p.mu.Unlock()
		if code != 0 {
			writeStatus(w, code)
			return
		}
		if lost {
			p.proxy.ServeHTTP(httptest.NewRecorder(), r)
			writeStatus(w, http.StatusInternalServerError)
			return
		}
	case http.MethodGet:
		if r.URL.Query().Get("watch") == "" {
			p.mu.Lock()
			var d time.Duration
			if p.rng.Float64() < p.ReadDelayRate {
				d = time.Duration(p.rng.Int64N(int64(p.MaxReadDelay) + 1))
				p.delayed++
			}
			p.mu.Unlock()
			time.Sleep(d)
		}
	}
	p.proxy.ServeHTTP(w, r)
}

// writeStatus answers with a metav1.Status body as the API server does, so
// client-go reports the reason (TooManyRequests, InternalError, Conflict).
func writeStatus(w http.ResponseWriter, code int) {
	reason := map[int]string{429: "TooManyRequests", 500: "InternalError", 409: "Conflict"}[code]
	w.Header().Set("Content-Type", "application/json")
	if code == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", "1")
	}
	w.WriteHeader(code)
	fmt.Fprintf(w, `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"injected fault","reason":%q,"code":%d}`, reason, code)
}

// APIFaultCounts are the figures of an APIFaultProxy.
type APIFaultCounts struct {
	Writes int
	// Faulted counts the writes the proxy answered itself, by "VERB code"
	// ("PATCH 409").
	Faulted map[string]int
	// LostAnswers counts, by verb, the writes passed on and done, then
	// answered 500.
	LostAnswers map[string]int
	ReadsDelay  int
	// ProxyErrors are requests that did not reach the API server or whose
	// answer did not reach the client (the client had gone).
	ProxyErrors int
}

// Counts returns the figures so far.
func (p *APIFaultProxy) Counts() APIFaultCounts {
	p.mu.Lock()
	defer p.mu.Unlock()
	return APIFaultCounts{Writes: p.writes, Faulted: maps.Clone(p.faulted), LostAnswers: maps.Clone(p.lost),
		ReadsDelay: p.delayed, ProxyErrors: p.proxyErrors}
}

// ByCode sums the writes the proxy answered itself with code, whatever
// their verb.
func (c APIFaultCounts) ByCode(code int) int {
	n := 0
	for k, v := range c.Faulted {
		if strings.HasSuffix(k, fmt.Sprintf(" %d", code)) {
			n += v
		}
	}
	return n
}

// Lost sums the lost answers of every verb.
func (c APIFaultCounts) Lost() int {
	n := 0
	for _, v := range c.LostAnswers {
		n += v
	}
	return n
}
