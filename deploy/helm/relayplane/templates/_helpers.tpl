{{/* The four apps, in the order they are rendered. */}}
{{- define "relayplane.components" -}}
gateway issuer admin billing
{{- end -}}

{{- define "relayplane.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Resource name prefix; component suffixes (e.g. -gateway, -migrate) must still fit in 63. */}}
{{- define "relayplane.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "relayplane.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Labels that never change for a release: the only ones selectors use. */}}
{{- define "relayplane.selectorLabels" -}}
app.kubernetes.io/name: {{ include "relayplane.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/* Labels for every object. Call with (dict "root" $ "component" "gateway"). */}}
{{- define "relayplane.labels" -}}
{{ include "relayplane.selectorLabels" . }}
app.kubernetes.io/part-of: relayplane
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
helm.sh/chart: {{ include "relayplane.chart" .root }}
{{- with .root.Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "relayplane.componentName" -}}
{{- printf "%s-%s" (include "relayplane.fullname" .root) .component -}}
{{- end -}}

{{- define "relayplane.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "relayplane.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/*
One image per app: <image.repository>/<component>:<tag or appVersion>[@digest].
Call with (dict "root" $ "component" "issuer").
*/}}
{{- define "relayplane.image" -}}
{{- $image := .root.Values.image -}}
{{- $tag := default .root.Chart.AppVersion $image.tag -}}
{{- $ref := printf "%s/%s:%s" (trimSuffix "/" $image.repository) .component $tag -}}
{{- $digest := index (default dict $image.digests) .component -}}
{{- if $digest -}}
{{- printf "%s@%s" $ref $digest -}}
{{- else -}}
{{- $ref -}}
{{- end -}}
{{- end -}}

{{/* Secret names: the chart's own unless an existingSecret is given. */}}
{{- define "relayplane.secretName" -}}
{{- include "relayplane.fullname" . -}}
{{- end -}}
{{- define "relayplane.databaseSecretName" -}}
{{- default (include "relayplane.secretName" .) .Values.database.existingSecret -}}
{{- end -}}
{{- define "relayplane.databaseSecretKey" -}}
{{- if .root.Values.database.existingSecret -}}
{{- index .root.Values.database.existingSecretKeys .component -}}
{{- else -}}
database-url
{{- end -}}
{{- end -}}
{{- define "relayplane.redisSecretName" -}}
{{- default (include "relayplane.secretName" .) .Values.redis.existingSecret -}}
{{- end -}}
{{- define "relayplane.redisSecretKey" -}}
{{- ternary .Values.redis.existingSecretKey "redis-url" (ne .Values.redis.existingSecret "") -}}
{{- end -}}
{{- define "relayplane.kekSecretName" -}}
{{- default (include "relayplane.secretName" .) .Values.kek.existingSecret -}}
{{- end -}}
{{- define "relayplane.kekSecretKey" -}}
{{- ternary .Values.kek.existingSecretKey "kek" (ne .Values.kek.existingSecret "") -}}
{{- end -}}
{{- define "relayplane.bootstrapSecretName" -}}
{{- default (include "relayplane.secretName" .) .Values.admin.bootstrap.existingSecret -}}
{{- end -}}
{{- define "relayplane.bootstrapSecretKey" -}}
{{- ternary .Values.admin.bootstrap.existingSecretKey "bootstrap-password" (ne .Values.admin.bootstrap.existingSecret "") -}}
{{- end -}}

{{- define "relayplane.stripeSecretName" -}}
{{- default (include "relayplane.secretName" .) .Values.billing.stripe.existingSecret -}}
{{- end -}}
{{/* Key of one Stripe secret. Call with (dict "root" $ "key" "secretKey"|"webhookSecret"). */}}
{{- define "relayplane.stripeSecretKey" -}}
{{- if .root.Values.billing.stripe.existingSecret -}}
{{- index .root.Values.billing.stripe.existingSecretKeys .key -}}
{{- else -}}
{{- index (dict "secretKey" "stripe-secret-key" "webhookSecret" "stripe-webhook-secret") .key -}}
{{- end -}}
{{- end -}}
{{/* "true" when billing uses Stripe and takes its secrets from values (the chart's Secret). */}}
{{- define "relayplane.stripeInline" -}}
{{- $b := .Values.billing -}}
{{- if and (eq $b.provider "stripe") (not $b.stripe.existingSecret) -}}
true
{{- end -}}
{{- end -}}

{{/* True when the chart has secret material of its own to store. */}}
{{- define "relayplane.chartSecretNeeded" -}}
{{- $v := .Values -}}
{{- $stripe := and (include "relayplane.stripeInline" .) (or $v.billing.stripe.secretKey $v.billing.stripe.webhookSecret) -}}
{{- if or (and $v.database.url (not $v.database.existingSecret)) (and $v.redis.url (not $v.redis.existingSecret)) $v.redis.clusterNodes (and $v.kek.value (not $v.kek.existingSecret)) (and $v.admin.bootstrap.password (not $v.admin.bootstrap.existingSecret)) $stripe -}}
true
{{- end -}}
{{- end -}}

{{/* Secret data shared by the release Secret and the migration hook's copy. */}}
{{- define "relayplane.secretData" -}}
{{- $v := .Values -}}
{{- if and $v.database.url (not $v.database.existingSecret) }}
database-url: {{ $v.database.url | b64enc | quote }}
{{- end }}
{{- if and $v.redis.url (not $v.redis.existingSecret) }}
redis-url: {{ $v.redis.url | b64enc | quote }}
{{- end }}
{{- with $v.redis.clusterNodes }}
redis-cluster-nodes: {{ . | b64enc | quote }}
{{- end }}
{{- if and $v.kek.value (not $v.kek.existingSecret) }}
kek: {{ $v.kek.value | b64enc | quote }}
{{- if $v.kek.previous }}
kek-previous: {{ $v.kek.previous | b64enc | quote }}
{{- end }}
{{- end }}
{{- if and $v.admin.bootstrap.password (not $v.admin.bootstrap.existingSecret) }}
bootstrap-password: {{ $v.admin.bootstrap.password | b64enc | quote }}
{{- end }}
{{- if include "relayplane.stripeInline" . }}
{{- with $v.billing.stripe.secretKey }}
stripe-secret-key: {{ . | b64enc | quote }}
{{- end }}
{{- with $v.billing.stripe.webhookSecret }}
stripe-webhook-secret: {{ . | b64enc | quote }}
{{- end }}
{{- end }}
{{- end -}}

{{/* Effective minimum replicas (HPA minimum when autoscaling). */}}
{{- define "relayplane.minReplicas" -}}
{{- if .autoscaling.enabled -}}
{{- .autoscaling.minReplicas -}}
{{- else -}}
{{- .replicaCount -}}
{{- end -}}
{{- end -}}

{{/* "true" when the component gets a PodDisruptionBudget: enabled and replicas > 1 or an HPA. */}}
{{- define "relayplane.pdbRendered" -}}
{{- if and .pdb.enabled (or .autoscaling.enabled (gt (int .replicaCount) 1)) -}}
true
{{- end -}}
{{- end -}}

{{/* Pod Security "restricted" container securityContext; not configurable on purpose. */}}
{{- define "relayplane.containerSecurityContext" -}}
runAsNonRoot: true
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
privileged: false
capabilities:
  drop:
    - ALL
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "relayplane.podSecurityContext" -}}
runAsNonRoot: true
{{- with .Values.podSecurityContext.runAsUser }}
runAsUser: {{ . }}
{{- end }}
{{- with .Values.podSecurityContext.runAsGroup }}
runAsGroup: {{ . }}
{{- end }}
{{- with .Values.podSecurityContext.fsGroup }}
fsGroup: {{ . }}
{{- end }}
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{/*
gRPC target of a service: its headless Service through the dns resolver, so the client's
round_robin balancer connects to every replica the name resolves to.
*/}}
{{- define "relayplane.address" -}}
{{- $c := index .root.Values .component -}}
{{- printf "dns:///%s-headless.%s.svc.%s:%d" (include "relayplane.componentName" .) .root.Release.Namespace .root.Values.clusterDomain (int $c.port) -}}
{{- end -}}

{{/* Environment for one component. Call with (dict "root" $ "component" "issuer"). */}}
{{/*
A Kubernetes memory quantity (plain bytes, or with Ki, Mi, Gi, K, M, G; whole numbers) in MiB.
*/}}
{{- define "relayplane.memoryMiB" -}}
{{- $m := toString . -}}
{{- if not (regexMatch "^[0-9]+(Ki|Mi|Gi|K|M|G)?$" $m) -}}
{{- fail (printf "cannot read the memory limit %q: use a whole number of bytes, Ki, Mi, Gi, K, M or G" $m) -}}
{{- end -}}
{{- $n := regexFind "^[0-9]+" $m | int64 -}}
{{- $unit := trimPrefix (toString $n) $m -}}
{{- $bytes := dict "" 1 "Ki" 1024 "Mi" 1048576 "Gi" 1073741824 "K" 1000 "M" 1000000 "G" 1000000000 -}}
{{- div (mul $n (index $bytes $unit)) 1048576 -}}
{{- end -}}

{{- /* The port of the kubelet's gRPC probes: the app's own, or with mutual TLS (which the
kubelet cannot speak) the plaintext health-only listener. */}}
{{- define "relayplane.grpcProbePort" -}}
{{- $v := .root.Values -}}
{{- ternary $v.tls.grpc.healthPort (index $v .component).port $v.tls.grpc.enabled -}}
{{- end -}}

{{- /* The app's SPIFFE identity (gRPC mutual TLS). */}}
{{- define "relayplane.spiffeId" -}}
spiffe://{{ .root.Values.tls.grpc.trustDomain }}/{{ .component }}
{{- end -}}

{{- /* The Secret holding the app's gRPC certificate: cert-manager's, or the existing one. */}}
{{- define "relayplane.grpcTlsSecretName" -}}
{{- $tls := .root.Values.tls.grpc -}}
{{- if $tls.certManager.enabled -}}
{{ include "relayplane.componentName" . }}-grpc-tls
{{- else -}}
{{ index $tls.existingSecrets .component }}
{{- end -}}
{{- end -}}

{{- define "relayplane.env" -}}
{{- $root := .root -}}
{{- $v := $root.Values -}}
{{- $c := index $v .component -}}
- name: LOG_LEVEL
  value: {{ $v.logLevel | quote }}
- name: NODE_ENV
  value: production
{{- /* V8 sizes its heap from the node's memory, not the container's limit, unless told: half
the limit for the old generation, 8 MiB semi-spaces (docs/performance.md, Soak). */}}
- name: NODE_OPTIONS
  value: {{ printf "--max-old-space-size=%d --max-semi-space-size=8" (div (include "relayplane.memoryMiB" $c.resources.limits.memory | int64) 2) | quote }}
{{- if $v.tls.grpc.enabled }}
- name: RELAYPLANE_TRUST_DOMAIN
  value: {{ $v.tls.grpc.trustDomain | quote }}
{{- if ne .component "gateway" }}
{{- /* The kubelet's probes cannot present a client certificate: health alone, plaintext, here. */}}
- name: {{ upper .component }}_HEALTH_LISTEN_ADDRESS
  value: {{ printf "0.0.0.0:%d" ($v.tls.grpc.healthPort | int) | quote }}
{{- end }}
- name: RELAYPLANE_GRPC_TLS_CERT_FILE
  value: /etc/relayplane/grpc-tls/tls.crt
- name: RELAYPLANE_GRPC_TLS_KEY_FILE
  value: /etc/relayplane/grpc-tls/tls.key
- name: RELAYPLANE_GRPC_TLS_CA_FILE
  value: /etc/relayplane/grpc-tls/ca.crt
{{- end }}
{{- if eq .component "gateway" }}
- name: HOST
  value: "0.0.0.0"
- name: PORT
  value: {{ $c.port | int | quote }}
- name: GATEWAY_ISSUER_ADDRESS
  value: {{ include "relayplane.address" (dict "root" $root "component" "issuer") | quote }}
- name: GATEWAY_ADMIN_ADDRESS
  value: {{ include "relayplane.address" (dict "root" $root "component" "admin") | quote }}
- name: GATEWAY_BILLING_ADDRESS
  value: {{ include "relayplane.address" (dict "root" $root "component" "billing") | quote }}
{{- if $v.redis.clusterNodes }}
- name: GATEWAY_REDIS_CLUSTER_NODES
  valueFrom:
    secretKeyRef:
      name: {{ include "relayplane.secretName" $root }}
      key: redis-cluster-nodes
{{- else }}
- name: GATEWAY_REDIS_URL
  valueFrom:
    secretKeyRef:
      name: {{ include "relayplane.redisSecretName" $root }}
      key: {{ include "relayplane.redisSecretKey" $root }}
{{- end }}
- name: RELAYPLANE_REDIS_PREFIX
  value: {{ $v.redis.prefix | quote }}
{{- with $c.bodyLimitBytes }}
- name: GATEWAY_BODY_LIMIT_BYTES
  value: {{ . | int64 | quote }}
{{- end }}
{{- with $c.rpcTimeoutMs }}
- name: GATEWAY_RPC_TIMEOUT_MS
  value: {{ . | int64 | quote }}
{{- end }}
{{- with $c.headersTimeoutMs }}
- name: GATEWAY_HEADERS_TIMEOUT_MS
  value: {{ . | int64 | quote }}
{{- end }}
{{- with $c.requestTimeoutMs }}
- name: GATEWAY_REQUEST_TIMEOUT_MS
  value: {{ . | int64 | quote }}
{{- end }}
{{- with $c.keepAliveTimeoutMs }}
- name: GATEWAY_KEEP_ALIVE_TIMEOUT_MS
  value: {{ . | int64 | quote }}
{{- end }}
{{- with $c.shutdownDelayMs }}
- name: GATEWAY_SHUTDOWN_DELAY_MS
  value: {{ . | int64 | quote }}
{{- end }}
{{- with $c.maxConnections }}
- name: GATEWAY_MAX_CONNECTIONS
  value: {{ . | int64 | quote }}
{{- end }}
{{- with $c.maxConnectionsPerIp }}
- name: GATEWAY_MAX_CONNECTIONS_PER_IP
  value: {{ . | int64 | quote }}
{{- end }}
{{- if not (kindIs "invalid" $c.jwksCacheMs) }}
- name: GATEWAY_JWKS_CACHE_MS
  value: {{ $c.jwksCacheMs | int64 | quote }}
{{- end }}
{{- with $c.trustedProxies }}
- name: GATEWAY_TRUSTED_PROXIES
  value: {{ join "," . | quote }}
{{- end }}
{{- with $c.issuanceStreams }}
- name: GATEWAY_ISSUANCE_STREAMS
  value: {{ . | int64 | quote }}
{{- end }}
{{- with $c.issuanceStreamMaxAgeMs }}
- name: GATEWAY_ISSUANCE_STREAM_MAX_AGE_MS
  value: {{ . | int64 | quote }}
{{- end }}
{{- with $c.grpcDnsMinIntervalMs }}
- name: GATEWAY_GRPC_DNS_MIN_INTERVAL_MS
  value: {{ . | int64 | quote }}
{{- end }}
{{- else }}
{{- $prefix := upper .component }}
- name: {{ $prefix }}_LISTEN_ADDRESS
  value: {{ printf "0.0.0.0:%d" (int $c.port) | quote }}
- name: {{ $prefix }}_DATABASE_URL
  valueFrom:
    secretKeyRef:
      name: {{ include "relayplane.databaseSecretName" $root }}
      key: {{ include "relayplane.databaseSecretKey" . }}
- name: {{ $prefix }}_DATABASE_POOL_MAX
  value: {{ $v.database.poolMax | int | quote }}
{{- if not (kindIs "invalid" $c.maxConnectionAgeMs) }}
- name: {{ $prefix }}_GRPC_MAX_CONNECTION_AGE_MS
  value: {{ $c.maxConnectionAgeMs | int64 | quote }}
{{- end }}
{{- end }}
{{- if eq .component "issuer" }}
{{- if $v.redis.clusterNodes }}
- name: ISSUER_REDIS_CLUSTER_NODES
  valueFrom:
    secretKeyRef:
      name: {{ include "relayplane.secretName" $root }}
      key: redis-cluster-nodes
{{- else }}
- name: ISSUER_REDIS_URL
  valueFrom:
    secretKeyRef:
      name: {{ include "relayplane.redisSecretName" $root }}
      key: {{ include "relayplane.redisSecretKey" $root }}
{{- end }}
- name: ISSUER_REDIS_PREFIX
  value: {{ $v.redis.prefix | quote }}
- name: ISSUER_ADMIN_ADDRESS
  value: {{ include "relayplane.address" (dict "root" $root "component" "admin") | quote }}
- name: RELAYPLANE_KEK
  valueFrom:
    secretKeyRef:
      name: {{ include "relayplane.kekSecretName" $root }}
      key: {{ include "relayplane.kekSecretKey" $root }}
{{- if or $v.kek.existingSecret $v.kek.previous }}
{{- /* Optional: an existing Secret gets the key only while a rotation runs. */}}
- name: RELAYPLANE_KEK_PREVIOUS
  valueFrom:
    secretKeyRef:
      name: {{ include "relayplane.kekSecretName" $root }}
      key: {{ ternary $v.kek.existingSecretPreviousKey "kek-previous" (ne $v.kek.existingSecret "") }}
      optional: true
{{- end }}
{{- with $c.keyRotationIntervalSeconds }}
- name: ISSUER_KEY_ROTATION_INTERVAL_SECONDS
  value: {{ . | int64 | quote }}
{{- end }}
{{- with $c.maxCredentialTtlSeconds }}
- name: ISSUER_MAX_CREDENTIAL_TTL_SECONDS
  value: {{ . | int64 | quote }}
{{- end }}
{{- with $c.credentialRetentionDays }}
- name: ISSUER_CREDENTIAL_RETENTION_DAYS
  value: {{ . | int64 | quote }}
{{- end }}
{{- with $c.keyMaintenanceIntervalSeconds }}
- name: ISSUER_KEY_MAINTENANCE_INTERVAL_SECONDS
  value: {{ . | int64 | quote }}
{{- end }}
{{- with $c.relaySessionRevalidateSeconds }}
- name: RELAYPLANE_RELAY_SESSION_REVALIDATE_SECONDS
  value: {{ . | int64 | quote }}
{{- end }}
{{- with $c.relaySessionExpiresSeconds }}
- name: RELAYPLANE_RELAY_SESSION_EXPIRES_SECONDS
  value: {{ . | int64 | quote }}
{{- end }}
{{- with $c.relayConnectWindowSeconds }}
- name: RELAYPLANE_RELAY_CONNECT_WINDOW_SECONDS
  value: {{ . | int64 | quote }}
{{- end }}
{{- if $v.relays }}
- name: RELAYPLANE_RELAYS_FILE
  value: /etc/relayplane/relays.yaml
{{- end }}
{{- end }}
{{- if eq .component "admin" }}
{{- /* A fixed mmap threshold: each login's 19 MiB argon2id block is unmapped when its hash
ends, instead of staying in malloc's arenas once glibc has raised its dynamic threshold
(~85 MiB less RSS, no step growth; docs/performance.md, Soak). */}}
- name: MALLOC_MMAP_THRESHOLD_
  value: "131072"
{{- if $v.redis.clusterNodes }}
- name: ADMIN_REDIS_CLUSTER_NODES
  valueFrom:
    secretKeyRef:
      name: {{ include "relayplane.secretName" $root }}
      key: redis-cluster-nodes
{{- else }}
- name: ADMIN_REDIS_URL
  valueFrom:
    secretKeyRef:
      name: {{ include "relayplane.redisSecretName" $root }}
      key: {{ include "relayplane.redisSecretKey" $root }}
{{- end }}
- name: ADMIN_REDIS_PREFIX
  value: {{ $v.redis.prefix | quote }}
- name: ADMIN_BILLING_ADDRESS
  value: {{ include "relayplane.address" (dict "root" $root "component" "billing") | quote }}
{{- /* Admin derives its own keys from the KEK (device-token MAC, second-factor secrets: docs/configuration.md). */}}
- name: RELAYPLANE_KEK
  valueFrom:
    secretKeyRef:
      name: {{ include "relayplane.kekSecretName" $root }}
      key: {{ include "relayplane.kekSecretKey" $root }}
{{- if or $v.kek.existingSecret $v.kek.previous }}
- name: RELAYPLANE_KEK_PREVIOUS
  valueFrom:
    secretKeyRef:
      name: {{ include "relayplane.kekSecretName" $root }}
      key: {{ ternary $v.kek.existingSecretPreviousKey "kek-previous" (ne $v.kek.existingSecret "") }}
      optional: true
{{- end }}
- name: RELAYPLANE_SIGNUP_ENABLED
  value: {{ $c.signupEnabled | quote }}
{{- with $c.sessionTtlSeconds }}
- name: ADMIN_SESSION_TTL_SECONDS
  value: {{ . | int64 | quote }}
{{- end }}
{{- with $c.bootstrap }}
{{- if .email }}
- name: RELAYPLANE_BOOTSTRAP_EMAIL
  value: {{ .email | quote }}
- name: RELAYPLANE_BOOTSTRAP_PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ include "relayplane.bootstrapSecretName" $root }}
      key: {{ include "relayplane.bootstrapSecretKey" $root }}
{{- with .tenant }}
- name: RELAYPLANE_BOOTSTRAP_TENANT
  value: {{ . | quote }}
{{- end }}
{{- with .plan }}
- name: RELAYPLANE_BOOTSTRAP_PLAN
  value: {{ . | quote }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
{{- if eq .component "billing" }}
{{- if $v.redis.clusterNodes }}
- name: BILLING_REDIS_CLUSTER_NODES
  valueFrom:
    secretKeyRef:
      name: {{ include "relayplane.secretName" $root }}
      key: redis-cluster-nodes
{{- else }}
- name: BILLING_REDIS_URL
  valueFrom:
    secretKeyRef:
      name: {{ include "relayplane.redisSecretName" $root }}
      key: {{ include "relayplane.redisSecretKey" $root }}
{{- end }}
- name: BILLING_REDIS_PREFIX
  value: {{ $v.redis.prefix | quote }}
{{- with $c.redisCommandTimeoutMs }}
- name: BILLING_REDIS_COMMAND_TIMEOUT_MS
  value: {{ . | int64 | quote }}
{{- end }}
- name: BILLING_ISSUER_ADDRESS
  value: {{ include "relayplane.address" (dict "root" $root "component" "issuer") | quote }}
- name: BILLING_ADMIN_ADDRESS
  value: {{ include "relayplane.address" (dict "root" $root "component" "admin") | quote }}
{{- with $c.checkout }}
{{- with .maxPerWindow }}
- name: BILLING_CHECKOUT_MAX_PER_WINDOW
  value: {{ . | int64 | quote }}
{{- end }}
{{- with .windowSeconds }}
- name: BILLING_CHECKOUT_WINDOW_SECONDS
  value: {{ . | int64 | quote }}
{{- end }}
{{- with .sessionTtlSeconds }}
- name: BILLING_CHECKOUT_SESSION_TTL_SECONDS
  value: {{ . | int64 | quote }}
{{- end }}
{{- end }}
- name: BILLING_PROVIDER
  value: {{ $c.provider | quote }}
- name: BILLING_BUILTIN_PAID_CHECKOUT
  value: {{ $c.builtinPaidCheckout | default false | quote }}
{{- if eq $c.provider "stripe" }}
{{- /* Secrets by reference only: never a literal value here. */}}
- name: STRIPE_SECRET_KEY
  valueFrom:
    secretKeyRef:
      name: {{ include "relayplane.stripeSecretName" $root }}
      key: {{ include "relayplane.stripeSecretKey" (dict "root" $root "key" "secretKey") }}
- name: STRIPE_WEBHOOK_SECRET
  valueFrom:
    secretKeyRef:
      name: {{ include "relayplane.stripeSecretName" $root }}
      key: {{ include "relayplane.stripeSecretKey" (dict "root" $root "key" "webhookSecret") }}
{{- with $c.stripe.webhookToleranceSeconds }}
- name: STRIPE_WEBHOOK_TOLERANCE_SECONDS
  value: {{ . | int64 | quote }}
{{- end }}
{{- end }}
{{- if $v.plans }}
- name: RELAYPLANE_PLANS_FILE
  value: /etc/relayplane/plans.yaml
{{- end }}
{{- end }}
{{- if $v.metrics.enabled }}
- name: {{ upper .component }}_METRICS_ADDRESS
  value: {{ printf "0.0.0.0:%d" (int $v.metrics.port) | quote }}
{{- end }}
{{- with $c.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end -}}


{{/*
Labels of a ServiceMonitor: the chart's labels, then metrics.serviceMonitor.labels (which cannot
override the chart's own). Call with (dict "root" $ "component" "gateway").
*/}}
{{- define "relayplane.serviceMonitorLabels" -}}
{{- $labels := fromYaml (include "relayplane.labels" .) -}}
{{- toYaml (merge $labels (default dict .root.Values.metrics.serviceMonitor.labels)) -}}
{{- end -}}

{{/* Milliseconds of a Prometheus duration such as 1m30s (schema-checked format; "" is 0). */}}
{{- define "relayplane.durationMs" -}}
{{- $units := dict "ms" 1 "s" 1000 "m" 60000 "h" 3600000 "d" 86400000 "w" 604800000 "y" 31536000000 -}}
{{- $total := 0 -}}
{{- range regexFindAll "[0-9]+(ms|y|w|d|h|m|s)" (toString .) -1 -}}
{{- $unit := regexFind "(ms|y|w|d|h|m|s)$" . -}}
{{- /* Leading zeros stripped: int64 of a string would read "010" as octal. */ -}}
{{- $n := regexReplaceAll "^0+([0-9])" (trimSuffix $unit .) "${1}" -}}
{{- $total = add $total (mul (int64 $n) (index $units $unit)) -}}
{{- end -}}
{{- $total -}}
{{- end -}}

{{/*
NetworkPolicyPeers allowed to scrape the metrics port. The default lives here rather than in
values.yaml so that the generated parameters table can document the list as one value.
*/}}
{{- define "relayplane.metricsFrom" -}}
{{- $default := list (dict "namespaceSelector" (dict "matchLabels" (dict "kubernetes.io/metadata.name" "monitoring"))) -}}
{{- toYaml (default $default .Values.metrics.networkPolicy.from) -}}
{{- end -}}

{{/*
NetworkPolicyPeers billing may reach on TCP 443 (Stripe API). Default anywhere, kept here for
the same reason as relayplane.metricsFrom; operators should narrow it or use an egress proxy.
*/}}
{{- define "relayplane.stripeEgressTo" -}}
{{- $default := list (dict "ipBlock" (dict "cidr" "0.0.0.0/0")) -}}
{{- toYaml (default $default .Values.billing.stripe.egressTo) -}}
{{- end -}}

{{/* The PrometheusRule's labels: the chart's, plus metrics.prometheusRule.labels (e.g. the Prometheus ruleSelector's). */}}
{{- define "relayplane.prometheusRuleLabels" -}}
{{- $labels := fromYaml (include "relayplane.labels" .) -}}
{{- toYaml (merge $labels (default dict .root.Values.metrics.prometheusRule.labels)) -}}
{{- end -}}
