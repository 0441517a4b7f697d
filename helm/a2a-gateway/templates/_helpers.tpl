{{/* Names and labels shared by every template. */}}

{{- define "a2a.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "a2a.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "a2a.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ include "a2a.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: a2a-gateway
{{- end -}}

{{/* Selector labels of one component: include "a2a.selector" (list . "gateway"). */}}
{{- define "a2a.selector" -}}
{{- $ := index . 0 -}}
app.kubernetes.io/name: {{ include "a2a.name" $ }}
app.kubernetes.io/instance: {{ $.Release.Name }}
app.kubernetes.io/component: {{ index . 1 }}
{{- end -}}

{{- define "a2a.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "a2a.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "a2a.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{- define "a2a.publicUrl" -}}
{{- default (printf "http://%s.%s.svc:%v" (include "a2a.fullname" .) .Release.Namespace .Values.gateway.service.port) .Values.publicUrl -}}
{{- end -}}

{{/* The Secret holding the chart-managed URLs (and keys): name and keys. */}}
{{- define "a2a.secretName" -}}
{{- include "a2a.fullname" . -}}
{{- end -}}

{{- define "a2a.databaseSecretRef" -}}
name: {{ default (include "a2a.secretName" .) .Values.database.existingSecret }}
key: {{ ternary .Values.database.existingSecretKey "database-url" (ne .Values.database.existingSecret "") }}
{{- end -}}

{{- define "a2a.redisSecretRef" -}}
name: {{ default (include "a2a.secretName" .) .Values.redis.existingSecret }}
key: {{ ternary .Values.redis.existingSecretKey "redis-url" (ne .Values.redis.existingSecret "") }}
{{- end -}}

{{- define "a2a.keysSecretName" -}}
{{- default (printf "%s-push-keys" (include "a2a.fullname" .)) .Values.push.signingKeys.existingSecret -}}
{{- end -}}

{{/* A2A_PUSH_SIGNING_KEYS: kid=/etc/a2a/keys/<kid>.pem, the first signs. */}}
{{- define "a2a.signingKeysEnv" -}}
{{- $paths := list -}}
{{- range .Values.push.signingKeys.kids -}}
{{- $paths = append $paths (printf "%s=/etc/a2a/keys/%s.pem" . .) -}}
{{- end -}}
{{- join "," $paths -}}
{{- end -}}

{{/* The drain bound of the gateway, from config.limits (the binary's default is 25 s). */}}
{{- define "a2a.drainTimeout" -}}
{{- int (default 25 (index .Values.config.limits "drain_timeout_secs")) -}}
{{- end -}}

{{- define "a2a.terminationGrace" -}}
{{- $min := add (include "a2a.drainTimeout" . | int) (int .Values.gateway.preStopSleepSeconds) -}}
{{- if kindIs "invalid" .Values.gateway.terminationGracePeriodSeconds -}}
{{- add $min 10 -}}
{{- else if le (int .Values.gateway.terminationGracePeriodSeconds) $min -}}
{{- fail (printf "gateway.terminationGracePeriodSeconds (%v) must exceed gateway.preStopSleepSeconds + config.limits.drain_timeout_secs (%v): the kubelet would kill the gateway before it drained" .Values.gateway.terminationGracePeriodSeconds $min) -}}
{{- else -}}
{{- int .Values.gateway.terminationGracePeriodSeconds -}}
{{- end -}}
{{- end -}}

{{/* Environment both binaries read the same way: storage, push, logs, traces. */}}
{{- define "a2a.sharedEnv" -}}
- name: A2A_DATABASE_URL
  valueFrom:
    secretKeyRef:
      {{- include "a2a.databaseSecretRef" . | nindent 6 }}
- name: A2A_REDIS_URL
  valueFrom:
    secretKeyRef:
      {{- include "a2a.redisSecretRef" . | nindent 6 }}
- name: A2A_REDIS_PREFIX
  value: {{ .Values.redis.prefix | quote }}
- name: A2A_DATABASE_POOL_SIZE
  value: {{ .Values.database.poolSize | quote }}
- name: A2A_PUBLIC_URL
  value: {{ include "a2a.publicUrl" . | quote }}
{{- with .Values.push.allowedHosts }}
- name: A2A_PUSH_ALLOWED_HOSTS
  value: {{ join "," . | quote }}
{{- end }}
{{- if .Values.push.signingKeys.kids }}
- name: A2A_PUSH_SIGNING_KEYS
  value: {{ include "a2a.signingKeysEnv" . | quote }}
{{- end }}
- name: A2A_LOG_FORMAT
  value: {{ .Values.logs.format | quote }}
- name: RUST_LOG
  value: {{ .Values.logs.level | quote }}
{{- if .Values.tracing.otlpEndpoint }}
- name: OTEL_EXPORTER_OTLP_ENDPOINT
  value: {{ .Values.tracing.otlpEndpoint | quote }}
- name: OTEL_TRACES_SAMPLER
  value: {{ .Values.tracing.sampler | quote }}
- name: OTEL_TRACES_SAMPLER_ARG
  value: {{ .Values.tracing.samplerArg | quote }}
- name: OTEL_RESOURCE_ATTRIBUTES
  value: {{ printf "service.namespace=%s" .Release.Namespace | quote }}
{{- end }}
{{- end -}}

{{- define "a2a.topologySpread" -}}
{{- if .Values.gateway.topologySpreadConstraints -}}
{{- toYaml .Values.gateway.topologySpreadConstraints -}}
{{- else -}}
- maxSkew: 1
  topologyKey: topology.kubernetes.io/zone
  whenUnsatisfiable: ScheduleAnyway
  labelSelector:
    matchLabels:
      {{- include "a2a.selector" (list . "gateway") | nindent 6 }}
- maxSkew: 1
  topologyKey: kubernetes.io/hostname
  whenUnsatisfiable: ScheduleAnyway
  labelSelector:
    matchLabels:
      {{- include "a2a.selector" (list . "gateway") | nindent 6 }}
{{- end -}}
{{- end -}}

{{/* The gateway's TOML configuration (A2A_CONFIG); the environment wins over it. */}}
{{- define "a2a.gatewayToml" -}}
# Rendered by the a2a-gateway chart. Listen addresses, URLs and secrets come from the environment.
builtin_agents = {{ toJson .Values.config.builtinAgents }}
default_agent = {{ toJson .Values.config.defaultAgent }}
{{- with .Values.config.limits }}

[limits]
{{- range $key, $value := . }}
{{ $key }} = {{ toJson $value }}
{{- end }}
{{- end }}
{{- with .Values.config.extra }}

{{ . }}
{{- end }}
{{- end -}}
