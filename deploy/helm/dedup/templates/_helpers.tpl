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

{{/* "true" when repartition.hops is split: the hops of REPARTITION_TOPIC
as two Deployments (REPARTITION_HOPS rekey and dedup); "" for one. */}}
{{- define "dedup.split" -}}
{{- $hops := .Values.repartition.hops | default "both" -}}
{{- if not (has $hops (list "both" "split")) -}}
{{- fail (printf "repartition.hops must be both or split, got %q" $hops) -}}
{{- end -}}
{{- if eq $hops "split" -}}
{{- $_ := required "repartition.hops split needs config.REPARTITION_TOPIC (the hops exist only with a repartition topic)" .Values.config.REPARTITION_TOPIC -}}
{{- if .Values.config.REPARTITION_HOPS -}}
{{- fail "config.REPARTITION_HOPS is set per Deployment with repartition.hops split: remove it from config" -}}
{{- end -}}
true
{{- end -}}
{{- end -}}

{{/* The selector labels of one role's pods (dict root, role; role "" for
the single Deployment). */}}
{{- define "dedup.roleSelectorLabels" -}}
{{ include "dedup.selectorLabels" .root }}
{{- if .role }}
dedup/hops: {{ .role }}
{{- end }}
{{- end -}}

{{/* The variables only hop 2 reads: the rekey pods' ConfigMap leaves them
out (deploy/k8scheck's Hop2Only holds the rendering to it). */}}
{{- define "dedup.hop2Only" -}}
{{- list "OUTPUT_TOPIC" "DEAD_LETTER_TOPIC" "DEDUP_MODE" "DEDUP_WINDOW" "DEDUP_EXPECTED_KEYS" "DEDUP_FP_RATE" "DEDUP_RETRACT_HEADER" "DEDUP_MAX_CLOCK_SKEW" "FETCH_BUFFER_BYTES" "CHECKPOINT_STORE" "CHECKPOINT_TOPIC" "CHECKPOINT_DIR" "CHECKPOINT_INTERVAL" "CHECKPOINT_CHAIN_RATIO" "CHECKPOINT_KEEP" "CHECKPOINT_ON_DAMAGE" | toJson -}}
{{- end -}}
