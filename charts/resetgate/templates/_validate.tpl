{{/*
Refuse to render a release that cannot work, with a message that says what to set.
Each check returns a message or nothing; resetgate.validateValues joins them and fails
once, so an operator sees every problem in one run. Included from configmap.yaml, which
every release renders.
*/}}

{{- define "resetgate.validate.secrets" -}}
{{- $s := .Values.secrets -}}
{{- if and (not $s.existingSecret) (not (and $s.providerApiKey $s.tokenKeys $s.internalApiToken)) -}}
resetgate: no secrets. Either set secrets.existingSecret to the name of a Secret holding the keys
{{ $s.keys.providerApiKey | quote }}, {{ $s.keys.tokenKeys | quote }} and {{ $s.keys.internalApiToken | quote }}, or set all of secrets.providerApiKey,
secrets.tokenKeys ("kid:secret,...") and secrets.internalApiToken so the chart creates that Secret.
{{- end -}}
{{- end -}}

{{- define "resetgate.validate.redis" -}}
{{- $r := .Values.redis -}}
{{- if and $r.sentinel.sentinels $r.cluster -}}
resetgate: redis.sentinel.sentinels and redis.cluster=true are both set. Sentinel fronts one primary
and its replicas; a Cluster fails over by itself. Pick the one your Redis runs.
{{- else if and $r.sentinel.sentinels .Values.devRedis.enabled -}}
resetgate: devRedis is a single standalone Redis without Sentinels; unset redis.sentinel.sentinels.
{{- else if and $r.sentinel.sentinels (ne .Values.provider.kind "http") (not (int .Values.durability.waitReplicas)) .Values.durability.keylessRequireReplicaWait -}}
resetgate: provider.kind={{ .Values.provider.kind }} has no idempotency key, and with Sentinel a failover to a replica that
missed an attempt could send an email twice, so the sender refuses durability.waitReplicas=0. Set
durability.waitReplicas=1, or durability.keylessRequireReplicaWait=false to accept that risk.
{{- else if and $r.sentinel.sentinels (not (or $r.url $r.existingSecret)) -}}
{{- /* Sentinel names the host; no URL means database 0, no password, no TLS. */ -}}
{{- else if not (or $r.url $r.existingSecret .Values.devRedis.enabled) -}}
resetgate: no Redis. Set redis.url (no password), or redis.existingSecret naming a Secret whose key
{{ $r.existingSecretKey | quote }} holds the URL, or devRedis.enabled=true for a throwaway in-release Redis (dev only).
{{- else if and $r.url (not $r.existingSecret) (not .Values.devRedis.enabled) -}}
{{- $u := urlParse $r.url -}}
{{- if not (has $u.scheme (list "redis" "rediss")) -}}
resetgate: redis.url must start with redis:// or rediss://, got scheme {{ $u.scheme | quote }}.
{{- else if contains ":" $u.userinfo -}}
resetgate: redis.url carries a password, which would land in a ConfigMap. Put the URL in a Secret
and set redis.existingSecret (and redis.existingSecretKey) instead.
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "resetgate.validate.devRedis" -}}
{{- if .Values.devRedis.enabled -}}
{{- if or .Values.redis.url .Values.redis.existingSecret -}}
resetgate: devRedis.enabled and redis.url/redis.existingSecret are both set. Pick one Redis: the
in-release dev Redis, or your own.
{{- else if .Values.redis.cluster -}}
resetgate: devRedis is a single standalone Redis; it cannot serve redis.cluster=true.
{{- else if gt (int .Values.durability.waitReplicas) 0 -}}
resetgate: devRedis has no replicas, so durability.waitReplicas={{ .Values.durability.waitReplicas }} would make every admission wait
its full timeout and still miss the target. Set durability.waitReplicas=0 with devRedis.
{{- else if and (ne .Values.provider.kind "http") .Values.durability.keylessRequireFsyncAlways (not (include "resetgate.devRedisFsyncAlways" .)) -}}
resetgate: provider.kind={{ .Values.provider.kind }} has no idempotency key, so the sender refuses a Redis without
appendonly yes and appendfsync always (a host crash could send an email twice), and devRedis.args say otherwise.
Put "--appendonly", "yes", "--appendfsync", "always" in devRedis.args, or set durability.keylessRequireFsyncAlways=false.
{{- end -}}
{{- end -}}
{{- end -}}

{{/* "true" when devRedis.args turn AOF on with appendfsync always (the last value wins). */}}
{{- define "resetgate.devRedisFsyncAlways" -}}
{{- $args := .Values.devRedis.args -}}
{{- $aof := "no" -}}{{- $fsync := "everysec" -}}
{{- range $i, $arg := $args -}}
{{- if and (eq $arg "--appendonly") (lt (add1 $i) (len $args)) -}}{{- $aof = index $args (add1 $i) -}}{{- end -}}
{{- if and (eq $arg "--appendfsync") (lt (add1 $i) (len $args)) -}}{{- $fsync = index $args (add1 $i) -}}{{- end -}}
{{- end -}}
{{- if and (eq $aof "yes") (eq $fsync "always") -}}true{{- end -}}
{{- end -}}

{{- define "resetgate.validate.provider" -}}
{{- $p := .Values.provider -}}
{{- $namedUrls := list -}}
{{- range $p.named }}{{ if .url }}{{ $namedUrls = append $namedUrls .url }}{{ end }}{{ end -}}
{{- if $p.named -}}
{{- /* provider.named replaces the single provider (resetgate.validate.namedProviders). */ -}}
{{- if and $namedUrls (not (and .Values.config.resetUrlBase .Values.config.emailFrom)) -}}
resetgate: provider.named sends real email, so set config.resetUrlBase (the link players click) and
config.emailFrom; the services' built-in placeholders must never reach a player.
{{- end -}}
{{- else if and (eq $p.kind "mailgun") (not $p.mailgunDomain) -}}
resetgate: provider.kind=mailgun needs provider.mailgunDomain (the sending domain, RESETGATE_MAILGUN_DOMAIN).
{{- else if and (eq $p.kind "ses") (not $p.awsRegion) -}}
resetgate: provider.kind=ses needs provider.awsRegion (AWS_REGION); credentials come from the AWS chain.
{{- else if and (ne $p.kind "ses") (not (include "resetgate.providerUrl" .)) -}}
resetgate: no email provider. Set provider.url, or sandbox.enabled=true to run the sandbox provider (never sends real email).
{{- else if and .Values.provider.url (not (and .Values.config.resetUrlBase .Values.config.emailFrom)) -}}
resetgate: provider.url sends real email, so set config.resetUrlBase (the link players click) and
config.emailFrom; the services' built-in placeholders must never reach a player.
{{- end -}}
{{- end -}}

{{- define "resetgate.validate.namedProviders" -}}
{{- $seen := dict -}}
{{- range $p := .Values.provider.named -}}
{{- if hasKey $seen $p.name -}}
resetgate: provider.named lists {{ $p.name }} twice; each name once.
{{ end -}}
{{- $_ := set $seen $p.name true -}}
{{- if and (eq $p.kind "mailgun") (not $p.mailgunDomain) -}}
resetgate: provider.named {{ $p.name }} (mailgun) needs mailgunDomain (RESETGATE_PROVIDER_{{ upper $p.name }}_MAILGUN_DOMAIN).
{{ end -}}
{{- if and (eq $p.kind "ses") (not $.Values.provider.awsRegion) -}}
resetgate: provider.named {{ $p.name }} (ses) needs provider.awsRegion (AWS_REGION).
{{ end -}}
{{- if and (ne $p.kind "ses") (not (include "resetgate.namedProviderUrl" (dict "root" $ "provider" $p))) -}}
resetgate: provider.named {{ $p.name }} has no url. Set it, or sandbox.enabled=true (never sends real email).
{{ end -}}
{{- if and (ne $p.kind "ses") (not $.Values.secrets.existingSecret) (not (get $.Values.secrets.namedProviderApiKeys $p.name)) -}}
resetgate: provider.named {{ $p.name }} has no API key: set secrets.namedProviderApiKeys.{{ $p.name }}, or put {{ include "resetgate.namedProviderKey" $p.name | quote }} in secrets.existingSecret.
{{ end -}}
{{- if and $p.failoverTo (or (eq $p.failoverTo $p.name) (not (has $p.failoverTo (splitList "," (include "resetgate.providerNames" $))))) -}}
resetgate: provider.named {{ $p.name }} fails over to {{ $p.failoverTo | quote }}: name another provider.named entry (RESETGATE_FAILOVER_{{ upper $p.name }}).
{{ end -}}
{{- end -}}
{{- end -}}

{{- define "resetgate.validate.email" -}}
{{- range $path := keys .Values.email.templates | sortAlpha -}}
{{- if or (contains "__" $path) (has ".." (splitList "/" $path)) -}}
resetgate: email.templates {{ $path | quote }}: a path may not hold ".." or "__" (a ConfigMap key writes "/" as "__").
{{ end -}}
{{- end -}}
{{- end -}}

{{- define "resetgate.validate.autoscaling" -}}
{{- if and .Values.keda.enabled .Values.sender.autoscaling.enabled -}}
resetgate: keda.enabled and sender.autoscaling.enabled both create a HorizontalPodAutoscaler for the
sender and would fight over its replicas. Pick one: keda (stream lag) or sender.autoscaling (CPU).
{{- else if and .Values.keda.enabled (not (include "resetgate.keda.address" .)) -}}
resetgate: keda.enabled needs a Redis address KEDA can reach. With redis.existingSecret the URL is
not visible to the chart: set keda.redis.address (host:port) and, if Redis needs a password,
keda.redis.authenticationRef.
{{- end -}}
{{- end -}}

{{/*
Stopping a pod: the preStop sleep runs first, then SIGTERM starts the service's shutdown
grace; Kubernetes kills whatever is left when terminationGracePeriodSeconds (counted from
the start of preStop) runs out, so work in flight would be cut instead of handed back.
*/}}
{{- define "resetgate.validate.grace" -}}
{{- $period := int .Values.terminationGracePeriodSeconds -}}
{{- range $component := splitList " " (include "resetgate.components" .) -}}
{{- $preStop := int (dig "preStopSleepSeconds" 0 (get $.Values $component)) -}}
{{- $needed := add $preStop (int $.Values.shutdownGraceSeconds) -}}
{{- if le $period $needed }}
resetgate: {{ $component }} needs {{ $preStop }} s preStop sleep + {{ $.Values.shutdownGraceSeconds }} s shutdownGraceSeconds = {{ $needed }} s, but
terminationGracePeriodSeconds is {{ $period }}: Kubernetes would kill it mid-shutdown. Raise terminationGracePeriodSeconds
above {{ $needed }} or lower the other two.
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "resetgate.validate.ingress" -}}
{{- if and .Values.ingress.enabled (not .Values.ingress.host) -}}
resetgate: ingress.enabled needs ingress.host, the name players' clients call.
{{- end -}}
{{- end -}}

{{- define "resetgate.validate.monitoring" -}}
{{- $m := .Values.metrics -}}
{{- $selector := $m.prometheusRule.selector -}}
{{- if and $selector (not (regexMatch "^namespace(=|!=|=~|!~)\"[^\"]*\"$" $selector)) -}}
resetgate: metrics.prometheusRule.selector must be one matcher on namespace (e.g. namespace="prod" or
namespace=~"prod|prod-eu"), got {{ $selector }}. The rules keep only namespace through their
aggregations, so a matcher on any other label would never match the recorded series and the
alerts built on them would stay silent.
{{- else if and (or $m.prometheusRule.enabled $m.dashboard.enabled) (not $m.runbookBaseUrl) -}}
resetgate: metrics.prometheusRule / metrics.dashboard link every alert to its runbook section, so set
metrics.runbookBaseUrl to the absolute URL of docs/runbook.md as responders open it
(e.g. https://git.example.com/team/resetgate/blob/main/docs/runbook.md).
{{- end -}}
{{- end -}}

{{- define "resetgate.validate.console" -}}
{{- $c := .Values.console -}}
{{- $api := int (include "resetgate.httpPort" .) -}}
{{- if and $c.enabled (has (int $c.port) (list $api (int .Values.metrics.port))) -}}
resetgate: console.port {{ $c.port }} is already admission's API ({{ $api }}) or metrics.port; give the
console a port of its own.
{{- else if and $c.enabled $c.proxy.userHeader (not $c.proxy.trustedProxies) -}}
resetgate: console.proxy.userHeader needs console.proxy.trustedProxies, the CIDRs your auth proxy's
pods connect from: no peer is trusted to assert an identity by default, loopback included.
{{- end -}}
{{- end -}}

{{- define "resetgate.validateValues" -}}
{{- $messages := list -}}
{{- range $check := list "secrets" "redis" "devRedis" "provider" "namedProviders" "autoscaling" "grace" "ingress" "monitoring" "console" "email" "archive" -}}
{{- $m := include (printf "resetgate.validate.%s" $check) $ | trim -}}
{{- if $m -}}{{- $messages = append $messages $m -}}{{- end -}}
{{- end -}}
{{- if $messages -}}
{{- printf "\nVALUES VALIDATION:\n%s" (join "\n\n" $messages) | fail -}}
{{- end -}}
{{- end -}}
