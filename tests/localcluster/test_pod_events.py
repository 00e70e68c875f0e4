"""The events a pod's life records: the scheduler's `Scheduled`, the kubelet's per-container
`Pulling` / `Pulled` / `Created` / `Started` and `Killing`, as `kubectl describe pod` shows them.

The Scheduled event is checked on both backends (kube-scheduler runs on the real tier); the
kubelet's only locally (the real tier's kubelets are this project's own simulation).
"""

from __future__ import annotations

import shutil
from typing import Any

import pytest

from apiclient import KubeClient
from apiclient import resources as R
from localcluster.cluster import LocalCluster
from tests.localcluster.living import SPEED, is_ready, living_cluster
from tests.localcluster.test_fidelity_api import kubectl
from tests.support.objects import pod
from tests.support.waiting import eventually, holds, when

needs_kubectl = pytest.mark.skipif(shutil.which("kubectl") is None, reason="needs the kubectl binary")


async def _events(kube: KubeClient, name: str) -> list[dict[str, Any]]:
    found = await kube.list(R.EVENTS, namespace="default", field_selector=f"involvedObject.name={name}")
    items: list[dict[str, Any]] = found["items"]
    return items


def _reasons(events: list[dict[str, Any]]) -> list[str]:
    return [e["reason"] for e in events]


@pytest.mark.backends("local", "real")
async def test_the_scheduler_records_scheduled_through_the_events_api(kube: KubeClient) -> None:
    await kube.create(R.PODS, pod("sched-me"), namespace="default")
    events = await eventually(
        lambda: when(_events(kube, "sched-me"), lambda evs: "Scheduled" in _reasons(evs)),
        "'Scheduled' in _reasons(evs)",
    )
    scheduled = next(e for e in events if e["reason"] == "Scheduled")
    node = (await kube.get(R.PODS, "sched-me", namespace="default"))["spec"]["nodeName"]
    assert scheduled["message"] == f"Successfully assigned default/sched-me to {node}"
    assert (scheduled["type"], scheduled["action"], scheduled["reportingComponent"]) == (
        "Normal",
        "Binding",
        "default-scheduler",
    )
    assert scheduled["reportingInstance"].startswith("default-scheduler-") and scheduled["eventTime"]
    assert scheduled["involvedObject"]["kind"] == "Pod" and not scheduled.get("source")


async def test_the_kubelet_records_each_containers_start_and_stop() -> None:
    async with living_cluster(nodes=1) as (_cluster, kube):
        two = pod("first", restartPolicy="Always")
        two["spec"]["containers"].append(
            {"name": "side", "image": "busybox:1.36", "imagePullPolicy": "Always"}
        )
        await kube.create(R.PODS, two, namespace="default")
        await eventually(
            lambda: holds(kube.get(R.PODS, "first", namespace="default"), is_ready), "pod first ready"
        )
        events = await eventually(
            lambda: when(_events(kube, "first"), lambda evs: _reasons(evs).count("Started") == 2),
            "_reasons(evs).count('Started') == 2",
        )
        by_container: dict[str, list[tuple[str, str]]] = {}
        for e in sorted(events, key=lambda e: e["metadata"]["name"]):
            if e["reason"] != "Scheduled":
                by_container.setdefault(e["involvedObject"]["fieldPath"], []).append(
                    (e["reason"], e["message"])
                )
                assert e["source"] == {"component": "kubelet", "host": "node-1"}
        pull = by_container["spec.containers{c}"][1][1]
        assert pull.startswith('Successfully pulled image "nginx:1.27" in ')
        assert by_container["spec.containers{c}"] == [
            ("Pulling", 'Pulling image "nginx:1.27"'),
            ("Pulled", pull),
            ("Created", "Created container c"),
            ("Started", "Started container c"),
        ]
        assert [r for r, _ in by_container["spec.containers{side}"]] == [
            "Pulling",
            "Pulled",
            "Created",
            "Started",
        ]

        # the node has nginx now; busybox is pulled again (imagePullPolicy Always)
        await kube.create(R.PODS, two | {"metadata": {"name": "second"}}, namespace="default")
        events = await eventually(
            lambda: when(_events(kube, "second"), lambda evs: _reasons(evs).count("Started") == 2),
            "_reasons(evs).count('Started') == 2",
        )
        messages = {(e["involvedObject"].get("fieldPath"), e["reason"]): e["message"] for e in events}
        assert (
            messages[("spec.containers{c}", "Pulled")]
            == 'Container image "nginx:1.27" already present on machine'
        )
        assert ("spec.containers{c}", "Pulling") not in messages
        assert messages[("spec.containers{side}", "Pulling")] == 'Pulling image "busybox:1.36"'

        await kube.delete(R.PODS, "first", namespace="default")
        events = await eventually(
            lambda: when(_events(kube, "first"), lambda evs: _reasons(evs).count("Killing") == 2),
            "_reasons(evs).count('Killing') == 2",
        )
        assert {e["message"] for e in events if e["reason"] == "Killing"} == {
            "Stopping container c",
            "Stopping container side",
        }


@needs_kubectl
async def test_kubectl_describe_pod_shows_the_events() -> None:
    async with living_cluster(nodes=1) as (cluster, kube):
        await kube.create(R.PODS, pod("described"), namespace="default")
        await eventually(
            lambda: holds(_events(kube, "described"), lambda evs: "Started" in _reasons(evs)),
            "'Started' in _reasons(evs)",
        )
        code, out, err = await kubectl(cluster, "describe", "pod", "described", "-n", "default")
        assert code == 0, err
        lines = out.split("Events:", 1)[1].splitlines()
        rows = [line.split(None, 4) for line in lines if line.strip().startswith("Normal")]
        assert [(r[1], r[3]) for r in rows] == [
            ("Scheduled", "default-scheduler"),
            ("Pulling", "kubelet"),
            ("Pulled", "kubelet"),
            ("Created", "kubelet"),
            ("Started", "kubelet"),
        ]


async def test_pod_events_can_be_switched_off_for_big_worlds() -> None:
    async with LocalCluster(nodes=1, speed=SPEED, pod_events=False) as cluster:
        kube = await cluster.client()
        try:
            await kube.create(R.PODS, pod("quiet"), namespace="default")
            await eventually(
                lambda: holds(kube.get(R.PODS, "quiet", namespace="default"), is_ready), "pod quiet ready"
            )
            assert await _events(kube, "quiet") == []
        finally:
            await kube.close()
