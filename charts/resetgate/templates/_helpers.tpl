{{/*
Names, labels and the small lookups every template shares. Kubernetes names and label
values stop at 63 characters, so every generated name is cut there (and a trailing "-"
left by the cut is dropped).
*/}}

{{/* The port every HTTP service (admission's API, the sandbox) listens on in its pod. */}}
{{- define "resetgate.httpPort" -}}8080{{- end -}}

{{/* Chart name, overridable. */}}
{{- define "resetgate.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
Release-wide prefix. A release already named after the chart is not repeated
("resetgate", not "resetgate-resetgate").
*/}}
{{- define "resetgate.fullname" -}}
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

{{/*
Name of one component's resources: "<fullname>-<component>". The prefix is cut first so
the component suffix always survives: two components can never collide on a long name.
Call with (dict "root" $ "component" "sender").
*/}}
{{- define "resetgate.componentName" -}}
{{- $room := sub 62 (len .component) | int -}}
{{- $prefix := include "resetgate.fullname" .root | trunc $room | trimSuffix "-" -}}
{{- printf "%s-%s" $prefix .component -}}
{{- end -}}

{{- define "resetgate.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Selector labels: stable for the life of a release (selectors are immutable). */}}
{{- define "resetgate.selectorLabels" -}}
app.kubernetes.io/name: {{ include "resetgate.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* Labels on every resource. */}}
{{- define "resetgate.labels" -}}
helm.sh/chart: {{ include "resetgate.chart" . }}
{{ include "resetgate.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: resetgate
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* Selector labels of one component. Call with (dict "root" $ "component" NAME). */}}
{{- define "resetgate.componentSelectorLabels" -}}
{{ include "resetgate.selectorLabels" .root }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/* Labels of one component's resources. Call with (dict "root" $ "component" NAME). */}}
{{- define "resetgate.componentLabels" -}}
{{ include "resetgate.labels" .root }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/*
Object metadata: name, namespace, labels and annotations. Call with (dict "root" $) for
release-wide objects or (dict "root" $ "component" NAME) for one component's. Optional
keys: "name" replaces the name, "labels" and "annotations" add to the common ones.
*/}}
{{- define "resetgate.metadata" -}}
{{- $root := .root -}}
{{- if .name -}}
name: {{ .name }}
{{- else if .component -}}
name: {{ include "resetgate.componentName" . }}
{{- else -}}
name: {{ include "resetgate.fullname" $root }}
{{- end }}
namespace: {{ $root.Release.Namespace }}
labels:
{{- if .component }}
  {{- include "resetgate.componentLabels" . | nindent 2 }}
{{- else }}
  {{- include "resetgate.labels" $root | nindent 2 }}
{{- end }}
{{- with .labels }}
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- $annotations := merge (dict) (default (dict) .annotations) $root.Values.commonAnnotations }}
{{- with $annotations }}
annotations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* The four services of the gateway; the sandbox and dev Redis are extras. */}}
{{- define "resetgate.coreComponents" -}}
admission sender poller router
{{- end -}}

{{/* The services that talk to Redis and are scraped: the four, and the archiver when the
archive is on. */}}
{{- define "resetgate.serviceComponents" -}}
{{- include "resetgate.coreComponents" . }}{{ if .Values.archive.enabled }} archiver{{ end }}
{{- end -}}

{{/* Components that get a Deployment, Service, NetworkPolicy ... in this release. */}}
{{- define "resetgate.components" -}}
{{- include "resetgate.serviceComponents" . }}{{ if .Values.sandbox.enabled }} sandbox{{ end }}
{{- end -}}

{{/*
Image reference: a digest pins it (repository:tag@digest keeps the tag readable, as skaffold
passes it; the runtime pulls by digest); otherwise the tag, defaulting to appVersion.
*/}}
{{- define "resetgate.image" -}}
{{- if and .Values.image.digest .Values.image.tag -}}
{{- printf "%s:%s@%s" .Values.image.repository .Values.image.tag .Values.image.digest -}}
{{- else if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- end -}}

{{- define "resetgate.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "resetgate.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* Secret holding the provider key, token keys and internal API token. */}}
{{- define "resetgate.secretName" -}}
{{- default (include "resetgate.fullname" .) .Values.secrets.existingSecret -}}
{{- end -}}

{{/* Provider base URL: explicit, or the in-chart sandbox (which does not speak SES: SES
without a URL uses the region's endpoint). */}}
{{- define "resetgate.providerUrl" -}}
{{- if .Values.provider.url -}}
{{- .Values.provider.url -}}
{{- else if and .Values.sandbox.enabled (ne .Values.provider.kind "ses") -}}
{{- printf "http://%s:%d" (include "resetgate.componentName" (dict "root" . "component" "sandbox")) (int .Values.sandbox.service.port) -}}
{{- end -}}
{{- end -}}

{{/* provider.named as RESETGATE_PROVIDERS: the names in order, comma-separated. */}}
{{- define "resetgate.providerNames" -}}
{{- $names := list -}}
{{- range .Values.provider.named }}{{ $names = append $names .name }}{{ end -}}
{{- join "," $names -}}
{{- end -}}

{{/* One named provider's URL: its own, or the in-chart sandbox (never for SES). */}}
{{- define "resetgate.namedProviderUrl" -}}
{{- $root := .root -}}
{{- if .provider.url -}}
{{- .provider.url -}}
{{- else if and $root.Values.sandbox.enabled (ne .provider.kind "ses") -}}
{{- printf "http://%s:%d" (include "resetgate.componentName" (dict "root" $root "component" "sandbox")) (int $root.Values.sandbox.service.port) -}}
{{- end -}}
{{- end -}}

{{/* The Secret's key holding a named provider's API key. */}}
{{- define "resetgate.namedProviderKey" -}}
{{- printf "provider-%s-api-key" . -}}
{{- end -}}

{{/* Redis URL when it is not secret: the dev Redis, else redis.url. */}}
{{- define "resetgate.redisUrl" -}}
{{- if .Values.devRedis.enabled -}}
{{- printf "redis://%s:6379/0" (include "resetgate.componentName" (dict "root" . "component" "redis")) -}}
{{- else -}}
{{- .Values.redis.url -}}
{{- end -}}
{{- end -}}

{{/*
Which secret each component gets, as env name -> key in the Secret. Least privilege: a
service sees only the secrets it uses. Admission checks tokens and guards the internal
API; the sender derives tokens and calls the provider; the poller calls the provider; the
router creates operations through the admission logic, which keys the recipient digest
with the token keys; the sandbox accepts the provider key.
*/}}
{{- define "resetgate.componentSecrets" -}}
{{- $k := .root.Values.secrets.keys -}}
{{- $map := dict
  "admission" (dict "RESETGATE_TOKEN_KEYS" $k.tokenKeys "RESETGATE_INTERNAL_API_TOKEN" $k.internalApiToken)
  "sender" (dict "RESETGATE_PROVIDER_API_KEY" $k.providerApiKey "RESETGATE_TOKEN_KEYS" $k.tokenKeys)
  "poller" (dict "RESETGATE_PROVIDER_API_KEY" $k.providerApiKey)
  "router" (dict "RESETGATE_TOKEN_KEYS" $k.tokenKeys)
  "sandbox" (dict "RESETGATE_SANDBOX_API_KEY" $k.providerApiKey)
  "archiver" (dict)
-}}
{{- /* The sender and the poller call every named provider (SES has no key: the AWS chain). */}}
{{- range $p := .root.Values.provider.named }}
{{- if ne $p.kind "ses" }}
{{- $env := printf "RESETGATE_PROVIDER_%s_API_KEY" (upper $p.name) }}
{{- $key := include "resetgate.namedProviderKey" $p.name }}
{{- $_ := set (get $map "sender") $env $key }}
{{- $_ := set (get $map "poller") $env $key }}
{{- end }}
{{- end }}
{{- toYaml (get $map .component) -}}
{{- end -}}

{{/* Pod-level env of one component: secrets, the Redis URL when secret, extraEnv. */}}
{{- define "resetgate.componentEnv" -}}
{{- $root := .root -}}
{{- $secrets := include "resetgate.componentSecrets" . | fromYaml -}}
{{- range $env := keys $secrets | sortAlpha }}
- name: {{ $env }}
  valueFrom:
    secretKeyRef:
      name: {{ include "resetgate.secretName" $root }}
      key: {{ get $secrets $env }}
{{- end }}
{{- if and (ne .component "sandbox") $root.Values.redis.existingSecret (not $root.Values.devRedis.enabled) }}
- name: RESETGATE_REDIS_URL
  valueFrom:
    secretKeyRef:
      name: {{ $root.Values.redis.existingSecret }}
      key: {{ $root.Values.redis.existingSecretKey }}
{{- end }}
{{- with $root.Values.redis.sentinel }}
{{- if and (ne $.component "sandbox") .sentinels .existingSecret }}
- name: RESETGATE_REDIS_SENTINEL_PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ .existingSecret }}
      key: {{ .existingSecretKey }}
{{- end }}
{{- end }}
{{- if eq .component "sandbox" }}
{{- /* The sandbox has its own settings (RESETGATE_SANDBOX_*) and binds loopback by default. */}}
- name: RESETGATE_SANDBOX_HOST
  value: "0.0.0.0"
- name: RESETGATE_SANDBOX_PORT
  value: {{ include "resetgate.httpPort" $root | quote }}
- name: RESETGATE_SANDBOX_LOG_LEVEL
  value: {{ $root.Values.config.logLevel | quote }}
- name: RESETGATE_SANDBOX_IDEMPOTENCY_WINDOW_SECONDS
  value: {{ $root.Values.provider.idempotencyWindowSeconds | quote }}
{{- /* The sandbox answers as the configured provider documents (SES has moto instead). */}}
- name: RESETGATE_SANDBOX_MODE
  value: {{ ternary "http" $root.Values.provider.kind (eq $root.Values.provider.kind "ses") | quote }}
{{- end }}
{{- if eq .component "poller" }}
{{- include "resetgate.webhooks.env" $root }}
{{- end }}
{{- if eq .component "admission" }}
{{- include "resetgate.console.env" $root }}
{{- end }}
{{- if and $root.Values.archive.enabled (has .component (list "admission" "archiver")) }}
{{- include "resetgate.archive.dsnEnv" $root }}
{{- end }}
{{- with (get $root.Values .component).extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/*
host:port of the Redis the services use, when the chart can see its URL (empty when it sits
in redis.existingSecret). redis-py's default port is 6379 for redis:// and rediss:// alike.
*/}}
{{- define "resetgate.redisHostPort" -}}
{{- if or .Values.devRedis.enabled (and .Values.redis.url (not .Values.redis.existingSecret)) -}}
{{- $host := (urlParse (include "resetgate.redisUrl" .)).host -}}
{{- if regexMatch ":[0-9]+$" $host }}{{ $host }}{{ else }}{{ printf "%s:6379" $host }}{{ end -}}
{{- end -}}
{{- end -}}

{{/* Redis TCP ports for the NetworkPolicy, as a JSON list: the values, else the URL's port
(and with Sentinel, every Sentinel's port). */}}
{{- define "resetgate.redisPorts" -}}
{{- if .Values.networkPolicy.redis.ports -}}
{{- toJson .Values.networkPolicy.redis.ports -}}
{{- else if .Values.redis.sentinel.sentinels -}}
{{- /* Sentinel: each Sentinel's port, and the data nodes' (the URL's port, else 6379). */ -}}
{{- $ports := list (last (splitList ":" (default "redis:6379" (include "resetgate.redisHostPort" .))) | int) -}}
{{- range .Values.redis.sentinel.sentinels }}{{ $ports = append $ports (last (splitList ":" .) | int) }}{{ end -}}
{{- $ports | uniq | toJson -}}
{{- else -}}
{{- $hostPort := default "redis:6379" (include "resetgate.redisHostPort" .) -}}
{{- list (last (splitList ":" $hostPort) | int) | toJson -}}
{{- end -}}
{{- end -}}

{{/*
host:port KEDA dials. KEDA takes no URL, so it is derived from the Redis the services
use (when the chart can see it) unless keda.redis.address says otherwise.
*/}}
{{- define "resetgate.keda.address" -}}
{{- default (include "resetgate.redisHostPort" .) .Values.keda.redis.address -}}
{{- end -}}

{{/*
X-Forwarded-For hops admission trusts: config.trustedProxyHops when set, else the Ingress's
when the chart renders one, else nothing (the service default: trust only the TCP peer).
*/}}
{{- define "resetgate.trustedProxyHops" -}}
{{- if not (kindIs "invalid" .Values.config.trustedProxyHops) -}}
{{- .Values.config.trustedProxyHops -}}
{{- else if .Values.ingress.enabled -}}
{{- .Values.ingress.proxyHops -}}
{{- end -}}
{{- end -}}

{{/* Where the senders find email.templates (RESETGATE_TEMPLATES_DIR). */}}
{{- define "resetgate.templatesDir" -}}
/etc/resetgate/templates
{{- end -}}

{{/* A template's path as a ConfigMap key: "brands/x/en/subject.txt" -> "brands__x__en__subject.txt". */}}
{{- define "resetgate.templateKey" -}}
{{- replace "/" "__" . -}}
{{- end -}}

{{/* The ConfigMap holding email.templates. */}}
{{- define "resetgate.templatesConfigMap" -}}
{{- printf "%s-email-templates" (include "resetgate.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}
