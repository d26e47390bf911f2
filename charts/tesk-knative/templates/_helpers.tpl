{{/* An image reference from {repository, tag}; an empty tag leaves the repository as it is (a ko:// path or a digest). */}}
{{- define "tesk-knative.image" -}}
{{- if .tag -}}{{ .repository }}:{{ .tag }}{{- else -}}{{ .repository }}{{- end -}}
{{- end -}}
{{- define "tesk-knative.validate" -}}
{{- if eq .Values.namespaces.platform .Values.namespaces.tasks -}}
{{- fail "namespaces.platform and namespaces.tasks must differ: the tasks run users' code in a namespace of their own" -}}
{{- end -}}
{{- if and (contains "oidc" .Values.auth.mode) (not .Values.auth.oidc.issuer) -}}
{{- fail "auth.mode is oidc: set auth.oidc.issuer to your issuer's URL (or auth.mode=none on a trusted network)" -}}
{{- end -}}
{{- if and (contains "basic" .Values.auth.mode) (not .Values.auth.basic.usersSecret) -}}
{{- fail "auth.mode is basic: set auth.basic.usersSecret to a Secret of the platform namespace whose key users is a users file of bcrypt hashes (htpasswd -B)" -}}
{{- end -}}
{{- end -}}
{{/* K_OBSERVABILITY_CONFIG of the handler and the TES API: Prometheus metrics on port 9092 when the PodMonitor scrapes them, else nothing exported. */}}
{{- define "tesk-knative.observability" -}}
{{- if .Values.metrics.podMonitor.enabled -}}
{{ `{"metrics-protocol": "prometheus"}` | quote }}
{{- else -}}
""
{{- end -}}
{{- end -}}
