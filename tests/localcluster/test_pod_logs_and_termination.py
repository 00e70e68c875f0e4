"""`kubectl logs` against the simulated kubelets, and a deleted pod's last status.

Local only: on the real tier the apiserver proxies logs to a kubelet's HTTP port, which the
real tier's simulated kubelets do not serve.
"""

from __future__ import annotations

import asyncio
import shutil
from typing import Any

import anyio
import pytest

from apiclient import ApiError
from apiclient import resources as R
from tests.localcluster.living import is_ready, living_cluster
from tests.localcluster.test_fidelity_api import kubectl
from tests.support.waiting import eventually, holds, when

needs_kubectl = pytest.mark.skipif(shutil.which("kubectl") is None, reason="needs the kubectl binary")


def _pod(name: str, *containers: str, grace: int = 30) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {
            "terminationGracePeriodSeconds": grace,
            "containers": [{"name": c, "image": f"registry.example/{c}:1"} for c in containers],
        },
    }


@needs_kubectl
async def test_kubectl_logs_answers_with_a_short_simulated_log() -> None:
    async with living_cluster(nodes=1) as (cluster, kube):
        await kube.create(R.PODS, _pod("one", "app"), namespace="default")
        await kube.create(R.PODS, _pod("two", "web", "sidecar"), namespace="default")
        for name in ("one", "two"):
            await eventually(
                lambda name=name: holds(kube.get(R.PODS, name, namespace="default"), is_ready),
                f"pod {name} ready",
            )  # type: ignore[misc]

        code, out, err = await kubectl(cluster, "logs", "one")
        assert code == 0, err
        assert "simulated container app started from image registry.example/app:1 on node node-1" in out
        code, out, _ = await kubectl(cluster, "logs", "one", "--timestamps", "--tail=1")
        assert code == 0 and len(out.splitlines()) == 1 and out[:4].isdigit() and "Z " in out

        code, out, err = await kubectl(cluster, "logs", "two")  # kubectl picks the first container itself
        assert code == 0 and "container web" in out and 'Defaulted container "web"' in err
        with pytest.raises(ApiError) as unnamed:
            await kube.request("GET", "/api/v1/namespaces/default/pods/two/log")
        assert unnamed.value.status == 400
        assert (
            "a container name must be specified for pod two, choose one of: [web sidecar]"
            in unnamed.value.message
        )
        code, out, _ = await kubectl(cluster, "logs", "two", "-c", "sidecar")
        assert code == 0 and "container sidecar" in out
        code, _, err = await kubectl(cluster, "logs", "two", "-c", "nope")
        assert code != 0 and "container nope is not valid for pod two" in err
        code, _, err = await kubectl(cluster, "logs", "one", "--previous")
        assert code != 0 and 'previous terminated container "app" in pod "one" not found' in err
        code, _, err = await kubectl(cluster, "logs", "missing")
        assert code != 0 and 'pods "missing" not found' in err

        code, _, err = await kubectl(cluster, "exec", "one", "--", "true")
        assert code != 0 and "exec is not supported by the embedded cluster" in err


@needs_kubectl
async def test_kubectl_logs_follow_ends_when_the_container_stops() -> None:
    async with living_cluster(nodes=1, speed=1.0, pod_start_delay=0.1, termination_cap=0.5) as (
        cluster,
        kube,
    ):
        await kube.create(R.PODS, _pod("tail", "app"), namespace="default")
        await eventually(
            lambda: holds(kube.get(R.PODS, "tail", namespace="default"), is_ready), "pod tail ready"
        )
        follow = asyncio.ensure_future(kubectl(cluster, "logs", "-f", "tail"))
        try:
            await asyncio.sleep(0.5)
            assert not follow.done()  # still following a running container
            await kube.delete(R.PODS, "tail", namespace="default")
            with anyio.fail_after(20):
                code, out, err = await follow
        finally:
            follow.cancel()
        assert code == 0, err
        assert out.splitlines()[-1] == "stopped with exit code 0 (Completed)"


async def test_a_deleted_pod_reports_its_containers_terminated_before_it_goes() -> None:
    async with living_cluster(nodes=1, speed=1.0, pod_start_delay=0.1, termination_cap=0.3) as (_, kube):
        await kube.create(R.PODS, _pod("calm", "app"), namespace="default")
        await eventually(
            lambda: holds(kube.get(R.PODS, "calm", namespace="default"), is_ready), "pod calm ready"
        )
        listed = await kube.list(R.PODS, namespace="default")
        seen: list[dict[str, Any]] = []

        async def watch(stream_done: anyio.Event) -> None:
            async with kube.watch(
                R.PODS,
                namespace="default",
                resource_version=listed["metadata"]["resourceVersion"],
                allow_bookmarks=False,
            ) as stream:
                async for ev in stream:
                    seen.append({"type": ev.type, **ev.object})
                    if ev.type == "DELETED" and ev.object["metadata"]["name"] == "calm":
                        stream_done.set()
                        return

        done = anyio.Event()
        async with anyio.create_task_group() as tg:
            tg.start_soon(watch, done)
            await kube.delete(R.PODS, "calm", namespace="default")  # 30 s grace: stops within it
            with anyio.fail_after(20):
                await done.wait()
        last = [e for e in seen if e["metadata"]["name"] == "calm" and e["type"] == "MODIFIED"][-1]
        assert last["status"]["phase"] == "Succeeded"
        ready = {c["type"]: c for c in last["status"]["conditions"]}
        assert ready["Ready"]["status"] == "False" and ready["ContainersReady"]["status"] == "False"
        terminated = last["status"]["containerStatuses"][0]["state"]["terminated"]
        assert (
            terminated["exitCode"] == 0 and terminated["reason"] == "Completed" and terminated["finishedAt"]
        )
        assert last["status"]["containerStatuses"][0]["ready"] is False


async def test_a_pod_killed_at_the_end_of_its_grace_period_fails() -> None:
    async with living_cluster(nodes=1, speed=1.0, pod_start_delay=0.1, termination_cap=2.0) as (_, kube):
        body = _pod("stubborn", "app", grace=1)  # stops only when killed, 1 s after the delete
        body["metadata"]["finalizers"] = ["example.com/hold"]  # kept after the kubelet is done, to be read
        await kube.create(R.PODS, body, namespace="default")
        await eventually(
            lambda: holds(kube.get(R.PODS, "stubborn", namespace="default"), is_ready), "pod stubborn ready"
        )
        await kube.delete(R.PODS, "stubborn", namespace="default")
        pod = await eventually(
            lambda: when(
                kube.get(R.PODS, "stubborn", namespace="default"),
                lambda p: p["status"]["phase"] in ("Succeeded", "Failed"),
            ),
            "p['status']['phase'] in ('Succeeded', 'Failed')",
        )
        assert pod["status"]["phase"] == "Failed"
        assert pod["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 137
        await kube.patch(R.PODS, "stubborn", {"metadata": {"finalizers": None}}, namespace="default")
        with anyio.fail_after(10):
            await eventually(
                lambda: holds(
                    kube.list(R.PODS, namespace="default", field_selector="metadata.name=stubborn"),
                    lambda listed: not listed["items"],
                ),
                "not listed['items']",
            )
