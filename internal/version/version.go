// Package version is the version of a build of the project's programs.
// The build sets it from git (git describe --tags --always --dirty), as the
// Makefile, hack/ociimage and the Dockerfile do:
//
//	go build -ldflags "-X github.com/elixir-cloud-aai/tesk-knative/internal/version.Version=v0.3.0" ./cmd/...
//
// A build that does not set it (go run, go test, a plain go build) is Dev.
package version

import "strings"

// Dev is the version of a build that was not given one.
const Dev = "0.0.0-dev"

// Version is set by the linker (-X); use Get to read it.
var Version = ""

// Get returns the build's version: the tag it was built from (v0.3.0), a
// description of a later commit (v0.3.0-4-gabc1234, -dirty with local
// changes, or only the commit outside any tag), or Dev.
func Get() string {
	if v := strings.TrimSpace(Version); v != "" {
		return v
	}
	return Dev
}
