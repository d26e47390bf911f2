package main

import "encoding/json"

// task is what tesctl reads of a tesTask.
type task struct {
	ID           string            `json:"id"`
	State        string            `json:"state"`
	Name         string            `json:"name"`
	CreationTime string            `json:"creation_time"`
	Executors    []json.RawMessage `json:"executors"`
	Tags         map[string]string `json:"tags"`
	Logs         []struct {
		Logs []struct {
			ExitCode  int    `json:"exit_code"`
			Stdout    string `json:"stdout"`
			Stderr    string `json:"stderr"`
			StartTime string `json:"start_time"`
			EndTime   string `json:"end_time"`
		} `json:"logs"`
		SystemLogs []string `json:"system_logs"`
	} `json:"logs"`
}

// endedExecutors is how many executors ended: the task log has one entry
// per executor started, in order, and one that ended has its end time.
func (t *task) endedExecutors() int {
	if len(t.Logs) == 0 {
		return 0
	}
	n := 0
	for _, l := range t.Logs[0].Logs {
		if l.EndTime == "" {
			break
		}
		n++
	}
	return n
}

// systemLogs is the system logs of the task's first task log (nil: none).
func (t *task) systemLogs() []string {
	if len(t.Logs) == 0 {
		return nil
	}
	return t.Logs[0].SystemLogs
}
