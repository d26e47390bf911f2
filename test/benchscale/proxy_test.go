package main

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestRoundRobin(t *testing.T) {
	var hits [2]int
	var backends []string
	for i := range hits {
		s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits[i]++ }))
		defer s.Close()
		backends = append(backends, s.URL)
	}
	rr, err := newRoundRobin(backends...)
	if err != nil {
		t.Fatal(err)
	}
	front := httptest.NewServer(rr)
	defer front.Close()
	for i := 0; i < 7; i++ {
		resp, err := http.Post(front.URL+"/", "application/json", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	if hits[0] != 4 || hits[1] != 3 {
		t.Errorf("backends got %v, want [4 3]", hits)
	}
	if c := rr.counts(); c[0] != 4 || c[1] != 3 {
		t.Errorf("counts = %v, want [4 3]", c)
	}
}
