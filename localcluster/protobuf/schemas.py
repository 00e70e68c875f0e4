"""Field numbers of the Kubernetes messages kubectl sends as protobuf, from the `generated.proto` files.

Only the kinds kubectl's typed clients send (create configmap/secret/namespace/deployment/service,
run, drain's eviction, DeleteOptions, scale) are described; a field left out is skipped on decode,
exactly like a field an older server does not know. `keep=True` marks Go pointer fields (a zero
value that was sent means something); `inline=True` marks Go embedded structs, whose fields JSON
flattens into the parent (`ConfigMapKeySelector` embeds `LocalObjectReference`).

Sources: k8s.io/apimachinery/pkg/apis/meta/v1, pkg/util/intstr, pkg/api/resource, pkg/runtime;
k8s.io/api/core/v1, apps/v1, policy/v1, autoscaling/v1 (all `generated.proto`).
"""

from __future__ import annotations

from localcluster.protobuf.decode import (
    BOOL,
    BYTES,
    INT,
    INT_OR_STRING,
    MICROTIME,
    QUANTITY,
    RAW,
    STR,
    TIME,
    F,
    Map,
    Schema,
)

STRINGS = Map(STR)

# -- k8s.io/apimachinery/pkg/runtime --------------------------------------------------------------------
TYPE_META: Schema = {1: F("apiVersion", STR), 2: F("kind", STR)}
UNKNOWN: Schema = {1: F("typeMeta", TYPE_META), 2: F("raw", BYTES), 3: F("contentEncoding", STR), 4: F("contentType", STR)}

# -- k8s.io/apimachinery/pkg/apis/meta/v1 ---------------------------------------------------------------
OWNER_REFERENCE: Schema = {
    1: F("kind", STR), 3: F("name", STR), 4: F("uid", STR), 5: F("apiVersion", STR),
    6: F("controller", BOOL, keep=True), 7: F("blockOwnerDeletion", BOOL, keep=True),
}
MANAGED_FIELDS_ENTRY: Schema = {
    1: F("manager", STR), 2: F("operation", STR), 3: F("apiVersion", STR), 4: F("time", TIME),
    6: F("fieldsType", STR), 7: F("fieldsV1", RAW), 8: F("subresource", STR),
}
OBJECT_META: Schema = {
    1: F("name", STR), 2: F("generateName", STR), 3: F("namespace", STR), 4: F("selfLink", STR),
    5: F("uid", STR), 6: F("resourceVersion", STR), 7: F("generation", INT), 8: F("creationTimestamp", TIME),
    9: F("deletionTimestamp", TIME), 10: F("deletionGracePeriodSeconds", INT, keep=True),
    11: F("labels", STRINGS), 12: F("annotations", STRINGS), 13: F("ownerReferences", OWNER_REFERENCE, repeated=True),
    14: F("finalizers", STR, repeated=True), 17: F("managedFields", MANAGED_FIELDS_ENTRY, repeated=True),
}
LABEL_SELECTOR_REQUIREMENT: Schema = {1: F("key", STR), 2: F("operator", STR), 3: F("values", STR, repeated=True)}
LABEL_SELECTOR: Schema = {1: F("matchLabels", STRINGS), 2: F("matchExpressions", LABEL_SELECTOR_REQUIREMENT, repeated=True)}
PRECONDITIONS: Schema = {1: F("uid", STR, keep=True), 2: F("resourceVersion", STR, keep=True)}
DELETE_OPTIONS: Schema = {
    1: F("gracePeriodSeconds", INT, keep=True), 2: F("preconditions", PRECONDITIONS),
    3: F("orphanDependents", BOOL, keep=True), 4: F("propagationPolicy", STR, keep=True),
    5: F("dryRun", STR, repeated=True), 6: F("ignoreStoreReadErrorWithClusterBreakingPotential", BOOL, keep=True),
}
CONDITION: Schema = {
    1: F("type", STR), 2: F("status", STR), 3: F("observedGeneration", INT), 4: F("lastTransitionTime", TIME),
    5: F("reason", STR), 6: F("message", STR),
}

# -- k8s.io/api/core/v1 ---------------------------------------------------------------------------------
LOCAL_OBJECT_REFERENCE: Schema = {1: F("name", STR)}
KEY_SELECTOR: Schema = {1: F("", LOCAL_OBJECT_REFERENCE, inline=True), 2: F("key", STR), 3: F("optional", BOOL, keep=True)}
ENV_VAR_SOURCE: Schema = {
    1: F("fieldRef", {1: F("apiVersion", STR), 2: F("fieldPath", STR)}),
    2: F("resourceFieldRef", {1: F("containerName", STR), 2: F("resource", STR), 3: F("divisor", QUANTITY)}),
    3: F("configMapKeyRef", KEY_SELECTOR),
    4: F("secretKeyRef", KEY_SELECTOR),
}
ENV_VAR: Schema = {1: F("name", STR), 2: F("value", STR), 3: F("valueFrom", ENV_VAR_SOURCE)}
ENV_FROM_SOURCE: Schema = {
    1: F("prefix", STR),
    2: F("configMapRef", {1: F("", LOCAL_OBJECT_REFERENCE, inline=True), 2: F("optional", BOOL, keep=True)}),
    3: F("secretRef", {1: F("", LOCAL_OBJECT_REFERENCE, inline=True), 2: F("optional", BOOL, keep=True)}),
}
CONTAINER_PORT: Schema = {1: F("name", STR), 2: F("hostPort", INT), 3: F("containerPort", INT), 4: F("protocol", STR), 5: F("hostIP", STR)}
RESOURCE_REQUIREMENTS: Schema = {
    1: F("limits", Map(QUANTITY)), 2: F("requests", Map(QUANTITY)),
    3: F("claims", {1: F("name", STR), 2: F("request", STR)}, repeated=True),
}
VOLUME_MOUNT: Schema = {
    1: F("name", STR), 2: F("readOnly", BOOL), 3: F("mountPath", STR), 4: F("subPath", STR),
    5: F("mountPropagation", STR, keep=True), 6: F("subPathExpr", STR), 7: F("recursiveReadOnly", STR, keep=True),
}
PROBE_HANDLER: Schema = {
    1: F("exec", {1: F("command", STR, repeated=True)}),
    2: F("httpGet", {
        1: F("path", STR), 2: F("port", INT_OR_STRING), 3: F("host", STR), 4: F("scheme", STR),
        5: F("httpHeaders", {1: F("name", STR), 2: F("value", STR)}, repeated=True),
    }),
    3: F("tcpSocket", {1: F("port", INT_OR_STRING), 2: F("host", STR)}),
    4: F("grpc", {1: F("port", INT), 2: F("service", STR, keep=True)}),
}
PROBE: Schema = {
    1: F("", PROBE_HANDLER, inline=True), 2: F("initialDelaySeconds", INT), 3: F("timeoutSeconds", INT),
    4: F("periodSeconds", INT), 5: F("successThreshold", INT), 6: F("failureThreshold", INT),
    7: F("terminationGracePeriodSeconds", INT, keep=True),
}
CONTAINER: Schema = {
    1: F("name", STR), 2: F("image", STR), 3: F("command", STR, repeated=True), 4: F("args", STR, repeated=True),
    5: F("workingDir", STR), 6: F("ports", CONTAINER_PORT, repeated=True), 7: F("env", ENV_VAR, repeated=True),
    8: F("resources", RESOURCE_REQUIREMENTS), 9: F("volumeMounts", VOLUME_MOUNT, repeated=True),
    10: F("livenessProbe", PROBE), 11: F("readinessProbe", PROBE), 13: F("terminationMessagePath", STR),
    14: F("imagePullPolicy", STR), 16: F("stdin", BOOL), 17: F("stdinOnce", BOOL), 18: F("tty", BOOL),
    19: F("envFrom", ENV_FROM_SOURCE, repeated=True), 20: F("terminationMessagePolicy", STR), 22: F("startupProbe", PROBE),
    24: F("restartPolicy", STR, keep=True),
}
TOLERATION: Schema = {
    1: F("key", STR), 2: F("operator", STR), 3: F("value", STR), 4: F("effect", STR),
    5: F("tolerationSeconds", INT, keep=True),
}
VOLUME_SOURCE: Schema = {
    1: F("hostPath", {1: F("path", STR), 2: F("type", STR, keep=True)}),
    2: F("emptyDir", {1: F("medium", STR), 2: F("sizeLimit", QUANTITY)}),
    6: F("secret", {1: F("secretName", STR), 3: F("defaultMode", INT, keep=True), 4: F("optional", BOOL, keep=True)}),
    10: F("persistentVolumeClaim", {1: F("claimName", STR), 2: F("readOnly", BOOL)}),
    19: F("configMap", {1: F("", LOCAL_OBJECT_REFERENCE, inline=True), 3: F("defaultMode", INT, keep=True), 4: F("optional", BOOL, keep=True)}),
}
VOLUME: Schema = {1: F("name", STR), 2: F("", VOLUME_SOURCE, inline=True)}
POD_SPEC: Schema = {
    1: F("volumes", VOLUME, repeated=True), 2: F("containers", CONTAINER, repeated=True), 3: F("restartPolicy", STR),
    4: F("terminationGracePeriodSeconds", INT, keep=True), 5: F("activeDeadlineSeconds", INT, keep=True),
    6: F("dnsPolicy", STR), 7: F("nodeSelector", STRINGS), 8: F("serviceAccountName", STR), 9: F("serviceAccount", STR),
    10: F("nodeName", STR), 11: F("hostNetwork", BOOL), 12: F("hostPID", BOOL), 13: F("hostIPC", BOOL),
    15: F("imagePullSecrets", LOCAL_OBJECT_REFERENCE, repeated=True), 16: F("hostname", STR), 17: F("subdomain", STR),
    19: F("schedulerName", STR), 20: F("initContainers", CONTAINER, repeated=True),
    21: F("automountServiceAccountToken", BOOL, keep=True), 22: F("tolerations", TOLERATION, repeated=True),
    24: F("priorityClassName", STR), 25: F("priority", INT, keep=True), 30: F("enableServiceLinks", BOOL, keep=True),
    31: F("preemptionPolicy", STR, keep=True), 38: F("schedulingGates", {1: F("name", STR)}, repeated=True),
}
POD_TEMPLATE_SPEC: Schema = {1: F("metadata", OBJECT_META), 2: F("spec", POD_SPEC)}
POD_CONDITION: Schema = {
    1: F("type", STR), 2: F("status", STR), 3: F("lastProbeTime", TIME), 4: F("lastTransitionTime", TIME),
    5: F("reason", STR), 6: F("message", STR),
}
POD_STATUS: Schema = {
    1: F("phase", STR), 2: F("conditions", POD_CONDITION, repeated=True), 3: F("message", STR), 4: F("reason", STR),
    5: F("hostIP", STR), 6: F("podIP", STR), 7: F("startTime", TIME), 10: F("qosClass", STR),
}
POD: Schema = {1: F("metadata", OBJECT_META), 2: F("spec", POD_SPEC), 3: F("status", POD_STATUS)}
CONFIG_MAP: Schema = {1: F("metadata", OBJECT_META), 2: F("data", STRINGS), 3: F("binaryData", Map(BYTES)), 4: F("immutable", BOOL, keep=True)}
SECRET: Schema = {
    1: F("metadata", OBJECT_META), 2: F("data", Map(BYTES)), 3: F("type", STR), 4: F("stringData", STRINGS),
    5: F("immutable", BOOL, keep=True),
}
NAMESPACE: Schema = {
    1: F("metadata", OBJECT_META), 2: F("spec", {1: F("finalizers", STR, repeated=True)}),
    3: F("status", {1: F("phase", STR)}),
}
SERVICE_PORT: Schema = {
    1: F("name", STR), 2: F("protocol", STR), 3: F("port", INT), 4: F("targetPort", INT_OR_STRING), 5: F("nodePort", INT),
    6: F("appProtocol", STR, keep=True),
}
SERVICE_SPEC: Schema = {
    1: F("ports", SERVICE_PORT, repeated=True), 2: F("selector", STRINGS), 3: F("clusterIP", STR), 4: F("type", STR),
    5: F("externalIPs", STR, repeated=True), 7: F("sessionAffinity", STR), 8: F("loadBalancerIP", STR),
    9: F("loadBalancerSourceRanges", STR, repeated=True), 10: F("externalName", STR), 11: F("externalTrafficPolicy", STR),
    12: F("healthCheckNodePort", INT), 13: F("publishNotReadyAddresses", BOOL),
}
SERVICE: Schema = {1: F("metadata", OBJECT_META), 2: F("spec", SERVICE_SPEC), 3: F("status", {})}
BINDING: Schema = {1: F("metadata", OBJECT_META), 2: F("target", {
    1: F("kind", STR), 2: F("namespace", STR), 3: F("name", STR), 4: F("uid", STR), 5: F("apiVersion", STR),
    6: F("resourceVersion", STR), 7: F("fieldPath", STR),
})}
EVENT: Schema = {
    1: F("metadata", OBJECT_META), 2: F("involvedObject", BINDING[2].type), 3: F("reason", STR), 4: F("message", STR),
    5: F("source", {1: F("component", STR), 2: F("host", STR)}), 6: F("firstTimestamp", TIME), 7: F("lastTimestamp", TIME),
    8: F("count", INT), 9: F("type", STR), 10: F("eventTime", MICROTIME), 12: F("action", STR),
    14: F("reportingComponent", STR), 15: F("reportingInstance", STR),
}

# -- k8s.io/api/apps/v1 ---------------------------------------------------------------------------------
ROLLING_UPDATE_DEPLOYMENT: Schema = {1: F("maxUnavailable", INT_OR_STRING), 2: F("maxSurge", INT_OR_STRING)}
DEPLOYMENT_SPEC: Schema = {
    1: F("replicas", INT, keep=True), 2: F("selector", LABEL_SELECTOR), 3: F("template", POD_TEMPLATE_SPEC),
    4: F("strategy", {1: F("type", STR), 2: F("rollingUpdate", ROLLING_UPDATE_DEPLOYMENT)}),
    5: F("minReadySeconds", INT), 6: F("revisionHistoryLimit", INT, keep=True), 7: F("paused", BOOL),
    9: F("progressDeadlineSeconds", INT, keep=True),
}
# Status is ignored on create; decoded so a PUT of a whole object round-trips the common counters.
DEPLOYMENT_STATUS: Schema = {
    1: F("observedGeneration", INT), 2: F("replicas", INT), 3: F("updatedReplicas", INT), 4: F("availableReplicas", INT),
    5: F("unavailableReplicas", INT), 7: F("readyReplicas", INT),
}
DEPLOYMENT: Schema = {1: F("metadata", OBJECT_META), 2: F("spec", DEPLOYMENT_SPEC), 3: F("status", DEPLOYMENT_STATUS)}
REPLICA_SET: Schema = {
    1: F("metadata", OBJECT_META),
    2: F("spec", {1: F("replicas", INT, keep=True), 2: F("selector", LABEL_SELECTOR), 3: F("template", POD_TEMPLATE_SPEC),
                  4: F("minReadySeconds", INT)}),
    3: F("status", {}),
}

# -- k8s.io/api/policy/v1, autoscaling/v1 ---------------------------------------------------------------
EVICTION: Schema = {1: F("metadata", OBJECT_META), 2: F("deleteOptions", DELETE_OPTIONS)}
SCALE: Schema = {
    1: F("metadata", OBJECT_META), 2: F("spec", {1: F("replicas", INT)}),
    3: F("status", {1: F("replicas", INT), 2: F("selector", STR)}),
}

# -- k8s.io/api/rbac/v1, authorization/v1, authentication/v1 (kubectl create role|..., auth can-i, create token) --
POLICY_RULE: Schema = {
    1: F("verbs", STR, repeated=True), 2: F("apiGroups", STR, repeated=True), 3: F("resources", STR, repeated=True),
    4: F("resourceNames", STR, repeated=True), 5: F("nonResourceURLs", STR, repeated=True),
}
SUBJECT: Schema = {1: F("kind", STR), 2: F("apiGroup", STR), 3: F("name", STR), 4: F("namespace", STR)}
ROLE_REF: Schema = {1: F("apiGroup", STR), 2: F("kind", STR), 3: F("name", STR)}
ROLE: Schema = {1: F("metadata", OBJECT_META), 2: F("rules", POLICY_RULE, repeated=True)}
CLUSTER_ROLE: Schema = {
    1: F("metadata", OBJECT_META), 2: F("rules", POLICY_RULE, repeated=True),
    3: F("aggregationRule", {1: F("clusterRoleSelectors", LABEL_SELECTOR, repeated=True)}),
}
ROLE_BINDING: Schema = {1: F("metadata", OBJECT_META), 2: F("subjects", SUBJECT, repeated=True), 3: F("roleRef", ROLE_REF)}
RESOURCE_ATTRIBUTES: Schema = {
    1: F("namespace", STR), 2: F("verb", STR), 3: F("group", STR), 4: F("version", STR), 5: F("resource", STR),
    6: F("subresource", STR), 7: F("name", STR),
}
NON_RESOURCE_ATTRIBUTES: Schema = {1: F("path", STR), 2: F("verb", STR)}
SUBJECT_ACCESS_REVIEW_SPEC: Schema = {
    1: F("resourceAttributes", RESOURCE_ATTRIBUTES), 2: F("nonResourceAttributes", NON_RESOURCE_ATTRIBUTES),
    3: F("user", STR), 4: F("groups", STR, repeated=True),
    6: F("uid", STR),
}
SUBJECT_ACCESS_REVIEW: Schema = {1: F("metadata", OBJECT_META), 2: F("spec", SUBJECT_ACCESS_REVIEW_SPEC)}
SELF_SUBJECT_ACCESS_REVIEW: Schema = {
    1: F("metadata", OBJECT_META),
    2: F("spec", {1: F("resourceAttributes", RESOURCE_ATTRIBUTES),
                  2: F("nonResourceAttributes", NON_RESOURCE_ATTRIBUTES)}),
}
TOKEN_REVIEW: Schema = {1: F("metadata", OBJECT_META), 2: F("spec", {1: F("token", STR), 2: F("audiences", STR, repeated=True)})}
TOKEN_REQUEST: Schema = {
    1: F("metadata", OBJECT_META),
    2: F("spec", {1: F("audiences", STR, repeated=True),
                  3: F("boundObjectRef", {1: F("kind", STR), 2: F("apiVersion", STR), 3: F("name", STR), 4: F("uid", STR)}),
                  4: F("expirationSeconds", INT, keep=True)}),
}
SERVICE_ACCOUNT: Schema = {1: F("metadata", OBJECT_META)}

# (group, kind) -> schema. The version is not part of the key: the kinds here have one served version.
KINDS: dict[tuple[str, str], Schema] = {
    ("", "ConfigMap"): CONFIG_MAP,
    ("", "Secret"): SECRET,
    ("", "Namespace"): NAMESPACE,
    ("", "Service"): SERVICE,
    ("", "Pod"): POD,
    ("", "Binding"): BINDING,
    ("", "Event"): EVENT,
    ("apps", "Deployment"): DEPLOYMENT,
    ("apps", "ReplicaSet"): REPLICA_SET,
    ("policy", "Eviction"): EVICTION,
    ("autoscaling", "Scale"): SCALE,
    ("rbac.authorization.k8s.io", "Role"): ROLE,
    ("rbac.authorization.k8s.io", "ClusterRole"): CLUSTER_ROLE,
    ("rbac.authorization.k8s.io", "RoleBinding"): ROLE_BINDING,
    ("rbac.authorization.k8s.io", "ClusterRoleBinding"): ROLE_BINDING,
    ("authorization.k8s.io", "SubjectAccessReview"): SUBJECT_ACCESS_REVIEW,
    ("authorization.k8s.io", "LocalSubjectAccessReview"): SUBJECT_ACCESS_REVIEW,
    ("authorization.k8s.io", "SelfSubjectAccessReview"): SELF_SUBJECT_ACCESS_REVIEW,
    ("authentication.k8s.io", "TokenReview"): TOKEN_REVIEW,
    ("authentication.k8s.io", "TokenRequest"): TOKEN_REQUEST,
    ("", "ServiceAccount"): SERVICE_ACCOUNT,
    ("meta.k8s.io", "DeleteOptions"): DELETE_OPTIONS,
    ("", "DeleteOptions"): DELETE_OPTIONS,  # older clients send DeleteOptions as core v1
    ("policy", "DeleteOptions"): DELETE_OPTIONS,
    ("apps", "DeleteOptions"): DELETE_OPTIONS,
}
