{{/* An image reference from {repository, tag}; an empty tag leaves the repository as it is (a ko:// path or a digest). */}}
{{- define "tesk-knative.image" -}}
{{- if .tag -}}{{ .repository }}:{{ .tag }}{{- else -}}{{ .repository }}{{- end -}}
{{- end -}}
{{- define "tesk-knative.validate" -}}
{{- if eq .Values.namespaces.platform .Values.namespaces.tasks -}}
{{- fail "namespaces.platform and namespaces.tasks must differ: the tasks run users' code in a namespace of their own" -}}
{{- end -}}
{{- if and (contains "oidc" .Values.auth.mode) (not .Values.auth.oidc.issuer) (not .Values.auth.allowIncomplete) -}}
{{- fail "auth.mode is oidc: set auth.oidc.issuer to your issuer's URL (or auth.mode=none on a trusted network)" -}}
{{- end -}}
{{- if and (contains "basic" .Values.auth.mode) (not .Values.auth.basic.usersSecret) -}}
{{- fail "auth.mode is basic: set auth.basic.usersSecret to a Secret of the platform namespace whose key users is a users file of bcrypt hashes (htpasswd -B)" -}}
{{- end -}}
{{- if and .Values.filer.ftp.existingSecret (or .Values.filer.ftp.username .Values.filer.ftp.password) -}}
{{- fail "filer.ftp: set either existingSecret (a Secret you create) or username and password (a Secret the chart creates), not both" -}}
{{- end -}}
{{- if and (or .Values.filer.ftp.username .Values.filer.ftp.password) (not (and .Values.filer.ftp.username .Values.filer.ftp.password)) -}}
{{- fail "filer.ftp: set both username and password (or existingSecret)" -}}
{{- end -}}
{{- if and .Values.filer.netrc.existingSecret .Values.filer.netrc.content -}}
{{- fail "filer.netrc: set either existingSecret (a Secret you create) or content (a Secret the chart creates), not both" -}}
{{- end -}}
{{- if and .Values.filer.s3.existingSecret (or .Values.filer.s3.config .Values.filer.s3.credentials) -}}
{{- fail "filer.s3: set either existingSecret (a Secret you create) or config and credentials (the Secret aws-secret the chart creates), not both" -}}
{{- end -}}
{{- if and .Values.filer.s3.config (not .Values.filer.s3.credentials) -}}
{{- fail "filer.s3: config without credentials: set filer.s3.credentials (the AWS credentials file) too, or neither to create aws-secret yourself" -}}
{{- end -}}
{{- if and (ne .Values.expose.via "none") (not .Values.expose.host) -}}
{{- fail (printf "expose.via is %s: set expose.host to the TES API's host name" .Values.expose.via) -}}
{{- end -}}
{{- if and (gt (int .Values.handler.minScale) (int .Values.handler.maxScale)) (gt (int .Values.handler.maxScale) 0) -}}
{{- fail "handler.minScale is above handler.maxScale" -}}
{{- end -}}
{{- if and (gt (int .Values.tes.minScale) (int .Values.tes.maxScale)) (gt (int .Values.tes.maxScale) 0) -}}
{{- fail "tes.minScale is above tes.maxScale" -}}
{{- end -}}
{{- end -}}
{{/* K_OBSERVABILITY_CONFIG of the handler and the TES API (knative.dev/pkg's config-observability keys): metrics in Prometheus form on port 9092 when the PodMonitor scrapes them, else over OTLP when observability.otlp.endpoint is set; traces over OTLP when it is set; else nothing exported. */}}
{{- define "tesk-knative.observability" -}}
{{- $otlp := .Values.observability.otlp -}}
{{- $c := dict -}}
{{- $http := eq $otlp.protocol "http/protobuf" -}}
{{- if .Values.metrics.podMonitor.enabled -}}
{{- $_ := set $c "metrics-protocol" "prometheus" -}}
{{- else if $otlp.endpoint -}}
{{- $_ := set $c "metrics-protocol" $otlp.protocol -}}
{{- $_ := set $c "metrics-endpoint" (ternary (printf "%s/v1/metrics" (trimSuffix "/" $otlp.endpoint)) $otlp.endpoint $http) -}}
{{- $_ := set $c "metrics-export-interval" $otlp.metricsExportInterval -}}
{{- end -}}
{{- if $otlp.endpoint -}}
{{- $_ := set $c "tracing-protocol" $otlp.protocol -}}
{{- $_ := set $c "tracing-endpoint" (ternary (printf "%s/v1/traces" (trimSuffix "/" $otlp.endpoint)) $otlp.endpoint $http) -}}
{{- $_ := set $c "tracing-sampling-rate" (toString $otlp.tracingSamplingRate) -}}
{{- end -}}
{{- if $c -}}
{{ toJson $c | quote }}
{{- else -}}
""
{{- end -}}
{{- end -}}
{{/* The Triggers' dead letter sink: broker.delivery.deadLetterSink, or the chart's tesk-dead-letters. */}}
{{- define "tesk-knative.deadLetterSink" -}}
{{- with .Values.broker.delivery.deadLetterSink -}}
{{ toYaml . }}
{{- else -}}
ref:
  apiVersion: serving.knative.dev/v1
  kind: Service
  name: tesk-dead-letters
{{- end -}}
{{- end -}}
{{/* The filer's FTP and netrc Secrets: the one named, or the chart's when it creates one, or none. */}}
{{- define "tesk-knative.ftpSecret" -}}
{{- if .Values.filer.ftp.existingSecret -}}{{ .Values.filer.ftp.existingSecret }}{{- else if .Values.filer.ftp.username -}}tesk-filer-ftp{{- end -}}
{{- end -}}
{{- define "tesk-knative.netrcSecret" -}}
{{- if .Values.filer.netrc.existingSecret -}}{{ .Values.filer.netrc.existingSecret }}{{- else if .Values.filer.netrc.content -}}tesk-filer-netrc{{- end -}}
{{- end -}}
{{/* A JSON object setting of the handler: its JSON, or empty (the handler's default). */}}
{{- define "tesk-knative.jsonSetting" -}}
{{- if . -}}{{ toJson . | quote }}{{- else -}}""{{- end -}}
{{- end -}}
{{/* A number setting as a quoted string, whole numbers without an exponent (values read from YAML are floats: 2592000, not 2.592e+06); an empty string stays empty. */}}
{{- define "tesk-knative.number" -}}
{{- if kindIs "string" . -}}
{{ . | quote }}
{{- else if eq (float64 .) (float64 (int64 .)) -}}
{{ int64 . | toString | quote }}
{{- else -}}
{{ . | toString | quote }}
{{- end -}}
{{- end -}}

{{- /* "true" where Knative Eventing's authentication-oidc is taken to be on (broker.eventPolicies: auto reads knative-eventing's config-features at install and upgrade; a rendering without a cluster reads nothing: on), else "false". */ -}}
{{- define "tesk-knative.oidc" -}}
{{- $mode := toString .Values.broker.eventPolicies -}}
{{- if eq $mode "auto" -}}
{{- $features := lookup "v1" "ConfigMap" "knative-eventing" "config-features" -}}
{{- if $features -}}
{{- eq (get (default dict $features.data) "authentication-oidc") "enabled" -}}
{{- else -}}
true
{{- end -}}
{{- else -}}
{{- eq $mode "true" -}}
{{- end -}}
{{- end -}}
