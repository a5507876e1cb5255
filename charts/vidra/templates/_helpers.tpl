{{/*
The release's full name: the prefix of every object's name. A release named
vidra (or vidra-something) keeps its name, so that the default install's
objects carry the names of the kustomize install (manifests/).
*/}}
{{- define "vidra.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 50 | trimSuffix "-" -}}
{{- else if contains "vidra" .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-vidra" .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* The labels the kustomize install sets, plus Helm's own. */}}
{{- define "vidra.labels" -}}
app.kubernetes.io/name: vidra
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "vidra.selectorLabels" -}}
app.kubernetes.io/name: vidra
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "vidra.serviceAccountName" -}}
{{- default (include "vidra.fullname" .) .Values.serviceAccount.name -}}
{{- end -}}

{{- define "vidra.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- end -}}
