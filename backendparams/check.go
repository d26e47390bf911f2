package backendparams

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// field is how errors name a task's parameters.
const field = "resources.backend_parameters"

// Check sorts a task's backend parameters: accepted are those the
// configuration enables, with values it allows (nil if none); ignored are
// the keys it does not enable, sorted. Keys are matched without regard to
// case and accepted in their lower-case form. With strict, a key that is
// not enabled is an error; a value that is not allowed always is. The error
// names the key and what is allowed.
func (c *Config) Check(params map[string]string, strict bool) (accepted map[string]string, ignored []string, err error) {
	for _, k := range slices.Sorted(maps.Keys(params)) {
		key := strings.ToLower(k)
		if !c.Supports(key) {
			if strict {
				return nil, nil, fmt.Errorf("%s: %q is not supported (backend_parameters_strict is true; supported: %s)", field, k, listOr(c.Keys(), "none"))
			}
			ignored = append(ignored, k)
			continue
		}
		if _, dup := accepted[key]; dup {
			return nil, nil, fmt.Errorf("%s: %q is given twice, in different cases", field, key)
		}
		if accepted == nil {
			accepted = map[string]string{}
		}
		accepted[key] = params[k]
	}
	if _, err := c.Resolve(accepted); err != nil {
		return nil, nil, err
	}
	return accepted, ignored, nil
}

// Resolve maps a task's parameters to what they make of its pods. Every key
// must be enabled (in its lower-case form) and every value allowed: the
// handler calls it on the parameters the TES API accepted, so that a
// configuration changed since refuses the task rather than place it
// otherwise. The error names the key and what is allowed.
func (c *Config) Resolve(params map[string]string) (Pods, error) {
	var p Pods
	place := func(key string, pl Placement) error {
		for _, k := range slices.Sorted(maps.Keys(pl.NodeSelector)) {
			v := pl.NodeSelector[k]
			if old, ok := p.NodeSelector[k]; ok && old != v {
				return fmt.Errorf("%s.%s: its node selector asks for %s=%s, where another parameter asks for %s=%s", field, key, k, v, k, old)
			}
			if p.NodeSelector == nil {
				p.NodeSelector = map[string]string{}
			}
			p.NodeSelector[k] = v
		}
		for _, t := range pl.Tolerations {
			if !slices.ContainsFunc(p.Tolerations, func(o corev1.Toleration) bool {
				return o.MatchToleration(&t) && ptrEqual(o.TolerationSeconds, t.TolerationSeconds)
			}) {
				p.Tolerations = append(p.Tolerations, t)
			}
		}
		return nil
	}
	for _, k := range slices.Sorted(maps.Keys(params)) {
		if !c.Supports(k) {
			return Pods{}, fmt.Errorf("%s: %q is not supported by this service's configuration (supported: %s)", field, k, listOr(c.Keys(), "none"))
		}
	}
	if v, ok := params[KeyNodePool]; ok {
		pl, found := c.NodePool.Pools[v]
		if !found {
			return Pods{}, notAllowed(KeyNodePool, v, slices.Sorted(maps.Keys(c.NodePool.Pools)))
		}
		if err := place(KeyNodePool, pl); err != nil {
			return Pods{}, err
		}
	}
	if v, ok := params[KeyPreemptible]; ok {
		var pl *Placement
		switch strings.ToLower(strings.TrimSpace(v)) {
		case "true":
			pl = c.Preemptible.True
		case "false":
			pl = c.Preemptible.False
		default:
			return Pods{}, notAllowed(KeyPreemptible, v, []string{"true", "false"})
		}
		if pl != nil {
			if err := place(KeyPreemptible, *pl); err != nil {
				return Pods{}, err
			}
		}
	}
	count, hasCount := params[KeyGPUCount]
	typ, hasType := params[KeyGPUType]
	if hasCount {
		n, err := strconv.ParseInt(strings.TrimSpace(count), 10, 64)
		if err != nil || n < 0 || n > c.GPU.Max {
			return Pods{}, fmt.Errorf("%s.%s: %q is not a whole number from 0 to %d", field, KeyGPUCount, count, c.GPU.Max)
		}
		p.GPUCount = n
	}
	if hasType {
		if !hasCount {
			return Pods{}, fmt.Errorf("%s.%s: %q without %s: set the number of GPUs too", field, KeyGPUType, typ, KeyGPUCount)
		}
		if _, ok := c.GPU.Types[typ]; !ok {
			return Pods{}, notAllowed(KeyGPUType, typ, slices.Sorted(maps.Keys(c.GPU.Types)))
		}
	}
	if p.GPUCount > 0 {
		if !hasType {
			typ = c.GPU.Default
		}
		p.GPU = corev1.ResourceName(typ)
		if err := place(KeyGPUType, c.GPU.Types[typ]); err != nil {
			return Pods{}, err
		}
	}
	if v, ok := params[KeyZones]; ok {
		zones, err := list(KeyZones, v, c.Zones.Allowed)
		if err != nil {
			return Pods{}, err
		}
		p.Zones = zones
	}
	if v, ok := params[KeyServiceAccount]; ok {
		if !slices.Contains(c.ServiceAccount.Allowed, v) {
			return Pods{}, notAllowed(KeyServiceAccount, v, c.ServiceAccount.Allowed)
		}
		p.ServiceAccount = v
	}
	if v, ok := params[KeyImagePullSecrets]; ok {
		secrets, err := list(KeyImagePullSecrets, v, c.ImagePullSecrets.Allowed)
		if err != nil {
			return Pods{}, err
		}
		p.ImagePullSecrets = secrets
	}
	return p, nil
}

// list reads a comma-separated list of allowed values, without repeats.
func list(key, v string, allowed []string) ([]string, error) {
	var out []string
	for _, s := range strings.Split(v, ",") {
		s = strings.TrimSpace(s)
		if !slices.Contains(allowed, s) {
			if s == "" {
				return nil, fmt.Errorf("%s.%s: %q holds an empty entry (a comma-separated list of %s)", field, key, v, strings.Join(allowed, ", "))
			}
			return nil, notAllowed(key, s, allowed)
		}
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out, nil
}

// notAllowed is the error of a value of key that the configuration does not
// allow, with the values it does.
func notAllowed(key, v string, allowed []string) error {
	return fmt.Errorf("%s.%s: %q is not allowed (allowed: %s)", field, key, v, strings.Join(allowed, ", "))
}

// listOr joins l with commas, or is none if l is empty.
func listOr(l []string, none string) string {
	if len(l) == 0 {
		return none
	}
	return strings.Join(l, ", ")
}

// ptrEqual reports whether a and b are both nil or point to equal values.
func ptrEqual(a, b *int64) bool {
	return a == nil && b == nil || a != nil && b != nil && *a == *b
}
