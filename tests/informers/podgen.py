"""Realistic pods, shaped like a Deployment's pods as a 1.30 API server returns them.

Used by the benchmark (bytes per cached pod are only meaningful for a pod of a realistic size:
about 4.5 KB of JSON, a third of it `managedFields`) and by tests that need full objects.
"""

from __future__ import annotations

from typing import Any

Obj = dict[str, Any]


def realistic_pod(i: int, *, namespaces: int = 20, nodes: int = 500) -> Obj:
    ns = f"team-{i % namespaces}"
    rs = f"web-{i % 97:02d}-7d9f8c6b5"
    name = f"{rs}-{i:06x}"
    node = f"node-{i % nodes:04d}"
    ts = "2026-11-20T10:15:30Z"
    owner_uid = f"5c3f0b7e-0000-4000-8000-{i % 97:012d}"
    fields_status: Obj = {
        "f:conditions": {
            f'k:{{"type":"{t}"}}': {
                ".": {},
                "f:lastProbeTime": {},
                "f:lastTransitionTime": {},
                "f:status": {},
                "f:type": {},
            }
            for t in ("ContainersReady", "Initialized", "PodReadyToStartContainers", "PodScheduled", "Ready")
        },
        "f:containerStatuses": {},
        "f:hostIP": {},
        "f:hostIPs": {},
        "f:phase": {},
        "f:podIP": {},
        "f:podIPs": {".": {}, 'k:{"ip":"10.244.1.5"}': {".": {}, "f:ip": {}}},
        "f:startTime": {},
    }
    fields_spec = {
        "f:metadata": {
            "f:generateName": {},
            "f:labels": {".": {}, "f:app": {}, "f:pod-template-hash": {}},
            "f:ownerReferences": {".": {}, f'k:{{"uid":"{owner_uid}"}}': {}},
        },
        "f:spec": {
            "f:containers": {
                'k:{"name":"web"}': {
                    ".": {},
                    "f:image": {},
                    "f:imagePullPolicy": {},
                    "f:name": {},
                    "f:ports": {},
                    "f:resources": {},
                    "f:env": {},
                }
            },
            "f:dnsPolicy": {},
            "f:enableServiceLinks": {},
            "f:restartPolicy": {},
            "f:schedulerName": {},
            "f:securityContext": {},
            "f:terminationGracePeriodSeconds": {},
        },
    }
    conditions = [
        {"type": t, "status": "True", "lastProbeTime": None, "lastTransitionTime": ts}
        for t in ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled")
    ]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "generateName": f"{rs}-",
            "namespace": ns,
            "uid": f"0a1b2c3d-{i:04x}-4e5f-8a9b-{i:012x}"[-36:],
            "resourceVersion": str(1000 + i),
            "creationTimestamp": ts,
            "labels": {"app": f"web-{i % 97:02d}", "pod-template-hash": "7d9f8c6b5"},
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "name": rs,
                    "uid": owner_uid,
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
            "managedFields": [
                {
                    "manager": "kube-controller-manager",
                    "operation": "Update",
                    "apiVersion": "v1",
                    "time": ts,
                    "fieldsType": "FieldsV1",
                    "fieldsV1": fields_spec,
                },
                {
                    "manager": "kubelet",
                    "operation": "Update",
                    "apiVersion": "v1",
                    "time": ts,
                    "fieldsType": "FieldsV1",
                    "fieldsV1": {"f:status": fields_status},
                    "subresource": "status",
                },
            ],
        },
        "spec": {
            "volumes": [
                {
                    "name": "kube-api-access-x7k2p",
                    "projected": {
                        "sources": [
                            {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                            {
                                "configMap": {
                                    "name": "kube-root-ca.crt",
                                    "items": [{"key": "ca.crt", "path": "ca.crt"}],
                                }
                            },
                            {
                                "downwardAPI": {
                                    "items": [
                                        {
                                            "path": "namespace",
                                            "fieldRef": {
                                                "apiVersion": "v1",
                                                "fieldPath": "metadata.namespace",
                                            },
                                        }
                                    ]
                                }
                            },
                        ],
                        "defaultMode": 420,
                    },
                }
            ],
            "containers": [
                {
                    "name": "web",
                    "image": "registry.example.com/team/web:1.27.3",
                    "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}],
                    "env": [
                        {"name": "LOG_LEVEL", "value": "info"},
                        {
                            "name": "POD_NAME",
                            "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}},
                        },
                    ],
                    "resources": {
                        "limits": {"cpu": "500m", "memory": "256Mi"},
                        "requests": {"cpu": "100m", "memory": "128Mi"},
                    },
                    "volumeMounts": [
                        {
                            "name": "kube-api-access-x7k2p",
                            "readOnly": True,
                            "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
                        }
                    ],
                    "terminationMessagePath": "/dev/termination-log",
                    "terminationMessagePolicy": "File",
                    "imagePullPolicy": "IfNotPresent",
                }
            ],
            "restartPolicy": "Always",
            "terminationGracePeriodSeconds": 30,
            "dnsPolicy": "ClusterFirst",
            "serviceAccountName": "default",
            "serviceAccount": "default",
            "nodeName": node,
            "securityContext": {},
            "schedulerName": "default-scheduler",
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
        },
        "status": {
            "phase": "Running",
            "conditions": conditions,
            "hostIP": f"172.18.{i % 250}.{i % 200 + 2}",
            "hostIPs": [{"ip": f"172.18.{i % 250}.{i % 200 + 2}"}],
            "podIP": f"10.244.{i % 250}.{i % 200 + 5}",
            "podIPs": [{"ip": f"10.244.{i % 250}.{i % 200 + 5}"}],
            "startTime": ts,
            "containerStatuses": [
                {
                    "name": "web",
                    "state": {"running": {"startedAt": ts}},
                    "lastState": {},
                    "ready": True,
                    "restartCount": 0,
                    "image": "registry.example.com/team/web:1.27.3",
                    "imageID": "registry.example.com/team/web@sha256:4f1c0b0a8e5d3c2b1a09f8e7d6c5b4a39281706f5e4d3c2b1a0f9e8d7c6b5a49",
                    "containerID": f"containerd://{i:064x}",
                    "started": True,
                }
            ],
            "qosClass": "Burstable",
        },
    }
