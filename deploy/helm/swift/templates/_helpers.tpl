{{/* The chart's labels. */}}
{{- define "swift.labels" -}}
app.kubernetes.io/name: swift
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end }}

{{/* The agent's selector labels. */}}
{{- define "swift.agentSelector" -}}
app.kubernetes.io/name: swift
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: node-agent
{{- end }}

{{/* The installer's selector labels. */}}
{{- define "swift.installerSelector" -}}
app.kubernetes.io/name: swift
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: installer
{{- end }}

{{/* The image. */}}
{{- define "swift.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}
