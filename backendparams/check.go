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
	for _, k := range slices.Sorted(maps.Keys(params)) {
		if !c.Supports(k) {
			return Pods{}, fmt.Errorf("%s: %q is not supported by this service's configuration (supported: %s)", field, k, listOr(c.Keys(), "none"))
		}
	}
	var p Pods
	for _, resolve := range []func(map[string]string, *Pods) error{c.resolveNodePool, c.resolvePreemptible, c.resolveGPU, c.resolveLists} {
		if err := resolve(params, &p); err != nil {
			return Pods{}, err
		}
	}
	return p, nil
}

// place adds a parameter's placement (key's) to the pods': its node
// selector, which may not ask for another value of a label another
// parameter set, and its tolerations, without repeats.
func (p *Pods) place(key string, pl Placement) error {
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

// resolveNodePool places the pods on the node pool named, one of the
// configuration's.
func (c *Config) resolveNodePool(params map[string]string, p *Pods) error {
	v, ok := params[KeyNodePool]
	if !ok {
		return nil
	}
	pl, found := c.NodePool.Pools[v]
	if !found {
		return notAllowed(KeyNodePool, v, slices.Sorted(maps.Keys(c.NodePool.Pools)))
	}
	return p.place(KeyNodePool, pl)
}

// resolvePreemptible places the pods as the configuration says for true or
// false, if it says anything.
func (c *Config) resolvePreemptible(params map[string]string, p *Pods) error {
	v, ok := params[KeyPreemptible]
	if !ok {
		return nil
	}
	var pl *Placement
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "true":
		pl = c.Preemptible.True
	case "false":
		pl = c.Preemptible.False
	default:
		return notAllowed(KeyPreemptible, v, []string{"true", "false"})
	}
	if pl == nil {
		return nil
	}
	return p.place(KeyPreemptible, *pl)
}

// resolveGPU sets the number of GPUs, up to the configuration's most, and
// their type (one of its types, given with a number, else its default),
// placed where that type is.
func (c *Config) resolveGPU(params map[string]string, p *Pods) error {
	count, hasCount := params[KeyGPUCount]
	typ, hasType := params[KeyGPUType]
	if hasCount {
		n, err := strconv.ParseInt(strings.TrimSpace(count), 10, 64)
		if err != nil || n < 0 || n > c.GPU.Max {
			return fmt.Errorf("%s.%s: %q is not a whole number from 0 to %d", field, KeyGPUCount, count, c.GPU.Max)
		}
		p.GPUCount = n
	}
	if hasType {
		if !hasCount {
			return fmt.Errorf("%s.%s: %q without %s: set the number of GPUs too", field, KeyGPUType, typ, KeyGPUCount)
		}
		if _, ok := c.GPU.Types[typ]; !ok {
			return notAllowed(KeyGPUType, typ, slices.Sorted(maps.Keys(c.GPU.Types)))
		}
	}
	if p.GPUCount == 0 {
		return nil
	}
	if !hasType {
		typ = c.GPU.Default
	}
	p.GPU = corev1.ResourceName(typ)
	return p.place(KeyGPUType, c.GPU.Types[typ])
}

// resolveLists sets the zones, the service account and the image pull
// secrets, each among the values the configuration allows.
func (c *Config) resolveLists(params map[string]string, p *Pods) error {
	if v, ok := params[KeyZones]; ok {
		zones, err := list(KeyZones, v, c.Zones.Allowed)
		if err != nil {
			return err
		}
		p.Zones = zones
	}
	if v, ok := params[KeyServiceAccount]; ok {
		if !slices.Contains(c.ServiceAccount.Allowed, v) {
			return notAllowed(KeyServiceAccount, v, c.ServiceAccount.Allowed)
		}
		p.ServiceAccount = v
	}
	if v, ok := params[KeyImagePullSecrets]; ok {
		secrets, err := list(KeyImagePullSecrets, v, c.ImagePullSecrets.Allowed)
		if err != nil {
			return err
		}
		p.ImagePullSecrets = secrets
	}
	return nil
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
