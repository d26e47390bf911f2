//go:build e2e

package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/elixir-cloud-aai/tesk-knative/jobspec"
	"github.com/elixir-cloud-aai/tesk-knative/steps"
	"github.com/elixir-cloud-aai/tesk-knative/tes"
	"github.com/elixir-cloud-aai/tesk-knative/tes/dashboard"
	"github.com/elixir-cloud-aai/tesk-knative/test/s3server"
)

// Workflow engines call TES with tasks of their own shape: they stage their
// own scripts as inputs into a work directory, run there, and write beside
// their inputs. These tests replay the tasks three engines send, written
// from their sources (Nextflow's nf-ga4gh TesTaskHandler, Cromwell's TES
// backend, Snakemake 7's ga4gh_tes executor), through the TES API on the
// real node, once with the default settings and an image that runs as root,
// and once with executors confined to a numbered user (runAsNonRoot with
// runAsUser 1234, as an operator of a Pod Security restricted namespace
// sets it; the kernel sees what an image of USER 1234 gets). The engines'
// own programs (the JVM, Python) are not in the stand-in images: each
// script does what the engine's generated script does on the task's volume
// (the same files, directories, renames and redirections), and /bin/bash,
// which the stand-ins lack, is /bin/sh (behaviour §3.13).

// engineUID is the numbered user of the confined runs.
const engineUID = 1234

// transferDir is a directory of this machine shared with the filer as the
// file:// transfer volume, as Snakemake's TES executor expects its
// working directory to be shared; bindTransfer makes it the claim
// transferPVC of the env's namespace (a hostPath PersistentVolume).
func transferDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "tesk-transfer-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	// The outputs filer of the confined runs writes here as user 1234.
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	return dir
}

const transferPVC = "transfer"

func bindTransfer(t *testing.T, e *env, dir string) {
	t.Helper()
	ctx := context.Background()
	pvName := e.ns + "-transfer"
	hostPathType := corev1.HostPathDirectory
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: pvName},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: dir, Type: &hostPathType}},
			ClaimRef:                      &corev1.ObjectReference{Namespace: e.ns, Name: transferPVC},
		},
	}
	if _, err := e.c.Client.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = e.c.Client.CoreV1().PersistentVolumes().Delete(context.Background(), pvName, metav1.DeleteOptions{})
	})
	empty := ""
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: transferPVC, Namespace: e.ns},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
			StorageClassName: &empty,
			VolumeName:       pvName,
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
	if _, err := e.c.Client.CoreV1().PersistentVolumeClaims(e.ns).Create(ctx, pvc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// nextflowRun is .command.run as Nextflow's BashWrapperBuilder writes it
// for TES (header NXF_CHDIR=/work), cut to what it does on the volume: it
// changes to the work directory, touches .command.begin, runs .command.sh
// with its standard output and error teed into .command.out and
// .command.err, and on exit writes the script's exit status into .exitcode
// and exits with it.
const nextflowRun = `#!/bin/bash
# NEXTFLOW TASK: upper (1)
set -e
set -u
NXF_DEBUG=${NXF_DEBUG:=0}; [ $NXF_DEBUG -gt 1 ] && set -x
NXF_ENTRY=${1:-nxf_main}
NXF_CHDIR=/work

nxf_launch() {
    /bin/sh -ue /work/.command.sh
}

on_exit() {
    exit_status=${nxf_main_ret:=$?}
    printf -- $exit_status > /work/.exitcode
    set +u
    exit $exit_status
}

nxf_main() {
    trap on_exit EXIT
    [ -n "${NXF_CHDIR:-}" ] && cd "$NXF_CHDIR"
    touch /work/.command.begin
    set +e
    (set -o pipefail; (nxf_launch | tee .command.out) 3>&1 1>&2 2>&3 | tee .command.err) &
    pid=$!
    wait $pid || nxf_main_ret=$?
}

$NXF_ENTRY
`

// nextflowTask is the task nf-ga4gh's TesTaskHandler (nf-ga4gh 9e86d8e,
// newTesTask) sends: .command.sh and .command.run and the process's input
// as inputs into /work, the four control files as outputs (no type), the
// process's file outputs (a glob with path_prefix /work and the work
// directory's URL; a dir as DIRECTORY), and one executor running
// bash -o pipefail -c "bash /work/.command.run 2>&1 | tee /work/.command.log"
// in workdir /work (sh for bash in the stand-in images). Nextflow reads
// the exit status from logs[0].logs[0].exit_code of the FULL view.
func nextflowTask(bucket, prefix string) map[string]any {
	work := "s3://" + bucket + "/" + prefix
	out := func(name string) map[string]any {
		return map[string]any{"path": "/work/" + name, "url": work + "/" + name}
	}
	return map[string]any{
		"name": "upper (1)",
		"inputs": []any{
			map[string]any{"url": work + "/.command.sh", "path": "/work/.command.sh", "type": "FILE"},
			map[string]any{"url": work + "/.command.run", "path": "/work/.command.run", "type": "FILE"},
			map[string]any{"url": "s3://" + bucket + "/data/sample.csv", "path": "/work/sample.csv", "type": "FILE"},
		},
		"outputs": []any{
			out(".command.out"), out(".command.err"), out(".command.log"), out(".exitcode"),
			map[string]any{"path": "/work/*.txt", "path_prefix": "/work", "url": work, "type": "FILE"},
			map[string]any{"path": "/work/outdir", "url": work + "/outdir", "type": "DIRECTORY"},
		},
		"resources": map[string]any{"cpu_cores": 1, "ram_gb": 0.25},
		"executors": []any{map[string]any{
			"image":   "busybox",
			"command": []any{"sh", "-o", "pipefail", "-c", "sh /work/.command.run 2>&1 | tee /work/.command.log"},
			"workdir": "/work",
		}},
	}
}

// The Cromwell workflow and call the tasks below are of: the call "upper"
// of the workflow "hello", its files under cromwell-executions/ of the
// bucket (Cromwell's root), seen by the executor under /cromwell-executions.
const (
	cromwellWorkflowID = "4f1c2a9e-8d3b-4c6e-9a7f-0b5d1e2c3a4b"
	cromwellCall       = "cromwell-executions/hello/" + cromwellWorkflowID + "/call-upper"
	cromwellExecution  = "/" + cromwellCall + "/execution"
)

// cromwellScript is the script Cromwell's StandardAsyncExecutionActor
// generates, cut to what it does on the volume: a temporary directory in
// the call's execution directory, the command in a subshell (here with
// umask 077, so its files are 0600 and its directories 0700), the return
// code written to rc.tmp and renamed to rc, the glob's directory and its
// .list, a .file in every empty directory.
const cromwellScript = `#!/bin/bash

cd ` + cromwellExecution + `
tmpDir=$(mkdir -p "` + cromwellExecution + `/tmp.a1b2c3" && echo "` + cromwellExecution + `/tmp.a1b2c3")
chmod 777 "$tmpDir"
export TMPDIR="$tmpDir"
(
cd ` + cromwellExecution + `
umask 077
tr a-z A-Z < /` + cromwellCall + `/inputs/engines/inputs/words.txt > upper.txt
id -u > whoami
echo "counted $(wc -l < upper.txt) lines"
)
echo $? > ` + cromwellExecution + `/rc.tmp
(
cd ` + cromwellExecution + `
mkdir -p glob-5e8c
ln -L whoami glob-5e8c/ 2> /dev/null || cp whoami glob-5e8c/
ls -1 glob-5e8c > glob-5e8c.list
)
(
cd ` + cromwellExecution + `
find . -type d -exec sh -c '[ -z "$(ls -A '"'"'{}'"'"')" ] && touch '"'"'{}'"'"'/.file' \;
)
(
cd ` + cromwellExecution + `
sync
)
mv ` + cromwellExecution + `/rc.tmp ` + cromwellExecution + `/rc
`

// cromwellTask is the task Cromwell 92's TES backend sends (TesTask.scala,
// GRANULAR output mode, the default): the call's File input from S3 at its
// place under the call's inputs, the command script Cromwell wrote to the
// bucket as an input by URL, the executor running it with the job shell
// (Cromwell's /bin/bash, the stand-in's /bin/sh), its stdout and stderr in
// the execution directory; as outputs rc, stdout, stderr, the script, the
// call's File output and its glob (globDir, a DIRECTORY whose path ends in
// a slash, and globList, its .list); preemptible false, the backend
// parameter internal_path_prefix, and the workflow's ids as tags, the
// parent's null for a root workflow.
func cromwellTask(bucket string) map[string]any {
	storage := "s3://" + bucket + "/" + cromwellCall + "/execution/"
	out := func(name, file, typ string) map[string]any {
		description := name
		if !strings.HasPrefix(name, "hello.upper.") {
			description = "hello.upper." + name
		}
		return map[string]any{"name": name, "description": description, "url": storage + file, "path": cromwellExecution + "/" + file, "type": typ}
	}
	return map[string]any{
		"name":        "hello.upper",
		"description": "JobDescriptor(" + cromwellWorkflowID[:8] + ":hello.upper:-1:1)",
		"inputs": []any{
			map[string]any{"name": "hello.upper.words.0", "description": "hello.hello.upper.words.0", "url": "s3://" + bucket + "/inputs/words.txt",
				"path": "/" + cromwellCall + "/inputs/" + bucket + "/inputs/words.txt", "type": "FILE"},
			map[string]any{"name": "commandScript", "description": "hello.upper.commandScript", "url": storage + "script", "path": cromwellExecution + "/script", "type": "FILE"},
		},
		"outputs": []any{
			out("rc", "rc", "FILE"), out("stdout", "stdout", "FILE"), out("stderr", "stderr", "FILE"),
			out("commandScript", "script", "FILE"),
			out("hello.upper.output.0", "upper.txt", "FILE"),
			out("globDir.1", "glob-5e8c/", "DIRECTORY"), out("globList.1", "glob-5e8c.list", "FILE"),
		},
		"resources": map[string]any{"cpu_cores": 1, "ram_gb": 0.25, "disk_gb": 1, "preemptible": false,
			"backend_parameters": map[string]any{"internal_path_prefix": "s3://" + bucket + "/" + cromwellCall + "/tes_task"}},
		"executors": []any{map[string]any{
			"image":   "ubuntu",
			"command": []any{"/bin/sh", cromwellExecution + "/script"},
			"stdout":  cromwellExecution + "/stdout",
			"stderr":  cromwellExecution + "/stderr",
		}},
		"tags": map[string]any{"workflow_id": cromwellWorkflowID, "root_workflow_id": cromwellWorkflowID, "parent_workflow_id": nil},
	}
}

// snakemakeJob is run_snakemake.sh as Snakemake 7's TES executor stages
// it, the snakemake command it runs replaced by what that command does in
// the working directory /tmp: the conda prefix /tmp/conda, the .snakemake
// metadata directories, the rule's shell command, the job's log.
const snakemakeJob = `#!/bin/sh
# properties = {"type": "single", "rule": "upper", "local": false, "input": ["data/b.txt"], "output": ["upper/b.txt"], "wildcards": {"sample": "b"}, "params": {}, "log": ["logs/upper/b.log"], "threads": 1, "resources": {}, "jobid": 1, "cluster": {}}
cd /tmp && \
mkdir -p /tmp/conda /tmp/.snakemake/log /tmp/.snakemake/metadata /tmp/.snakemake/incomplete /tmp/logs/upper && \
touch /tmp/.snakemake/incomplete/dXBwZXIvYi50eHQ= && \
tr a-z A-Z < data/b.txt > upper/b.txt 2> logs/upper/b.log && \
echo "user $(id -u)" >> logs/upper/b.log && \
echo '{"version": "7.21.0", "code": "tr", "rule": "upper"}' > /tmp/.snakemake/metadata/dXBwZXIvYi50eHQ= && \
rm /tmp/.snakemake/incomplete/dXBwZXIvYi50eHQ=
`

const snakefile = `rule upper:
    input: "data/{sample}.txt"
    output: "upper/{sample}.txt"
    log: "logs/upper/{sample}.log"
    shell: "tr a-z A-Z < {input} > {output} 2> {log}"
`

// snakemakeTask is the task Snakemake's TES executor sends for one job of
// the workflow in dir (shared as the transfer volume): the Snakefile and
// run_snakemake.sh as content, the job's input and its output and log as
// file:// URLs of the working directory below /tmp, one executor running
// the job script in workdir /tmp.
func snakemakeTask(dir string) map[string]any {
	return map[string]any{
		"name":        "snakejob.upper.1.sh",
		"description": "rule: upper",
		"inputs": []any{
			map[string]any{"path": "/tmp/Snakefile", "content": snakefile},
			map[string]any{"url": "file://" + dir + "/data/b.txt", "path": "/tmp/data/b.txt"},
			map[string]any{"path": "/tmp/run_snakemake.sh", "content": snakemakeJob},
		},
		"outputs": []any{
			map[string]any{"url": "file://" + dir + "/upper/b.txt", "path": "/tmp/upper/b.txt"},
			map[string]any{"url": "file://" + dir + "/logs/upper/b.log", "path": "/tmp/logs/upper/b.log"},
		},
		"resources": map[string]any{"cpu_cores": 1},
		"executors": []any{map[string]any{
			"image":   "alpine",
			"command": []any{"/bin/sh", "/tmp/run_snakemake.sh"},
			"workdir": "/tmp",
		}},
	}
}

// scratchTask writes into an input's directory (a new file, an input
// overwritten, another removed), a volume and its workdir on the volume.
func scratchTask(bucket, prefix string) map[string]any {
	dst := "s3://" + bucket + "/" + prefix
	return map[string]any{
		"name": "writes everywhere",
		"inputs": []any{
			map[string]any{"path": "/data/in/keep.txt", "content": "old\n"},
			map[string]any{"path": "/data/in/drop.txt", "content": "drop me\n"},
		},
		"outputs": []any{
			map[string]any{"path": "/data/in", "url": dst + "/in", "type": "DIRECTORY"},
		},
		"volumes": []any{"/scratch"},
		"executors": []any{map[string]any{
			"image": "busybox",
			"command": []any{"sh", "-c", "echo new > keep.txt && rm drop.txt && mkdir -p made/deeper && echo made > made/deeper/file.txt && " +
				"echo scratch > /scratch/s.txt && cp /scratch/s.txt copied.txt && ls -a /data/in | sort | tr '\\n' ' ' > /scratch/listing && cp /scratch/listing listing.txt"},
			"workdir": "/data/in",
		}},
	}
}

// engineS3 starts an S3 server on the real node's bridge with a bucket,
// and gives the env's filer its credentials; put writes an object of the
// bucket. The server stops with the test.
func engineS3(t *testing.T, e *env, bucket string) (srv *s3server.Server, put func(key, body string)) {
	t.Helper()
	ctx := context.Background()
	srv, err := s3server.StartOn(e.c.RealNode().HostIP)
	if err != nil {
		t.Fatalf("S3 server: %v", err)
	}
	t.Cleanup(srv.Stop)
	if err := srv.CreateBucket(ctx, bucket); err != nil {
		t.Fatal(err)
	}
	e.awsSecret(srv)
	return srv, func(key, body string) {
		t.Helper()
		if err := srv.Put(ctx, bucket, key, body); err != nil {
			t.Fatal(err)
		}
	}
}

func TestRealNodeWorkflowEngines(t *testing.T) {
	for _, run := range []struct {
		name string
		uid  string
		cfg  func(*steps.Config)
	}{
		{"root image", "0", nil},
		{"numbered user", "1234", confinedToEngineUID},
	} {
		t.Run(run.name, func(t *testing.T) { engineRun(t, run.uid, run.cfg) })
	}
}

// confinedToEngineUID confines the executors to user and group engineUID,
// as an operator whose namespace enforces Pod Security's restricted
// profile does.
func confinedToEngineUID(c *steps.Config) {
	yes := true
	uid := int64(engineUID)
	c.ExecutorSecurityContext = jobspec.DefaultExecutorSecurityContext()
	c.ExecutorSecurityContext.RunAsNonRoot, c.ExecutorSecurityContext.RunAsUser, c.ExecutorSecurityContext.RunAsGroup = &yes, &uid, &uid
}

func engineRun(t *testing.T, uid string, config func(*steps.Config)) {
	ctx := context.Background()
	dir := transferDir(t)
	settings := func(c *steps.Config) {
		c.TransferPVCName, c.HostBasePath, c.ContainerBasePath = transferPVC, dir, dir
		if config != nil {
			config(c)
		}
	}
	e := newRealEnv(t, 60*time.Second, settings)
	bindTransfer(t, e, dir)
	const bucket = "engines"
	srv, put := engineS3(t, e, bucket)
	get := func(t *testing.T, key string) string {
		t.Helper()
		got, err := srv.Get(ctx, bucket, key)
		if err != nil {
			t.Errorf("output %s: %v", key, err)
		}
		return got
	}
	want := func(t *testing.T, key, body string) {
		t.Helper()
		if got := get(t, key); got != body {
			t.Errorf("output %s = %q, want %q", key, got, body)
		}
	}

	// Nextflow: a process that succeeds, and one whose script exits 3.
	const sample = "id,name\n1,ada\n2,grace\n"
	put("data/sample.csv", sample)
	nfScript := func(exit int) string {
		return "#!/bin/bash -ue\n" +
			"tr a-z A-Z < sample.csv > upper.txt\n" +
			"id -u > whoami.txt\n" +
			"mkdir -p outdir/nested && cp upper.txt outdir/nested/copy.txt\n" +
			"echo 'to stderr' >&2\n" +
			"exit " + strconv.Itoa(exit) + "\n"
	}
	put("work/ok/.command.sh", nfScript(0))
	put("work/ok/.command.run", nextflowRun)
	put("work/fail/.command.sh", nfScript(3))
	put("work/fail/.command.run", nextflowRun)
	// Cromwell: the call's File input, and the command script it writes
	// to the call's execution directory before it sends the task.
	const words = "alpha\nbeta\ngamma\n"
	put("inputs/words.txt", words)
	put(cromwellCall+"/execution/script", cromwellScript)
	// Snakemake: the workflow's directory, shared.
	if err := os.MkdirAll(filepath.Join(dir, "data"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "data", "b.txt"), []byte("snake case\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	api := newTESAPIDashboard(t, e, e.url, tesAPIOptions{
		Dashboard: dashboard.Config{API: tes.BasePath}, LogTailBytes: 16, Steps: settings,
		Storage: []string{"s3://", "file://" + dir},
	})
	failing := api.create(nextflowTask(bucket, "work/fail"))
	ids := map[string]string{
		"nextflow":  api.create(nextflowTask(bucket, "work/ok")),
		"cromwell":  api.create(cromwellTask(bucket)),
		"snakemake": api.create(snakemakeTask(dir)),
		"writes":    api.create(scratchTask(bucket, "scratch")),
	}
	for name, id := range ids {
		api.waitState(id, "COMPLETE", 5*time.Minute)
		t.Logf("%s: task %s COMPLETE", name, id)
	}
	api.waitState(failing, "EXECUTOR_ERROR", 5*time.Minute)
	upper := strings.ToUpper(sample)

	t.Run("nextflow", func(t *testing.T) {
		want(t, "work/ok/upper.txt", upper)
		want(t, "work/ok/whoami.txt", uid+"\n")
		want(t, "work/ok/outdir/nested/copy.txt", upper)
		want(t, "work/ok/.command.out", "")
		want(t, "work/ok/.command.err", "to stderr\n")
		want(t, "work/ok/.command.log", "to stderr\n")
		want(t, "work/ok/.exitcode", "0")
	})
	t.Run("nextflow, a script that exits 3", func(t *testing.T) {
		// The wrapper and tee could write: under pipefail the executor
		// exits with the script's own status, which Nextflow reads from
		// the FULL view.
		v := api.get(failing, "FULL")
		logs, _ := v["logs"].([]any)
		if len(logs) == 0 {
			t.Fatalf("FULL view without logs: %v", v)
		}
		exLogs, _ := logs[0].(map[string]any)["logs"].([]any)
		if len(exLogs) != 1 {
			t.Fatalf("executor logs %v, want one", exLogs)
		}
		if code := exLogs[0].(map[string]any)["exit_code"]; code != float64(3) {
			t.Errorf("logs[0].logs[0].exit_code = %v, want 3 (the script's)", code)
		}
	})
	t.Run("cromwell", func(t *testing.T) {
		exec := cromwellCall + "/execution/"
		want(t, exec+"rc", "0\n")
		want(t, exec+"upper.txt", strings.ToUpper(words))
		want(t, exec+"stdout", "counted 3 lines\n")
		want(t, exec+"stderr", "")
		want(t, exec+"script", cromwellScript)
		want(t, exec+"glob-5e8c/whoami", uid+"\n")
		want(t, exec+"glob-5e8c.list", "whoami\n")
	})
	t.Run("snakemake", func(t *testing.T) {
		got, err := os.ReadFile(filepath.Join(dir, "upper", "b.txt"))
		if err != nil || string(got) != "SNAKE CASE\n" {
			t.Errorf("upper/b.txt in the workflow's directory: %q, %v", got, err)
		}
		log, err := os.ReadFile(filepath.Join(dir, "logs", "upper", "b.log"))
		if err != nil || string(log) != "user "+uid+"\n" {
			t.Errorf("logs/upper/b.log in the workflow's directory: %q, %v", log, err)
		}
	})
	t.Run("an input's directory, a volume and the workdir", func(t *testing.T) {
		want(t, "scratch/in/keep.txt", "new\n")
		want(t, "scratch/in/made/deeper/file.txt", "made\n")
		want(t, "scratch/in/copied.txt", "scratch\n")
		want(t, "scratch/in/listing.txt", ". .. copied.txt keep.txt made ")
		if _, err := srv.Get(ctx, bucket, "scratch/in/drop.txt"); err == nil {
			t.Error("the removed input was uploaded")
		}
	})
}
