"""One test's view of a shared real control plane: a clean world, simulated kubelets, clients.

A control plane costs seconds to start, so one serves a whole test session; each test enters a
`RealCluster`, which first puts the world back to what a fresh cluster has (no workloads, no
test namespaces, `nodes` freshly registered Ready nodes) and then runs the simulated kubelets
for the test's duration. The surface is the embedded cluster's (`client()`, `kubeconfig_path`,
`url`, `kubelets[name]`), so one test body runs on either.

The reset deletes content, not namespaces: kube-controller-manager's namespace controller takes
about 5 s to remove one, and a test that creates into a namespace still Terminating meets a 403.
A namespace a test left behind is emptied and kept (a controller that creates its namespace, as
the maintenance-lease one does, finds it there); one a test deleted is waited for.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable
from types import TracebackType
from typing import Any

import anyio

from apiclient import ApiError, KubeClient
from apiclient.config import build_api_client
from apiclient.resources import (
    CUSTOMRESOURCEDEFINITIONS,
    LEASES,
    NAMESPACES,
    NODEMAINTENANCES,
    NODES,
    PODS,
    VALIDATINGWEBHOOKCONFIGURATIONS,
    Resource,
)
from realcluster.controlplane import ControlPlane
from realcluster.kubelet import ApiKubelets

SYSTEM_NAMESPACES = frozenset({"default", "kube-system", "kube-public", "kube-node-lease"})

# Namespaced kinds a test may leave behind, cleared in every namespace (system ones included,
# except for what the control plane itself keeps there).
_NAMESPACED = (
    Resource("batch", "v1", "cronjobs", "CronJob", True),
    Resource("batch", "v1", "jobs", "Job", True),
    Resource("apps", "v1", "deployments", "Deployment", True),
    Resource("apps", "v1", "statefulsets", "StatefulSet", True),
    Resource("apps", "v1", "daemonsets", "DaemonSet", True),
    Resource("apps", "v1", "replicasets", "ReplicaSet", True),
    Resource("", "v1", "replicationcontrollers", "ReplicationController", True),
    Resource("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", True),
    Resource("", "v1", "configmaps", "ConfigMap", True),
    Resource("", "v1", "events", "Event", True),
    Resource("events.k8s.io", "v1", "events", "Event", True),
    Resource("", "v1", "resourcequotas", "ResourceQuota", True),
    Resource("", "v1", "limitranges", "LimitRange", True),
    Resource("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", True),
    Resource("autoscaling", "v2", "horizontalpodautoscalers", "HorizontalPodAutoscaler", True),
    # The EvictionRequest API's kinds outlive no test, though their CRDs do (KEPT_CRDS).
    Resource("lifecycle.aiokcm.io", "v1alpha1", "evictionrequests", "EvictionRequest", True),
    Resource("lifecycle.aiokcm.io", "v1alpha1", "evictions", "Eviction", True),
)
#: Cluster-scoped kinds tests create; PriorityClasses named `system-` are the server's own.
_CLUSTER_SCOPED = (
    Resource("", "v1", "persistentvolumes", "PersistentVolume", False),
    Resource("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", False),
)
_KEPT_CONFIGMAPS = frozenset({"kube-root-ca.crt", "extension-apiserver-authentication"})
#: Requests in flight at once while a reset clears the world.
_CLEARING_AT_ONCE = 16
SERVICEACCOUNTS = Resource("", "v1", "serviceaccounts", "ServiceAccount", True)
# CRDs that outlive a test: installing one takes a while and every test that needs it installs it.
KEPT_CRDS = frozenset(
    {
        "nodemaintenances.maintenance.aiokcm.io",
        "evictionrequests.lifecycle.aiokcm.io",
        "evictions.lifecycle.aiokcm.io",
    }
)


class RealCluster:
    """`async with RealCluster(plane, nodes=3) as cluster:` — a clean world with `nodes` Ready nodes."""

    def __init__(
        self,
        plane: ControlPlane,
        *,
        nodes: int = 3,
        pod_start_delay: float = 1.0,
        termination_cap: float = 2.0,
        untaint_not_ready: bool = True,
        kubelets: bool = True,
    ) -> None:
        self.plane = plane
        self.nodes = nodes
        self.url = plane.url
        self.kubeconfig_path = str(plane.kubeconfig("admin"))
        self._admin: KubeClient | None = None
        self.kubelets: ApiKubelets
        self._kubelet_options: dict[str, Any] = {
            "pod_start_delay": pod_start_delay,
            "termination_cap": termination_cap,
            "untaint_not_ready": untaint_not_ready,
            "run_pods": kubelets,
        }
        self._background: asyncio.Task[None] | None = None

    async def client(self, *, qps: float = 1000.0, burst: int = 2000) -> KubeClient:
        """A `KubeClient` built from the admin kubeconfig, as the product builds its own."""
        return KubeClient(await build_api_client(kubeconfig=self.kubeconfig_path), qps=qps, burst=burst)

    async def __aenter__(self) -> RealCluster:
        self._admin = await self.client()
        await reset_world(self._admin)
        if self.plane.kcm_controllers and "serviceaccount" not in self.plane.apiserver_disabled_admission():
            await _wait_for_default_service_account(self._admin)
        self.kubelets = ApiKubelets(self._admin, **self._kubelet_options)
        for i in range(1, self.nodes + 1):
            self.kubelets.add_node(f"node-{i}")
        self._background = asyncio.create_task(self.kubelets.run(), name="realcluster-kubelets")
        registered = asyncio.create_task(self.kubelets.registered.wait())
        done, _ = await asyncio.wait({registered, self._background}, return_when=asyncio.FIRST_COMPLETED)
        if registered not in done:
            registered.cancel()
            await self._background  # raises what stopped the kubelets
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._background is not None:
            self._background.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._background
        if self._admin is not None:
            await self._admin.close()


async def _ignore_missing(call: Any) -> None:
    try:
        await call
    except ApiError as exc:
        if not (exc.not_found or exc.status in (405, 409)):
            raise


async def reset_world(client: KubeClient, *, timeout: float = 60.0) -> None:
    """Remove what tests create: webhook configurations (first: a webhook left failing closed
    would refuse the rest), workloads, pods, budgets, maintenances, nodes, custom resource
    definitions (but the NodeMaintenance one), and the content of every namespace."""
    await _ignore_missing(client.request("DELETE", VALIDATINGWEBHOOKCONFIGURATIONS.path(None)))
    listed = (await client.list(NAMESPACES)).get("items") or []
    terminating = {ns["metadata"]["name"] for ns in listed if ns["metadata"].get("deletionTimestamp")}
    with contextlib.suppress(ApiError):  # the CRD may not be installed yet
        for nm in (await client.list(NODEMAINTENANCES)).get("items") or []:
            name = nm["metadata"]["name"]
            if nm["metadata"].get("finalizers"):
                await _ignore_missing(
                    client.patch(NODEMAINTENANCES, name, {"metadata": {"finalizers": None}})
                )
            await _ignore_missing(client.delete(NODEMAINTENANCES, name))
    await _clear_namespaced(client)
    await _each(
        [
            _ignore_missing(client.delete(NODES, node["metadata"]["name"]))
            for node in (await client.list(NODES)).get("items") or []
        ]
    )
    for res in _CLUSTER_SCOPED:
        for obj in (await client.list(res)).get("items") or []:
            if not obj["metadata"]["name"].startswith("system-"):
                await _ignore_missing(client.delete(res, obj["metadata"]["name"]))
    crds = [
        c["metadata"]["name"]
        for c in (await client.list(CUSTOMRESOURCEDEFINITIONS)).get("items") or []
        if c["metadata"]["name"] not in KEPT_CRDS
    ]
    for crd in crds:
        await _ignore_missing(client.delete(CUSTOMRESOURCEDEFINITIONS, crd))
    with anyio.fail_after(timeout):
        while True:
            left = [p for p in (await client.list(PODS)).get("items") or []]
            names = {ns["metadata"]["name"] for ns in (await client.list(NAMESPACES)).get("items") or []}
            crds_left = {
                c["metadata"]["name"]
                for c in (await client.list(CUSTOMRESOURCEDEFINITIONS)).get("items") or []
            }
            if (
                not left
                and not (names & terminating)
                and not (await client.list(NODES)).get("items")
                and not crds_left.intersection(crds)
            ):
                return
            await _clear_pods(client, left)
            await anyio.sleep(0.1)


async def _holders(client: KubeClient, res: Resource) -> dict[str, list[str]]:
    """Namespace -> names of `res` objects there, from one LIST across namespaces ({} where the
    kind is not served: a custom resource whose definition a test never installed)."""
    try:
        items = (await client.list(res)).get("items") or []
    except ApiError as exc:
        if exc.not_found or exc.status == 405:
            return {}
        raise
    found: dict[str, list[str]] = {}
    for obj in items:
        meta = obj["metadata"]
        found.setdefault(meta.get("namespace") or "", []).append(meta["name"])
    return found


async def _each(calls: list[Awaitable[None]]) -> None:
    """The calls at once, a few in flight: the namespaces of a long session add up to thousands
    of requests one after another, seconds of every test's set-up."""
    limiter = anyio.CapacityLimiter(_CLEARING_AT_ONCE)

    async def one(call: Awaitable[None]) -> None:
        async with limiter:
            await call

    async with anyio.create_task_group() as tg:
        for call in calls:
            tg.start_soon(one, call)


async def _clear_namespaced(client: KubeClient) -> None:
    """Every kind a test may leave behind, listed once across namespaces and deleted only where
    some is left: workloads first (so that no controller makes their pods again), then Leases
    (but kube-system's, the control plane's own), then pods."""
    kinds = [*_NAMESPACED, LEASES]
    surveys: dict[Resource, dict[str, list[str]]] = {}

    async def survey(res: Resource) -> None:
        surveys[res] = await _holders(client, res)

    await _each([survey(res) for res in kinds])
    calls: list[Awaitable[None]] = []
    for res in _NAMESPACED:
        for ns, names in surveys[res].items():
            if res.plural == "configmaps":
                calls.extend(
                    _ignore_missing(client.delete(res, name, namespace=ns))
                    for name in names
                    if name not in _KEPT_CONFIGMAPS
                )
                continue
            calls.append(
                _ignore_missing(
                    client.request(
                        "DELETE", _collection_path(res, ns), query={"propagationPolicy": "Background"}
                    )
                )
            )
    await _each(calls)
    await _each(
        [
            _ignore_missing(client.request("DELETE", _collection_path(LEASES, ns)))
            for ns in surveys[LEASES]
            if ns != "kube-system"
        ]
    )
    await _clear_pods(client, (await client.list(PODS)).get("items") or [])


async def _clear_pods(client: KubeClient, pods: list[dict[str, Any]]) -> None:
    async def clear(pod: dict[str, Any]) -> None:
        name, namespace = pod["metadata"]["name"], pod["metadata"]["namespace"]
        if pod["metadata"].get("finalizers"):
            await _ignore_missing(
                client.patch(PODS, name, {"metadata": {"finalizers": None}}, namespace=namespace)
            )
        await _ignore_missing(client.delete(PODS, name, namespace=namespace, grace_period_seconds=0))

    await _each([clear(pod) for pod in pods])


async def _wait_for_default_service_account(client: KubeClient, *, timeout: float = 60.0) -> None:
    """Pods are refused until KCM's service-account controller has made `default/default`."""
    with anyio.fail_after(timeout):
        while True:
            try:
                await client.get(SERVICEACCOUNTS, "default", namespace="default")
                return
            except ApiError as exc:
                if not exc.not_found:
                    raise
            await anyio.sleep(0.1)


def _collection_path(res: Resource, namespace: str) -> str:
    base = "/api/v1" if not res.group else f"/apis/{res.group}/{res.version}"
    return f"{base}/namespaces/{namespace}/{res.plural}"
