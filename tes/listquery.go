package tes

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/url"
	"slices"
	"strconv"

	"github.com/elixir-cloud-aai/tesk-knative/tesv1"
)

// Paging of the list.
const (
	DefaultPageSize = 256
	MaxPageSize     = 2048
	// ScanBeyond bounds what one page reads beyond the page itself: at
	// most PageSize+ScanBeyond anchors' metadata. A filter the API server
	// cannot apply (a name prefix, tags, a state a task passes through)
	// that keeps fewer tasks than that returns a shorter page, perhaps an
	// empty one, with a next_page_token.
	ScanBeyond = 4096
)

// pageToken is where the next page starts. Anchors are listed in two runs,
// each in the order the API server lists names: first the tasks of ordered
// ids (taskmeta.NewID: newest first), then the others (TESK's ids: in id
// order). Continue is the API server's continue token of the LIST chunk
// the page ended in ("" for the first), After the last task it served or
// looked at: the next page lists that chunk again and skips up to After.
type pageToken struct {
	Unordered bool   `json:"u,omitempty"`
	Continue  string `json:"k,omitempty"`
	After     string `json:"a,omitempty"`
}

// String is the token as a client holds it: its JSON, base64url-encoded.
func (p pageToken) String() string {
	b, _ := json.Marshal(p)
	return base64.RawURLEncoding.EncodeToString(b)
}

// parsePageToken reads a page_token: nil for none, a bad request for one
// this service did not give.
func parsePageToken(s string) (*pageToken, error) {
	if s == "" {
		return nil, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	var p pageToken
	if err == nil {
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		err = dec.Decode(&p)
	}
	if err != nil || p == (pageToken{}) {
		return nil, bad("page_token: %q is not a token this service gave", s)
	}
	return &p, nil
}

// ListQuery is a list request.
type ListQuery struct {
	NamePrefix string
	State      string
	Tags       map[string]string
	PageSize   int
	Token      *pageToken
	View       string
}

// ParseListQuery reads the list's parameters.
func ParseListQuery(q url.Values) (ListQuery, error) {
	lq := ListQuery{NamePrefix: q.Get("name_prefix"), State: q.Get("state"), PageSize: DefaultPageSize}
	if lq.State != "" && !slices.Contains(tesv1.States, lq.State) {
		return lq, bad("state: %q is not a TES state", lq.State)
	}
	if ps := q.Get("page_size"); ps != "" {
		n, err := strconv.Atoi(ps)
		if err != nil || n < 1 {
			return lq, bad("page_size: %q is not a positive integer", ps)
		}
		lq.PageSize = min(n, MaxPageSize)
	}
	var err error
	if lq.Token, err = parsePageToken(q.Get("page_token")); err != nil {
		return lq, err
	}
	keys, values := q["tag_key"], q["tag_value"]
	if len(values) > len(keys) {
		return lq, bad("tag_value: %d values for %d tag_key", len(values), len(keys))
	}
	if len(keys) > 0 {
		lq.Tags = map[string]string{}
		for i, k := range keys {
			v := ""
			if i < len(values) {
				v = values[i]
			}
			lq.Tags[k] = v
		}
	}
	switch v := q.Get("view"); v {
	case "":
		lq.View = tesv1.ViewMinimal
	case tesv1.ViewMinimal, tesv1.ViewBasic, tesv1.ViewFull:
		lq.View = v
	default:
		return lq, bad("view: %q is none of MINIMAL, BASIC, FULL", v)
	}
	return lq, nil
}

// MatchTags is the specification's tag filter: every key of the filter must
// be a tag of the task, with the same value unless the filter's is empty.
func MatchTags(filter, tags map[string]string) bool {
	for k, v := range filter {
		tv, ok := tags[k]
		if !ok || (v != "" && tv != v) {
			return false
		}
	}
	return true
}

// passingStates are the states a task of this service passes through
// (never UNKNOWN or PAUSED).
var passingStates = []string{tesv1.StateQueued, tesv1.StateInitializing, tesv1.StateRunning, tesv1.StateCanceling}
