package events

import (
	"errors"
	"io/fs"
	"os"
	"strings"
)

// DefaultSinkTokenFile is where a SinkBinding mounts the OIDC token for its
// sink (Knative Eventing's authentication-oidc).
const DefaultSinkTokenFile = "/oidc/token"

// SinkToken reads the OIDC token to send with an event from file, each time
// (the SinkBinding renews it before it expires): "" without a file, or
// when file does not exist; an error when it exists and cannot be read.
func SinkToken(file string) (string, error) {
	if file == "" {
		return "", nil
	}
	b, err := os.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}
