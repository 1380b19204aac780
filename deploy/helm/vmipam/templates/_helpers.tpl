{{/* The base name of every object: fullnameOverride, else the release name when it contains
"vmipam", else <release>-vmipam. Cluster-scoped objects carry it too, so two releases never
share one. */}}
{{- define "vmipam.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" -}}
{{- else if contains "vmipam" .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-vmipam" .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "vmipam.selectorLabels" -}}
app.kubernetes.io/name: vmipam
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "vmipam.labels" -}}
{{ include "vmipam.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "vmipam.serviceAccountName" -}}{{ include "vmipam.fullname" . }}{{- end -}}
{{- define "vmipam.webhookService" -}}{{ include "vmipam.fullname" . }}-webhook{{- end -}}
{{- define "vmipam.apiService" -}}{{ include "vmipam.fullname" . }}-api{{- end -}}
{{- define "vmipam.metricsService" -}}{{ include "vmipam.fullname" . }}-metrics{{- end -}}
{{- define "vmipam.certSecret" -}}{{ include "vmipam.fullname" . }}-serving-cert{{- end -}}
{{- define "vmipam.webhookConfiguration" -}}{{ include "vmipam.fullname" . }}-clusteripampolicy{{- end -}}
{{- define "vmipam.apiServiceName" -}}v1alpha1.dryrun.ipam.virtualization.deckhouse.io{{- end -}}
{{- define "vmipam.certificate" -}}{{ include "vmipam.fullname" . }}-serving{{- end -}}

{{/* The DNS names the serving certificate must carry: the webhook's and the API's Service. */}}
{{- define "vmipam.dnsNames" -}}
{{ include "vmipam.webhookService" . }}.{{ .Release.Namespace }}.svc,{{ include "vmipam.apiService" . }}.{{ .Release.Namespace }}.svc
{{- end -}}

{{- define "vmipam.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}
{{- end -}}

{{/* cert-manager's CA injection annotation, in cert-manager mode. */}}
{{- define "vmipam.injectCA" -}}
{{- if eq .Values.certificates.mode "cert-manager" }}
cert-manager.io/inject-ca-from: {{ .Release.Namespace }}/{{ include "vmipam.certificate" . }}
{{- end -}}
{{- end -}}

{{/* The usernames of the record consumers' ServiceAccounts (records.consumers), as a CEL list
of string literals for the records admission policy. */}}
{{- define "vmipam.recordConsumers" -}}
{{- $names := list -}}
{{- range .Values.records.consumers -}}
{{- $names = append $names (printf "system:serviceaccount:%s:%s" .namespace .name | quote) -}}
{{- end -}}
[{{ join ", " $names }}]
{{- end -}}
