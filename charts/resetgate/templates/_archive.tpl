{{/*
The PostgreSQL evidence archive (docs/archive.md). Its libpq URL carries a password, so it
only ever reaches a pod through a secretKeyRef: from archive.dsn.existingSecret, or from the
Secret the chart makes of archive.dsn.value. Only the archiver, admission (its reads fall
back to the archive) and the migration Job get it.
*/}}

{{/* The Secret holding the DSN: the operator's, or "<fullname>-archive". */}}
{{- define "resetgate.archive.secretName" -}}
{{- if .Values.archive.dsn.existingSecret -}}
{{- .Values.archive.dsn.existingSecret -}}
{{- else -}}
{{- printf "%s-archive" (include "resetgate.fullname" . | trunc 55 | trimSuffix "-") -}}
{{- end -}}
{{- end -}}

{{/* The key of that Secret holding the DSN. */}}
{{- define "resetgate.archive.secretKey" -}}
{{- ternary .Values.archive.dsn.existingSecretKey "dsn" (ne .Values.archive.dsn.existingSecret "") -}}
{{- end -}}

{{/* RESETGATE_ARCHIVE_DSN as an env entry, from the Secret. */}}
{{- define "resetgate.archive.dsnEnv" }}
- name: RESETGATE_ARCHIVE_DSN
  valueFrom:
    secretKeyRef:
      name: {{ include "resetgate.archive.secretName" . }}
      key: {{ include "resetgate.archive.secretKey" . }}
{{- end -}}

{{- define "resetgate.validate.archive" -}}
{{- $a := .Values.archive -}}
{{- if $a.enabled -}}
{{- if not (or $a.dsn.existingSecret $a.dsn.value) -}}
resetgate: archive.enabled needs the archive's PostgreSQL URL. Set archive.dsn.existingSecret to a Secret
whose key {{ $a.dsn.existingSecretKey | quote }} (archive.dsn.existingSecretKey) holds it
(postgresql://user:password@host:5432/db), or archive.dsn.value for a Secret the chart creates.
{{- else if and $a.dsn.existingSecret $a.dsn.value -}}
resetgate: archive.dsn.existingSecret and archive.dsn.value are both set; pick one (the value would be ignored).
{{- else if and $a.dsn.value (not (has (urlParse $a.dsn.value).scheme (list "postgresql" "postgres"))) -}}
resetgate: archive.dsn.value must be a libpq URL starting with postgresql:// or postgres://.
{{- end -}}
{{- end -}}
{{- end -}}
