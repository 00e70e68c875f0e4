"""StatefulSets and DaemonSets get their pods, as KCM's controllers give them, on both backends.

Driven through the real kubectl (apply, scale, cordon, taint, delete) and watched with
kubernetes_asyncio: what a drain test needs from them is that the pods exist, carry the labels
and controller references KCM puts on them, appear and go in the order the policy says, and that
a DaemonSet follows its nodes (a new node gets a pod, a cordoned one keeps it).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import shutil
import tempfile
from collections.abc import AsyncIterator, Awaitable
from typing import Any

import anyio
import pytest
import yaml

from apiclient import KubeClient
from apiclient.resources import CONFIGMAPS, DAEMONSETS, EVENTS, NODES, PODS, SERVICES, STATEFULSETS, Resource
from localcluster.cluster import LocalCluster
from tests.backends import cluster_on_backend
from tests.support.waiting import eventually

pytestmark = [
    pytest.mark.kubectl,
    pytest.mark.backends("local", "real"),
    pytest.mark.skipif(shutil.which("kubectl") is None, reason="needs the kubectl binary"),
]

NS = "default"
SERVICEACCOUNTS = Resource("", "v1", "serviceaccounts", "ServiceAccount", True)
CONTROLLERREVISIONS = Resource("apps", "v1", "controllerrevisions", "ControllerRevision", True)


@pytest.fixture
async def cluster(request: pytest.FixtureRequest) -> AsyncIterator[Any]:
    """Scheduler, kubelets and the controllers run: pods start and become Ready by themselves."""
    async with cluster_on_backend(request, nodes=3, pod_start_delay=0.2, termination_cap=0.5) as started:
        yield started


async def kubectl(cluster: Any, *args: str, stdin: str | None = None) -> str:
    cache = tempfile.mkdtemp(prefix="kubectl-cache-")
    try:
        proc = await asyncio.create_subprocess_exec(
            "kubectl",
            "--kubeconfig",
            cluster.kubeconfig_path,
            "--cache-dir",
            cache,
            *args,
            stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        out, _ = await proc.communicate(stdin.encode() if stdin is not None else None)
        assert proc.returncode == 0, f"kubectl {' '.join(args)}: {out.decode()}"
        return out.decode()
    finally:
        shutil.rmtree(cache, ignore_errors=True)


def statefulset(name: str, replicas: int, *, policy: str = "OrderedReady") -> str:
    return f"""
apiVersion: apps/v1
kind: StatefulSet
metadata: {{name: {name}}}
spec:
  replicas: {replicas}
  serviceName: {name}
  podManagementPolicy: {policy}
  selector: {{matchLabels: {{app: {name}}}}}
  template:
    metadata: {{labels: {{app: {name}}}}}
    spec:
      terminationGracePeriodSeconds: 1
      containers: [{{name: c, image: "nginx:1.27"}}]
"""


def daemonset(name: str, *, node_selector: dict[str, str] | None = None) -> str:
    selector = f"\n      nodeSelector: {node_selector}" if node_selector else ""
    return f"""
apiVersion: apps/v1
kind: DaemonSet
metadata: {{name: {name}}}
spec:
  selector: {{matchLabels: {{app: {name}}}}}
  template:
    metadata: {{labels: {{app: {name}}}}}
    spec:{selector}
      terminationGracePeriodSeconds: 1
      containers: [{{name: c, image: "nginx:1.27"}}]
"""


def ready(pod: dict[str, Any]) -> bool:
    status = pod.get("status") or {}
    return status.get("phase") == "Running" and any(
        c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or []
    )


async def pods_of(kube: KubeClient, app: str) -> dict[str, dict[str, Any]]:
    pods = await kube.list_all(PODS, namespace=NS, label_selector=f"app={app}")
    return {p["metadata"]["name"]: p for p in pods}


@contextlib.asynccontextmanager
async def recording(kube: KubeClient, app: str) -> AsyncIterator[list[tuple[str, dict[str, Any]]]]:
    """Every watch event of the app's pods, in order, while the block runs."""
    events: list[tuple[str, dict[str, Any]]] = []
    listed = await kube.list(PODS, namespace=NS, label_selector=f"app={app}")

    async def watch() -> None:
        async with kube.watch(
            PODS,
            namespace=NS,
            label_selector=f"app={app}",
            resource_version=listed["metadata"]["resourceVersion"],
            allow_bookmarks=False,
        ) as stream:
            async for ev in stream:
                events.append((ev.type, ev.object))

    async with anyio.create_task_group() as tg:
        tg.start_soon(watch)
        try:
            yield events
        finally:
            tg.cancel_scope.cancel()


async def sts_settled(kube: KubeClient, name: str, replicas: int) -> dict[str, Any] | None:
    sts = await kube.get(STATEFULSETS, name, namespace=NS)
    st = sts.get("status") or {}
    done = (
        st.get("observedGeneration") == sts["metadata"]["generation"]
        and st.get("replicas") == replicas
        and st.get("readyReplicas", 0) == replicas
        and st.get("currentRevision") == st.get("updateRevision")
    )
    return sts if done else None


# -- StatefulSet ----------------------------------------------------------------------------


async def test_statefulset_ordered_ready_creates_one_at_a_time(cluster: Any, kube: KubeClient) -> None:
    async with recording(kube, "web") as events:
        await kubectl(cluster, "apply", "-f", "-", stdin=statefulset("web", 3))
        sts = await eventually(lambda: sts_settled(kube, "web", 3), "3 ready replicas")
        await eventually(lambda: sum(t == "ADDED" for t, _ in events) == 3, "the three ADDED events")

    # each ordinal appears only once every lower one is Running and Ready
    latest: dict[str, dict[str, Any]] = {}
    created: list[str] = []
    for kind, pod in events:
        name = pod["metadata"]["name"]
        if kind == "ADDED":
            ordinal = int(name.rsplit("-", 1)[1])
            assert all(ready(latest[f"web-{i}"]) for i in range(ordinal)), (
                f"{name} made before its predecessors were ready"
            )
            created.append(name)
        latest[name] = pod
    assert created == ["web-0", "web-1", "web-2"]

    pods = await pods_of(kube, "web")
    status = sts["status"]
    assert set(pods) == {"web-0", "web-1", "web-2"}
    for name, pod in pods.items():
        labels = pod["metadata"]["labels"]
        assert labels["statefulset.kubernetes.io/pod-name"] == name
        assert labels["controller-revision-hash"] == status["updateRevision"]
        owner = pod["metadata"]["ownerReferences"]
        assert [(o["kind"], o["name"], o["uid"], o.get("controller")) for o in owner] == [
            ("StatefulSet", "web", sts["metadata"]["uid"], True)
        ]
        assert pod["spec"]["hostname"] == name and pod["spec"]["subdomain"] == "web"
    assert status["currentReplicas"] == status["updatedReplicas"] == 3
    revisions = await kube.list(CONTROLLERREVISIONS, namespace=NS)
    assert status["updateRevision"] in {r["metadata"]["name"] for r in revisions["items"]}

    async def recorded() -> set[str]:
        events = await kube.list(
            EVENTS, namespace=NS, field_selector="involvedObject.kind=StatefulSet,involvedObject.name=web"
        )
        return {e["message"] for e in events["items"] if e["reason"] == "SuccessfulCreate"}

    expected = {f"create Pod web-{i} in StatefulSet web successful" for i in range(3)}
    await eventually(lambda: _superset(recorded(), expected), "a SuccessfulCreate event per pod")


async def _superset(found: Awaitable[set[str]], expected: set[str]) -> bool:
    return expected <= await found


async def test_statefulset_scales_down_in_reverse_and_recreates_a_deleted_pod(
    cluster: Any, kube: KubeClient
) -> None:
    await kubectl(cluster, "apply", "-f", "-", stdin=statefulset("db", 3))
    await eventually(lambda: sts_settled(kube, "db", 3), "3 ready replicas")

    before = (await pods_of(kube, "db"))["db-1"]["metadata"]["uid"]
    await kubectl(cluster, "delete", "pod", "db-1", "-n", NS, "--wait=false")

    async def replaced() -> bool:
        pod = (await pods_of(kube, "db")).get("db-1")
        return pod is not None and pod["metadata"]["uid"] != before and ready(pod)

    await eventually(replaced, "db-1 made again under its name")

    async with recording(kube, "db") as events:
        await kubectl(cluster, "scale", "statefulset", "db", "--replicas=1", "-n", NS)
        await eventually(lambda: sts_settled(kube, "db", 1), "scaled to 1")
        await eventually(lambda: sum(t == "DELETED" for t, _ in events) == 2, "two pods gone")
    gone = [pod["metadata"]["name"] for kind, pod in events if kind == "DELETED"]
    assert gone == ["db-2", "db-1"]
    # db-1 was asked to go only once db-2 had gone
    marked = next(
        i
        for i, (kind, pod) in enumerate(events)
        if pod["metadata"]["name"] == "db-1" and pod["metadata"].get("deletionTimestamp")
    )
    first_gone = next(i for i, (kind, _) in enumerate(events) if kind == "DELETED")
    assert first_gone < marked
    assert set(await pods_of(kube, "db")) == {"db-0"}


async def test_statefulset_parallel_creates_all_at_once(cluster: Any, kube: KubeClient) -> None:
    async with recording(kube, "par") as events:
        await kubectl(cluster, "apply", "-f", "-", stdin=statefulset("par", 3, policy="Parallel"))
        await eventually(lambda: sts_settled(kube, "par", 3), "3 ready replicas")
    added = [i for i, (kind, _) in enumerate(events) if kind == "ADDED"]
    first_ready = next(i for i, (_, pod) in enumerate(events) if ready(pod))
    assert len(added) == 3 and max(added) < first_ready


@pytest.mark.backends("local")  # spec.ordinals came in 1.26, after the real tier's 1.24
async def test_statefulset_ordinals_start(cluster: Any, kube: KubeClient) -> None:
    body = statefulset("idx", 2, policy="Parallel").replace(
        "  replicas: 2\n", "  replicas: 2\n  ordinals: {start: 5}\n"
    )
    await kubectl(cluster, "apply", "-f", "-", stdin=body)
    await eventually(lambda: sts_settled(kube, "idx", 2), "2 ready replicas")
    pods = await pods_of(kube, "idx")
    assert set(pods) == {"idx-5", "idx-6"}
    assert pods["idx-6"]["metadata"]["labels"]["apps.kubernetes.io/pod-index"] == "6"


# -- DaemonSet ------------------------------------------------------------------------------


async def ds_settled(kube: KubeClient, name: str, nodes: int) -> dict[str, Any] | None:
    ds = await kube.get(DAEMONSETS, name, namespace=NS)
    st = ds.get("status") or {}
    done = (
        st.get("observedGeneration") == ds["metadata"]["generation"]
        and st.get("desiredNumberScheduled") == nodes
        and st.get("currentNumberScheduled") == nodes
        and st.get("numberReady") == nodes
        and st.get("numberAvailable") == nodes
        and st.get("updatedNumberScheduled") == nodes
    )
    return ds if done else None


async def daemonset_settles(kube: KubeClient, name: str, nodes: int, what: str) -> dict[str, Any]:
    """Wait for `ds_settled`; on a timeout say where the DaemonSet stood: its status, its pods and
    the nodes' taints and readiness (a new node's pod passes through the scheduler, the simulated
    kubelet and KCM's controller, and which one it waits on is the question)."""
    try:
        found: dict[str, Any] = await eventually(lambda: ds_settled(kube, name, nodes), what)
        return found
    except AssertionError as exc:
        ds = await kube.get(DAEMONSETS, name, namespace=NS)
        pods = [
            (
                (p.get("spec") or {}).get("nodeName"),
                (p.get("status") or {}).get("phase"),
                ready(p),
                bool(p["metadata"].get("deletionTimestamp")),
            )
            for p in (await pods_of(kube, name)).values()
        ]
        node_states = [
            (
                n["metadata"]["name"],
                [t.get("key") for t in (n.get("spec") or {}).get("taints") or []],
                [
                    c.get("status")
                    for c in (n.get("status") or {}).get("conditions") or []
                    if c.get("type") == "Ready"
                ],
                ((n.get("status") or {}).get("allocatable") or {}).get("pods"),
            )
            for n in (await kube.list(NODES)).get("items") or []
        ]
        raise AssertionError(
            f"{exc}: status {ds.get('status')}, generation {ds['metadata'].get('generation')}; "
            f"pods (node, phase, ready, deleting) {sorted(pods, key=str)}; "
            f"nodes (name, taints, Ready, pods) {node_states}"
        ) from None


async def placement(kube: KubeClient, app: str) -> dict[str, str]:
    """node -> pod name, of the app's live, Ready pods."""
    return {
        p["spec"]["nodeName"]: name
        for name, p in (await pods_of(kube, app)).items()
        if not p["metadata"].get("deletionTimestamp") and ready(p)
    }


async def test_daemonset_runs_one_pod_per_node_and_follows_nodes(cluster: Any, kube: KubeClient) -> None:
    await kubectl(cluster, "apply", "-f", "-", stdin=daemonset("agent"))
    ds = await daemonset_settles(kube, "agent", 3, "a ready pod on each of 3 nodes")
    pods = await pods_of(kube, "agent")
    assert sorted(p["spec"]["nodeName"] for p in pods.values()) == ["node-1", "node-2", "node-3"]
    for pod in pods.values():
        assert pod["metadata"]["ownerReferences"][0]["uid"] == ds["metadata"]["uid"]
        assert pod["metadata"]["ownerReferences"][0]["controller"] is True
        assert pod["metadata"]["labels"]["controller-revision-hash"]
        tolerations = {(t.get("key"), t.get("effect")) for t in pod["spec"]["tolerations"]}
        assert {
            ("node.kubernetes.io/unschedulable", "NoSchedule"),
            ("node.kubernetes.io/not-ready", "NoExecute"),
            ("node.kubernetes.io/unreachable", "NoExecute"),
        } <= tolerations
        node_terms = pod["spec"]["affinity"]["nodeAffinity"][
            "requiredDuringSchedulingIgnoredDuringExecution"
        ]["nodeSelectorTerms"]
        assert node_terms == [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [pod["spec"]["nodeName"]]}]}
        ]

    # a cordoned node keeps its daemon pod, and gets it back when it is deleted
    await kubectl(cluster, "cordon", "node-1")
    on_node_1 = (await placement(kube, "agent"))["node-1"]
    await kubectl(cluster, "delete", "pod", on_node_1, "-n", NS, "--wait=false")

    async def back_on_node_1() -> bool:
        return (await placement(kube, "agent")).get("node-1") not in (None, on_node_1)

    await eventually(back_on_node_1, "a new daemon pod on the cordoned node-1")

    # a new node gets one
    cluster.kubelets.add_node("node-4")
    await daemonset_settles(kube, "agent", 4, "a ready pod on each of 4 nodes")
    assert sorted(await placement(kube, "agent")) == ["node-1", "node-2", "node-3", "node-4"]


async def test_daemonset_surge_update_keeps_a_ready_pod_on_every_node(cluster: Any, kube: KubeClient) -> None:
    body = daemonset("surge").replace(
        "spec:\n  selector:",
        "spec:\n  updateStrategy: {type: RollingUpdate, rollingUpdate: {maxSurge: 1, maxUnavailable: 0}}\n  selector:",
    )
    await kubectl(cluster, "apply", "-f", "-", stdin=body)
    await daemonset_settles(kube, "surge", 3, "a ready pod on each node")
    state = await pods_of(kube, "surge")  # settled: nothing changes until the image does
    async with recording(kube, "surge") as events:
        await kubectl(cluster, "set", "image", "daemonset/surge", "c=nginx:1.28")
        await kubectl(cluster, "rollout", "status", "daemonset/surge", "--timeout=60s")
        await daemonset_settles(kube, "surge", 3, "the update rolled out")
    assert images(await pods_of(kube, "surge")) == {"nginx:1.28"}
    # replay: no node was ever without a Ready pod, and none ever had more than two
    for kind, pod in events:
        name = pod["metadata"]["name"]
        if kind == "DELETED":
            state.pop(name, None)
        else:
            state[name] = pod
        per_node: dict[str, list[dict[str, Any]]] = {}
        for p in state.values():
            node = (
                p["spec"].get("nodeName")
                or p["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
                    "nodeSelectorTerms"
                ][0]["matchFields"][0]["values"][0]
            )
            per_node.setdefault(node, []).append(p)
        for node in ("node-1", "node-2", "node-3"):
            assert any(
                ready(p) and not p["metadata"].get("deletionTimestamp") for p in per_node.get(node, [])
            ), (node, kind, name)
            assert len(per_node.get(node, [])) <= 2


async def test_daemonset_taints_and_node_selector(cluster: Any, kube: KubeClient) -> None:
    await kubectl(cluster, "label", "node", "node-2", "node-3", "tier=edge")
    await kubectl(cluster, "apply", "-f", "-", stdin=daemonset("edge", node_selector={"tier": "edge"}))
    await daemonset_settles(kube, "edge", 2, "pods on the two edge nodes")
    assert sorted(await placement(kube, "edge")) == ["node-2", "node-3"]

    # an untolerated NoSchedule taint: the pod there stays, but the node is no longer desired
    await kubectl(cluster, "taint", "node", "node-2", "dedicated=db:NoSchedule")

    async def misscheduled() -> bool:
        st = (await kube.get(DAEMONSETS, "edge", namespace=NS)).get("status") or {}
        return st.get("desiredNumberScheduled") == 1 and st.get("numberMisscheduled") == 1

    await eventually(misscheduled, "node-2 counted as misscheduled")
    assert sorted(await placement(kube, "edge")) == ["node-2", "node-3"]

    # an untolerated NoExecute taint: the pod there goes
    await kubectl(cluster, "taint", "node", "node-3", "dedicated=db:NoExecute")
    await eventually(lambda: _only(kube, "edge", ["node-2"]), "node-3's pod removed")


async def _only(kube: KubeClient, app: str, nodes: list[str]) -> bool:
    pods = await pods_of(kube, app)
    return sorted(p["spec"].get("nodeName") or "" for p in pods.values()) == nodes


# -- rollouts and drains ---------------------------------------------------------------------


def images(pods: dict[str, dict[str, Any]]) -> set[str]:
    return {
        p["spec"]["containers"][0]["image"]
        for p in pods.values()
        if not p["metadata"].get("deletionTimestamp")
    }


async def test_rollouts_undo_and_drain_with_statefulset_and_daemonset(cluster: Any, kube: KubeClient) -> None:
    await kubectl(cluster, "apply", "-f", "-", stdin=statefulset("web", 2) + "---" + daemonset("agent"))
    for kind in ("statefulset/web", "daemonset/agent"):
        await kubectl(cluster, "rollout", "status", kind, "--timeout=60s")

    # rolling updates through kubectl, followed to the end by kubectl
    await kubectl(cluster, "set", "image", "statefulset/web", "c=nginx:1.28")
    await kubectl(cluster, "set", "image", "daemonset/agent", "c=nginx:1.28")
    for kind in ("statefulset/web", "daemonset/agent"):
        await kubectl(cluster, "rollout", "status", kind, "--timeout=60s")
    assert images(await pods_of(kube, "web")) == images(await pods_of(kube, "agent")) == {"nginx:1.28"}
    sts = await eventually(lambda: sts_settled(kube, "web", 2), "web settled at the new revision")
    revisions = (await kube.list(CONTROLLERREVISIONS, namespace=NS))["items"]
    owned = sorted((r["metadata"]["ownerReferences"][0]["name"], r["revision"]) for r in revisions)
    assert owned == [("agent", 1), ("agent", 2), ("web", 1), ("web", 2)]
    assert sts["status"]["currentRevision"] == sts["status"]["updateRevision"]

    # undo goes back through the old revision (renumbered, not copied)
    await kubectl(cluster, "rollout", "undo", "statefulset/web")
    await kubectl(cluster, "rollout", "status", "statefulset/web", "--timeout=60s")
    await eventually(lambda: sts_settled(kube, "web", 2), "web settled back")
    assert images(await pods_of(kube, "web")) == {"nginx:1.27"}
    history = await kubectl(cluster, "rollout", "history", "statefulset/web")
    assert [line.split()[0] for line in history.splitlines()[2:] if line.strip()] == ["2", "3"]

    # a drain evicts the StatefulSet pod, which comes back on another node; the daemon pod stays
    on_node_1 = {
        name for name, p in (await pods_of(kube, "web")).items() if p["spec"].get("nodeName") == "node-1"
    }
    daemon_on_node_1 = (await placement(kube, "agent"))["node-1"]
    out = await kubectl(cluster, "drain", "node-1", "--ignore-daemonsets", "--timeout=60s")
    assert f"ignoring DaemonSet-managed Pods: {NS}/{daemon_on_node_1}" in out
    await eventually(lambda: sts_settled(kube, "web", 2), "web back to 2 ready pods")

    async def moved() -> bool:
        pods = await pods_of(kube, "web")
        return all(ready(p) and p["spec"].get("nodeName") != "node-1" for p in pods.values()) and set(
            pods
        ) == {"web-0", "web-1"}

    await eventually(moved, "the StatefulSet's pods off node-1")
    assert on_node_1 <= set(await pods_of(kube, "web"))
    assert (await placement(kube, "agent"))["node-1"] == daemon_on_node_1


# -- what every namespace has ---------------------------------------------------------------


async def test_namespace_defaults_and_kubernetes_service(cluster: Any, kube: KubeClient) -> None:
    await kubectl(cluster, "create", "namespace", "team-a")

    async def defaults() -> bool:
        names = {
            s["metadata"]["name"] for s in (await kube.list(SERVICEACCOUNTS, namespace="team-a"))["items"]
        }
        cms = {c["metadata"]["name"]: c for c in (await kube.list(CONFIGMAPS, namespace="team-a"))["items"]}
        return "default" in names and "kube-root-ca.crt" in cms

    await eventually(defaults, "default ServiceAccount and kube-root-ca.crt in team-a", timeout=30)
    root_ca = await kube.get(CONFIGMAPS, "kube-root-ca.crt", namespace="team-a")
    assert root_ca["data"]["ca.crt"].startswith("-----BEGIN CERTIFICATE-----")
    assert root_ca["metadata"]["annotations"]["kubernetes.io/description"].startswith("Contains a CA bundle")

    # deleted, made again
    await kubectl(cluster, "delete", "serviceaccount", "default", "-n", "team-a")
    await eventually(defaults, "default ServiceAccount made again", timeout=30)

    svc = await kube.get(SERVICES, "kubernetes", namespace="default")
    assert svc["spec"]["type"] == "ClusterIP" and svc["spec"]["clusterIP"].endswith(".0.1")
    assert [(p["name"], p["port"], p["protocol"]) for p in svc["spec"]["ports"]] == [("https", 443, "TCP")]
    assert svc["metadata"]["labels"] == {"component": "apiserver", "provider": "kubernetes"}


async def test_kube_root_ca_is_the_serving_ca_when_the_cluster_serves_tls() -> None:
    """Local only (a cluster of its own): what pods would verify the API server with is its CA."""
    async with LocalCluster(nodes=0, tls=True) as secure:
        client = await secure.client()
        try:

            async def published() -> dict[str, Any] | None:
                items = (await client.list(CONFIGMAPS, namespace="default"))["items"]
                return next((c for c in items if c["metadata"]["name"] == "kube-root-ca.crt"), None)

            root_ca = await eventually(published, "kube-root-ca.crt in default")
        finally:
            await client.close()
        kubeconfig = yaml.safe_load(await anyio.Path(secure.kubeconfig_path).read_text())
    served = base64.b64decode(kubeconfig["clusters"][0]["cluster"]["certificate-authority-data"]).decode()
    assert root_ca["data"]["ca.crt"] == served
