package backendparams

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

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

// validate checks every section of the configuration, naming the field at
// fault, and sets gpu.default when there is one type only.
func (c *Config) validate() error {
	if err := c.NodePool.validate(); err != nil {
		return err
	}
	if err := c.Preemptible.validate(); err != nil {
		return err
	}
	if err := c.GPU.validate(); err != nil {
		return err
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
		if err := l.list.validate(l.name, l.check); err != nil {
			return err
		}
	}
	return nil
}

// validate checks the node pools, when configured: at least one, each
// named without spaces or commas and placing pods somewhere.
func (p *NodePools) validate() error {
	if p == nil {
		return nil
	}
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
	return nil
}

// validate checks the placements of preemptible, when configured: true's
// is required, false's optional.
func (p *Preemptible) validate() error {
	if p == nil {
		return nil
	}
	if p.True == nil || len(p.True.NodeSelector) == 0 && len(p.True.Tolerations) == 0 {
		return fmt.Errorf(`preemptible.true: a node selector or tolerations are required`)
	}
	if err := p.True.validate("preemptible.true"); err != nil {
		return err
	}
	if p.False != nil {
		return p.False.validate("preemptible.false")
	}
	return nil
}

// validate checks the GPUs, when configured: their types (extended
// resources, with their placements), the default type, which one type
// alone makes, and the most a task may ask for.
func (g *GPU) validate() error {
	if g == nil {
		return nil
	}
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
	return nil
}

// validate checks the list of allowed values of the parameter name, when
// configured: at least one, none empty or with a comma, each passing check.
func (l *AllowList) validate(name string, check func(string) []string) error {
	if l == nil {
		return nil
	}
	if len(l.Allowed) == 0 {
		return fmt.Errorf("%s.allowed: at least one value is required", name)
	}
	for i, v := range l.Allowed {
		if v == "" || strings.Contains(v, ",") {
			return fmt.Errorf("%s.allowed[%d]: %q is empty or holds a comma", name, i, v)
		}
		if errs := check(v); len(errs) > 0 {
			return fmt.Errorf("%s.allowed[%d]: %q: %s", name, i, v, strings.Join(errs, "; "))
		}
	}
	return nil
}

// validate checks a placement's node selector and tolerations as Kubernetes
// would; at names the placement in errors.
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
