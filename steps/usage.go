package steps

import (
	"strconv"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"

	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
	"github.com/elixir-cloud-aai/tesk-knative/tesv1"
)

// Requested is what a task asked for, as a cost model weighs it: the cores
// and the memory each executor's pod requests while it runs, and the disk
// its volume holds from its first part to its end.
type Requested struct {
	CPUCores, RAMGB, DiskGB float64
}

// Usage keys of a task log's metadata: per executor (UsageKey(i, ...)) and
// in total.
const (
	UsageWallSeconds    = "usage.wall_seconds"
	UsageCPUCoreSeconds = "usage.cpu_core_seconds"
	UsageMemoryGBSecs   = "usage.memory_gb_seconds"
	UsageDiskGBSeconds  = "usage.disk_gb_seconds"
)

// UsageKey is the key of one executor's figure: usage.ex-00.wall_seconds.
func UsageKey(i int, total string) string {
	return "usage." + taskmeta.ExecutorPart(i) + "." + strings.TrimPrefix(total, "usage.")
}

// Usage is what a task used, as the metadata of its log: for each executor
// that started, its wall seconds (to now while it runs) and the core- and
// GB-seconds its requests held for them; the sums of these; and the disk
// GB-seconds of its volume, from its first job's creation to the task's end
// (or now). Requests are what was asked, not what was consumed: the figures
// a cost model multiplies by a price.
func Usage(log tesv1.TaskLog, jobs map[string]*batchv1.Job, req Requested, now time.Time) map[string]string {
	out := map[string]string{}
	var wall float64
	for i, el := range log.Logs {
		start, err := time.Parse(time.RFC3339, el.StartTime)
		if err != nil {
			continue
		}
		end := now
		if t, err := time.Parse(time.RFC3339, el.EndTime); err == nil {
			end = t
		}
		secs := max(0, end.Sub(start).Seconds())
		wall += secs
		out[UsageKey(i, UsageWallSeconds)] = seconds(secs)
		out[UsageKey(i, UsageCPUCoreSeconds)] = seconds(secs * req.CPUCores)
		out[UsageKey(i, UsageMemoryGBSecs)] = seconds(secs * req.RAMGB)
	}
	out[UsageWallSeconds] = seconds(wall)
	out[UsageCPUCoreSeconds] = seconds(wall * req.CPUCores)
	out[UsageMemoryGBSecs] = seconds(wall * req.RAMGB)
	var first time.Time
	for _, j := range jobs {
		if c := j.CreationTimestamp.Time; !c.IsZero() && (first.IsZero() || c.Before(first)) {
			first = c
		}
	}
	disk := 0.0
	if !first.IsZero() {
		end := now
		if t, err := time.Parse(time.RFC3339, log.EndTime); err == nil {
			end = t
		}
		disk = max(0, end.Sub(first).Seconds()) * req.DiskGB
	}
	out[UsageDiskGBSeconds] = seconds(disk)
	return out
}

// Prices are what an hour of a core, of a GB of memory and of a GB of disk
// costs a site (US dollars); the zero Prices: none.
type Prices struct {
	CoreHour, RAMGBHour, DiskGBHour float64
}

// On reports whether a price is set.
func (p Prices) On() bool { return p.CoreHour > 0 || p.RAMGBHour > 0 || p.DiskGBHour > 0 }

// PricePerHourKey is the task log's metadata key of what an hour of the
// task costs, as Cromwell's TES backend reads it (with logs[0].start_time)
// to price a task.
const PricePerHourKey = "vm_price_per_hour_usd"

// PricePerHour is what an hour of a task that asked for req costs at
// prices p, to the millionth of a dollar.
func PricePerHour(req Requested, p Prices) string {
	v := req.CPUCores*p.CoreHour + req.RAMGB*p.RAMGBHour + req.DiskGB*p.DiskGBHour
	return strconv.FormatFloat(float64(int64(v*1e6+0.5))/1e6, 'f', -1, 64)
}

// seconds prints a figure to the millisecond.
func seconds(v float64) string {
	return strconv.FormatFloat(float64(int64(v*1000+0.5))/1000, 'f', -1, 64)
}
