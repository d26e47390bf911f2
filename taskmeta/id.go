package taskmeta

import (
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"strings"
	"time"
)

// An id of NewID is "task-", the time it was drawn as 9 digits of base 32
// (0-9a-v) counting down the milliseconds left until 2^45 ms after the
// epoch (the year 3084), and 8 random hex digits. The API server lists
// objects in the order of their names, so the anchors of these ids come
// newest first, a millisecond's apart in random order. TESK's ids (task-
// and 8 random hex digits) have no order; their anchors lack
// LabelOrderedID.
const (
	idPrefix     = "task-"
	idTimeDigits = 9
	idTimeEnd    = 1<<45 - 1
)

// NewID draws a task id for a task created at now.
func NewID(now time.Time) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	left := strconv.FormatUint(uint64(idTimeEnd-now.UnixMilli()), 32)
	return idPrefix + strings.Repeat("0", idTimeDigits-len(left)) + left + hex.EncodeToString(b[:])
}

// IDTime is the time an id of NewID was drawn; false for any other id.
func IDTime(id string) (time.Time, bool) {
	rest, ok := strings.CutPrefix(id, idPrefix)
	if !ok || len(rest) != idTimeDigits+8 {
		return time.Time{}, false
	}
	left, err := strconv.ParseUint(rest[:idTimeDigits], 32, 64)
	if err != nil || left > idTimeEnd || strings.ToLower(rest) != rest {
		return time.Time{}, false
	}
	if _, err := hex.DecodeString(rest[idTimeDigits:]); err != nil {
		return time.Time{}, false
	}
	return time.UnixMilli(int64(idTimeEnd - left)).UTC(), true
}
