// Package chaos runs a generated set of TES tasks under faults and compares
// the outcome with a clean run of the same tasks.
package chaos

import (
	"bytes"
	"io"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// DeliveryCounts are the figures of a DeliveryProxy.
type DeliveryCounts struct {
	Received   int64 // events received from the source
	Dropped    int64 // events never forwarded
	Duplicated int64 // events forwarded more than once
	Delayed    int64 // forwards held back before sending
	Forwarded  int64 // forwards sent (all copies)
	Failed     int64 // forwards the target refused or did not answer
	// DroppedByType counts the dropped events by CloudEvent type
	// ("structured" for a structured-mode event).
	DroppedByType map[string]int64
}

// DeliveryProxy accepts events (HTTP POSTs, CloudEvents in binary or
// structured mode) and forwards each one to Target 1 to MaxCopies times,
// each copy after a random delay up to MaxDelay, so copies of different
// events overtake each other; a DropRate share of events is not forwarded at
// all. The source is always answered 202 at once, as a broker would.
type DeliveryProxy struct {
	Target    string
	DropRate  float64
	MaxCopies int
	MaxDelay  time.Duration
	Client    *http.Client

	mu            sync.Mutex
	rng           *rand.Rand
	droppedByType map[string]int64
	wg            sync.WaitGroup

	received, dropped, duplicated, delayed, forwarded, failed atomic.Int64
}

// NewDeliveryProxy returns a proxy to target with the given seed.
func NewDeliveryProxy(target string, seed uint64, dropRate float64, maxCopies int, maxDelay time.Duration) *DeliveryProxy {
	return &DeliveryProxy{
		Target: target, DropRate: dropRate, MaxCopies: maxCopies, MaxDelay: maxDelay,
		Client:        &http.Client{Timeout: 30 * time.Second},
		rng:           rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		droppedByType: map[string]int64{},
	}
}

func (p *DeliveryProxy) plan() (drop bool, delays []time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.rng.Float64() < p.DropRate {
		return true, nil
	}
	n := 1
	if p.MaxCopies > 1 {
		n += p.rng.IntN(p.MaxCopies)
	}
	for range n {
		var d time.Duration
		if p.MaxDelay > 0 {
			d = time.Duration(p.rng.Int64N(int64(p.MaxDelay) + 1))
		}
		delays = append(delays, d)
	}
	return false, delays
}

// ServeHTTP implements http.Handler.
func (p *DeliveryProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	p.received.Add(1)
	drop, delays := p.plan()
	w.WriteHeader(http.StatusAccepted)
	if drop {
		p.dropped.Add(1)
		typ := r.Header.Get("Ce-Type")
		if typ == "" {
			typ = "structured"
		}
		p.mu.Lock()
		p.droppedByType[typ]++
		p.mu.Unlock()
		return
	}
	if len(delays) > 1 {
		p.duplicated.Add(1)
	}
	hdr := r.Header.Clone()
	for _, d := range delays {
		if d > 0 {
			p.delayed.Add(1)
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			time.Sleep(d)
			p.send(r.Method, hdr, body)
		}()
	}
}

func (p *DeliveryProxy) send(method string, hdr http.Header, body []byte) {
	req, err := http.NewRequest(method, p.Target, bytes.NewReader(body))
	if err != nil {
		p.failed.Add(1)
		return
	}
	req.Header = hdr.Clone()
	p.forwarded.Add(1)
	resp, err := p.Client.Do(req)
	if err != nil {
		p.failed.Add(1)
		return
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode >= 300 {
		p.failed.Add(1)
	}
}

// Wait blocks until every scheduled forward has been sent.
func (p *DeliveryProxy) Wait() { p.wg.Wait() }

// Counts returns the figures so far.
func (p *DeliveryProxy) Counts() DeliveryCounts {
	p.mu.Lock()
	byType := make(map[string]int64, len(p.droppedByType))
	for k, v := range p.droppedByType {
		byType[k] = v
	}
	p.mu.Unlock()
	return DeliveryCounts{DroppedByType: byType,
		Received: p.received.Load(), Dropped: p.dropped.Load(), Duplicated: p.duplicated.Load(),
		Delayed: p.delayed.Load(), Forwarded: p.forwarded.Load(), Failed: p.failed.Load(),
	}
}
