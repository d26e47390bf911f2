package helm

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

var none = map[string]any{"mode": "none"}

var oidc = map[string]any{"auth": map[string]any{"mode": "oidc", "oidc": map[string]any{"issuer": "https://login.example.org/oidc/"}}}

func TestLint(t *testing.T) {
	basic := map[string]any{"auth": map[string]any{"mode": "basic", "basic": map[string]any{"usersSecret": "tes-users"}}}
	for _, vals := range []map[string]any{oidc, basic, {"auth": map[string]any{"mode": "none"}},
		{"auth": map[string]any{"mode": "none"}, "metrics": map[string]any{"podMonitor": map[string]any{"enabled": true, "labels": map[string]any{"release": "prom"}}}},
		{"auth": none, "expose": map[string]any{"via": "domainMapping", "host": "tes.example.org", "tlsSecret": "tes-tls"},
			"filer":         map[string]any{"s3": map[string]any{"credentials": "[default]"}, "ftp": map[string]any{"username": "u", "password": "p"}, "netrc": map[string]any{"content": "machine x"}},
			"broker":        map[string]any{"class": "Kafka", "config": map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "name": "kafka-broker-config", "namespace": "knative-eventing"}, "delivery": map[string]any{"deadLetterSink": map[string]any{"uri": "http://dead.example.org/"}}},
			"observability": map[string]any{"otlp": map[string]any{"endpoint": "http://otel:4318"}}},
		{"auth": none, "expose": map[string]any{"via": "ingress", "host": "tes.example.org", "ingress": map[string]any{"className": "nginx"}}}} {
		if msgs := Lint(vals); len(msgs) > 0 {
			t.Errorf("lint %v: %s", vals, strings.Join(msgs, "\n"))
		}
	}
}

// Every value of values.yaml is set by a case to something other than its
// default, and a want of the case shows it: the want is in the rendering,
// and not in the rendering with the value at its default or as another case
// sets it.
func TestTemplateValues(t *testing.T) {
	cases := []struct {
		name string
		vals map[string]any
		want []string
	}{
		{"namespaces", map[string]any{"auth": map[string]any{"mode": "none"}, "namespaces": map[string]any{"platform": "p1", "tasks": "t1"}},
			[]string{"namespace: p1", "namespace: t1", `NAMESPACE: "t1"`, "kubernetes.io/metadata.name: t1"}},
		{"images", map[string]any{"auth": map[string]any{"mode": "none"}, "images": map[string]any{
			"handler":      map[string]any{"repository": "r/h", "tag": "v1"},
			"tes":          map[string]any{"repository": "r/t", "tag": ""},
			"filer":        map[string]any{"repository": "r/f", "tag": "v3"},
			"eventDisplay": map[string]any{"repository": "r/d", "tag": "v4"}}},
			[]string{"image: r/h:v1", "image: r/t\n", `FILER_NAME: "r/f"`, `FILER_VERSION: "v3"`, "image: r/d:v4"}},
		{"auth", map[string]any{"auth": map[string]any{"mode": "oidc", "oidc": map[string]any{"issuer": "https://i.example/", "audience": "aud", "groupsClaim": "g", "adminGroup": "admins"}}},
			[]string{`TES_AUTH: "oidc"`, `OIDC_ISSUER: "https://i.example/"`, `OIDC_AUDIENCE: "aud"`, `OIDC_GROUPS_CLAIM: "g"`, `OIDC_ADMIN_GROUP: "admins"`}},
		{"basic", map[string]any{"auth": map[string]any{"mode": "oidc,basic", "oidc": map[string]any{"issuer": "https://i.example/", "opaqueTokens": "off"}, "basic": map[string]any{"usersSecret": "tes-users", "admins": "root,ops"}}},
			[]string{`TES_AUTH: "oidc,basic"`, `OIDC_ISSUER: "https://i.example/"`, `OIDC_OPAQUE_TOKENS: "off"`, `TES_BASIC_AUTH_FILE: "/etc/tesk/basic-auth/users"`, `TES_BASIC_AUTH_ADMINS: "root,ops"`, "secretName: tes-users", "mountPath: /etc/tesk/basic-auth"}},
		{"tasks", map[string]any{"auth": map[string]any{"mode": "none"}, "tasks": map[string]any{"executorRetries": 5, "maxPreemptions": 1, "uploadOutputsOnFailure": true, "filerRetries": 1, "podTimeoutSeconds": 60, "maxQueueSeconds": 3600, "ttlSeconds": 86400, "maxRunSeconds": 7200}},
			[]string{`TES_AUTH: "none"`, `EXECUTOR_BACKOFF_LIMIT: "5"`, `EXECUTOR_MAX_PREEMPTIONS: "1"`, `UPLOAD_OUTPUTS_ON_FAILURE: "true"`, `FILER_BACKOFF_LIMIT: "1"`, `POD_TIMEOUT: "60"`, `TESK_MAX_QUEUE_SECONDS: "3600"`, `TASK_TTL_SECONDS: "86400"`, `TASK_MAX_RUN_SECONDS: "7200"`}},
		{"who creates", map[string]any{"auth": map[string]any{"mode": "oidc,basic", "sharedOwners": true, "oidc": map[string]any{"issuer": "https://login.example.org/", "allowedGroups": "lab-a,lab-b", "allowedSubjects": "bob"}, "basic": map[string]any{"usersSecret": "tes-users"}}},
			[]string{`TES_AUTH: "oidc,basic"`, `OIDC_ISSUER: "https://login.example.org/"`, "secretName: tes-users", `OIDC_ALLOWED_GROUPS: "lab-a,lab-b"`, `OIDC_ALLOWED_SUBJECTS: "bob"`, `TES_AUTH_SHARED_OWNERS: "true"`}},
		{"prices", map[string]any{"auth": none, "tasks": map[string]any{"prices": map[string]any{"coreHourUSD": 0.04, "ramGBHourUSD": "0.005", "diskGBHourUSD": 0.0001}}},
			[]string{`TES_PRICE_PER_CORE_HOUR_USD: "0.04"`, `TES_PRICE_PER_RAM_GB_HOUR_USD: "0.005"`, `TES_PRICE_PER_DISK_GB_HOUR_USD: "0.0001"`}},
		{"denied ranges", map[string]any{"auth": none, "tasks": map[string]any{"deniedCIDRs": map[string]any{"ipv4": []any{"10.0.0.0/8", "203.0.113.0/24"}, "ipv6": []any{"fc00::/7"}}}},
			[]string{"except:\n              - 10.0.0.0/8\n              - 203.0.113.0/24\n        - ipBlock:", "except:\n              - fc00::/7\n\n---"}},
		{"private ranges", map[string]any{"auth": none, "tasks": map[string]any{"allowedPrivateCIDRs": []any{"10.20.30.40/32", "fd00::/8"}}},
			[]string{`FILER_ALLOWED_CIDRS: "10.20.30.40/32,fd00::/8"`, "- ::1/128\n        - ipBlock:\n            cidr: 10.20.30.40/32\n        - ipBlock:\n            cidr: fd00::/8\n"}},
		{"users named by the metrics", map[string]any{"auth": none, "metrics": map[string]any{"users": 25}}, []string{`METRICS_USERS: "25"`}},
		{"shares", map[string]any{"auth": none, "tasks": map[string]any{"share": map[string]any{"tasks": 3, "cpu": 7.5}}},
			[]string{`QUOTA_TASKS_PER_USER: "3"`, `QUOTA_CPU_PER_USER: "7.5"`}},
		{"task limits", map[string]any{"auth": none, "tasks": map[string]any{"limits": map[string]any{"executors": 3, "inputs": 0, "outputs": 7, "cpuCores": 16, "ramGB": 64.5, "diskGB": float64(100000), "createsPerMinute": 30}}},
			[]string{`TES_CREATE_RATE_PER_USER: "30"`, `TES_MAX_EXECUTORS: "3"`, `TES_MAX_INPUTS: "0"`, `TES_MAX_OUTPUTS: "7"`, `TES_MAX_CPU_CORES: "16"`, `TES_MAX_RAM_GB: "64.5"`, `TES_MAX_DISK_GB: "100000"`}},
		{"unfinished bounds", map[string]any{"auth": none, "tasks": map[string]any{"limits": map[string]any{"unfinishedTasksPerUser": 50, "unfinishedBytesPerUser": 67108864}}},
			[]string{`TES_MAX_UNFINISHED_TASKS_PER_USER: "50"`, `TES_MAX_UNFINISHED_BYTES_PER_USER: "67108864"`}},
		{"unfinished bounds by default", map[string]any{"auth": none},
			[]string{`TES_MAX_UNFINISHED_TASKS_PER_USER: "200"`, `TES_MAX_UNFINISHED_BYTES_PER_USER: "8388608"`}},
		{"quota and limit range", map[string]any{"auth": none, "namespaces": map[string]any{"tasks": "t1"}, "tasks": map[string]any{
			"resourceQuota": map[string]any{"requests.cpu": "64", "persistentvolumeclaims": "500"},
			"limitRange":    []any{map[string]any{"type": "Container", "defaultRequest": map[string]any{"cpu": "100m"}}}}},
			[]string{"kind: ResourceQuota\nmetadata:\n  name: tesk-tasks\n  namespace: t1", "hard:\n    persistentvolumeclaims: \"500\"\n    requests.cpu: \"64\"",
				"kind: LimitRange\nmetadata:\n  name: tesk-tasks\n  namespace: t1", "limits:\n    - defaultRequest:\n        cpu: 100m\n      type: Container"}},
		{"state events to the Broker", map[string]any{"auth": none, "stateEvents": map[string]any{"enabled": true}},
			[]string{"kind: SinkBinding\nmetadata:\n  name: tesk-handler-state-events\n  namespace: tesk", "subject:\n    apiVersion: serving.knative.dev/v1\n    kind: Service\n    name: tesk-handler\n  sink:\n    ref:\n      apiVersion: eventing.knative.dev/v1\n      kind: Broker\n      name: default"}},
		{"state events to a sink of one's own", map[string]any{"auth": none, "stateEvents": map[string]any{"sink": "http://recorder.example.org/tes"}},
			[]string{`STATE_EVENTS_SINK: "http://recorder.example.org/tes"`}},
		{"state changes to tasks' addresses", map[string]any{"auth": none, "stateEvents": map[string]any{"enabled": true,
			"notifyURLPrefixes": []any{"https://hooks.example.org/tes", "http://10.0.0.5:8080/"}, "notifyDelivery": map[string]any{"retry": 4, "backoffPolicy": "linear", "backoffDelay": "PT3S"}}},
			[]string{`NOTIFY_URL_PREFIXES: "https://hooks.example.org/tes,http://10.0.0.5:8080/"`,
				"kind: Trigger\nmetadata:\n  name: tesk-state-notify\n  namespace: tesk",
				"filter:\n    attributes:\n      type: org.ga4gh.tes.task.state_changed\n      tesknotify: \"true\"",
				"      name: tesk-handler\n    uri: /notify\n    audience: \"tesk-handler\"\n  delivery:\n    retry: 4\n    backoffPolicy: linear\n    backoffDelay: PT3S\n    deadLetterSink:"}},
		{"trustEvents", map[string]any{"auth": map[string]any{"mode": "none"}, "trustEvents": true}, []string{`TRUST_EVENTS: "true"`}},
		{"backendParameters", map[string]any{"auth": map[string]any{"mode": "none"}, "backendParameters": map[string]any{"zones": map[string]any{"allowed": []any{"a", "b"}}}},
			[]string{`BACKEND_PARAMETERS: "{\"zones\":{\"allowed\":[\"a\",\"b\"]}}"`}},
		{"metrics", map[string]any{"auth": map[string]any{"mode": "none"}, "metrics": map[string]any{"podMonitor": map[string]any{
			"enabled": true, "interval": "15s", "labels": map[string]any{"release": "prom"}}}},
			[]string{"kind: PodMonitor", "interval: 15s", "release: prom", `K_OBSERVABILITY_CONFIG: "{\"metrics-protocol\":\"prometheus\"}"`}},
		{"storage", map[string]any{"auth": none, "tasks": map[string]any{"storageClass": "fast-ssd", "defaultDiskGB": 2.5}},
			[]string{`STORAGE_CLASS_NAME: "fast-ssd"`, `DEFAULT_DISK_GB: "2.5"`}},
		// Numbers read from a values file are floats: large whole numbers
		// keep their digits, as the handler parses whole numbers only.
		{"large numbers", map[string]any{"auth": none, "tasks": map[string]any{"ttlSeconds": float64(5184000), "maxQueueSeconds": float64(1e7), "defaultDiskGB": float64(1048576)},
			"handler": map[string]any{"maxScale": float64(1000000), "containerConcurrency": float64(1000)},
			"broker":  map[string]any{"delivery": map[string]any{"steps": map[string]any{"retry": float64(10000000)}}}},
			[]string{`TASK_TTL_SECONDS: "5184000"`, `TESK_MAX_QUEUE_SECONDS: "10000000"`, `DEFAULT_DISK_GB: "1048576"`, `autoscaling.knative.dev/max-scale: "1000000"`,
				"containerConcurrency: 1000\n", "retry: 10000000\n"}},
		{"tasks' pod security", map[string]any{"auth": none, "namespaces": map[string]any{"tasksPodSecurity": "restricted"},
			"executors": map[string]any{"securityContext": map[string]any{"runAsNonRoot": true, "runAsUser": 1000}, "secret": map[string]any{"name": "mysecret", "mountPath": "/etc/secret"}}},
			[]string{"pod-security.kubernetes.io/enforce: restricted", `EXECUTOR_SECURITY_CONTEXT: "{\"runAsNonRoot\":true,\"runAsUser\":1000}"`,
				`EXECUTOR_SECRET_NAME: "mysecret"`, `EXECUTOR_SECRET_MOUNT_PATH: "/etc/secret"`}},
		{"filer secrets created", map[string]any{"auth": none, "filer": map[string]any{
			"s3":    map[string]any{"config": "[default]\nregion = eu-west-1\n", "credentials": "[default]\naws_access_key_id = K\n"},
			"ftp":   map[string]any{"username": "u", "password": "p", "hosts": "ftp.example.org"},
			"netrc": map[string]any{"content": "machine example.org login u password p\n"}}},
			[]string{"name: aws-secret\n  namespace: tesk-tasks", `credentials: "[default]\naws_access_key_id = K\n"`, `config: "[default]\nregion = eu-west-1\n"`,
				"name: tesk-filer-ftp\n  namespace: tesk-tasks", `username: "u"`, `password: "p"`, `TESK_FTP_SECRET_NAME: "tesk-filer-ftp"`, `TESK_FTP_HOSTS: "ftp.example.org"`,
				"name: tesk-filer-netrc\n  namespace: tesk-tasks", `.netrc: "machine example.org login u password p\n"`, `NETRC_SECRET_NAME: "tesk-filer-netrc"`}},
		{"filer secrets created, S3 credentials alone", map[string]any{"auth": none, "filer": map[string]any{
			"s3":  map[string]any{"credentials": "[default]\naws_access_key_id = K2\n"},
			"ftp": map[string]any{"username": "u2", "password": "p2"}}},
			[]string{"name: aws-secret\n  namespace: tesk-tasks", `credentials: "[default]\naws_access_key_id = K2\n"`, `username: "u2"`, `password: "p2"`}},
		{"filer secrets named", map[string]any{"auth": none, "filer": map[string]any{
			"s3": map[string]any{"existingSecret": "my-s3"}, "ftp": map[string]any{"existingSecret": "my-ftp"}, "netrc": map[string]any{"existingSecret": "my-netrc"}}},
			[]string{`AWS_SECRET_NAME: "my-s3"`, `TESK_FTP_SECRET_NAME: "my-ftp"`, `NETRC_SECRET_NAME: "my-netrc"`}},
		{"broker answering senders at once", map[string]any{"auth": none, "broker": map[string]any{"asyncDelivery": true}},
			[]string{`messaging.knative.dev/async-handler: "true"`}},
		{"broker", map[string]any{"auth": none, "broker": map[string]any{"class": "Kafka",
			"config": map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "name": "kafka-broker-config", "namespace": "knative-eventing"},
			"delivery": map[string]any{
				"steps":          map[string]any{"retry": 20, "backoffPolicy": "linear", "backoffDelay": "PT2S"},
				"changes":        map[string]any{"retry": 3, "backoffPolicy": "linear", "backoffDelay": "PT0.1S"},
				"sweep":          map[string]any{"retry": 1, "backoffPolicy": "linear", "backoffDelay": "PT3S"},
				"deadLetterSink": map[string]any{"uri": "http://dead.example.org/"}}}},
			[]string{"eventing.knative.dev/broker.class: Kafka", "config:\n    apiVersion: v1\n    kind: ConfigMap\n    name: kafka-broker-config\n    namespace: knative-eventing",
				"retry: 20\n    backoffPolicy: linear\n    backoffDelay: PT2S", "retry: 3\n    backoffPolicy: linear\n    backoffDelay: PT0.1S",
				"retry: 1\n    backoffPolicy: linear\n    backoffDelay: PT3S", "deadLetterSink:\n      uri: http://dead.example.org/"}},
		{"domain mapping", map[string]any{"auth": none, "expose": map[string]any{"via": "domainMapping", "host": "tes.example.org", "tlsSecret": "tes-tls"}},
			[]string{"kind: DomainMapping\nmetadata:\n  name: tes.example.org\n  namespace: tesk", "    kind: Service\n    name: tesk-tes\n    namespace: tesk", "tls:\n    secretName: tes-tls"}},
		{"ingress", map[string]any{"auth": none, "expose": map[string]any{"via": "ingress", "host": "ingress.example.org", "tlsSecret": "tes-tls",
			"ingress": map[string]any{"className": "nginx", "annotations": map[string]any{"nginx.ingress.kubernetes.io/upstream-vhost": "tesk-tes.tesk.svc.cluster.local"}}}},
			[]string{"kind: Ingress", "ingressClassName: nginx", "nginx.ingress.kubernetes.io/upstream-vhost: tesk-tes.tesk.svc.cluster.local",
				"- hosts: [ingress.example.org]\n      secretName: tes-tls", "- host: ingress.example.org", "name: tesk-tes\n                port:\n                  number: 80"}},
		{"no event policies", map[string]any{"auth": none, "broker": map[string]any{"eventPolicies": false}},
			[]string{"# No EventPolicies (broker.eventPolicies: false)", `SINK_TOKEN_REQUIRED: "false"`}},
		{"event policies", map[string]any{"auth": none, "broker": map[string]any{
			"extraSenders": []any{map[string]any{"sub": "system:serviceaccount:ops:adapter"}}}, "stateEvents": map[string]any{"enabled": true}},
			[]string{"kind: EventPolicy\nmetadata:\n  name: tesk-apiserversource", "kind: ApiServerSource, name: tesk-events, namespace: tesk}\n  filters:\n    - prefix: {type: dev.knative.apiserver.}",
				"kind: PingSource, name: tesk-sweep, namespace: tesk}\n  filters:\n    - exact: {type: dev.knative.sources.ping}",
				"kind: SinkBinding, name: tesk-tes, namespace: tesk}\n  filters:\n    - any:\n        - exact: {type: task.submitted}\n        - exact: {type: task.cancelled}",
				"kind: SinkBinding, name: tesk-handler-state-events, namespace: tesk}\n  filters:\n    - exact: {type: org.ga4gh.tes.task.state_changed}",
				"name: tesk-extra-senders", "from:\n    - sub: system:serviceaccount:ops:adapter"}},
		{"events' audience", map[string]any{"auth": none, "handler": map[string]any{"eventsAudience": "tesk-events"}},
			[]string{`EVENTS_AUDIENCE: "tesk-events"`, "      name: tesk-handler\n    audience: \"tesk-events\"\n  delivery:"}},
		{"no events' audience", map[string]any{"auth": none, "handler": map[string]any{"eventsAudience": ""}},
			[]string{`EVENTS_AUDIENCE: ""`, "      name: tesk-handler\n  delivery:"}},
		{"services", map[string]any{"auth": none,
			"handler": map[string]any{"minScale": 1, "maxScale": 10, "containerConcurrency": 20, "target": 12, "resources": map[string]any{
				"requests": map[string]any{"cpu": "250m", "memory": "256Mi"}, "limits": map[string]any{"memory": "2Gi"}}},
			"tes": map[string]any{"minScale": 2, "maxScale": 8, "containerConcurrency": 30, "resources": map[string]any{
				"requests": map[string]any{"cpu": "200m", "memory": "96Mi"}, "limits": map[string]any{"memory": "768Mi"}}}},
			[]string{`autoscaling.knative.dev/min-scale: "1"`, `autoscaling.knative.dev/max-scale: "10"`, `autoscaling.knative.dev/target: "12"`, "containerConcurrency: 20",
				"requests:\n              cpu: 250m\n              memory: 256Mi", "limits:\n              memory: 2Gi",
				`autoscaling.knative.dev/min-scale: "2"`, `autoscaling.knative.dev/max-scale: "8"`, "containerConcurrency: 30",
				"requests:\n              cpu: 200m\n              memory: 96Mi", "limits:\n              memory: 768Mi"}},
		{"otlp", map[string]any{"auth": none, "observability": map[string]any{"otlp": map[string]any{
			"endpoint": "http://otel.observability:4318/", "tracingSamplingRate": 0.25, "metricsExportInterval": "15s"}}},
			[]string{`K_OBSERVABILITY_CONFIG: "{\"metrics-endpoint\":\"http://otel.observability:4318/v1/metrics\",\"metrics-export-interval\":\"15s\",\"metrics-protocol\":\"http/protobuf\",\"tracing-endpoint\":\"http://otel.observability:4318/v1/traces\",\"tracing-protocol\":\"http/protobuf\",\"tracing-sampling-rate\":\"0.25\"}"`}},
		{"otlp traces beside the PodMonitor's metrics", map[string]any{"auth": none, "metrics": map[string]any{"podMonitor": map[string]any{"enabled": true}},
			"observability": map[string]any{"otlp": map[string]any{"endpoint": "http://otel.observability:4317", "protocol": "grpc"}}},
			[]string{`K_OBSERVABILITY_CONFIG: "{\"metrics-protocol\":\"prometheus\",\"tracing-endpoint\":\"http://otel.observability:4317\",\"tracing-protocol\":\"grpc\",\"tracing-sampling-rate\":\"1\"}"`}},
		{"incomplete auth", map[string]any{"auth": map[string]any{"mode": "oidc", "allowIncomplete": true, "basic": map[string]any{"usersSecret": "later"}}},
			[]string{`TES_AUTH: "oidc"`, `OIDC_ISSUER: ""`, `TES_BASIC_AUTH_FILE: ""`, "secretName: later\n            optional: true", "mountPath: /etc/tesk/basic-auth"}},
		{"incomplete auth mounts the users of any mode", map[string]any{"auth": map[string]any{"mode": "none", "allowIncomplete": true, "basic": map[string]any{"usersSecret": "later"}}},
			[]string{`TES_AUTH: "none"`, "secretName: later\n            optional: true", "mountPath: /etc/tesk/basic-auth"}},
	}
	defaults := map[string]any{}
	if err := yamlUnmarshalFile(filepath.Join(ChartDir(), "values.yaml"), &defaults); err != nil {
		t.Fatal(err)
	}
	// given are the settings each value of values.yaml has in the cases.
	given := map[string][]any{}
	for _, c := range cases {
		for _, s := range settings(c.vals, defaults, nil) {
			k := strings.Join(s.path, ".")
			given[k] = append(given[k], s.val)
		}
	}
	// A value a case sets is asserted when a want of the case is in its
	// rendering and not in the rendering with the value at its default, nor
	// with the value as another case sets it (each of these that the chart
	// renders). A value the chart renders no other way (auth.mode none
	// beside no issuer) is one the case needs; another case asserts it.
	asserted := map[string]bool{}
	for _, c := range cases {
		out, err := Render(c.vals)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		for _, w := range c.want {
			if !strings.Contains(out, w) {
				t.Errorf("%s: rendering lacks %q", c.name, w)
			}
		}
		for _, s := range settings(c.vals, defaults, nil) {
			k := strings.Join(s.path, ".")
			variants := []any{unset}
			for _, v := range given[k] {
				if !reflect.DeepEqual(v, s.val) && !slices.ContainsFunc(variants, func(o any) bool { return reflect.DeepEqual(o, v) }) {
					variants = append(variants, v)
				}
			}
			told, rendered := true, false
			for _, v := range variants {
				o, err := Render(with(c.vals, s.path, v))
				if err != nil {
					continue
				}
				rendered = true
				if !slices.ContainsFunc(c.want, func(w string) bool { return !strings.Contains(o, w) }) {
					told = false
					what := fmt.Sprintf("%v", v)
					if v == unset {
						what = "its default"
					}
					t.Errorf("%s: every want is in the rendering with %s at %s as with %v", c.name, k, what, s.val)
				}
			}
			if rendered && told {
				asserted[k] = true
			}
		}
	}
	all := map[string]bool{}
	leaves("", defaults, all)
	for k := range all {
		if !asserted[k] {
			t.Errorf("value %s of values.yaml has no template test: no case sets it with a want that tells it from its default", k)
		}
	}
}

// setting is a value of values.yaml a case sets: its path and the case's
// value.
type setting struct {
	path []string
	val  any
}

// unsetValue is the type of unset.
type unsetValue struct{}

// unset stands for a value left at its default.
var unset any = unsetValue{}

// settings are the values of values.yaml that vals sets: a key whose
// default is a map with keys is a group of values, any other key a value
// (a map that is empty by default, as a set of labels, is one value).
func settings(vals, defaults map[string]any, prefix []string) []setting {
	var out []setting
	for k, v := range vals {
		path := append(slices.Clone(prefix), k)
		sub, isMap := v.(map[string]any)
		def, _ := defaults[k].(map[string]any)
		if isMap && len(def) > 0 {
			out = append(out, settings(sub, def, path)...)
			continue
		}
		out = append(out, setting{path, v})
	}
	return out
}

// with is a copy of vals with the value at path set to v, or removed when
// v is unset.
func with(vals map[string]any, path []string, v any) map[string]any {
	out := clone(vals).(map[string]any)
	m := out
	for _, k := range path[:len(path)-1] {
		m = m[k].(map[string]any)
	}
	if v == unset {
		delete(m, path[len(path)-1])
	} else {
		m[path[len(path)-1]] = clone(v)
	}
	return out
}

// leaves are the values of m, by path; a map that is empty by default (a
// set of labels) is a value of its own.
func leaves(prefix string, m map[string]any, into map[string]bool) {
	for k, v := range m {
		if sub, ok := v.(map[string]any); ok && len(sub) > 0 {
			leaves(prefix+k+".", sub, into)
			continue
		}
		into[prefix+k] = true
	}
}

func TestRefusals(t *testing.T) {
	cases := []struct {
		name string
		vals map[string]any
		want string
	}{
		{"no auth mode", nil, "auth"},
		{"unknown auth mode", map[string]any{"auth": map[string]any{"mode": "ldap"}}, "/auth/mode"},
		{"basic without users", map[string]any{"auth": map[string]any{"mode": "basic"}}, "set auth.basic.usersSecret"},
		{"unknown opaque tokens", map[string]any{"auth": map[string]any{"mode": "oidc", "oidc": map[string]any{"issuer": "https://i.example/", "opaqueTokens": "introspect"}}}, "opaqueTokens"},
		{"oidc without issuer", map[string]any{"auth": map[string]any{"mode": "oidc"}}, "set auth.oidc.issuer"},
		{"issuer not a URL", map[string]any{"auth": map[string]any{"mode": "oidc", "oidc": map[string]any{"issuer": "login.example"}}}, "issuer"},
		{"same namespace", map[string]any{"auth": map[string]any{"mode": "none"}, "namespaces": map[string]any{"platform": "x", "tasks": "x"}}, "must differ"},
		{"bad namespace", map[string]any{"auth": map[string]any{"mode": "none"}, "namespaces": map[string]any{"platform": "Tesk"}}, "/namespaces/platform"},
		{"negative retries", map[string]any{"auth": map[string]any{"mode": "none"}, "tasks": map[string]any{"executorRetries": -1}}, "executorRetries"},
		{"unfinished tasks below 0", map[string]any{"auth": none, "tasks": map[string]any{"limits": map[string]any{"unfinishedTasksPerUser": -1}}}, "/tasks/limits/unfinishedTasksPerUser"},
		{"unfinished bytes with a unit", map[string]any{"auth": none, "tasks": map[string]any{"limits": map[string]any{"unfinishedBytesPerUser": "64Mi"}}}, "/tasks/limits/unfinishedBytesPerUser"},
		{"unknown value", map[string]any{"auth": map[string]any{"mode": "none"}, "typo": 1}, "typo"},
		{"podMonitor not a boolean", map[string]any{"auth": map[string]any{"mode": "none"}, "metrics": map[string]any{"podMonitor": map[string]any{"enabled": "yes"}}}, "/metrics/podMonitor/enabled"},
		{"scrape interval not a duration", map[string]any{"auth": map[string]any{"mode": "none"}, "metrics": map[string]any{"podMonitor": map[string]any{"interval": "30"}}}, "/metrics/podMonitor/interval"},
		{"label not a string", map[string]any{"auth": map[string]any{"mode": "none"}, "metrics": map[string]any{"podMonitor": map[string]any{"labels": map[string]any{"n": 1}}}}, "/metrics/podMonitor/labels"},
		{"storage class not a name", map[string]any{"auth": none, "tasks": map[string]any{"storageClass": "Fast SSD"}}, "/tasks/storageClass"},
		{"no disk", map[string]any{"auth": none, "tasks": map[string]any{"defaultDiskGB": 0}}, "/tasks/defaultDiskGB"},
		{"unknown pod security level", map[string]any{"auth": none, "namespaces": map[string]any{"tasksPodSecurity": "strict"}}, "/namespaces/tasksPodSecurity"},
		{"executor security context field unknown", map[string]any{"auth": none, "executors": map[string]any{"securityContext": map[string]any{"runAsRoot": false}}}, "/executors/securityContext"},
		{"executor secret not a secret name", map[string]any{"auth": none, "executors": map[string]any{"secret": map[string]any{"name": "My Secret"}}}, "/executors/secret/name"},
		{"executor user not a number", map[string]any{"auth": none, "executors": map[string]any{"securityContext": map[string]any{"runAsUser": "1000"}}}, "/executors/securityContext/runAsUser"},
		{"ftp secret and values", map[string]any{"auth": none, "filer": map[string]any{"ftp": map[string]any{"existingSecret": "f", "username": "u", "password": "p"}}}, "filer.ftp: set either existingSecret"},
		{"ftp user without password", map[string]any{"auth": none, "filer": map[string]any{"ftp": map[string]any{"username": "u"}}}, "filer.ftp: set both username and password"},
		{"netrc secret and content", map[string]any{"auth": none, "filer": map[string]any{"netrc": map[string]any{"existingSecret": "n", "content": "machine x"}}}, "filer.netrc: set either existingSecret"},
		{"s3 secret and values", map[string]any{"auth": none, "filer": map[string]any{"s3": map[string]any{"existingSecret": "s", "credentials": "[default]"}}}, "filer.s3: set either existingSecret"},
		{"s3 secret not a name", map[string]any{"auth": none, "filer": map[string]any{"s3": map[string]any{"existingSecret": "S3 creds"}}}, "/filer/s3/existingSecret"},
		{"s3 config without credentials", map[string]any{"auth": none, "filer": map[string]any{"s3": map[string]any{"config": "[default]"}}}, "filer.s3: config without credentials"},
		{"ftp secret not a name", map[string]any{"auth": none, "filer": map[string]any{"ftp": map[string]any{"existingSecret": "My_FTP"}}}, "/filer/ftp/existingSecret"},
		{"broker class not a name", map[string]any{"auth": none, "broker": map[string]any{"class": "Kafka Broker"}}, "/broker/class"},
		{"broker config without a name", map[string]any{"auth": none, "broker": map[string]any{"config": map[string]any{"apiVersion": "v1", "kind": "ConfigMap"}}}, "/broker/config"},
		{"negative retry", map[string]any{"auth": none, "broker": map[string]any{"delivery": map[string]any{"steps": map[string]any{"retry": -1}}}}, "/broker/delivery/steps/retry"},
		{"unknown backoff policy", map[string]any{"auth": none, "broker": map[string]any{"delivery": map[string]any{"sweep": map[string]any{"backoffPolicy": "random"}}}}, "/broker/delivery/sweep/backoffPolicy"},
		{"backoff delay not a duration", map[string]any{"auth": none, "broker": map[string]any{"delivery": map[string]any{"changes": map[string]any{"backoffDelay": "1s"}}}}, "/broker/delivery/changes/backoffDelay"},
		{"dead letter sink neither ref nor uri", map[string]any{"auth": none, "broker": map[string]any{"delivery": map[string]any{"deadLetterSink": map[string]any{"name": "x"}}}}, "/broker/delivery/deadLetterSink"},
		{"tasks' addresses without the Broker", map[string]any{"auth": none, "stateEvents": map[string]any{"notifyURLPrefixes": []any{"https://hooks.example.org/"}}}, "stateEvents.notifyURLPrefixes: the state changes reach tasks' addresses through the Broker"},
		{"tasks' addresses with a sink of one's own", map[string]any{"auth": none, "stateEvents": map[string]any{"enabled": true, "sink": "http://r.example.org/", "notifyURLPrefixes": []any{"https://hooks.example.org/"}}}, "leave stateEvents.sink empty"},
		{"a prefix with a query", map[string]any{"auth": none, "stateEvents": map[string]any{"enabled": true, "notifyURLPrefixes": []any{"https://hooks.example.org/?a=1"}}}, "/stateEvents/notifyURLPrefixes/0"},
		{"unknown exposure", map[string]any{"auth": none, "expose": map[string]any{"via": "loadBalancer"}}, "/expose/via"},
		{"exposure without a host", map[string]any{"auth": none, "expose": map[string]any{"via": "ingress"}}, "expose.via is ingress: set expose.host"},
		{"host not a name", map[string]any{"auth": none, "expose": map[string]any{"via": "domainMapping", "host": "https://tes.example.org"}}, "/expose/host"},
		{"negative max scale", map[string]any{"auth": none, "handler": map[string]any{"maxScale": -1}}, "/handler/maxScale"},
		{"min scale above max scale", map[string]any{"auth": none, "tes": map[string]any{"minScale": 6, "maxScale": 5}}, "tes.minScale is above tes.maxScale"},
		{"concurrency out of range", map[string]any{"auth": none, "tes": map[string]any{"containerConcurrency": 5000}}, "/tes/containerConcurrency"},
		{"resources not quantities", map[string]any{"auth": none, "handler": map[string]any{"resources": map[string]any{"limits": map[string]any{"memory": "lots"}}}}, "/handler/resources/limits/memory"},
		{"unknown resources key", map[string]any{"auth": none, "tes": map[string]any{"resources": map[string]any{"claims": []any{}}}}, "/tes/resources"},
		{"otlp endpoint not a URL", map[string]any{"auth": none, "observability": map[string]any{"otlp": map[string]any{"endpoint": "otel:4317"}}}, "/observability/otlp/endpoint"},
		{"unknown otlp protocol", map[string]any{"auth": none, "observability": map[string]any{"otlp": map[string]any{"protocol": "http/json"}}}, "/observability/otlp/protocol"},
		{"sampling rate above 1", map[string]any{"auth": none, "observability": map[string]any{"otlp": map[string]any{"tracingSamplingRate": 2}}}, "/observability/otlp/tracingSamplingRate"},
	}
	for _, c := range cases {
		_, err := Render(c.vals)
		if err == nil {
			t.Errorf("%s: rendered", c.name)
			continue
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %q lacks %q", c.name, err, c.want)
		}
	}
}

var _ = os.ReadFile
