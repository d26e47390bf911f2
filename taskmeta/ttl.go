package taskmeta

import (
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NoTTL is the value of AnnotationTTL for a task without a TTL.
const NoTTL = "none"

// TTLValue is the value of AnnotationTTL for a TTL (nil: none).
func TTLValue(ttl *time.Duration) string {
	if ttl == nil {
		return NoTTL
	}
	return strconv.FormatInt(int64(ttl.Seconds()), 10)
}

// TaskTTLOf is the TTL recorded on a task's anchor; none if it has none, or
// if it recorded none (a task that started before TTLs were recorded keeps
// its objects, as a later setting must not shorten its life).
func TaskTTLOf(anchor metav1.ObjectMeta) (time.Duration, bool) {
	n, err := strconv.ParseInt(anchor.Annotations[AnnotationTTL], 10, 64)
	if err != nil || n < 0 {
		return 0, false
	}
	return time.Duration(n) * time.Second, true
}
