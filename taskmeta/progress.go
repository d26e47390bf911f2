package taskmeta

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"
)

// Progress is the task's record on its anchor. A part is added to Started
// before it is created, so that a job someone deleted is never created again;
// a part the service ends itself (a job it deletes, or one the API server
// refused to create) is added to Ended, with why, before it acts.
// Parts is the task's whole sequence, written at submission, so that a sweep
// can decide without decoding the task. Failing lists the jobs the service set
// out to fail (recorded before it patches them), which stop the task however
// they then end, even if the patch did not take. Done lists the jobs seen complete (or
// failed, ignoring errors) when a later part was started: a step reads only
// the jobs started and not done, by name, whatever else the namespace holds.
type Progress struct {
	Parts   []string `json:"parts"`
	Started []string `json:"started,omitempty"`
	Done    []string `json:"done,omitempty"`
	Failing []string `json:"failing,omitempty"`
	Last    *Batch   `json:"last,omitempty"`
	// Began is when the task started (its submission's step), which its
	// time limit counts from; none on a task started by a version that
	// did not record it.
	Began *time.Time    `json:"began,omitempty"`
	Ended []EndedRecord `json:"ended,omitempty"`
	// Kept lists the jobs the service set out to delete but whose deletion
	// the API server rejected, and why: no step tries to delete them again,
	// and the task stops all the same.
	Kept []EndedRecord `json:"kept,omitempty"`
	// Failed is the executor that failed while the task uploads the
	// outputs that exist before it ends EXECUTOR_ERROR (with its reason);
	// none otherwise.
	Failed *EndedRecord `json:"failed,omitempty"`
}

// Batch says which event recorded the last parts started, and when: a
// redelivery of that event may create them again, as its first attempt may
// have stopped before it created them.
type Batch struct {
	Event string    `json:"event"`
	At    time.Time `json:"at"`
	Parts []string  `json:"parts"`
}

// EndedRecord is a part the service ended itself, and why.
type EndedRecord struct {
	Part   string `json:"part"`
	Reason string `json:"reason"`
}

// ParseProgress reads the anchor's annotation; an absent one is an empty
// record.
func ParseProgress(s string) (Progress, error) {
	var p Progress
	if s == "" {
		return p, nil
	}
	if err := json.Unmarshal([]byte(s), &p); err != nil {
		return p, fmt.Errorf("annotation %s: %w", AnnotationProgress, err)
	}
	return p, nil
}

// String is the annotation's value.
func (p Progress) String() string {
	b, _ := json.Marshal(p)
	return string(b)
}

// IsStarted reports whether a part was recorded as started.
func (p Progress) IsStarted(part string) bool { return slices.Contains(p.Started, part) }

// HasPart reports whether the task has a part.
func (p Progress) HasPart(part string) bool { return slices.Contains(p.Parts, part) }

// IsDone reports whether a part was recorded as done.
func (p Progress) IsDone(part string) bool { return slices.Contains(p.Done, part) }

// EndedReason returns why the service ended a part, if it did.
func (p Progress) EndedReason(part string) (string, bool) { return reasonOf(p.Ended, part) }

// KeptReason returns why a job the service set out to delete is kept, if it
// is.
func (p Progress) KeptReason(part string) (string, bool) { return reasonOf(p.Kept, part) }

func reasonOf(records []EndedRecord, part string) (string, bool) {
	for _, d := range records {
		if d.Part == part {
			return d.Reason, true
		}
	}
	return "", false
}

// InLastBatch reports whether the part was recorded by the given event.
func (p Progress) InLastBatch(part, event string) bool {
	return p.Last != nil && event != "" && p.Last.Event == event && slices.Contains(p.Last.Parts, part)
}

// WithStarted returns the record with parts started by an event.
func (p Progress) WithStarted(event string, now time.Time, parts ...string) Progress {
	q := p.clone()
	for _, part := range parts {
		if !q.IsStarted(part) {
			q.Started = append(q.Started, part)
		}
	}
	q.Last = &Batch{Event: event, At: now.UTC().Truncate(time.Second), Parts: slices.Clone(parts)}
	return q
}

// IsFailing reports whether the service set out to fail a part's job.
func (p Progress) IsFailing(part string) bool { return slices.Contains(p.Failing, part) }

// WithFailing returns the record with a job the service sets out to fail.
func (p Progress) WithFailing(part string) Progress {
	q := p.clone()
	if !q.IsFailing(part) {
		q.Failing = append(q.Failing, part)
	}
	return q
}

// Running returns the parts started and neither done nor the PVC: the jobs a
// step has to look at.
func (p Progress) Running() []string {
	var parts []string
	for _, part := range p.Started {
		if part != PartPVC && !p.IsDone(part) {
			parts = append(parts, part)
		}
	}
	return parts
}

// WithDone returns the record with parts done.
func (p Progress) WithDone(parts ...string) Progress {
	q := p.clone()
	for _, part := range parts {
		if !q.IsDone(part) {
			q.Done = append(q.Done, part)
		}
	}
	return q
}

// WithEnded returns the record with a part the service ends.
func (p Progress) WithEnded(part, reason string) Progress {
	q := p.clone()
	if _, ok := q.EndedReason(part); !ok {
		q.Ended = append(q.Ended, EndedRecord{Part: part, Reason: reason})
	}
	return q
}

// WithFailed returns the record of a task whose executor part failed for
// reason, and which uploads its outputs before it ends.
func (p Progress) WithFailed(part, reason string) Progress {
	q := p.clone()
	q.Failed = &EndedRecord{Part: part, Reason: reason}
	return q
}

// WithKept returns the record with a job whose deletion was rejected.
func (p Progress) WithKept(part, reason string) Progress {
	q := p.clone()
	if _, ok := q.KeptReason(part); !ok {
		q.Kept = append(q.Kept, EndedRecord{Part: part, Reason: reason})
	}
	return q
}

func (p Progress) clone() Progress {
	q := p
	q.Parts = slices.Clone(p.Parts)
	q.Started = slices.Clone(p.Started)
	q.Done = slices.Clone(p.Done)
	q.Failing = slices.Clone(p.Failing)
	q.Ended = slices.Clone(p.Ended)
	q.Kept = slices.Clone(p.Kept)
	if p.Failed != nil {
		f := *p.Failed
		q.Failed = &f
	}
	if p.Last != nil {
		l := *p.Last
		l.Parts = slices.Clone(p.Last.Parts)
		q.Last = &l
	}
	return q
}
