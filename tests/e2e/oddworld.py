"""A namespace of odd but valid objects, as a real cluster accumulates them over the years.

Every object here is accepted by kube-apiserver; each one is a shape some controller once got
wrong: odd rollout strategies, "no deadline" max-int values, selectors that match nothing or
everything, budgets of 0 and 100 %, pods that tolerate a NoExecute taint for 68 years, pods that
can never be scheduled, a NodeMaintenance whose selector matches no node. `populate` creates
them; the caller waits for the manager to converge and then counts its writes.
"""

from __future__ import annotations

from typing import Any

from apiclient import KubeClient
from apiclient.resources import (
    DEPLOYMENTS,
    NAMESPACES,
    NODEMAINTENANCES,
    NODES,
    PODDISRUPTIONBUDGETS,
    PODS,
    REPLICASETS,
)

MAX_INT32 = 2147483647  # Kubernetes' "no deadline"
MAX_INT64 = 9223372036854775807  # the most tolerationSeconds (an int64) can say
TAINTED_NODE = "node-3"
ODD_TAINT = {"key": "example.com/odd", "value": "x", "effect": "NoExecute"}

Obj = dict[str, Any]


def _template(app: str, **spec: Any) -> Obj:
    return {
        "metadata": {"labels": {"app": app}},
        "spec": {
            "containers": [{"name": "app", "image": "nginx:1"}],
            "terminationGracePeriodSeconds": 0,
            **spec,
        },
    }


def deployment(name: str, replicas: int, *, app: str | None = None, **spec: Any) -> Obj:
    template_spec = spec.pop("template_spec", {})
    return {
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": app or name}},
            "template": _template(app or name, **template_spec),
            **spec,
        },
    }


def deployments() -> list[Obj]:
    forever = {
        "key": ODD_TAINT["key"],
        "operator": "Exists",
        "effect": "NoExecute",
        "tolerationSeconds": MAX_INT32,
    }
    return [
        deployment("recreate", 2, strategy={"type": "Recreate"}),
        deployment(
            "surge-zero",
            2,
            strategy={"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}},
        ),
        deployment(
            "all-percent",
            2,
            strategy={
                "type": "RollingUpdate",
                "rollingUpdate": {"maxSurge": "100%", "maxUnavailable": "100%"},
            },
        ),
        deployment("paused", 1, paused=True),
        deployment("no-deadline", 1, progressDeadlineSeconds=MAX_INT32),
        deployment("never-available", 1, minReadySeconds=86400, progressDeadlineSeconds=MAX_INT32),
        deployment("slow-available", 1, minReadySeconds=86400, progressDeadlineSeconds=86401),
        deployment("no-history", 0, revisionHistoryLimit=0),
        deployment("unschedulable", 1, template_spec={"nodeSelector": {"example.com/nowhere": "true"}}),
        deployment("tolerant", 2, template_spec={"tolerations": [forever]}),
        # two Deployments with one selector: each keeps to the ReplicaSets it owns
        deployment("overlap-a", 1, app="overlap"),
        deployment("overlap-b", 1, app="overlap"),
    ]


def replica_sets() -> list[Obj]:
    return [
        {
            "metadata": {"name": "bare-zero"},
            "spec": {
                "replicas": 0,
                "selector": {"matchLabels": {"app": "bare-zero"}},
                "template": _template("bare-zero"),
            },
        },
        {
            "metadata": {"name": "bare-slow"},
            "spec": {
                "replicas": 1,
                "minReadySeconds": MAX_INT32,
                "selector": {"matchLabels": {"app": "bare-slow"}},
                "template": _template("bare-slow"),
            },
        },
    ]


def budgets() -> list[Obj]:
    def pdb(name: str, selector: Obj, **spec: Any) -> Obj:
        return {"metadata": {"name": name}, "spec": {"selector": selector, **spec}}

    return [
        pdb("nothing-zero", {"matchLabels": {"app": "nobody"}}, minAvailable=0),
        pdb("everything-all", {}, maxUnavailable="100%"),
        pdb("all-must-stay", {"matchLabels": {"app": "recreate"}}, minAvailable="100%"),
        pdb("none-may-go", {"matchLabels": {"app": "tolerant"}}, maxUnavailable=0),
        pdb(
            "always-allow",
            {"matchLabels": {"app": "surge-zero"}},
            minAvailable=1,
            unhealthyPodEvictionPolicy="AlwaysAllow",
        ),
        pdb("bare-pods-percent", {"matchLabels": {"kind": "bare"}}, maxUnavailable="50%"),
        pdb("expression", {"matchExpressions": [{"key": "app", "operator": "DoesNotExist"}]}, minAvailable=1),
    ]


def bare_pods() -> list[Obj]:
    def pod(name: str, **spec: Any) -> Obj:
        return {
            "metadata": {"name": name, "labels": {"kind": "bare"}},
            "spec": {
                "containers": [{"name": "app", "image": "nginx:1"}],
                "terminationGracePeriodSeconds": 0,
                **spec,
            },
        }

    tolerate = {"key": ODD_TAINT["key"], "operator": "Exists", "effect": "NoExecute"}
    return [
        pod("tolerates-forever", tolerations=[tolerate]),
        # on the node `taint_node` taints: the taint manager must schedule their deletion decades out
        pod(
            "tolerates-68-years",
            nodeName=TAINTED_NODE,
            tolerations=[{**tolerate, "tolerationSeconds": MAX_INT32}],
        ),
        pod(
            "tolerates-int64-max",
            nodeName=TAINTED_NODE,
            tolerations=[{**tolerate, "tolerationSeconds": MAX_INT64}],
        ),
        pod("tolerates-everything", tolerations=[{"operator": "Exists"}]),
        pod("pending-forever", nodeSelector={"example.com/nowhere": "true"}),
        pod("pinned", nodeName="node-1"),
    ]


def maintenances(prefix: str) -> list[Obj]:
    nowhere = {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "example.com/nowhere", "operator": "Exists"}]}]
    }
    no_name = {
        "nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["no-such-node"]}]}
        ]
    }
    kind = {"apiVersion": "maintenance.aiokcm.io/v1alpha1", "kind": "NodeMaintenance"}
    return [
        {
            **kind,
            "metadata": {"name": f"{prefix}-nowhere"},
            "spec": {
                "nodeSelector": nowhere,
                "cordon": True,
                "drain": True,
                "reason": "matches nothing",
                "evacuationTimeoutSeconds": MAX_INT32,
            },
        },
        {
            **kind,
            "metadata": {"name": f"{prefix}-no-such-node"},
            "spec": {"nodeSelector": no_name, "cordon": False, "drain": False},
        },
    ]


async def taint_node(kube: KubeClient, node: str = TAINTED_NODE) -> None:
    """A NoExecute taint nothing but the tolerant pods survive, and a NoSchedule one beside it."""
    await kube.patch(
        NODES,
        node,
        {
            "spec": {
                "taints": [ODD_TAINT, {"key": "example.com/reserved", "value": "x", "effect": "NoSchedule"}]
            }
        },
    )


async def populate(kube: KubeClient, namespace: str, *, maintenance: bool = True) -> int:
    """Create the odd objects in `namespace` (created here); returns how many objects were created."""
    await kube.create(NAMESPACES, {"metadata": {"name": namespace}})
    count = 1
    for res, bodies in (
        (DEPLOYMENTS, deployments()),
        (REPLICASETS, replica_sets()),
        (PODDISRUPTIONBUDGETS, budgets()),
        (PODS, bare_pods()),
    ):
        for body in bodies:
            await kube.create(res, body, namespace=namespace)
            count += 1
    if maintenance:
        for body in maintenances(namespace):
            await kube.create(NODEMAINTENANCES, body)
            count += 1
    return count
