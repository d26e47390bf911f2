//go:build e2e

package chaos

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestChaos is make chaos in short: 30 tasks, clean and then with events
// dropped (10 %), delivered up to 3 times within 2 s, the handler SIGKILLed
// and restarted 3 times, 5 % of its writes failed by the API server's proxy
// (429, 500 and 409 in turn), 2 % done but answered 500, 10 % of its reads delayed.
// Every task must end as its spec says, the same in both runs, with no job
// created twice and nothing left past the TTL, and every kind of fault must
// have fired (Faults).
func TestChaos(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	for _, cmd := range []string{"handler", "tes"} {
		if out, err := exec.Command("go", "build", "-o", filepath.Join(bin, cmd), filepath.Join(root, "cmd", cmd)).CombinedOutput(); err != nil {
			t.Fatalf("build %s: %v\n%s", cmd, err, out)
		}
	}
	var out bytes.Buffer
	o := Options{
		Root: root, Handler: filepath.Join(bin, "handler"), TES: filepath.Join(bin, "tes"), Dir: t.TempDir(),
		Tasks: 30, Seed: 7, Kills: 3, DropRate: 0.1, WriteFaultRate: 0.05, LostAnswerRate: 0.02, ReadDelayRate: 0.1,
		Timeout: 8 * time.Minute, Out: &out,
	}
	rep, err := Run(context.Background(), o)
	t.Log(out.String())
	if err != nil {
		t.Fatal(err)
	}
	out.Reset()
	rep.Print(&out)
	t.Log(out.String())
	for _, p := range rep.Problems {
		t.Error(p)
	}
	// The clean run is the reference: no fault reached it.
	if c := rep.Clean; c.Delivery.Dropped != 0 || c.Delivery.Duplicated != 0 || c.Kills != 0 || c.API.Writes != 0 {
		t.Errorf("the clean run had faults: %+v, %d kills, %d writes through the fault proxy", c.Delivery, c.Kills, c.API.Writes)
	}
	if t.Failed() {
		logTails(t, o.Dir, 40)
	}
}

// logTails logs the last lines of each log of the run (the directory goes
// with the test).
func logTails(t *testing.T, dir string, lines int) {
	logs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	for _, l := range logs {
		if filepath.Base(l) == "audit.log" {
			continue
		}
		b, err := os.ReadFile(l)
		if err != nil {
			continue
		}
		all := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
		t.Logf("last lines of %s:\n%s", filepath.Base(l), strings.Join(all[max(0, len(all)-lines):], "\n"))
	}
}
