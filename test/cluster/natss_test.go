package cluster

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// build-natss.sh and NatsCacheDir agree on where the channel's binaries
// are: the same files (the patch of eventing-natss among them) in the key.
func TestNatsCacheDirMatchesScript(t *testing.T) {
	src, err := SourceDir()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(filepath.Join(src, "build-natss.sh"), "--print-dir").Output()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := NatsCacheDir()
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(out)); got != dir {
		t.Errorf("build-natss.sh says %s, NatsCacheDir %s", got, dir)
	}
}
