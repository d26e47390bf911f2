package benchkit

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// BrokerCounts are the figures of a Broker.
type BrokerCounts struct {
	Accepted  int64 // events accepted from the sources (answered 202)
	Refused   int64 // events refused because the queue was full (answered 429)
	Delivered int64 // events the target answered 2xx
	Retried   int64 // deliveries repeated after a failure
	Dead      int64 // events given up after the last retry
	MaxQueued int64 // the longest the queue grew
}

// Broker stands in for a Knative Broker and its Triggers between event
// sources and one subscriber: it answers a source 202 as soon as the event
// is queued, and delivers the queue to Target with up to Parallel requests
// at once, retrying a failed delivery (an error, or an answer other than
// 2xx) Retries times with exponential backoff from BackoffDelay, as a
// Trigger's delivery spec does. Events are not ordered, as a Broker does not
// order them.
type Broker struct {
	Target       string
	Parallel     int
	Retries      int
	BackoffDelay time.Duration
	Client       *http.Client

	queue   chan brokerEvent
	start   sync.Once
	wg      sync.WaitGroup
	pending sync.WaitGroup
	cancel  context.CancelFunc

	accepted, refused, delivered, retried, dead, maxQueued atomic.Int64
}

type brokerEvent struct {
	header http.Header
	body   []byte
}

// NewBroker returns a broker that delivers to target with up to parallel
// requests at once and the Triggers' delivery spec of config/knative
// (10 retries, exponential from 0.5 s); capacity bounds the queue.
func NewBroker(target string, parallel, capacity int) *Broker {
	return &Broker{
		Target: target, Parallel: parallel, Retries: 10, BackoffDelay: 500 * time.Millisecond,
		Client: &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: parallel}},
		queue:  make(chan brokerEvent, capacity),
	}
}

func (b *Broker) run() {
	ctx, cancel := context.WithCancel(context.Background())
	b.cancel = cancel
	for range max(b.Parallel, 1) {
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			for {
				select {
				case <-ctx.Done():
					return
				case ev := <-b.queue:
					b.deliver(ctx, ev)
					b.pending.Done()
				}
			}
		}()
	}
}

// ServeHTTP accepts an event (a CloudEvent in binary or structured mode).
func (b *Broker) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b.start.Do(b.run)
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	b.pending.Add(1)
	select {
	case b.queue <- brokerEvent{header: r.Header.Clone(), body: body}:
		n := int64(len(b.queue))
		for m := b.maxQueued.Load(); n > m && !b.maxQueued.CompareAndSwap(m, n); m = b.maxQueued.Load() {
		}
		b.accepted.Add(1)
		w.WriteHeader(http.StatusAccepted)
	default:
		b.pending.Done()
		b.refused.Add(1)
		http.Error(w, "the queue is full", http.StatusTooManyRequests)
	}
}

func (b *Broker) deliver(ctx context.Context, ev brokerEvent) {
	wait := b.BackoffDelay
	for attempt := 0; ; attempt++ {
		if b.send(ctx, ev) {
			b.delivered.Add(1)
			return
		}
		if attempt == b.Retries {
			b.dead.Add(1)
			return
		}
		b.retried.Add(1)
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait *= 2
	}
}

func (b *Broker) send(ctx context.Context, ev brokerEvent) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, b.Target, bytes.NewReader(ev.body))
	if err != nil {
		return false
	}
	req.Header = ev.header.Clone()
	resp, err := b.Client.Do(req)
	if err != nil {
		return false
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode >= 200 && resp.StatusCode < 300
}

// Drain waits until every accepted event has been delivered or given up,
// or until ctx ends. Call it once the sources have stopped sending.
func (b *Broker) Drain(ctx context.Context) error {
	done := make(chan struct{})
	go func() { b.pending.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close stops the deliveries; events still queued are not delivered.
func (b *Broker) Close() {
	b.start.Do(b.run)
	b.cancel()
	b.wg.Wait()
}

// Counts returns the figures so far.
func (b *Broker) Counts() BrokerCounts {
	return BrokerCounts{
		Accepted: b.accepted.Load(), Refused: b.refused.Load(), Delivered: b.delivered.Load(),
		Retried: b.retried.Load(), Dead: b.dead.Load(), MaxQueued: b.maxQueued.Load(),
	}
}
