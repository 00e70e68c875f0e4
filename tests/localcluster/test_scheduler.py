"""The scheduler as a user sees it: pods land on fitting nodes, spread, and say why when they cannot."""

from __future__ import annotations

from collections import Counter
from typing import Any

from apiclient import resources as R
from localcluster.scheduler import NodeInfo, filter_reason
from tests.localcluster.living import (
    condition,
    is_ready,
    living_cluster,
    pods,
    replicaset_with_pods,
)
from tests.support.waiting import eventually, when


async def test_replicaset_pods_are_spread_and_become_ready() -> None:
    async with living_cluster(nodes=3) as (_, kube):
        _, names = await replicaset_with_pods(kube, "web", 6)
        items = await eventually(
            lambda: when(
                pods(kube, selector="app=web"), lambda ps: len(ps) == 6 and all(is_ready(p) for p in ps)
            ),
            "len(ps) == 6 and all(is_ready(p) for p in ps)",
        )
        assert sorted(p["metadata"]["name"] for p in items) == sorted(names)
        assert Counter(p["spec"]["nodeName"] for p in items) == {"node-1": 2, "node-2": 2, "node-3": 2}
        for pod in items:
            status = pod["status"]
            assert status["phase"] == "Running"
            assert status["podIP"] and status["hostIP"] and status["startTime"]
            assert status["containerStatuses"][0]["ready"] is True
            assert "running" in status["containerStatuses"][0]["state"]
            for type_ in ("PodScheduled", "Initialized", "ContainersReady", "Ready"):
                assert condition(pod, type_)["status"] == "True"  # type: ignore[index]
        assert len({p["status"]["podIP"] for p in items}) == 6


async def test_unschedulable_pod_says_why_and_is_retried_when_a_node_changes() -> None:
    async with living_cluster(nodes=3) as (_, kube):
        await kube.create(
            R.PODS,
            {
                "metadata": {"name": "picky"},
                "spec": {"nodeSelector": {"disk": "ssd"}, "containers": [{"name": "c", "image": "nginx"}]},
            },
            namespace="default",
        )
        pod = await eventually(
            lambda: when(
                kube.get(R.PODS, "picky", namespace="default"),
                lambda p: condition(p, "PodScheduled") is not None,
            ),
            "condition(p, 'PodScheduled') is not None",
        )
        cond = condition(pod, "PodScheduled")
        assert cond is not None and cond["status"] == "False" and cond["reason"] == "Unschedulable"
        assert cond["message"].startswith(
            "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector."
        )
        assert "nodeName" not in pod["spec"]
        await kube.patch(R.NODES, "node-2", {"metadata": {"labels": {"disk": "ssd"}}})
        pod = await eventually(
            lambda: when(
                kube.get(R.PODS, "picky", namespace="default"), lambda p: bool(p["spec"].get("nodeName"))
            ),
            "bool(p['spec'].get('nodeName'))",
        )
        assert pod["spec"]["nodeName"] == "node-2"


async def test_cordon_taints_tolerations_and_required_affinity() -> None:
    async with living_cluster(nodes=3) as (_, kube):
        await kube.patch(R.NODES, "node-1", {"spec": {"unschedulable": True}})
        await kube.patch(
            R.NODES,
            "node-2",
            {"spec": {"taints": [{"key": "dedicated", "value": "db", "effect": "NoSchedule"}]}},
        )
        for i in range(3):
            await kube.create(
                R.PODS,
                {"metadata": {"name": f"plain-{i}"}, "spec": {"containers": [{"name": "c", "image": "x"}]}},
                namespace="default",
            )
        await kube.create(
            R.PODS,
            {
                "metadata": {"name": "db"},
                "spec": {
                    "tolerations": [
                        {"key": "dedicated", "operator": "Equal", "value": "db", "effect": "NoSchedule"}
                    ],
                    "affinity": {
                        "nodeAffinity": {
                            "requiredDuringSchedulingIgnoredDuringExecution": {
                                "nodeSelectorTerms": [
                                    {
                                        "matchFields": [
                                            {"key": "metadata.name", "operator": "In", "values": ["node-2"]}
                                        ]
                                    }
                                ]
                            }
                        }
                    },
                    "containers": [{"name": "c", "image": "x"}],
                },
            },
            namespace="default",
        )
        items = await eventually(
            lambda: when(pods(kube), lambda ps: len(ps) == 4 and all(p["spec"].get("nodeName") for p in ps)),
            "len(ps) == 4 and all(p['spec'].get('nodeName') for p in ps)",
        )
        placed = {p["metadata"]["name"]: p["spec"]["nodeName"] for p in items}
        assert placed == {"plain-0": "node-3", "plain-1": "node-3", "plain-2": "node-3", "db": "node-2"}
        # nothing fits: the message counts each reason as the real scheduler does
        await kube.patch(R.NODES, "node-3", {"spec": {"unschedulable": True}})
        await kube.create(
            R.PODS,
            {"metadata": {"name": "late"}, "spec": {"containers": [{"name": "c", "image": "x"}]}},
            namespace="default",
        )
        late = await eventually(
            lambda: when(
                kube.get(R.PODS, "late", namespace="default"),
                lambda p: condition(p, "PodScheduled") is not None,
            ),
            "condition(p, 'PodScheduled') is not None",
        )
        assert condition(late, "PodScheduled")["message"].startswith(  # type: ignore[index]
            "0/3 nodes are available: 1 node(s) had untolerated taint {dedicated: db}, 2 node(s) were unschedulable."
        )


async def test_pod_capacity_and_not_ready_nodes() -> None:
    async with living_cluster(nodes=3, max_pods=2) as (cluster, kube):
        cluster.kubelets["node-3"].set_ready(False)
        for i in range(5):
            await kube.create(
                R.PODS,
                {"metadata": {"name": f"p{i}"}, "spec": {"containers": [{"name": "c", "image": "x"}]}},
                namespace="default",
            )
        items = await eventually(
            lambda: when(
                pods(kube),
                lambda ps: (
                    sum(1 for p in ps if p["spec"].get("nodeName")) == 4
                    and any(condition(p, "PodScheduled") for p in ps if not p["spec"].get("nodeName"))
                ),
            ),
            "sum((1 for p in ps if p['spec'].get('nodeName'))) == 4 and any((condition(p, 'PodScheduled') for p in ps if not p['spec'].get('nodeName')))",
        )
        assert Counter(p["spec"].get("nodeName") for p in items) == {"node-1": 2, "node-2": 2, None: 1}
        waiting = next(p for p in items if not p["spec"].get("nodeName"))
        assert condition(waiting, "PodScheduled")["message"].startswith(  # type: ignore[index]
            "0/3 nodes are available: 1 node(s) had untolerated taint {node.kubernetes.io/not-ready: }, 2 Too many pods."
        )
        cluster.kubelets["node-3"].set_ready(True)
        pod = await eventually(
            lambda: when(
                kube.get(R.PODS, waiting["metadata"]["name"], namespace="default"),
                lambda p: bool(p["spec"].get("nodeName")),
            ),
            "bool(p['spec'].get('nodeName'))",
        )
        assert pod["spec"]["nodeName"] == "node-3"


async def test_a_deployment_run_by_aiokcm_controllers_gets_scheduled_and_ready() -> None:
    from controllers.deployment import DeploymentController
    from controllers.replicaset import ReplicaSetController
    from tests.controllers.harness import running_controllers

    async with living_cluster(nodes=3) as (_, kube):
        async with running_controllers(kube, DeploymentController, ReplicaSetController):
            await kube.create(
                R.DEPLOYMENTS,
                {
                    "metadata": {"name": "web"},
                    "spec": {
                        "replicas": 6,
                        "selector": {"matchLabels": {"app": "web"}},
                        "template": {
                            "metadata": {"labels": {"app": "web"}},
                            "spec": {"containers": [{"name": "app", "image": "nginx:1.27"}]},
                        },
                    },
                },
                namespace="default",
            )
            items = await eventually(
                lambda: when(
                    pods(kube, selector="app=web"), lambda ps: len(ps) == 6 and all(is_ready(p) for p in ps)
                ),
                "len(ps) == 6 and all(is_ready(p) for p in ps)",
            )
            assert Counter(p["spec"]["nodeName"] for p in items) == {"node-1": 2, "node-2": 2, "node-3": 2}
            deployment = await eventually(
                lambda: when(
                    kube.get(R.DEPLOYMENTS, "web", namespace="default"),
                    lambda d: (d.get("status") or {}).get("availableReplicas") == 6,
                ),
                "(d.get('status') or {}).get('availableReplicas') == 6",
            )
            assert deployment["status"]["readyReplicas"] == 6


async def test_a_gated_pod_waits_until_its_scheduling_gates_are_removed() -> None:
    async with living_cluster(nodes=1) as (_, kube):
        await kube.create(
            R.PODS,
            {
                "metadata": {"name": "gated"},
                "spec": {
                    "schedulingGates": [{"name": "example.com/quota"}],
                    "containers": [{"name": "c", "image": "x"}],
                },
            },
            namespace="default",
        )
        pod = await eventually(
            lambda: when(
                kube.get(R.PODS, "gated", namespace="default"),
                lambda p: condition(p, "PodScheduled") is not None,
            ),
            "condition(p, 'PodScheduled') is not None",
        )
        cond = condition(pod, "PodScheduled")
        assert cond is not None and (cond["status"], cond["reason"]) == ("False", "SchedulingGated")
        assert "nodeName" not in pod["spec"]
        await kube.patch(
            R.PODS,
            "gated",
            [{"op": "remove", "path": "/spec/schedulingGates"}],
            namespace="default",
            patch_type="json",
        )
        pod = await eventually(
            lambda: when(kube.get(R.PODS, "gated", namespace="default"), is_ready), "pod gated ready"
        )
        assert pod["spec"]["nodeName"] == "node-1"


def _node(**spec_and_labels: Any) -> NodeInfo:
    labels = spec_and_labels.pop("labels", {})
    return NodeInfo.from_node(
        {
            "metadata": {"name": "n", "labels": labels},
            "spec": spec_and_labels,
            "status": {"conditions": [{"type": "Ready", "status": "True"}]},
        }
    )


def test_filters_judge_tolerations_and_affinity_as_the_controllers_do() -> None:
    """Where the scheduler's own matchers disagreed with Kubernetes, it now follows Kubernetes."""
    tainted = _node(taints=[{"key": "dedicated", "value": "db", "effect": "NoSchedule"}])
    # An unknown toleration operator tolerates nothing (it used to act as Equal).
    bogus = {"tolerations": [{"key": "dedicated", "operator": "Bogus", "value": "db"}]}
    assert filter_reason(bogus, tainted) == "node(s) had untolerated taint {dedicated: db}"
    # An empty key with Equal matches any key with that value (it used to match none).
    assert filter_reason({"tolerations": [{"operator": "Equal", "value": "db"}]}, tainted) is None
    labelled = _node(labels={"zone": "a"})
    affinity: dict[str, Any] = {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": []}}
    exists_with_values = {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "Exists", "values": ["a"]}]}]
    }
    mismatch = "node(s) didn't match Pod's node affinity/selector"
    # `Exists` with values is an invalid requirement: its term matches nothing (it used to match).
    spec = {
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": exists_with_values}}
    }
    assert filter_reason(spec, labelled) == mismatch
    # A required affinity without terms fits no node (an empty one used to fit every node).
    empty: dict[str, Any] = {
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {}}}
    }
    assert filter_reason(empty, labelled) == mismatch
    assert filter_reason({"affinity": {"nodeAffinity": affinity}}, labelled) == mismatch
    assert filter_reason({"nodeSelector": {"zone": "a"}}, labelled) is None
