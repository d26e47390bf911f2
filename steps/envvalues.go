package steps

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/netip"
	"path"
	"strings"

	sigsjson "sigs.k8s.io/json"
)

// The checks of values LoadEnv reads that are not numbers: JSON objects of
// Kubernetes types, paths and lists of CIDRs.

// nilIfEmpty is nil for an object that sets nothing ({}): no security
// context at all, rather than the default.
func nilIfEmpty[T any](obj *T) *T {
	if isZero(*obj) {
		return nil
	}
	return obj
}

func cleanAbs(p string) bool { return path.IsAbs(p) && path.Clean(p) == p }

// strictObject decodes a JSON object into a Kubernetes type, refusing
// anything else, unknown fields and fields of the wrong type.
func strictObject(v string, into any) error {
	if !strings.HasPrefix(v, "{") {
		return fmt.Errorf("%q is not a JSON object", v)
	}
	strict, err := sigsjson.UnmarshalStrict([]byte(v), into, sigsjson.DisallowUnknownFields)
	if err != nil {
		return fmt.Errorf("not a valid JSON object of this type: %v", err)
	}
	if len(strict) > 0 {
		return fmt.Errorf("does not fit the Kubernetes type: %v", strict[0])
	}
	return nil
}

func isZero(v any) bool {
	b, _ := json.Marshal(v)
	return bytes.Equal(b, []byte("{}"))
}

// checkCIDRs checks a comma-separated list of CIDRs, as the filer reads
// FILER_ALLOWED_CIDRS.
func checkCIDRs(list string) error {
	for _, c := range strings.Split(list, ",") {
		if c = strings.TrimSpace(c); c == "" {
			continue
		}
		if _, err := netip.ParsePrefix(c); err != nil {
			return fmt.Errorf("%q is not a CIDR (e.g. 10.20.0.0/16)", c)
		}
	}
	return nil
}
