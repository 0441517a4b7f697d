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
{{- $repo := .Values.image.repository -}}
{{- with .Values.image.registry -}}{{- $repo = printf "%s/%s" (trimSuffix "/" .) $repo -}}{{- end -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" $repo .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" $repo (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- end -}}

{{/* A2A_REDIS_PREFIX: the release's own unless set. */}}
{{- define "a2a.redisPrefix" -}}
{{- default (printf "%s:" .Release.Name) .Values.redis.prefix -}}
{{- end -}}

{{/* A listen address on every interface, IPv4 and IPv6 ("[::]" takes both unless the node sets bindv6only). */}}
{{- define "a2a.listen" -}}
{{- printf "[::]:%v" . -}}
{{- end -}}

{{/* Whether the configuration the chart renders declares [auth] (unknown with config.existingSecret). */}}
{{- define "a2a.hasAuth" -}}
{{- if or (hasKey .Values.config.settings "auth") (regexMatch "(?m)^\\s*\\[\\s*auth\\s*[\\].]" .Values.config.extra) -}}true{{- end -}}
{{- end -}}

{{/* A2A_ALLOW_UNAUTHENTICATED: refused at render when the gateway would refuse to start. */}}
{{- define "a2a.authEnv" -}}
{{- if .Values.auth.allowUnauthenticated -}}
- name: A2A_ALLOW_UNAUTHENTICATED
  value: "true"
{{- else if and (not .Values.config.existingSecret) (not (include "a2a.hasAuth" .)) -}}
{{- fail "no [auth] is configured and auth.allowUnauthenticated is false: the gateway refuses to serve beyond loopback without authentication. Either configure [auth] (config.extra or config.settings.auth; README, Authentication), or set auth.allowUnauthenticated=true to serve every caller as `anonymous` (A2A_ALLOW_UNAUTHENTICATED)" -}}
{{- end -}}
{{- end -}}

{{/* The Secret of the public port's certificate, or "" without TLS. */}}
{{- define "a2a.tlsSecret" -}}
{{- if .Values.tls.enabled -}}
{{- if .Values.tls.existingSecret -}}
{{- .Values.tls.existingSecret -}}
{{- else if .Values.tls.certManager.enabled -}}
{{- printf "%s-tls" (include "a2a.fullname" .) -}}
{{- else -}}
{{- fail "tls.enabled needs tls.existingSecret (a kubernetes.io/tls Secret) or tls.certManager.enabled" -}}
{{- end -}}
{{- end -}}
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
- name: {{ ternary "A2A_REDIS_CLUSTER_NODES" "A2A_REDIS_URL" .Values.redis.cluster }}
  valueFrom:
    secretKeyRef:
      {{- include "a2a.redisSecretRef" . | nindent 6 }}
- name: A2A_REDIS_PREFIX
  value: {{ include "a2a.redisPrefix" . | quote }}
- name: A2A_REDIS_PARTITIONS
  value: {{ .Values.redis.partitions | quote }}
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
  # Each rollout's pods spread on their own (old and new pods would skew it otherwise).
  matchLabelKeys: [pod-template-hash]
- maxSkew: 1
  topologyKey: kubernetes.io/hostname
  whenUnsatisfiable: ScheduleAnyway
  labelSelector:
    matchLabels:
      {{- include "a2a.selector" (list . "gateway") | nindent 6 }}
  matchLabelKeys: [pod-template-hash]
{{- end -}}
{{- end -}}

{{/* A TOML key: bare when it may be, else a quoted string. */}}
{{- define "a2a.tomlKey" -}}
{{- if regexMatch "^[A-Za-z0-9_-]+$" . -}}{{ . }}{{- else -}}{{ toJson . }}{{- end -}}
{{- end -}}

{{/* A TOML value, on one line: a JSON scalar or array of scalars is TOML already; a map is an
     inline table, a list of maps an array of inline tables. null entries are left out. */}}
{{- define "a2a.tomlValue" -}}
{{- if kindIs "map" . -}}
{{- $items := list -}}
{{- range $k, $v := . -}}
{{- if not (kindIs "invalid" $v) -}}
{{- $items = append $items (printf "%s = %s" (include "a2a.tomlKey" $k) (include "a2a.tomlValue" $v)) -}}
{{- end -}}
{{- end -}}
{{- printf "{%s}" (join ", " $items) -}}
{{- else if kindIs "slice" . -}}
{{- $items := list -}}
{{- range . -}}
{{- $items = append $items (include "a2a.tomlValue" .) -}}
{{- end -}}
{{- printf "[%s]" (join ", " $items) -}}
{{- else if kindIs "invalid" . -}}
{{- fail "a null value cannot be rendered as TOML" -}}
{{- else -}}
{{- toJson . -}}
{{- end -}}
{{- end -}}

{{/* A top-level TOML table `name` from a map: `[name]` with one `key = value` line per entry. */}}
{{- define "a2a.tomlTable" -}}
{{- $name := index . 0 -}}
{{- $map := index . 1 }}

[{{ include "a2a.tomlKey" $name }}]
{{- range $k, $v := $map }}
{{- if not (kindIs "invalid" $v) }}
{{ include "a2a.tomlKey" $k }} = {{ include "a2a.tomlValue" $v }}
{{- end }}
{{- end }}
{{- end -}}

{{/* The gateway's TOML configuration (A2A_CONFIG); the environment wins over it. */}}
{{- define "a2a.gatewayToml" -}}
# Rendered by the a2a-gateway chart. Listen addresses, URLs and secrets come from the environment.
builtin_agents = {{ toJson .Values.config.builtinAgents }}
default_agent = {{ toJson .Values.config.defaultAgent }}
{{- /* Top-level scalars before any table. */}}
{{- range $k, $v := .Values.config.settings }}
{{- if not (or (kindIs "map" $v) (kindIs "invalid" $v) (and (kindIs "slice" $v) $v (kindIs "map" (first $v)))) }}
{{ include "a2a.tomlKey" $k }} = {{ include "a2a.tomlValue" $v }}
{{- end }}
{{- end }}
{{- with .Values.config.limits }}
{{- include "a2a.tomlTable" (list "limits" .) }}
{{- end }}
{{- range $k, $v := .Values.config.settings }}
{{- if kindIs "map" $v }}
{{- include "a2a.tomlTable" (list $k $v) }}
{{- else if and (kindIs "slice" $v) $v (kindIs "map" (first $v)) }}
{{- range $v }}

[[{{ include "a2a.tomlKey" $k }}]]
{{- range $ek, $ev := . }}
{{- if not (kindIs "invalid" $ev) }}
{{ include "a2a.tomlKey" $ek }} = {{ include "a2a.tomlValue" $ev }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
{{- with .Values.config.extra }}

{{ . }}
{{- end }}
{{- end -}}
