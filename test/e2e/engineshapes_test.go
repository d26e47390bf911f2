//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/elixir-cloud-aai/tesk-knative/steps"
	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
	"github.com/elixir-cloud-aai/tesk-knative/tes"
	"github.com/elixir-cloud-aai/tesk-knative/tes/dashboard"
	"github.com/elixir-cloud-aai/tesk-knative/test/ftpserver"
)

// The shapes of tasks that workflow engines send beyond one process's
// files, each written from the engine's source at the version named with
// it, run through the TES API on the real node against S3, HTTP and FTP
// servers on the node's bridge and a file:// transfer volume:
//
//   - Nextflow, nf-ga4gh 1.4.2 (95f43e3),
//     src/main/groovy/nextflow/ga4gh/tes/executor/TesTaskHandler.groovy
//     (newTesTask, inItem, outItem): a glob output as a FILE `/work/*.txt`
//     with path_prefix /work and the work directory's URL, a `path x,
//     type: 'dir'` output as a DIRECTORY, an input directory as a DIRECTORY;
//   - cwl-tes 0.3.0-25 (03f0096), cwl_tes/tes.py (TESTask.create_input,
//     create_task_msg, output2url): File inputs over http, ftp, s3 and
//     file, Directory inputs, the tool's stdout and its whole output
//     directory to the FTP remote storage, read by the next step as an
//     input (an intermediate), and a Directory literal's `_:` location;
//   - Toil 5.12.0, src/toil/batchSystems/tes.py (TESBatchSystem.__init__,
//     _server_can_mount, issueBatchJob, _get_exit_code, _try_cancel): one
//     executor, the file job store mounted as a file:// DIRECTORY input
//     when an entry of service-info's storage prefixes its URL, the exit
//     code of the last executor log, the cancel of a task that ended;
//   - Funnel's example tasks, funnel b427ea1 (examples/*.json): each runs,
//     its URLs moved to the test's servers.
//
// Stand-in images: busybox's applets for the engines' programs; sh for
// bash (behaviour §3.13).

// nfShapesScript is the process's script (.command.sh): it lists its
// input directory, writes files the glob `*.txt` matches and files it does
// not (a hidden file, another extension, a file in a subdirectory, a
// directory named like a match), and fills the directory output with
// nested and empty directories and a copy of the input directory; an
// input and an output whose names have brackets, which are names.
const nfShapesScript = `#!/bin/bash -ue
(cd refs && find . | sort) > refs-listing.txt
cp 'sample[1].csv' 'x[1].tsv'
echo a > a.txt
echo b > b.txt
echo hidden > .hidden.txt
echo c > c.csv
mkdir -p sub dir.txt
echo d > sub/d.txt
echo inside > dir.txt/inside
mkdir -p outdir/nested/deeper outdir/empty outdir/nested/emptytoo
echo x > outdir/nested/deeper/x.txt
cp -r refs outdir/refs
`

// nfShapesTask is what TesTaskHandler.newTesTask sends for a process with
// an input directory `refs` (inItem: type DIRECTORY as the path is one)
// and a file `sample[1].csv`, a `path 'x[1].tsv'` output (no `*` or `?`:
// a FILE without path_prefix),
// `path '*.txt'` and `path 'outdir', type: 'dir'` outputs (outItem: the
// glob as path /work/*.txt, path_prefix /work, the work directory's URL;
// the dir as a DIRECTORY at /work/outdir), the control files as outputs
// without a type.
func nfShapesTask(bucket, work, refs string) map[string]any {
	out := func(name string) map[string]any {
		return map[string]any{"path": "/work/" + name, "url": work + "/" + name}
	}
	return map[string]any{
		"name": "shapes (1)",
		"inputs": []any{
			map[string]any{"url": work + "/.command.sh", "path": "/work/.command.sh", "type": "FILE"},
			map[string]any{"url": work + "/.command.run", "path": "/work/.command.run", "type": "FILE"},
			map[string]any{"url": refs, "path": "/work/refs", "type": "DIRECTORY"},
			map[string]any{"url": "s3://" + bucket + "/data/sample[1].csv", "path": "/work/sample[1].csv", "type": "FILE"},
		},
		"outputs": []any{
			out(".command.out"), out(".command.err"), out(".command.log"), out(".exitcode"),
			map[string]any{"path": "/work/*.txt", "path_prefix": "/work", "url": work, "type": "FILE"},
			map[string]any{"path": "/work/outdir", "url": work + "/outdir", "type": "DIRECTORY"},
			map[string]any{"path": "/work/x[1].tsv", "url": work + "/x[1].tsv", "type": "FILE"},
		},
		"resources": map[string]any{"cpu_cores": 1, "ram_gb": 0.25},
		"tags":      map[string]any{},
		"executors": []any{map[string]any{
			"image":   "busybox",
			"command": []any{"sh", "-o", "pipefail", "-c", "sh /work/.command.run 2>&1 | tee /work/.command.log"},
			"workdir": "/work",
		}},
	}
}

// cwlInput is an input as TESTask.create_input writes it: the type is
// the CWL class in capitals.
func cwlInput(name, url, path, class string) map[string]any {
	return map[string]any{"name": name, "description": "cwl_input:" + name, "url": url, "path": path, "type": strings.ToUpper(class)}
}

// cwlTask is what TESTask.create_task_msg sends with --remote-storage-url
// (remote): the inputs, the tool's stdout and the output directory (its
// "workdir", /var/spool/cwl, a DIRECTORY whose URL is the remote storage
// with a slash) as outputs, one executor in the output directory with HOME
// and TMPDIR set, the resources CWL's defaults give, and the document's id
// as a tag.
func cwlTask(name, remote string, inputs []any, command []any, stdin, stdout string) map[string]any {
	ex := map[string]any{
		"image":   "alpine",
		"command": command,
		"workdir": "/var/spool/cwl",
		"stdout":  "/var/spool/cwl/" + stdout,
		"env":     map[string]any{"HOME": "/var/spool/cwl", "TMPDIR": "/tmp"},
	}
	if stdin != "" {
		ex["stdin"] = stdin
	}
	return map[string]any{
		"name":        name,
		"description": "",
		"inputs":      inputs,
		"outputs": []any{
			map[string]any{"name": "stdout", "url": remote + "/" + stdout, "path": "/var/spool/cwl/" + stdout},
			map[string]any{"name": "workdir", "url": remote + "/", "path": "/var/spool/cwl", "type": "DIRECTORY"},
		},
		"resources": map[string]any{"cpu_cores": 1, "ram_gb": 1024 / 953.674, "disk_gb": 2048 / 953.674},
		"tags":      map[string]any{"CWLDocumentId": "file:///workflows/" + name + ".cwl"},
		"executors": []any{ex},
	}
}

// toilTask is what TESBatchSystem.issueBatchJob sends: one executor (the
// Toil appliance's _toil_contained_executor with the pickled job, here a
// script that reads the job store and exits with exit), the job store as a
// file:// DIRECTORY input at its own path, resources with preemptible.
func toilTask(jobStore string, exit string) map[string]any {
	return map[string]any{
		"name": "'upper' kind-upper/instance-x1y2z3 v1",
		"executors": []any{map[string]any{
			"image": "busybox",
			"command": []any{"sh", "-c", "test -f " + jobStore + "/jobs/kind-upper/instance-x1y2z3/job && " +
				"test -d " + jobStore + "/files/for-job/empty && (cd " + jobStore + " && find . | sort) && exit " + exit},
			"env": map[string]any{"TOIL_WORKDIR": "/tmp", "TOIL_RT_LOGGING_LEVEL": "INFO"},
		}},
		"inputs": []any{
			map[string]any{"url": "file://" + jobStore, "path": jobStore, "type": "DIRECTORY"},
		},
		"resources": map[string]any{"cpu_cores": 1, "ram_gb": 0.5, "disk_gb": 1.0, "preemptible": false},
	}
}

// funnelExamples are Funnel's example tasks (examples/*.json at funnel
// b427ea1) with their URLs on the test's servers: file:///tmp/... and bare
// paths (Funnel's local storage) in the transfer volume dir, the public
// S3 object in bucket; nf-canary's image, which is not here, is busybox
// doing what the canary leaves in /root and /.nextflow. Each name is the
// example's file.
func funnelExamples(dir, bucket string) map[string]string {
	return map[string]string{
		"hello-world": `{"name": "Hello world", "description": "Demonstrates the most basic echo task.",
  "executors": [{"image": "alpine", "command": ["echo", "hello world"], "stdout": "/tmp/hello_out"}]}`,
		"error": `{"name": "Error Example", "description": "Example of a a task that errors (exit 1)",
  "executors": [{"image": "alpine", "command": ["echo", "error!", "&&", "exit", "1"]}]}`,
		"input-content": `{"name": "Input file content and output file",
  "inputs": [{"name": "cat input", "type": "FILE", "path": "/tmp/in", "content": "Hello World\n"}],
  "outputs": [{"name": "cat stdout", "url": "file://` + dir + `/funnel/cat_output", "type": "FILE", "path": "/tmp/out"}],
  "executors": [{"image": "alpine", "command": ["cat", "/tmp/in"], "stdout": "/tmp/out"}]}`,
		"md5sum": `{"name": "md5sum example",
  "inputs": [{"name": "md5sum input", "url": "file://` + dir + `/funnel/md5sum_input", "type": "FILE", "path": "/tmp/in"}],
  "outputs": [{"name": "md5sum stdout", "url": "file://` + dir + `/funnel/md5sum_output", "type": "FILE", "path": "/tmp/out"}],
  "executors": [{"image": "alpine", "command": ["md5sum", "/tmp/in"], "stdout": "/tmp/out"}]}`,
		"capture-stdout-stderr": `{"name": "Stdout and Stderr capture",
  "inputs": [{"name": "input", "url": "file://` + dir + `/funnel/input", "type": "FILE", "path": "/tmp/in"}],
  "outputs": [{"name": "stdout", "url": "file://` + dir + `/funnel/stdout", "type": "FILE", "path": "/tmp/out"},
    {"name": "stderr", "url": "file://` + dir + `/funnel/stderr", "type": "FILE", "path": "/tmp/err"}],
  "executors": [{"image": "alpine", "command": ["sh", "-c", "md5sum /tmp/in | tee /dev/stderr"], "stdout": "/tmp/out", "stderr": "/tmp/err"}]}`,
		"full-hello": `{"name": "Full Hello world", "description": "Demonstrates the most basic echo task with all the extras.",
  "tags": {"tag-ONE": "TWO", "tag-THREE": "FOUR"},
  "outputs": [{"url": "file://` + dir + `/funnel/full-output/", "path": "/outputs", "type": "DIRECTORY"}],
  "volumes": ["/vol1", "/vol2"],
  "executors": [{"image": "alpine", "command": ["sh", "-c", "echo foo > /outputs/foo; echo bar > /outputs/bar"], "env": {"ONE": "TWO", "THREE": "FOUR"}}]}`,
		"resource-request": `{"name": "Resource request", "description": "Demonstrates a task requesting 4 CPU cores, 15 GB RAM, and 100 GB disk space.",
  "resources": {"cpu_cores": 1, "ramGb": 0.5, "diskGb": 1},
  "executors": [{"image": "alpine", "command": ["sleep", "1"]}]}`,
		"s3": `{"name": "S3 Storage example", "description": "Task inputs and outputs can be Cloud Storage URLs",
  "executors": [{"image": "ubuntu", "command": ["md5sum", "/tmp/release.json"]}],
  "inputs": [{"name": "input", "url": "s3://` + bucket + `/cell-census/release.json", "path": "/tmp/release.json"}]}`,
		"nextflow": `{"name": "Nextflow Canary Tests", "tags": {"Project": "Nextflow"},
  "outputs": [{"url": "file://` + dir + `/funnel/nf/dot-nextflow", "path": "/.nextflow/", "type": "DIRECTORY"},
    {"url": "file://` + dir + `/funnel/nf/root", "path": "/root/", "type": "DIRECTORY"}],
  "executors": [{"image": "busybox", "command": ["sh", "-c", "cd /root; mkdir -p /.nextflow/history work/ab/cdef && echo ok > work/ab/cdef/.exitcode && echo run > /.nextflow/history/log"]}]}`,
	}
}

// The engines' shapes on the real node, with executors as the images'
// users (root here) and confined to a numbered user, as
// TestRealNodeWorkflowEngines runs its tasks.
func TestRealNodeEngineShapes(t *testing.T) {
	t.Run("root image", func(t *testing.T) { shapesRun(t, 0, nil) })
	t.Run("numbered user", func(t *testing.T) { shapesRun(t, engineUID, confinedToEngineUID) })
}

// shapesRun runs the shapes with the executors' user uid (0: the images').
func shapesRun(t *testing.T, uid int64, config func(*steps.Config)) {
	ctx := context.Background()
	dir := transferDir(t)
	var node string
	var ftp *ftpserver.Server
	settings := func(c *steps.Config) {
		c.TransferPVCName, c.HostBasePath, c.ContainerBasePath = transferPVC, dir, dir
		if ftp != nil {
			c.FTPUsername, c.FTPPassword, c.FTPHosts = ftp.User, ftp.Pass, node
		}
		if config != nil {
			config(c)
		}
	}
	c := realNodeCluster(t)
	node = c.RealNode().HostIP
	var err error
	if ftp, err = ftpserver.StartOn(node); err != nil {
		t.Fatalf("FTP server: %v", err)
	}
	defer ftp.Stop()
	e := newRealEnv(t, 60*time.Second, settings)
	bindTransfer(t, e, dir)
	const bucket = "shapes"
	srv, put := engineS3(t, e, bucket)
	// local writes a file (or, for "/", a directory) in the transfer
	// volume, its directories writable by any user as a site's transfer
	// volume is for the users its filers run as.
	local := func(rel, body string) {
		t.Helper()
		p := filepath.Join(dir, rel)
		d := filepath.Dir(p)
		if body == "/" {
			d = p
		}
		if err := os.MkdirAll(d, 0o777); err != nil {
			t.Fatal(err)
		}
		for c := d; c != dir; c = filepath.Dir(c) {
			if err := os.Chmod(c, 0o777); err != nil {
				t.Fatal(err)
			}
		}
		if body == "/" {
			return
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	web := t.TempDir()
	if err := os.WriteFile(filepath.Join(web, "words.txt"), []byte("over http\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	webURL := serveOn(t, node, http.FileServer(http.Dir(web)))

	// Nextflow: the process's scripts in its work directory, an input
	// directory with nested and empty directories.
	work := "s3://" + bucket + "/work/ab/cdef"
	put("work/ab/cdef/.command.sh", nfShapesScript)
	put("work/ab/cdef/.command.run", nextflowRun)
	put("data/refs/a.txt", "ref a\n")
	put("data/refs/nested/deeper/b.txt", "ref b\n")
	put("data/refs/empty/", "")
	put("data/sample[1].csv", "id\n1\n")

	// cwl-tes: a File over each scheme, a Directory tree over file:// and
	// over ftp.
	if err := ftp.Write("inputs/ftp.txt", "over ftp\n"); err != nil {
		t.Fatal(err)
	}
	if err := ftp.Write("inputs/ftptree/nested/leaf.txt", "ftp leaf\n"); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(ftp.Home, "inputs/ftptree/empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	put("cwl/s3.txt", "over s3\n")
	local("cwl/local.txt", "over file\n")
	local("cwl/tree/top.txt", "top\n")
	local("cwl/tree/nested/deeper/leaf.txt", "leaf\n")
	local("cwl/tree/empty", "/")

	// Toil: a file job store in the shared directory.
	jobStore := filepath.Join(dir, "jobstore")
	local("jobstore/jobs/kind-upper/instance-x1y2z3/job", "pickled job\n")
	local("jobstore/files/for-job/empty", "/")
	local("jobstore/config.pickle", "config\n")

	// Funnel: its examples' local files, and the public object.
	local("funnel/md5sum_input", "md5 me\n")
	local("funnel/input", "tee me\n")
	put("cell-census/release.json", `{"stable": "2023-07-25"}`+"\n")

	api := newTESAPIDashboard(t, e, e.url, tesAPIOptions{
		Dashboard: dashboard.Config{API: tes.BasePath}, LogTailBytes: 4096, Steps: settings,
	})

	// Toil mounts its job store only when service-info's storage has an
	// entry that prefixes the store's URL (TESBatchSystem._server_can_mount):
	// without TES_STORAGE, the transfer volume's.
	code, body := api.do(http.MethodGet, "/service-info", nil)
	var info struct {
		Storage []string `json:"storage"`
	}
	if code != http.StatusOK || json.Unmarshal(body, &info) != nil {
		t.Fatalf("service-info: %d %s", code, body)
	}
	canMount := false
	for _, base := range info.Storage {
		if strings.HasPrefix("file://"+jobStore, base) {
			canMount = true
		}
	}
	if !canMount {
		t.Fatalf("service-info's storage %q has no prefix of file://%s: Toil would not mount its job store", info.Storage, jobStore)
	}

	ids := map[string]string{
		"nextflow": api.create(nfShapesTask(bucket, work, "s3://"+bucket+"/data/refs")),
		"cwl step 1": api.create(cwlTask("cat-all", ftp.URL("cwl/step1"), []any{
			cwlInput("in_http", webURL+"/words.txt", "/var/lib/cwl/stg1a2b/words.txt", "File"),
			cwlInput("in_ftp", ftp.URL("inputs/ftp.txt"), "/var/lib/cwl/stg3c4d/ftp.txt", "File"),
			cwlInput("in_s3", "s3://"+bucket+"/cwl/s3.txt", "/var/lib/cwl/stg5e6f/s3.txt", "File"),
			cwlInput("in_file", "file://"+dir+"/cwl/local.txt", "/var/lib/cwl/stg7a8b/local.txt", "File"),
			cwlInput("in_dir", "file://"+dir+"/cwl/tree", "/var/lib/cwl/stg9c0d/tree", "Directory"),
			cwlInput("in_ftpdir", ftp.URL("inputs/ftptree"), "/var/lib/cwl/stgd1e2/ftptree", "Directory"),
		}, []any{"sh", "-c", "mkdir results && mkdir results/more && " +
			"cat /var/lib/cwl/stg1a2b/words.txt /var/lib/cwl/stg3c4d/ftp.txt /var/lib/cwl/stg5e6f/s3.txt /var/lib/cwl/stg7a8b/local.txt > results/all.txt && " +
			"cp -r /var/lib/cwl/stg9c0d/tree results/tree && cp -r /var/lib/cwl/stgd1e2/ftptree results/ftptree && " +
			"(cd /var/lib/cwl/stg9c0d/tree && find . | sort) && echo \"home $HOME tmp $TMPDIR\""}, "", "out.txt")),
		"toil": api.create(toilTask(jobStore, "0")),
	}
	funnel := map[string]string{}
	for name, task := range funnelExamples(dir, bucket) {
		funnel[name] = api.create(task)
	}
	streaming := api.create(`{"name": "Log streaming", "executors": [{"image": "alpine", "command": ["sh", "-c", "while true; do date; sleep 1; done"]}]}`)
	toilFailing := api.create(toilTask(jobStore, "7"))

	// A Directory literal, as cwl-tes sends it, names no data.
	literal := cwlTask("cat-from-dir", ftp.URL("cwl/literal"), []any{
		cwlInput("dir1", "_:5cb672c1-2c9b-4659-a5eb-24289b3a83ad", "/var/lib/cwl/stg1a4045b0/cwl", "Directory"),
	}, []any{"cat", "/var/lib/cwl/stg1a4045b0/cwl/hello.txt"}, "", "output")
	if code, body := api.do(http.MethodPost, "/tasks", literal); code != http.StatusBadRequest || !strings.Contains(string(body), "inputs[0].url") || !strings.Contains(string(body), "CWL literal") {
		t.Errorf("a CWL Directory literal: %d %s, want 400 naming inputs[0].url", code, body)
	}

	for name, id := range ids {
		api.waitState(id, "COMPLETE", 5*time.Minute)
		t.Logf("%s: task %s COMPLETE", name, id)
	}
	// cwl-tes: the next step reads the first one's output from the FTP
	// remote storage.
	step2 := api.create(cwlTask("upper", ftp.URL("cwl/step2"), []any{
		cwlInput("all", ftp.URL("cwl/step1/results/all.txt"), "/var/lib/cwl/stgf3a4/all.txt", "File"),
	}, []any{"tr", "a-z", "A-Z"}, "/var/lib/cwl/stgf3a4/all.txt", "upper.txt"))
	funnelState := map[string]string{}
	for name, id := range funnel {
		funnelState[name] = api.waitState(id, "COMPLETE", 5*time.Minute)["state"].(string)
	}
	api.waitState(step2, "COMPLETE", 5*time.Minute)
	api.waitState(toilFailing, "EXECUTOR_ERROR", 5*time.Minute)

	keys := func(t *testing.T, prefix string) []string {
		t.Helper()
		var got []string
		p := s3.NewListObjectsV2Paginator(srv.Client(), &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String(prefix)})
		for p.HasMorePages() {
			page, err := p.NextPage(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, o := range page.Contents {
				got = append(got, strings.TrimPrefix(aws.ToString(o.Key), prefix))
			}
		}
		sort.Strings(got)
		return got
	}
	s3Want := func(t *testing.T, key, body string) {
		t.Helper()
		if got, err := srv.Get(ctx, bucket, key); err != nil || got != body {
			t.Errorf("s3 %s = %q, %v; want %q", key, got, err, body)
		}
	}
	fileWant := func(t *testing.T, root, rel, body string) {
		t.Helper()
		got, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil || string(got) != body {
			t.Errorf("%s = %q, %v; want %q", rel, got, err, body)
		}
	}
	dirWant := func(t *testing.T, root, rel string) {
		t.Helper()
		fi, err := os.Stat(filepath.Join(root, rel))
		if err != nil || !fi.IsDir() {
			t.Errorf("%s: %v, want a directory", rel, err)
		}
	}

	t.Run("nextflow", func(t *testing.T) {
		// Exactly the glob's matches, under the work directory's URL with
		// /work pruned; the directory output's tree with its empty
		// directories; the input directory's tree as the executor saw it.
		want := []string{
			".command.err", ".command.log", ".command.out", ".command.run", ".command.sh", ".exitcode",
			"a.txt", "b.txt",
			"outdir/empty/", "outdir/nested/deeper/x.txt", "outdir/nested/emptytoo/",
			"outdir/refs/a.txt", "outdir/refs/empty/", "outdir/refs/nested/deeper/b.txt",
			"refs-listing.txt", "x[1].tsv",
		}
		if got := keys(t, "work/ab/cdef/"); !reflect.DeepEqual(got, want) {
			t.Errorf("the work directory's objects\n got %q\nwant %q", got, want)
		}
		s3Want(t, "work/ab/cdef/a.txt", "a\n")
		s3Want(t, "work/ab/cdef/outdir/refs/nested/deeper/b.txt", "ref b\n")
		s3Want(t, "work/ab/cdef/refs-listing.txt", ".\n./a.txt\n./empty\n./nested\n./nested/deeper\n./nested/deeper/b.txt\n")
		s3Want(t, "work/ab/cdef/.exitcode", "0")
		s3Want(t, "work/ab/cdef/x[1].tsv", "id\n1\n")
		// The FULL view's uploaded files name each match at its URL.
		v := api.get(ids["nextflow"], "FULL")
		var urls []string
		for _, o := range v["logs"].([]any)[0].(map[string]any)["outputs"].([]any) {
			urls = append(urls, o.(map[string]any)["url"].(string))
		}
		for _, u := range []string{work + "/a.txt", work + "/b.txt", work + "/refs-listing.txt", work + "/outdir/nested/deeper/x.txt"} {
			if !contains(urls, u) {
				t.Errorf("the FULL view's outputs %q lack %s", urls, u)
			}
		}
		for _, u := range urls {
			if strings.Contains(u, ".hidden") || strings.HasSuffix(u, ".csv") || strings.Contains(u, "sub/") {
				t.Errorf("the FULL view's outputs name %s, which the glob does not match", u)
			}
		}
	})
	t.Run("cwl-tes", func(t *testing.T) {
		home := ftp.Home
		fileWant(t, home, "cwl/step1/results/all.txt", "over http\nover ftp\nover s3\nover file\n")
		fileWant(t, home, "cwl/step1/out.txt", ".\n./empty\n./nested\n./nested/deeper\n./nested/deeper/leaf.txt\n./top.txt\nhome /var/spool/cwl tmp /tmp\n")
		fileWant(t, home, "cwl/step1/results/tree/nested/deeper/leaf.txt", "leaf\n")
		dirWant(t, home, "cwl/step1/results/tree/empty")
		dirWant(t, home, "cwl/step1/results/more")
		fileWant(t, home, "cwl/step1/results/ftptree/nested/leaf.txt", "ftp leaf\n")
		dirWant(t, home, "cwl/step1/results/ftptree/empty")
		fileWant(t, home, "cwl/step2/upper.txt", "OVER HTTP\nOVER FTP\nOVER S3\nOVER FILE\n")
	})
	t.Run("toil", func(t *testing.T) {
		// _get_exit_code: the last executor log's exit_code.
		exitOf := func(id string) any {
			v := api.get(id, "FULL")
			logs := v["logs"].([]any)
			exLogs := logs[len(logs)-1].(map[string]any)["logs"].([]any)
			return exLogs[len(exLogs)-1].(map[string]any)["exit_code"]
		}
		if code := exitOf(ids["toil"]); code != float64(0) {
			t.Errorf("exit code %v, want 0", code)
		}
		if code := exitOf(toilFailing); code != float64(7) {
			t.Errorf("exit code %v, want 7", code)
		}
		v := api.get(ids["toil"], "FULL")
		stdout, _ := v["logs"].([]any)[0].(map[string]any)["logs"].([]any)[0].(map[string]any)["stdout"].(string)
		for _, line := range []string{"./files/for-job/empty", "./jobs/kind-upper/instance-x1y2z3/job"} {
			if !strings.Contains(stdout, line+"\n") {
				t.Errorf("the job store as the executor saw it:\n%s\nwant a line %s", stdout, line)
			}
		}
		// _try_cancel at shutdown: a task that ended may answer 200, 409
		// or 500; this API answers 200 and the task stays as it ended.
		for id, state := range map[string]string{ids["toil"]: "COMPLETE", toilFailing: "EXECUTOR_ERROR"} {
			if code, body := api.do(http.MethodPost, "/tasks/"+id+":cancel", nil); code != http.StatusOK || strings.TrimSpace(string(body)) != "{}" {
				t.Errorf("cancel of an ended task: %d %s", code, body)
			}
			if got := api.get(id, "MINIMAL")["state"]; got != state {
				t.Errorf("after the cancel: %v, want %s", got, state)
			}
		}
	})
	t.Run("executors' user", func(t *testing.T) {
		jobs, err := e.c.Client.BatchV1().Jobs(e.ns).List(ctx, metav1.ListOptions{LabelSelector: taskmeta.LabelJobType + "=" + taskmeta.JobTypeExecutor})
		if err != nil || len(jobs.Items) == 0 {
			t.Fatalf("the executors' jobs: %d, %v", len(jobs.Items), err)
		}
		for _, j := range jobs.Items {
			p := j.Spec.Template.Spec
			var got int64
			if sc := p.SecurityContext; sc != nil && sc.RunAsUser != nil {
				got = *sc.RunAsUser
			}
			if sc := p.Containers[0].SecurityContext; sc != nil && sc.RunAsUser != nil {
				got = *sc.RunAsUser
			}
			if got != uid {
				t.Errorf("executor job %s runs its pods as user %d, want %d", j.Name, got, uid)
			}
		}
	})
	t.Run("funnel", func(t *testing.T) {
		for name, state := range funnelState {
			if state != "COMPLETE" {
				t.Errorf("%s: %s", name, state)
			}
		}
		stdoutOf := func(id string) string {
			v := api.get(id, "FULL")
			s, _ := v["logs"].([]any)[0].(map[string]any)["logs"].([]any)[0].(map[string]any)["stdout"].(string)
			return s
		}
		if got := stdoutOf(funnel["error"]); got != "error! && exit 1\n" {
			t.Errorf("error: stdout %q", got)
		}
		fileWant(t, dir, "funnel/cat_output", "Hello World\n")
		if got, err := os.ReadFile(filepath.Join(dir, "funnel/md5sum_output")); err != nil || !strings.HasSuffix(string(got), "  /tmp/in\n") {
			t.Errorf("md5sum_output %q, %v", got, err)
		}
		out, _ := os.ReadFile(filepath.Join(dir, "funnel/stdout"))
		errOut, _ := os.ReadFile(filepath.Join(dir, "funnel/stderr"))
		if len(out) == 0 || string(out) != string(errOut) || !strings.HasSuffix(string(out), "  /tmp/in\n") {
			t.Errorf("capture-stdout-stderr: stdout %q, stderr %q", out, errOut)
		}
		fileWant(t, dir, "funnel/full-output/foo", "foo\n")
		fileWant(t, dir, "funnel/full-output/bar", "bar\n")
		if got := stdoutOf(funnel["s3"]); !strings.HasSuffix(got, "  /tmp/release.json\n") {
			t.Errorf("s3: stdout %q", got)
		}
		fileWant(t, dir, "funnel/nf/root/work/ab/cdef/.exitcode", "ok\n")
		fileWant(t, dir, "funnel/nf/dot-nextflow/history/log", "run\n")
		// log-streaming runs until cancelled; its output shows while it runs.
		api.waitState(streaming, "RUNNING", 2*time.Minute)
		deadline := time.Now().Add(time.Minute)
		for stdoutOf(streaming) == "" && time.Now().Before(deadline) {
			time.Sleep(time.Second)
		}
		if stdoutOf(streaming) == "" {
			t.Error("log-streaming: no output while it runs")
		}
		if code, body := api.do(http.MethodPost, "/tasks/"+streaming+":cancel", nil); code != http.StatusOK {
			t.Errorf("cancel: %d %s", code, body)
		}
		api.waitState(streaming, "CANCELED", 2*time.Minute)
	})
}
