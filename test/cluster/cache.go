package cluster

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
)

// CacheDirEnv names the environment variable that, when set, overrides the
// directory holding the built binaries (bin/) and the extracted CRDs (crds/,
// kwok-crds/), as written by build.sh.
const CacheDirEnv = "TESK_CLUSTER_CACHE"

// Binary names, as built by build.sh into <cache>/bin.
const (
	binEtcd              = "etcd"
	binAPIServer         = "kube-apiserver"
	binControllerManager = "kube-controller-manager"
	binScheduler         = "kube-scheduler"
	binKubectl           = "kubectl"
	binKwok              = "kwok"
	binAdapter           = "apiserver_receive_adapter"
)

var allBinaries = []string{binEtcd, binAPIServer, binControllerManager, binScheduler, binKubectl, binKwok, binAdapter}

// Kubectl returns the kubectl that build.sh builds with the control plane
// (k8s.io/kubernetes' own, with its kustomize).
func Kubectl() (string, error) {
	dir, err := DefaultCacheDir()
	if err != nil {
		return "", err
	}
	if err := checkCache(dir); err != nil {
		return "", err
	}
	return filepath.Join(dir, "bin", binKubectl), nil
}

// servingPin is the knative.dev/serving module whose CRDs build.sh extracts;
// it is part of the cache key (see cachekey.sh).
const servingPin = "knative.dev/serving@v0.51.0"

// keyFiles are the files, relative to this package's directory, whose bytes
// make up the cache key, in the order cachekey.sh reads them.
var keyFiles = []string{
	"tools/go.mod",
	"tools/go.sum",
	"tools/cmd/etcd/main.go",
	"tools-kwok/go.mod",
	"tools-kwok/go.sum",
	"tools-kwok/easycel.patch",
	"tools-knative/go.mod",
	"tools-knative/go.sum",
	"tools-knative/cmd/apiserver_receive_adapter/main.go",
	"k8s-version-ldflags.sh",
}

// SourceDir returns the directory of this package's sources (test/cluster in
// the checkout), where build.sh, the tool modules and the stages live.
func SourceDir() (string, error) {
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		dir := filepath.Dir(file)
		if _, err := os.Stat(filepath.Join(dir, "build.sh")); err == nil {
			return dir, nil
		}
	}
	// Built with -trimpath: look for the module root from the working directory.
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if isModuleRoot(dir) {
			return filepath.Join(dir, "test", "cluster"), nil
		}
		if filepath.Dir(dir) == dir {
			break
		}
	}
	return "", errors.New("cannot find the test/cluster sources of github.com/elixir-cloud-aai/tesk-knative from the working directory")
}

func isModuleRoot(dir string) bool {
	f, err := os.Open(filepath.Join(dir, "go.mod"))
	if err != nil {
		return false
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		line := strings.TrimSpace(s.Text())
		if strings.HasPrefix(line, "module ") {
			return strings.TrimSpace(strings.TrimPrefix(line, "module ")) == "github.com/elixir-cloud-aai/tesk-knative"
		}
	}
	return false
}

// CacheKey returns the cache key of the binaries built from the tool modules
// in srcDir: the same value cachekey.sh prints, provided the go command that
// runs the script is the toolchain this program was built with.
func CacheKey(srcDir string) (string, error) {
	return hashFiles(srcDir, keyFiles, servingPin+"\n")
}

// hashFiles hashes the files (relative to srcDir) in order, then extra and
// the Go version, as the build scripts do with sha256sum.
func hashFiles(srcDir string, files []string, extra string) (string, error) {
	h := sha256.New()
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(srcDir, f))
		if err != nil {
			return "", fmt.Errorf("cache key: %w", err)
		}
		h.Write(b)
	}
	fmt.Fprintf(h, "%s%s\n", extra, runtime.Version())
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

// DefaultCacheDir returns where build.sh puts the binaries and CRDs:
// $TESK_CLUSTER_CACHE if set, else
// ${XDG_CACHE_HOME:-$HOME/.cache}/tesk-knative/cluster/<key>.
func DefaultCacheDir() (string, error) {
	if d := os.Getenv(CacheDirEnv); d != "" {
		return d, nil
	}
	src, err := SourceDir()
	if err != nil {
		return "", err
	}
	key, err := CacheKey(src)
	if err != nil {
		return "", err
	}
	base, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(base, "tesk-knative", "cluster", key), nil
}

// checkCache verifies that every binary and CRD directory is present.
func checkCache(dir string) error {
	var missing []string
	for _, b := range allBinaries {
		fi, err := os.Stat(filepath.Join(dir, "bin", b))
		if err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
			missing = append(missing, "bin/"+b)
		}
	}
	for _, d := range []string{"crds", "kwok-crds"} {
		if _, err := os.Stat(filepath.Join(dir, d, ".complete")); err != nil {
			missing = append(missing, d+"/")
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("cluster binaries missing in %s (%s): run `make cluster-bins` (test/cluster/build.sh) first", dir, strings.Join(missing, ", "))
	}
	return nil
}
