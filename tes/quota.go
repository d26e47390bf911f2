package tes

import (
	"context"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/elixir-cloud-aai/tesk-knative/tesv1"
)

// A ResourceQuota of the tasks' namespace (the chart's tasks.resourceQuota)
// bounds what the pods of all tasks request together. A task whose
// executor asks for more than such a quota allows altogether could never
// have its pod created: its Job controller would try again for ever
// ("exceeded quota" in the job's Events) and the task would never end. The
// TES API refuses it at its create (400 naming the quota), as it refuses a
// task past the user's share (checkShare). A task that fits the quota but
// not beside the tasks running waits, as the docs say.

// quotasCacheFor is how long the namespace's ResourceQuotas as read are
// used before they are read again: most creates cost no request for them,
// and a quota changed is seen within this time.
const quotasCacheFor = 30 * time.Second

// quotasRead is the namespace's ResourceQuotas as last read.
type quotasRead struct {
	mu     sync.Mutex
	at     time.Time
	quotas []corev1.ResourceQuota
	err    error
}

// resourceQuotas returns the tasks' namespace's ResourceQuotas, read from
// the API server's watch cache at most every quotasCacheFor (a failed read
// too, so that a Role without the right costs one request a period).
func (s *Server) resourceQuotas(ctx context.Context) ([]corev1.ResourceQuota, error) {
	s.quotas.mu.Lock()
	defer s.quotas.mu.Unlock()
	now := s.now()
	if !s.quotas.at.IsZero() && now.Sub(s.quotas.at) < quotasCacheFor {
		return s.quotas.quotas, s.quotas.err
	}
	l, err := s.Client.CoreV1().ResourceQuotas(s.Config.Namespace).List(ctx, metav1.ListOptions{ResourceVersion: "0"})
	s.quotas.at, s.quotas.quotas, s.quotas.err = now, nil, err
	if err == nil {
		s.quotas.quotas = l.Items
	}
	return s.quotas.quotas, s.quotas.err
}

// checkResourceQuota refuses a task that a ResourceQuota of the tasks'
// namespace could never admit (overQuota). Quotas that cannot be read let
// the task through, logged: the check is a courtesy, the API server's
// admission holds the quota all the same.
func (s *Server) checkResourceQuota(ctx context.Context, t *tesv1.Task) error {
	if t.Resources == nil || (t.Resources.CPUCores <= 0 && t.Resources.RAMGB <= 0) {
		return nil
	}
	quotas, err := s.resourceQuotas(ctx)
	if err != nil {
		s.Log.Warnw("The ResourceQuotas of the tasks' namespace cannot be read; a task they could never admit is not refused", "namespace", s.Config.Namespace, "error", err)
		return nil
	}
	return overQuota(t, quotas)
}

// quotaKeys are the quota's resources that bound an executor's request of
// CPU or memory: its requests, and its limits, which the executor's job
// sets to its requests (jobspec).
var quotaKeys = map[corev1.ResourceName][]corev1.ResourceName{
	corev1.ResourceCPU:    {corev1.ResourceRequestsCPU, corev1.ResourceCPU, corev1.ResourceLimitsCPU},
	corev1.ResourceMemory: {corev1.ResourceRequestsMemory, corev1.ResourceMemory, corev1.ResourceLimitsMemory},
}

// overQuota is a 400 naming the first quota (by name) that allows all
// pods together less than one executor's pod of the task asks for: its
// cores (cpu_cores) or its memory (ram_gb, in GiB as the executors ask).
// Quotas with scopes apply to some pods only, and are left out.
func overQuota(t *tesv1.Task, quotas []corev1.ResourceQuota) error {
	if t.Resources == nil {
		return nil
	}
	asks := map[corev1.ResourceName]resource.Quantity{}
	if t.Resources.CPUCores > 0 {
		asks[corev1.ResourceCPU] = *resource.NewQuantity(int64(t.Resources.CPUCores), resource.DecimalSI)
	}
	if t.Resources.RAMGB > 0 {
		asks[corev1.ResourceMemory] = *resource.NewQuantity(int64(math.Round(t.Resources.RAMGB*(1<<30))), resource.BinarySI)
	}
	sorted := slices.Clone(quotas)
	slices.SortFunc(sorted, func(a, b corev1.ResourceQuota) int { return strings.Compare(a.Name, b.Name) })
	for _, q := range sorted {
		if len(q.Spec.Scopes) > 0 || q.Spec.ScopeSelector != nil {
			continue
		}
		for _, res := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			ask, ok := asks[res]
			if !ok {
				continue
			}
			for _, key := range quotaKeys[res] {
				hard, ok := q.Spec.Hard[key]
				if !ok || ask.Cmp(hard) <= 0 {
					continue
				}
				field := "resources.cpu_cores: " + ask.String()
				if res == corev1.ResourceMemory {
					field = "resources.ram_gb: " + shortNumber(t.Resources.RAMGB) + " GB"
				}
				return bad("%s, more than the ResourceQuota %s of the tasks' namespace lets all tasks' pods hold together (%s: %s): an executor's pod could never be created", field, q.Name, key, hard.String())
			}
		}
	}
	return nil
}
