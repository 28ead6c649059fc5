{{- define "dedup.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* app.kubernetes.io/name stays the chart's name: the PodMonitor's jobLabel
turns it into job="dedup", which the alert rules select. */}}
{{- define "dedup.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "dedup.labels" -}}
{{ include "dedup.selectorLabels" . }}
app.kubernetes.io/component: stream-processor
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "dedup.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "dedup.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}
