package ociimage

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// Bad options are refused before anything is built or written.
func TestBuildAllRefusesBadOptions(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "busybox")
	must(t, os.WriteFile(script, []byte("#!/bin/sh\n"), 0o755))
	out := filepath.Join(dir, "out")
	// A go command that fails loudly if it is ever run.
	noGo := filepath.Join(dir, "no-go")
	cases := []struct {
		name string
		o    Options
		want string
	}{
		{"unknown image", Options{Only: []string{"handler", "debian"}}, `no image "debian"`},
		{"bad handler name", Options{Only: []string{Handler}, HandlerImage: "Bad Name"}, "handler image"},
		{"digest filer name", Options{Only: []string{Filer}, FilerImage: "ghcr.io/x/f@sha256:" + strings.Repeat("0", 64)}, "not a digest"},
		{"missing CA bundle", Options{Only: []string{TES}, CACertificates: filepath.Join(dir, "none.crt")}, "apt-get install ca-certificates"},
		{"zoneinfo not a directory", Options{Only: []string{TES}, CACertificates: script, Zoneinfo: script}, "not a directory"},
		{"version with a space", Options{Only: []string{Handler}, Version: "v1 2"}, "has a space"},
		{"bad also-tag", Options{Only: []string{Filer}, AlsoTags: []string{"not a tag"}}, "filer image"},
		{"busybox not static", Options{Only: []string{Alpine}, BusyboxBinary: script}, "apt-get install busybox-static"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.o.OutDir, c.o.Go = out, noGo
			built, err := BuildAll(context.Background(), c.o)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("BuildAll: %v, want an error with %q", err, c.want)
			}
			if len(built) != 0 {
				t.Errorf("built %+v", built)
			}
			if _, err := os.Stat(out); !os.IsNotExist(err) {
				t.Errorf("the output directory was made: %v", err)
			}
		})
	}
}

func TestRefsAlsoTags(t *testing.T) {
	o := Options{HandlerImage: "ghcr.io/x/tesk-knative-handler:v0.3.0", FilerImage: "localhost:5000/f", AlsoTags: []string{"latest", "v0.3.0", ""}}
	must(t, o.defaults())
	for img, want := range map[string][]string{
		Handler: {"ghcr.io/x/tesk-knative-handler:v0.3.0", "ghcr.io/x/tesk-knative-handler:latest"},
		Filer:   {"localhost:5000/f", "localhost:5000/f:v0.3.0"},
		Pause:   {PauseImage, PauseImageKubernetes},
	} {
		if got := o.Refs(img); !reflect.DeepEqual(got, want) {
			t.Errorf("Refs(%s) = %q, want %q", img, got, want)
		}
	}
}

func TestRefs(t *testing.T) {
	o := Options{}
	must(t, o.defaults())
	if !reflect.DeepEqual(o.Only, Names) {
		t.Errorf("default images %q", o.Only)
	}
	for img, want := range map[string][]string{
		Handler: {DefaultHandlerImage},
		TES:     {DefaultTESImage},
		Filer:   {DefaultFilerImage},
		Pause:   {"registry.k8s.io/pause:3.10.2", "registry.k8s.io/pause:3.10.1"},
		Busybox: {"docker.io/library/busybox:latest", "docker.io/library/busybox:1.36"},
		Alpine:  {"docker.io/library/alpine:latest", "docker.io/library/alpine:3"},
		Ubuntu:  {"docker.io/library/ubuntu:latest", "docker.io/library/ubuntu:24.04"},
	} {
		if got := o.Refs(img); !reflect.DeepEqual(got, want) {
			t.Errorf("Refs(%s) = %q, want %q", img, got, want)
		}
	}
	o = Options{HandlerImage: "dev.local/h:1", TESImage: "dev.local/t:1", FilerImage: "dev.local/f:1"}
	must(t, o.defaults())
	if got := []string{o.Refs(Handler)[0], o.Refs(TES)[0], o.Refs(Filer)[0]}; !reflect.DeepEqual(got, []string{"dev.local/h:1", "dev.local/t:1", "dev.local/f:1"}) {
		t.Errorf("service names %q", got)
	}
}
