"""One object of each built-in kind the local cluster serves, as a Go client would send it.

Each uses the shapes that need care on the wire: inline structs (a volume's source, a probe's
handler, `configMapKeyRef`'s name), pointers set to zero (`replicas: 0`), IntOrString both ways,
Quantities in maps and in fields, Time and MicroTime, RawExtension, maps and repeated messages.
"""

from __future__ import annotations

from typing import Any

NS = "pb"
LABELS = {"app": "pb"}
CONTAINER: dict[str, Any] = {
    "name": "app",
    "image": "nginx:1.25",
    "command": ["sh", "-c"],
    "args": ["sleep 1"],
    "workingDir": "/w",
    "ports": [{"name": "http", "containerPort": 80, "protocol": "TCP"}],
    "env": [
        {"name": "MODE", "value": "prod"},
        {"name": "FROM_CM", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "k", "optional": True}}},
        {"name": "POD", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}}},
    ],
    "resources": {
        "limits": {"cpu": "500m", "memory": "128Mi"},
        "requests": {"cpu": "250m", "memory": "64Mi"},
    },
    "volumeMounts": [{"name": "data", "mountPath": "/data", "readOnly": True}],
    "livenessProbe": {
        "httpGet": {"path": "/healthz", "port": "http", "scheme": "HTTP"},
        "initialDelaySeconds": 3,
        "timeoutSeconds": 1,
        "periodSeconds": 10,
        "successThreshold": 1,
        "failureThreshold": 3,
    },
    "readinessProbe": {
        "tcpSocket": {"port": 80},
        "timeoutSeconds": 1,
        "periodSeconds": 5,
        "successThreshold": 1,
        "failureThreshold": 3,
    },
    "lifecycle": {"preStop": {"exec": {"command": ["sleep", "5"]}}},
    "terminationMessagePath": "/dev/termination-log",
    "terminationMessagePolicy": "File",
    "imagePullPolicy": "IfNotPresent",
    "securityContext": {
        "runAsNonRoot": True,
        "runAsUser": 1000,
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
    },
}
POD_SPEC: dict[str, Any] = {
    "volumes": [
        {"name": "data", "emptyDir": {"sizeLimit": "1Gi"}},
        {
            "name": "cfg",
            "configMap": {"name": "cfg", "items": [{"key": "k", "path": "k.txt"}], "defaultMode": 420},
        },
    ],
    "initContainers": [
        {
            "name": "init",
            "image": "busybox:1.36",
            "command": ["true"],
            "resources": {},
            "terminationMessagePath": "/dev/termination-log",
            "terminationMessagePolicy": "File",
            "imagePullPolicy": "IfNotPresent",
        }
    ],
    "containers": [CONTAINER],
    "restartPolicy": "Always",
    "terminationGracePeriodSeconds": 30,
    "dnsPolicy": "ClusterFirst",
    "nodeSelector": {"disk": "ssd"},
    "serviceAccountName": "default",
    "automountServiceAccountToken": False,
    "securityContext": {"fsGroup": 2000},
    "schedulerName": "default-scheduler",
    "affinity": {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a", "b"]}]}
                ]
            }
        }
    },
    "tolerations": [
        {
            "key": "node.kubernetes.io/not-ready",
            "operator": "Exists",
            "effect": "NoExecute",
            "tolerationSeconds": 300,
        },
        {
            "key": "node.kubernetes.io/unreachable",
            "operator": "Exists",
            "effect": "NoExecute",
            "tolerationSeconds": 300,
        },
    ],
    "priority": 0,
    "enableServiceLinks": True,
    "preemptionPolicy": "PreemptLowerPriority",
}
TEMPLATE: dict[str, Any] = {"metadata": {"labels": LABELS, "annotations": {"note": "x"}}, "spec": POD_SPEC}
SELECTOR = {
    "matchLabels": LABELS,
    "matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["db"]}],
}


CRD_GROUP = "pbtest.example.com"
WIDGET_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["spec"],
    "properties": {
        "spec": {
            "type": "object",
            "properties": {
                "replicas": {
                    "type": "integer",
                    "format": "int32",
                    "minimum": 0,
                    "maximum": 10.5,
                    "default": 1,
                },
                "size": {"type": "integer", "multipleOf": 2},
                "mode": {"type": "string", "enum": ["a", "b"], "pattern": "^[ab]$", "maxLength": 1},
                "port": {
                    "x-kubernetes-int-or-string": True,
                    "anyOf": [{"type": "integer"}, {"type": "string"}],
                },
                "tags": {
                    "type": "array",
                    "items": {"type": "string"},
                    "x-kubernetes-list-type": "set",
                    "maxItems": 4,
                },
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": True, "nullable": True},
            },
        },
        "status": {"type": "object", "properties": {"replicas": {"type": "integer"}}},
    },
}


def _meta(name: str, namespaced: bool = True, **extra: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": {"team": "a"}, "annotations": {"empty": ""}, **extra}
    if namespaced:
        meta["namespace"] = NS
    return meta


def samples() -> list[tuple[str, dict[str, Any]]]:
    """(collection path, object) in creation order."""
    core, apps = f"/api/v1/namespaces/{NS}", f"/apis/apps/v1/namespaces/{NS}"
    return [
        (
            "/api/v1/namespaces",
            {
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": _meta(NS, False),
                "spec": {"finalizers": ["kubernetes"]},
            },
        ),
        (
            "/api/v1/nodes",
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": _meta("pb-node", False),
                "spec": {
                    "podCIDR": "10.9.0.0/24",
                    "podCIDRs": ["10.9.0.0/24"],
                    "unschedulable": True,
                    "taints": [
                        {"key": "k", "value": "v", "effect": "NoSchedule"},
                        {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"},
                    ],
                },
            },
        ),
        (
            f"{core}/configmaps",
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": _meta("cfg"),
                "data": {"k": "v", "empty": ""},
                "binaryData": {"bin": "AP8="},
            },
        ),
        (
            f"{core}/secrets",
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": _meta("creds"),
                "type": "Opaque",
                "data": {"user": "YWRtaW4=", "none": ""},
                "immutable": True,
            },
        ),
        (
            f"{core}/serviceaccounts",
            {
                "apiVersion": "v1",
                "kind": "ServiceAccount",
                "metadata": _meta("robot"),
                "imagePullSecrets": [{"name": "pull"}],
                "automountServiceAccountToken": False,
            },
        ),
        (
            f"{core}/services",
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": _meta("web"),
                "spec": {
                    "ports": [
                        {"name": "http", "protocol": "TCP", "port": 80, "targetPort": 8080},
                        {"name": "metrics", "protocol": "TCP", "port": 9090, "targetPort": "metrics"},
                    ],
                    "selector": LABELS,
                    "clusterIP": "None",
                    "clusterIPs": ["None"],
                    "type": "ClusterIP",
                    "sessionAffinity": "None",
                    "ipFamilies": ["IPv4"],
                    "ipFamilyPolicy": "SingleStack",
                    "publishNotReadyAddresses": True,
                },
            },
        ),
        (
            f"{core}/pods",
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": _meta("pod", generateName="pod-"),
                "spec": POD_SPEC,
            },
        ),
        (
            f"{core}/replicationcontrollers",
            {
                "apiVersion": "v1",
                "kind": "ReplicationController",
                "metadata": _meta("rc"),
                "spec": {"replicas": 0, "minReadySeconds": 5, "selector": LABELS, "template": TEMPLATE},
            },
        ),
        (
            f"{core}/events",
            {
                "apiVersion": "v1",
                "kind": "Event",
                "metadata": _meta("ev.1"),
                "involvedObject": {"kind": "Pod", "namespace": NS, "name": "pod", "apiVersion": "v1"},
                "reason": "Started",
                "message": "started",
                "source": {"component": "kubelet", "host": "n"},
                "firstTimestamp": "2024-01-02T03:04:05Z",
                "lastTimestamp": "2024-01-02T03:04:06Z",
                "count": 2,
                "type": "Normal",
                "eventTime": None,
                "reportingComponent": "",
                "reportingInstance": "",
            },
        ),
        (
            f"{apps}/deployments",
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": _meta("web"),
                "spec": {
                    "replicas": 0,
                    "selector": SELECTOR,
                    "template": TEMPLATE,
                    "strategy": {
                        "type": "RollingUpdate",
                        "rollingUpdate": {"maxUnavailable": 0, "maxSurge": "50%"},
                    },
                    "minReadySeconds": 2,
                    "revisionHistoryLimit": 3,
                    "progressDeadlineSeconds": 120,
                },
            },
        ),
        (
            f"{apps}/replicasets",
            {
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "metadata": _meta("rs"),
                "spec": {"replicas": 0, "selector": SELECTOR, "template": TEMPLATE},
            },
        ),
        (
            f"{apps}/statefulsets",
            {
                "apiVersion": "apps/v1",
                "kind": "StatefulSet",
                "metadata": _meta("db"),
                "spec": {
                    "replicas": 0,
                    "selector": SELECTOR,
                    "template": TEMPLATE,
                    "serviceName": "web",
                    "podManagementPolicy": "Parallel",
                    "revisionHistoryLimit": 5,
                    "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}},
                    "volumeClaimTemplates": [
                        {
                            "metadata": {"name": "data"},
                            "spec": {
                                "accessModes": ["ReadWriteOnce"],
                                "resources": {"requests": {"storage": "1Gi"}},
                                "volumeMode": "Filesystem",
                            },
                        }
                    ],
                },
            },
        ),
        (
            f"{apps}/daemonsets",
            {
                "apiVersion": "apps/v1",
                "kind": "DaemonSet",
                "metadata": _meta("agent"),
                "spec": {
                    "selector": SELECTOR,
                    "template": TEMPLATE,
                    "revisionHistoryLimit": 4,
                    "minReadySeconds": 1,
                    "updateStrategy": {
                        "type": "RollingUpdate",
                        "rollingUpdate": {"maxUnavailable": "10%", "maxSurge": 0},
                    },
                },
            },
        ),
        (
            f"{apps}/controllerrevisions",
            {
                "apiVersion": "apps/v1",
                "kind": "ControllerRevision",
                "metadata": _meta("agent-1"),
                "revision": 1,
                "data": {"spec": {"template": {"metadata": {"labels": LABELS}}}},
            },
        ),
        (
            f"/apis/policy/v1/namespaces/{NS}/poddisruptionbudgets",
            {
                "apiVersion": "policy/v1",
                "kind": "PodDisruptionBudget",
                "metadata": _meta("pdb"),
                "spec": {"minAvailable": "50%", "selector": SELECTOR},
            },
        ),
        (
            f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases",
            {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": _meta("lock"),
                "spec": {
                    "holderIdentity": "me",
                    "leaseDurationSeconds": 15,
                    "leaseTransitions": 0,
                    "acquireTime": "2024-01-02T03:04:05.123456Z",
                    "renewTime": "2024-01-02T03:04:07.000001Z",
                },
            },
        ),
        (
            f"/apis/events.k8s.io/v1/namespaces/{NS}/events",
            {
                "apiVersion": "events.k8s.io/v1",
                "kind": "Event",
                "metadata": _meta("ev.2"),
                "eventTime": "2024-01-02T03:04:05.250000Z",
                "series": {"count": 2, "lastObservedTime": "2024-01-02T03:04:09.000000Z"},
                "reportingController": "example.com/ctl",
                "reportingInstance": "ctl-1",
                "action": "Drain",
                "reason": "Drained",
                "regarding": {"kind": "Pod", "namespace": NS, "name": "pod", "apiVersion": "v1"},
                "note": "drained",
                "type": "Normal",
            },
        ),
        (
            f"/apis/rbac.authorization.k8s.io/v1/namespaces/{NS}/roles",
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "Role",
                "metadata": _meta("reader"),
                "rules": [
                    {"verbs": ["get", "list"], "apiGroups": [""], "resources": ["pods", "pods/log"]},
                    {
                        "verbs": ["get"],
                        "apiGroups": ["apps"],
                        "resources": ["deployments"],
                        "resourceNames": ["web"],
                    },
                ],
            },
        ),
        (
            "/apis/rbac.authorization.k8s.io/v1/clusterroles",
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRole",
                "metadata": _meta("pb-reader", False),
                "rules": [{"verbs": ["get"], "nonResourceURLs": ["/healthz"]}],
                "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"agg": "pb"}}]},
            },
        ),
        (
            f"/apis/rbac.authorization.k8s.io/v1/namespaces/{NS}/rolebindings",
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "RoleBinding",
                "metadata": _meta("reader"),
                "subjects": [
                    {"kind": "ServiceAccount", "name": "robot", "namespace": NS},
                    {"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "jane"},
                ],
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "reader"},
            },
        ),
        (
            "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRoleBinding",
                "metadata": _meta("pb-reader", False),
                "subjects": [{"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": "devs"}],
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "ClusterRole",
                    "name": "pb-reader",
                },
            },
        ),
        (
            "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
            {
                "apiVersion": "authorization.k8s.io/v1",
                "kind": "SelfSubjectAccessReview",
                "metadata": {},
                "spec": {"resourceAttributes": {"namespace": NS, "verb": "list", "resource": "pods"}},
            },
        ),
        (
            "/apis/authorization.k8s.io/v1/subjectaccessreviews",
            {
                "apiVersion": "authorization.k8s.io/v1",
                "kind": "SubjectAccessReview",
                "metadata": {},
                "spec": {
                    "user": "jane",
                    "groups": ["devs"],
                    "extra": {"scopes": ["a", "b"]},
                    "resourceAttributes": {
                        "namespace": NS,
                        "verb": "get",
                        "resource": "pods",
                        "subresource": "log",
                    },
                },
            },
        ),
        (
            f"/apis/authorization.k8s.io/v1/namespaces/{NS}/localsubjectaccessreviews",
            {
                "apiVersion": "authorization.k8s.io/v1",
                "kind": "LocalSubjectAccessReview",
                "metadata": {"namespace": NS},
                "spec": {
                    "user": "nobody",
                    "nonResourceAttributes": None,
                    "resourceAttributes": {
                        "namespace": NS,
                        "verb": "delete",
                        "group": "apps",
                        "resource": "deployments",
                    },
                },
            },
        ),
        (
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
            {
                "apiVersion": "apiextensions.k8s.io/v1",
                "kind": "CustomResourceDefinition",
                "metadata": {"name": f"widgets.{CRD_GROUP}"},
                "spec": {
                    "group": CRD_GROUP,
                    "scope": "Namespaced",
                    "names": {
                        "plural": "widgets",
                        "singular": "widget",
                        "kind": "Widget",
                        "listKind": "WidgetList",
                        "shortNames": ["wg"],
                        "categories": ["all"],
                    },
                    "versions": [
                        {
                            "name": "v1",
                            "served": True,
                            "storage": True,
                            "schema": {"openAPIV3Schema": WIDGET_SCHEMA},
                            "subresources": {
                                "status": {},
                                "scale": {
                                    "specReplicasPath": ".spec.replicas",
                                    "statusReplicasPath": ".status.replicas",
                                },
                            },
                            "additionalPrinterColumns": [
                                {"name": "Size", "type": "integer", "jsonPath": ".spec.size", "priority": 1}
                            ],
                        }
                    ],
                    "conversion": {"strategy": "None"},
                },
            },
        ),
    ]
