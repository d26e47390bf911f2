package events

import (
	"errors"
	"fmt"
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

// RequireSinkToken is an error unless file holds a token. Where Eventing's
// authentication-oidc is on, the Broker answers 401 to an event without
// one, and a SinkBinding sets K_SINK on a revision before it mounts the
// token (it creates the token's Secret later): that revision, were it
// Ready, would post events the Broker refuses, and a refused event is not
// sent again. A command that exits on this error keeps it from ever being
// Ready; the binding's next revision, with the token, takes its place.
func RequireSinkToken(file string) error {
	token, err := SinkToken(file)
	if err != nil {
		return fmt.Errorf("SINK_TOKEN_REQUIRED is set and the sink's token %s cannot be read: %w", file, err)
	}
	if token == "" {
		return fmt.Errorf("SINK_TOKEN_REQUIRED is set and there is no token in %q (SINK_TOKEN_FILE), which the SinkBinding mounts once Eventing's authentication-oidc gave it one: this revision was made before it did, and the Broker would refuse its events", file)
	}
	return nil
}
