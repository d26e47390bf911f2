//go:build e2e

package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/elixir-cloud-aai/tesk-knative/steps"
)

// Nextflow's task of a process whose script fails (nf-ga4gh's shape, as in
// TestRealNodeWorkflowEngines) on the real node, tagged to upload its
// outputs after a failure: it ends EXECUTOR_ERROR with the script's exit
// code, and the files Nextflow reads to report the failure (.command.err,
// .exitcode, .command.log) and the outputs the script wrote before it
// failed are uploaded, while those it never wrote are left out. The same
// task without the tag, under the default (off), uploads nothing.
func TestRealNodeOutputsAfterFailure(t *testing.T) {
	ctx := context.Background()
	e := newRealEnv(t, 60*time.Second, nil)
	const bucket = "engines"
	srv, put := engineS3(t, e, bucket)
	const sample = "id,name\n1,ada\n"
	put("data/sample.csv", sample)
	// The script writes one of the outputs, then fails before the others.
	script := "#!/bin/bash -ue\n" +
		"tr a-z A-Z < sample.csv > upper.txt\n" +
		"echo 'no such column' >&2\n" +
		"exit 3\n"
	for _, w := range []string{"work/tagged", "work/untagged"} {
		put(w+"/.command.sh", script)
		put(w+"/.command.run", nextflowRun)
	}

	api := newTESAPIDashboard(t, e, e.url, tesAPIOptions{Storage: []string{"s3://"}})
	tagged := nextflowTask(bucket, "work/tagged")
	tagged["tags"] = map[string]any{steps.TagUploadOutputsOnFailure: "true"}
	ids := map[string]string{"tagged": api.create(tagged), "untagged": api.create(nextflowTask(bucket, "work/untagged"))}
	for name, id := range ids {
		api.waitState(id, "EXECUTOR_ERROR", 5*time.Minute)
		logs := api.get(id, "FULL")["logs"].([]any)[0].(map[string]any)
		ex := logs["logs"].([]any)
		if len(ex) != 1 || ex[0].(map[string]any)["exit_code"] != float64(3) {
			t.Errorf("%s: executor logs %v, want one with exit code 3", name, ex)
		}
		t.Logf("%s: %s EXECUTOR_ERROR, system_logs %v", name, id, logs["system_logs"])
	}

	get := func(key string) (string, bool) {
		got, err := srv.Get(ctx, bucket, key)
		return got, err == nil
	}
	for key, want := range map[string]string{
		"work/tagged/.command.err": "no such column\n",
		"work/tagged/.exitcode":    "3",
		"work/tagged/.command.log": "no such column\n",
		"work/tagged/.command.out": "",
		"work/tagged/upper.txt":    "ID,NAME\n1,ADA\n",
	} {
		if got, ok := get(key); !ok || got != want {
			t.Errorf("%s = %q (uploaded: %v), want %q", key, got, ok, want)
		}
	}
	if _, ok := get("work/tagged/outdir"); ok {
		t.Error("the DIRECTORY output the script never made was uploaded")
	}
	for _, key := range []string{".command.err", ".exitcode", "upper.txt"} {
		if _, ok := get("work/untagged/" + key); ok {
			t.Errorf("work/untagged/%s uploaded without the tag, the default off", key)
		}
	}
	v := api.get(ids["tagged"], "FULL")
	if outs, _ := v["logs"].([]any)[0].(map[string]any)["outputs"].([]any); len(outs) != 5 {
		t.Errorf("the task's outputs log lists %d files, want the 5 uploaded: %v", len(outs), outs)
	}
}
