package taskmeta

import "regexp"

// The reasons of the Kubernetes Events the steps record on a task's anchor,
// so that `kubectl describe configmap <task>` tells the task's story. The
// TES API's timeline reads them back.
const (
	ReasonStarted    = "Started"
	ReasonJobCreated = "JobCreated"
	ReasonJobFailed  = "JobFailed"
	ReasonJobDeleted = "JobDeleted"
	ReasonPreempted  = "Preempted"
	ReasonCancelled  = "Cancelled"
	ReasonEnded      = "Ended"
)

// The notes of the Kubernetes Events the steps record on a task's anchor that
// name a job. The TES API's timeline reads back from them when each job was
// created, failed or deleted (ParseJobNote), after the job is gone.

// JobCreatedNote is the note of the Event recorded when a step created a
// job.
func JobCreatedNote(job string) string { return "Created job " + job }

// JobFailedNote is the note of the Event recorded when a step failed a job,
// and why.
func JobFailedNote(job, why string) string { return "Failed job " + job + ": " + why }

// JobDeletedNote is the note of the Event recorded when a step deleted a job,
// and why.
func JobDeletedNote(job, why string) string { return "Deleted job " + job + ": " + why }

var jobNoteRE = regexp.MustCompile(`^(?:Created|Failed|Deleted) job (\S+?)(?::|$)`)

// ParseJobNote returns the job named by a note of JobCreatedNote,
// JobFailedNote or JobDeletedNote (also once the Event shortened it); false
// for any other note.
func ParseJobNote(note string) (job string, ok bool) {
	m := jobNoteRE.FindStringSubmatch(note)
	if m == nil {
		return "", false
	}
	return m[1], true
}
