{{- define "stamen.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "stamen.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "stamen.labels" -}}
app.kubernetes.io/name: {{ include "stamen.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "stamen.selectorLabels" -}}
app.kubernetes.io/name: {{ include "stamen.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* The URL prefix as a path: "/flower", or "" without one. */}}
{{- define "stamen.prefix" -}}
{{- $p := trimAll "/" .Values.urlPrefix -}}
{{- if $p }}/{{ $p }}{{ end -}}
{{- end -}}

{{/* What the chart refuses to render. */}}
{{- define "stamen.validate" -}}
{{- if not .Values.broker.existingSecret -}}
{{- fail "broker.existingSecret is required: a Secret holding the broker URL (key broker.key)" -}}
{{- end -}}
{{- if and (gt (int .Values.replicaCount) 1) (not .Values.database.existingSecret) -}}
{{- fail "database.existingSecret is required with replicaCount > 1: a Secret holding a postgres:// URL, the history the replicas share" -}}
{{- end -}}
{{- if and (gt (int .Values.replicaCount) 1) .Values.persistence.enabled -}}
{{- fail "persistence (the bbolt store) is for one replica; a fleet shares PostgreSQL (database.existingSecret)" -}}
{{- end -}}
{{- if not (or .Values.auth.existingSecret .Values.auth.unauthenticated) -}}
{{- fail "auth.existingSecret is required (Flower's --basic_auth or an --auth_token from a Secret), or set auth.unauthenticated=true to serve the API without credentials" -}}
{{- end -}}
{{- end -}}
