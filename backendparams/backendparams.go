// Package backendparams is the operator's configuration of the TES
// backend_parameters a task may set (tesResources.backend_parameters), and
// what they make of the task's pods. The TES API checks a task's parameters
// with it, and lists the keys it enables in service-info; the handler checks
// them again with it when it reads the task, and places the task's pods by
// them. Both read the same document (BACKEND_PARAMETERS) with Parse.
package backendparams

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// EnvVar is the environment variable that holds the configuration.
const EnvVar = "BACKEND_PARAMETERS"

// The keys a task may set, when the operator's configuration enables them.
const (
	// KeyNodePool names one of the operator's node pools: the executors
	// get its node selector and tolerations.
	KeyNodePool = "node_pool"
	// KeyPreemptible is "true" or "false": the executors get the node
	// selector and tolerations the operator gives for that value.
	KeyPreemptible = "preemptible"
	// KeyGPUCount is a whole number of GPUs for each executor's container,
	// as a limit and a request of the GPU type's extended resource.
	KeyGPUCount = "gpu_count"
	// KeyGPUType is the extended resource of the GPUs (e.g.
	// nvidia.com/gpu), one of the operator's; the operator's default
	// without it.
	KeyGPUType = "gpu_type"
	// KeyZones is a comma-separated list of zones: every pod of the task
	// (filers too, as the task's volume binds in the zone of its first
	// pod) must run in one of them.
	KeyZones = "zones"
	// KeyServiceAccount is the ServiceAccount the executor pods run as.
	KeyServiceAccount = "service_account"
	// KeyImagePullSecrets is a comma-separated list of secrets the
	// executor pods pull their images with.
	KeyImagePullSecrets = "image_pull_secrets"
)

// ZoneLabel is the node label the zones are matched against.
const ZoneLabel = corev1.LabelTopologyZone

// field is how errors name a task's parameters.
const field = "resources.backend_parameters"

// maxGPUCount bounds gpu.max.
const maxGPUCount = 1 << 16

// Config is the operator's configuration: each section enables its keys.
// A nil *Config enables none.
type Config struct {
	// NodePool enables node_pool.
	NodePool *NodePools `json:"node_pool,omitempty"`
	// Preemptible enables preemptible.
	Preemptible *Preemptible `json:"preemptible,omitempty"`
	// GPU enables gpu_count and gpu_type.
	GPU *GPU `json:"gpu,omitempty"`
	// Zones enables zones.
	Zones *AllowList `json:"zones,omitempty"`
	// ServiceAccount enables service_account.
	ServiceAccount *AllowList `json:"service_account,omitempty"`
	// ImagePullSecrets enables image_pull_secrets.
	ImagePullSecrets *AllowList `json:"image_pull_secrets,omitempty"`
}

// Placement is where a pod may run: a node selector and tolerations.
type Placement struct {
	NodeSelector map[string]string   `json:"nodeSelector,omitempty"`
	Tolerations  []corev1.Toleration `json:"tolerations,omitempty"`
}

// NodePools are the node pools a task may name, each a placement.
type NodePools struct {
	Pools map[string]Placement `json:"pools"`
}

// Preemptible is the placement of each value of preemptible: "true" is
// required; without "false", false places nothing.
type Preemptible struct {
	True  *Placement `json:"true"`
	False *Placement `json:"false,omitempty"`
}

// GPU are the GPU types a task may ask for (extended resource names, each
// with a placement, which may be empty), the one it gets without gpu_type,
// and the most GPUs an executor may ask for.
type GPU struct {
	Types   map[string]Placement `json:"types"`
	Default string               `json:"default"`
	Max     int64                `json:"max"`
}

// AllowList is the values a key may take.
type AllowList struct {
	Allowed []string `json:"allowed"`
}

// FromEnv reads the configuration from EnvVar; unset or empty enables no
// key. The error names the variable and the field.
func FromEnv(getenv func(string) string) (*Config, error) {
	c, err := Parse([]byte(getenv(EnvVar)))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", EnvVar, err)
	}
	return c, nil
}

// Parse reads the configuration, a YAML or JSON document; an empty one
// enables no key. Fields it does not know, fields of the wrong type and
// values Kubernetes would refuse are errors naming the field.
func Parse(doc []byte) (*Config, error) {
	c := &Config{}
	if len(bytes.TrimSpace(doc)) == 0 {
		return c, nil
	}
	js, err := yaml.YAMLToJSON(doc)
	if err != nil {
		return nil, fmt.Errorf("not a YAML or JSON document: %v", err)
	}
	strict, err := sigsjson.UnmarshalStrict(js, c, sigsjson.DisallowUnknownFields)
	if err != nil {
		return nil, fmt.Errorf("not a configuration of backend parameters: %v", strings.TrimPrefix(err.Error(), "json: "))
	}
	if len(strict) > 0 {
		return nil, fmt.Errorf("not a configuration of backend parameters: %v", strings.TrimPrefix(strict[0].Error(), "json: "))
	}
	if err := c.validate(); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *Config) validate() error {
	if p := c.NodePool; p != nil {
		if len(p.Pools) == 0 {
			return fmt.Errorf("node_pool.pools: at least one pool is required")
		}
		for _, name := range slices.Sorted(maps.Keys(p.Pools)) {
			if name == "" || strings.ContainsAny(name, ", \t\r\n") {
				return fmt.Errorf("node_pool.pools: %q is not a pool name (no spaces or commas)", name)
			}
			pl := p.Pools[name]
			if len(pl.NodeSelector) == 0 && len(pl.Tolerations) == 0 {
				return fmt.Errorf("node_pool.pools.%s: a node selector or tolerations are required", name)
			}
			if err := pl.validate("node_pool.pools." + name); err != nil {
				return err
			}
		}
	}
	if p := c.Preemptible; p != nil {
		if p.True == nil || len(p.True.NodeSelector) == 0 && len(p.True.Tolerations) == 0 {
			return fmt.Errorf(`preemptible.true: a node selector or tolerations are required`)
		}
		if err := p.True.validate("preemptible.true"); err != nil {
			return err
		}
		if p.False != nil {
			if err := p.False.validate("preemptible.false"); err != nil {
				return err
			}
		}
	}
	if g := c.GPU; g != nil {
		if len(g.Types) == 0 {
			return fmt.Errorf("gpu.types: at least one extended resource name is required (e.g. nvidia.com/gpu)")
		}
		for _, name := range slices.Sorted(maps.Keys(g.Types)) {
			if err := extendedResource(name); err != nil {
				return fmt.Errorf("gpu.types: %q %v", name, err)
			}
			if err := g.Types[name].validate("gpu.types." + name); err != nil {
				return err
			}
		}
		switch {
		case g.Default == "" && len(g.Types) == 1:
			g.Default = slices.Collect(maps.Keys(g.Types))[0]
		case g.Default == "":
			return fmt.Errorf("gpu.default: required with more than one type (one of %s)", strings.Join(slices.Sorted(maps.Keys(g.Types)), ", "))
		default:
			if _, ok := g.Types[g.Default]; !ok {
				return fmt.Errorf("gpu.default: %q is not one of gpu.types (%s)", g.Default, strings.Join(slices.Sorted(maps.Keys(g.Types)), ", "))
			}
		}
		if g.Max < 1 || g.Max > maxGPUCount {
			return fmt.Errorf("gpu.max: %d is not a whole number from 1 to %d", g.Max, maxGPUCount)
		}
	}
	lists := []struct {
		name  string
		list  *AllowList
		check func(string) []string
	}{
		{KeyZones, c.Zones, validation.IsValidLabelValue},
		{KeyServiceAccount, c.ServiceAccount, validation.IsDNS1123Subdomain},
		{KeyImagePullSecrets, c.ImagePullSecrets, validation.IsDNS1123Subdomain},
	}
	for _, l := range lists {
		if l.list == nil {
			continue
		}
		if len(l.list.Allowed) == 0 {
			return fmt.Errorf("%s.allowed: at least one value is required", l.name)
		}
		for i, v := range l.list.Allowed {
			if v == "" || strings.Contains(v, ",") {
				return fmt.Errorf("%s.allowed[%d]: %q is empty or holds a comma", l.name, i, v)
			}
			if errs := l.check(v); len(errs) > 0 {
				return fmt.Errorf("%s.allowed[%d]: %q: %s", l.name, i, v, strings.Join(errs, "; "))
			}
		}
	}
	return nil
}

func (p Placement) validate(at string) error {
	for _, k := range slices.Sorted(maps.Keys(p.NodeSelector)) {
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			return fmt.Errorf("%s.nodeSelector: %q is not a label key: %s", at, k, strings.Join(errs, "; "))
		}
		if errs := validation.IsValidLabelValue(p.NodeSelector[k]); len(errs) > 0 {
			return fmt.Errorf("%s.nodeSelector.%s: %q is not a label value: %s", at, k, p.NodeSelector[k], strings.Join(errs, "; "))
		}
	}
	for i, t := range p.Tolerations {
		f := fmt.Sprintf("%s.tolerations[%d]", at, i)
		if t.Key != "" {
			if errs := validation.IsQualifiedName(t.Key); len(errs) > 0 {
				return fmt.Errorf("%s.key: %q is not a label key: %s", f, t.Key, strings.Join(errs, "; "))
			}
		}
		switch t.Operator {
		case "", corev1.TolerationOpEqual:
			if t.Key == "" {
				return fmt.Errorf("%s.operator: Equal needs a key", f)
			}
			if errs := validation.IsValidLabelValue(t.Value); len(errs) > 0 {
				return fmt.Errorf("%s.value: %q: %s", f, t.Value, strings.Join(errs, "; "))
			}
		case corev1.TolerationOpExists:
			if t.Value != "" {
				return fmt.Errorf("%s.value: must be empty with the operator Exists", f)
			}
		default:
			return fmt.Errorf("%s.operator: %q is neither Equal nor Exists", f, t.Operator)
		}
		switch t.Effect {
		case "", corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
		default:
			return fmt.Errorf("%s.effect: %q is not NoSchedule, PreferNoSchedule or NoExecute", f, t.Effect)
		}
		if t.TolerationSeconds != nil && t.Effect != corev1.TaintEffectNoExecute {
			return fmt.Errorf("%s.tolerationSeconds: only with the effect NoExecute", f)
		}
	}
	return nil
}

// extendedResource checks a name of an extended resource: a qualified name
// with a domain outside kubernetes.io.
func extendedResource(name string) error {
	if errs := validation.IsQualifiedName(name); len(errs) > 0 {
		return fmt.Errorf("is not a resource name: %s", strings.Join(errs, "; "))
	}
	domain, _, ok := strings.Cut(name, "/")
	if !ok {
		return fmt.Errorf("is not an extended resource name (domain/name, e.g. nvidia.com/gpu)")
	}
	if domain == "kubernetes.io" || strings.HasSuffix(domain, ".kubernetes.io") {
		return fmt.Errorf("is not an extended resource name (its domain is Kubernetes')")
	}
	return nil
}

// Keys are the keys the configuration enables, sorted: what service-info
// lists in tesResources_backend_parameters.
func (c *Config) Keys() []string {
	keys := []string{}
	if c == nil {
		return keys
	}
	if c.NodePool != nil {
		keys = append(keys, KeyNodePool)
	}
	if c.Preemptible != nil {
		keys = append(keys, KeyPreemptible)
	}
	if c.GPU != nil {
		keys = append(keys, KeyGPUCount, KeyGPUType)
	}
	if c.Zones != nil {
		keys = append(keys, KeyZones)
	}
	if c.ServiceAccount != nil {
		keys = append(keys, KeyServiceAccount)
	}
	if c.ImagePullSecrets != nil {
		keys = append(keys, KeyImagePullSecrets)
	}
	slices.Sort(keys)
	return keys
}

// Supports reports whether the configuration enables a key.
func (c *Config) Supports(key string) bool { return slices.Contains(c.Keys(), key) }

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

// Pods is what a task's backend parameters make of its pods.
type Pods struct {
	// NodeSelector and Tolerations place the executor pods (node_pool,
	// preemptible, the GPU type's placement).
	NodeSelector map[string]string
	Tolerations  []corev1.Toleration
	// Zones, if any, are required of the node of every pod of the task.
	Zones []string
	// GPUs of the resource GPU for each executor container (0: none).
	GPU      corev1.ResourceName
	GPUCount int64
	// ServiceAccount runs the executor pods ("": the operator's default).
	ServiceAccount string
	// ImagePullSecrets of the executor pods.
	ImagePullSecrets []string
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

func notAllowed(key, v string, allowed []string) error {
	return fmt.Errorf("%s.%s: %q is not allowed (allowed: %s)", field, key, v, strings.Join(allowed, ", "))
}

func listOr(l []string, none string) string {
	if len(l) == 0 {
		return none
	}
	return strings.Join(l, ", ")
}

func ptrEqual(a, b *int64) bool {
	return a == nil && b == nil || a != nil && b != nil && *a == *b
}

// ApplyExecutor places an executor's pod: the node selector, tolerations
// and zones, the GPUs as a limit and a request of every container, the
// ServiceAccount and the image pull secrets. What the pod holds already
// stays, unless a parameter sets it (the ServiceAccount).
func (p Pods) ApplyExecutor(ps *corev1.PodSpec) {
	p.ApplyTask(ps)
	if len(p.NodeSelector) > 0 {
		if ps.NodeSelector == nil {
			ps.NodeSelector = map[string]string{}
		}
		maps.Copy(ps.NodeSelector, p.NodeSelector)
	}
	ps.Tolerations = append(ps.Tolerations, p.Tolerations...)
	if p.GPUCount > 0 {
		q := *resource.NewQuantity(p.GPUCount, resource.DecimalSI)
		for i := range ps.Containers {
			r := &ps.Containers[i].Resources
			if r.Limits == nil {
				r.Limits = corev1.ResourceList{}
			}
			if r.Requests == nil {
				r.Requests = corev1.ResourceList{}
			}
			r.Limits[p.GPU] = q.DeepCopy()
			r.Requests[p.GPU] = q.DeepCopy()
		}
	}
	if p.ServiceAccount != "" {
		ps.ServiceAccountName = p.ServiceAccount
	}
	for _, s := range p.ImagePullSecrets {
		if !slices.ContainsFunc(ps.ImagePullSecrets, func(r corev1.LocalObjectReference) bool { return r.Name == s }) {
			ps.ImagePullSecrets = append(ps.ImagePullSecrets, corev1.LocalObjectReference{Name: s})
		}
	}
}

// ApplyTask places any pod of the task (the filers too): the zones, as a
// required node affinity on ZoneLabel, added to each of the pod's own
// terms.
func (p Pods) ApplyTask(ps *corev1.PodSpec) {
	if len(p.Zones) == 0 {
		return
	}
	req := corev1.NodeSelectorRequirement{Key: ZoneLabel, Operator: corev1.NodeSelectorOpIn, Values: slices.Clone(p.Zones)}
	if ps.Affinity == nil {
		ps.Affinity = &corev1.Affinity{}
	}
	if ps.Affinity.NodeAffinity == nil {
		ps.Affinity.NodeAffinity = &corev1.NodeAffinity{}
	}
	na := ps.Affinity.NodeAffinity
	if na.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		na.RequiredDuringSchedulingIgnoredDuringExecution = &corev1.NodeSelector{}
	}
	terms := &na.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	if len(*terms) == 0 {
		*terms = []corev1.NodeSelectorTerm{{}}
	}
	for i := range *terms {
		(*terms)[i].MatchExpressions = append((*terms)[i].MatchExpressions, req)
	}
}
