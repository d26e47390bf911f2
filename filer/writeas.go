package filer

import (
	"fmt"
	"strconv"
	"strings"
)

// FileWriter is the user and groups that write file:// uploads when the
// filer runs as root (FILER_WRITE_AS, FILER_WRITE_GROUPS).
type FileWriter struct {
	UID, GID uint32
	// Groups are the writer's supplementary groups (the filer pod's
	// fsGroup and supplementalGroups); none if empty.
	Groups []uint32
	// Program is the filer's binary that runs as the writer; empty: the
	// running one (os.Executable).
	Program string
}

func (w FileWriter) String() string {
	return fmt.Sprintf("user %d, group %d", w.UID, w.GID)
}

// ParseFileWriter reads FILER_WRITE_AS ("UID:GID", both numbers, the user
// not 0) and FILER_WRITE_GROUPS (comma-separated group numbers; empty for
// none). Its errors name the setting.
func ParseFileWriter(as, groups string) (*FileWriter, error) {
	u, g, ok := strings.Cut(strings.TrimSpace(as), ":")
	if !ok {
		return nil, fmt.Errorf("FILER_WRITE_AS: %q is not UID:GID", as)
	}
	uid, err := parseID(u)
	if err != nil {
		return nil, fmt.Errorf("FILER_WRITE_AS: user %v", err)
	}
	if uid == 0 {
		return nil, fmt.Errorf("FILER_WRITE_AS: user 0 is root, which keeps the filer's capabilities; name the filer's own user")
	}
	gid, err := parseID(g)
	if err != nil {
		return nil, fmt.Errorf("FILER_WRITE_AS: group %v", err)
	}
	w := &FileWriter{UID: uid, GID: gid}
	for _, s := range strings.Split(groups, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		id, err := parseID(s)
		if err != nil {
			return nil, fmt.Errorf("FILER_WRITE_GROUPS: %v", err)
		}
		w.Groups = append(w.Groups, id)
	}
	return w, nil
}

// parseID reads a user or group number: 0 to 4294967294 (4294967295 is
// no id).
func parseID(s string) (uint32, error) {
	n, err := strconv.ParseUint(strings.TrimSpace(s), 10, 32)
	if err != nil || n == 1<<32-1 {
		return 0, fmt.Errorf("%q is not a number from 0 to 4294967294", s)
	}
	return uint32(n), nil
}
