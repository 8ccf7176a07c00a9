{{/*
The support console (docs/console.md): admission serves it on its own listener when
RESETGATE_CONSOLE_PORT is set. It gets its own ClusterIP Service (never admission's, whose
type may be LoadBalancer) and its own NetworkPolicy rule; the public Ingress never routes it.
*/}}
{{- define "resetgate.console.name" -}}
{{- printf "%s-console" (include "resetgate.componentName" (dict "root" .root "component" "admission") | trunc 55 | trimSuffix "-") -}}
{{- end -}}

{{/* Admission's console env, named as ConsoleSettings (services/admission/settings.py) reads them;
a null or empty value is left out so the service keeps its own default. */}}
{{- define "resetgate.console.env" -}}
{{- $c := .Values.console -}}
{{- if $c.enabled }}
{{- $settings := dict
  "RESETGATE_CONSOLE_PORT" $c.port
  "RESETGATE_CONSOLE_HOST" "0.0.0.0"
  "RESETGATE_CONSOLE_SESSION_SECONDS" $c.sessionSeconds
  "RESETGATE_CONSOLE_TOKEN_ROLE" $c.tokenRole
  "RESETGATE_CONSOLE_PROXY_USER_HEADER" $c.proxy.userHeader
  "RESETGATE_CONSOLE_PROXY_GROUPS_HEADER" $c.proxy.groupsHeader
  "RESETGATE_CONSOLE_TRUSTED_PROXIES" (join "," $c.proxy.trustedProxies)
  "RESETGATE_CONSOLE_ACT_GROUPS" (join "," $c.actGroups)
  "RESETGATE_CONSOLE_ACT_USERS" (join "," $c.actUsers)
  "RESETGATE_CONSOLE_READ_GROUPS" (join "," $c.readGroups)
  "RESETGATE_CONSOLE_SIGN_IN_BURST" $c.signIn.burst
  "RESETGATE_CONSOLE_SIGN_IN_PER_MINUTE" $c.signIn.perMinute
}}
{{- range $name := keys $settings | sortAlpha }}
{{- $value := get $settings $name }}
{{- if not (or (kindIs "invalid" $value) (eq (toString $value) "")) }}
- name: {{ $name }}
  value: {{ $value | toString | quote }}
{{- end }}
{{- end }}
{{- end }}
{{- end -}}
