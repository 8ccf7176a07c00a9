{{/*
Pushed delivery events (docs/providers.md, "Delivery events"): the poller's webhook
listener and its SES queue reader. The listener has its own port, Service, optional Ingress
and NetworkPolicy, never admission's.
*/}}
{{- define "resetgate.webhooks.name" -}}
{{- printf "%s-webhooks" (include "resetgate.componentName" (dict "root" .root "component" "poller") | trunc 54 | trimSuffix "-") -}}
{{- end -}}

{{/* The poller's env for pushed events; secrets come from webhooks.existingSecret. */}}
{{- define "resetgate.webhooks.env" -}}
{{- $w := .Values.webhooks -}}
{{- $q := .Values.sesEvents -}}
{{- if $w.enabled }}
- name: RESETGATE_WEBHOOK_PORT
  value: {{ $w.port | quote }}
- name: RESETGATE_WEBHOOK_MAX_BODY_BYTES
  value: {{ $w.maxBodyBytes | quote }}
- name: RESETGATE_WEBHOOK_MAX_AGE_SECONDS
  value: {{ $w.maxAgeSeconds | quote }}
- name: RESETGATE_SENDGRID_WEBHOOK_PUBLIC_KEY
  value: {{ $w.sendgridPublicKey | quote }}
- name: RESETGATE_POSTMARK_WEBHOOK_NETWORKS
  value: {{ $w.postmarkNetworks | quote }}
{{- with $w.existingSecret }}
{{- range $env, $key := dict "RESETGATE_MAILGUN_WEBHOOK_SIGNING_KEY" $w.secretKeys.mailgunSigningKey "RESETGATE_POSTMARK_WEBHOOK_USERNAME" $w.secretKeys.postmarkUsername "RESETGATE_POSTMARK_WEBHOOK_PASSWORD" $w.secretKeys.postmarkPassword }}
- name: {{ $env }}
  valueFrom:
    secretKeyRef:
      name: {{ $.Values.webhooks.existingSecret }}
      key: {{ $key }}
      optional: true
{{- end }}
{{- end }}
{{- include "resetgate.webhooks.namedEnv" . }}
{{- end }}
{{- range $p := .Values.provider.named }}
{{- if and (eq $p.kind "ses") $p.sesQueueUrl }}
- name: RESETGATE_PROVIDER_{{ upper $p.name }}_SES_QUEUE_URL
  value: {{ $p.sesQueueUrl | quote }}
- name: RESETGATE_PROVIDER_{{ upper $p.name }}_SES_DEAD_LETTER_QUEUE_URL
  value: {{ $p.sesDeadLetterQueueUrl | default "" | quote }}
{{- end }}
{{- end }}
{{- if $q.queueUrl }}
- name: RESETGATE_SES_QUEUE_URL
  value: {{ $q.queueUrl | quote }}
- name: RESETGATE_SES_DEAD_LETTER_QUEUE_URL
  value: {{ $q.deadLetterQueueUrl | quote }}
- name: RESETGATE_SES_WAIT_SECONDS
  value: {{ $q.waitSeconds | quote }}
- name: RESETGATE_AWS_REGION
  value: {{ $q.region | quote }}
{{- end }}
{{- end -}}

{{/* Each provider.named entry of a webhook kind: its own path /webhooks/<name> and its own
credential as RESETGATE_PROVIDER_<NAME>_* (services/poller/inbound/sources.py). SendGrid's
verification key is the entry's sendgridPublicKey; Mailgun's and Postmark's secrets are
webhooks.existingSecret's keys provider-<name>-mailgun-webhook-signing-key,
provider-<name>-postmark-webhook-username and -password. */}}
{{- define "resetgate.webhooks.namedEnv" -}}
{{- $w := .Values.webhooks -}}
{{- range $p := .Values.provider.named }}
{{- $infix := printf "RESETGATE_PROVIDER_%s_" (upper $p.name) }}
{{- if and (eq $p.kind "sendgrid") $p.sendgridPublicKey }}
- name: {{ $infix }}SENDGRID_WEBHOOK_PUBLIC_KEY
  value: {{ $p.sendgridPublicKey | quote }}
{{- end }}
{{- if eq $p.kind "postmark" }}
- name: {{ $infix }}POSTMARK_WEBHOOK_NETWORKS
  value: {{ $w.postmarkNetworks | quote }}
{{- end }}
{{- if and $w.existingSecret (has $p.kind (list "mailgun" "postmark")) }}
{{- $secrets := dict "MAILGUN_WEBHOOK_SIGNING_KEY" "mailgun-webhook-signing-key" }}
{{- if eq $p.kind "postmark" }}
{{- $secrets = dict "POSTMARK_WEBHOOK_USERNAME" "postmark-webhook-username" "POSTMARK_WEBHOOK_PASSWORD" "postmark-webhook-password" }}
{{- end }}
{{- range $suffix, $key := $secrets }}
- name: {{ $infix }}{{ $suffix }}
  valueFrom:
    secretKeyRef:
      name: {{ $w.existingSecret }}
      key: provider-{{ $p.name }}-{{ $key }}
      optional: true
{{- end }}
{{- end }}
{{- end }}
{{- end -}}
