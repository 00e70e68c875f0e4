"""Simulated kubelets that work against any API server, through the API only.

What a real kubelet does that controllers can observe, and nothing else: nodes registered with
capacity and the kubelet's conditions; the node Lease renewed every 10 s; pods bound to a node
go Running and Ready after `pod_start_delay`; a pod being deleted is finished after
min(its grace period, `termination_cap`) by a delete with grace 0, as the kubelet does once its
containers have stopped. Per-node controls (`stop`, `start`, `set_ready`, `set_condition`,
`fail_readiness`) have the same names as the embedded cluster's kubelets, so one test can drive
either. Pods running one of `never_ready_images` go Running but never Ready, as a release whose
readiness probe never passes: the rollout that misses its progress deadline. With
`gate_readiness`, pods go Running but become Ready only when `release`d one at a time, so a test
can pace a rollout the same way on two clusters.

kube-apiserver's TaintNodesByCondition admission puts `node.kubernetes.io/not-ready:NoSchedule`
on every new Node, and the node lifecycle controller lifts it once the node is Ready. When that
controller is not running (aiokcm replaces it and a test does not start it), `untaint_not_ready`
lifts it at registration instead, so pods schedule as on the embedded cluster.

Every request is retried through API server and etcd restarts, and the pod watch relists after
any break: a fault test restarts the control plane under these kubelets.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

import aiohttp
import anyio
from anyio.abc import TaskGroup

from apiclient import ApiError, KubeClient
from apiclient.resources import LEASES, NODES, PODS
from kubeutil.timestamps import format_micro_time, format_time, utcnow
from localcluster.kubelet import node_conditions, node_info

Obj = dict[str, Any]
T = TypeVar("T")

LEASE_NAMESPACE = "kube-node-lease"
NOT_READY_TAINT = "node.kubernetes.io/not-ready"
_TRANSIENT = (aiohttp.ClientError, OSError, TimeoutError)


# What is scheduled for a pod (`ApiKubelets._pending`): its start, or its finish, which wins.
_START = "start"
_FINISH = "finish"


def _now() -> str:
    return format_time(utcnow())


def _micro_now() -> str:
    return format_micro_time(utcnow())


@dataclass
class ApiKubelet:
    """One node's kubelet; its controls take effect at once through the owning `ApiKubelets`."""

    name: str
    labels: dict[str, str]
    index: int
    owner: ApiKubelets
    running: bool = True
    ready: bool = True
    not_ready_message: str = ""
    pressure: dict[str, bool] = field(default_factory=dict)
    failing: set[tuple[str, str]] = field(default_factory=set)
    recovering: set[tuple[str, str]] = field(default_factory=set)

    @property
    def host_ip(self) -> str:
        return f"10.1.{self.index // 250}.{self.index % 250 + 1}"

    def stop(self) -> None:
        """The kubelet dies: no more heartbeats, pods left as they are."""
        self.running = False

    def start(self) -> None:
        self.running = True
        self.owner.post_status(self)
        self.owner.resync_pods()

    def set_ready(self, ready: bool, message: str = "container runtime is down") -> None:
        self.ready = ready
        self.not_ready_message = message
        self.owner.post_status(self)

    def set_condition(self, condition: str, status: bool) -> None:
        self.pressure[condition] = status
        self.owner.post_status(self)

    def fail_readiness(self, namespace: str, name: str, failing: bool = True) -> None:
        """The pod's readiness probe starts (or stops) failing."""
        if failing:
            self.failing.add((namespace, name))
            self.recovering.discard((namespace, name))
        elif (namespace, name) in self.failing:
            self.failing.discard((namespace, name))
            self.recovering.add((namespace, name))
        self.owner.resync_pods()


class ApiKubelets:
    """Run with `await kubelets.run()` inside a task group; cancel to stop."""

    def __init__(
        self,
        client: KubeClient,
        *,
        pod_start_delay: float = 1.0,
        termination_cap: float = 2.0,
        lease_interval: float = 10.0,
        lease_duration_seconds: int = 40,
        status_interval: float = 60.0,
        untaint_not_ready: bool = True,
        max_pods: int = 110,
        run_pods: bool = True,
        never_ready_images: frozenset[str] = frozenset(),
        gate_readiness: bool = False,
    ) -> None:
        self.client = client
        self.pod_start_delay = pod_start_delay
        self.termination_cap = termination_cap
        self.lease_interval = lease_interval
        self.lease_duration_seconds = lease_duration_seconds
        self.status_interval = status_interval
        self.untaint_not_ready = untaint_not_ready
        self.max_pods = max_pods
        self.run_pods = run_pods
        self.never_ready_images = never_ready_images
        self.gate_readiness = gate_readiness
        # Gated pods run but are not Ready until `release`d: (namespace, name) -> (pod, kubelet).
        self.held: dict[tuple[str, str], tuple[Obj, ApiKubelet]] = {}
        self._released: set[tuple[str, str]] = set()
        self._base_intervals = (lease_interval, status_interval)
        self._intervals_changed = anyio.Event()
        self._kubelets: dict[str, ApiKubelet] = {}
        self._tg: TaskGroup | None = None
        # pods being started or finished, by uid: a StatefulSet pod made again under the same
        # name while its predecessor's finish is still winding down must not be skipped, and a
        # pod deleted while its start is pending is finished all the same (a real kubelet kills
        # it), not left Terminating because its start was in flight
        self._pending: dict[str, str] = {}
        self._watch_scope: anyio.CancelScope | None = None
        self.registered = anyio.Event()

    def set_speed(self, speed: float) -> None:
        """Heartbeat `speed` times as often, like the embedded kubelets' `speed` option, from now on.

        A node-lifecycle test runs grace periods of seconds; with 10 s lease renewals every node
        would look lost. The heartbeat loop wakes at once, so the new pace holds without delay.
        """
        lease, status = self._base_intervals
        self.lease_interval, self.status_interval = lease / speed, status / speed
        self._intervals_changed.set()

    def __getitem__(self, name: str) -> ApiKubelet:
        return self._kubelets[name]

    def __iter__(self) -> Iterator[ApiKubelet]:
        return iter(list(self._kubelets.values()))

    def add_node(self, name: str, *, labels: dict[str, str] | None = None) -> ApiKubelet:
        kubelet = ApiKubelet(name, dict(labels or {}), len(self._kubelets), self)
        self._kubelets[name] = kubelet
        if self._tg is not None:
            self._tg.start_soon(self._register, kubelet)
        return kubelet

    # -- running ----------------------------------------------------------------------------

    async def run(self) -> None:
        async with anyio.create_task_group() as tg:
            self._tg = tg
            with anyio.fail_after(60):
                async with anyio.create_task_group() as registering:
                    for kubelet in list(self._kubelets.values()):
                        registering.start_soon(self._register, kubelet)
            self.registered.set()
            tg.start_soon(self._heartbeats)
            if self.run_pods:
                tg.start_soon(self._watch_pods)

    def post_status(self, kubelet: ApiKubelet) -> None:
        if self._tg is not None and kubelet.running:
            self._tg.start_soon(self._post_status, kubelet)

    def resync_pods(self) -> None:
        if self._watch_scope is not None:
            self._watch_scope.cancel()

    async def _retry(
        self, what: Callable[[], Awaitable[T]], *, give_up: tuple[int, ...] = (404,)
    ) -> T | None:
        """Retry through transport errors, 5xx and 429 until it succeeds; None on a status in `give_up`."""
        delay = 0.2
        while True:
            try:
                return await what()
            except ApiError as exc:
                if exc.status in give_up:
                    return None
                if exc.status < 500 and exc.status != 429:
                    raise
            except _TRANSIENT:
                pass
            await anyio.sleep(delay)
            delay = min(delay * 2, 2.0)

    async def _register(self, kubelet: ApiKubelet) -> None:
        body: Obj = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": kubelet.name,
                "labels": {
                    "kubernetes.io/hostname": kubelet.name,
                    "kubernetes.io/os": "linux",
                    "kubernetes.io/arch": "amd64",
                    "beta.kubernetes.io/os": "linux",
                    "beta.kubernetes.io/arch": "amd64",
                    **kubelet.labels,
                },
            },
            "spec": {"podCIDR": f"10.244.{kubelet.index}.0/24", "podCIDRs": [f"10.244.{kubelet.index}.0/24"]},
        }
        await self._retry(lambda: self.client.create(NODES, body), give_up=(409,))
        if self.untaint_not_ready:
            node = await self._retry(lambda: self.client.get(NODES, kubelet.name))
            taints = (node or {}).get("spec", {}).get("taints") or []
            kept = [t for t in taints if t.get("key") != NOT_READY_TAINT]
            if len(kept) != len(taints):
                await self._retry(
                    lambda: self.client.patch(NODES, kubelet.name, {"spec": {"taints": kept or None}})
                )
        await self._post_status(kubelet, initial=True)
        await self._renew_lease(kubelet)

    async def _post_status(self, kubelet: ApiKubelet, *, initial: bool = False) -> None:
        if not kubelet.running:
            return
        node = await self._retry(lambda: self.client.get(NODES, kubelet.name))
        if node is None:
            return
        old = (node.get("status") or {}).get("conditions") or []
        status: Obj = {
            "conditions": node_conditions(
                ready=kubelet.ready,
                not_ready_message=kubelet.not_ready_message,
                pressure=kubelet.pressure,
                old=old,
                now=_now(),
            )
        }
        if initial:
            capacity = {
                "cpu": "32",
                "memory": "128Gi",
                "pods": str(self.max_pods),
                "ephemeral-storage": "100Gi",
            }
            status |= {
                "capacity": capacity,
                "allocatable": dict(capacity),
                "addresses": [
                    {"type": "InternalIP", "address": kubelet.host_ip},
                    {"type": "Hostname", "address": kubelet.name},
                ],
                "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
                "nodeInfo": node_info(runtime="fake://1", version="v1.24.0"),
            }
        await self._retry(
            lambda: self.client.patch(
                NODES, kubelet.name, {"status": status}, subresource="status", patch_type="strategic"
            )
        )

    async def _renew_lease(self, kubelet: ApiKubelet) -> None:
        node = await self._retry(lambda: self.client.get(NODES, kubelet.name))
        owner = (
            [{"apiVersion": "v1", "kind": "Node", "name": kubelet.name, "uid": node["metadata"]["uid"]}]
            if node
            else []
        )
        spec = {
            "holderIdentity": kubelet.name,
            "leaseDurationSeconds": self.lease_duration_seconds,
            "renewTime": _micro_now(),
        }
        renewed = await self._retry(
            lambda: self.client.patch(LEASES, kubelet.name, {"spec": spec}, namespace=LEASE_NAMESPACE)
        )
        if renewed is None:
            lease: Obj = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": kubelet.name, "namespace": LEASE_NAMESPACE, "ownerReferences": owner},
                "spec": spec,
            }
            await self._retry(
                lambda: self.client.create(LEASES, lease, namespace=LEASE_NAMESPACE), give_up=(409,)
            )

    async def _heartbeats(self) -> None:
        since_status = 0.0
        while True:
            slept_from = anyio.current_time()
            with anyio.move_on_after(self.lease_interval):
                await self._intervals_changed.wait()
            if self._intervals_changed.is_set():
                self._intervals_changed = anyio.Event()
            since_status += anyio.current_time() - slept_from
            for kubelet in list(self._kubelets.values()):
                if kubelet.running:
                    await self._renew_lease(kubelet)
                    if since_status >= self.status_interval:
                        await self._post_status(kubelet)
            if since_status >= self.status_interval:
                since_status = 0.0

    # -- pods -------------------------------------------------------------------------------

    async def _watch_pods(self) -> None:
        while True:
            try:
                listed = await self.client.list(PODS)
                for pod in listed.get("items") or []:
                    self._on_pod(pod)
                version = str(listed["metadata"]["resourceVersion"])
                with anyio.CancelScope() as scope:
                    self._watch_scope = scope  # `resync_pods` ends the watch: relist at once
                    async with self.client.watch(
                        PODS, resource_version=version, timeout_seconds=300
                    ) as events:
                        async for event in events:
                            if event.type == "ERROR":
                                break
                            if event.type in ("ADDED", "MODIFIED"):
                                self._on_pod(event.object)
            except (ApiError, *_TRANSIENT):
                await anyio.sleep(0.5)

    def _on_pod(self, pod: Obj) -> None:
        meta, spec, status = pod["metadata"], pod.get("spec") or {}, pod.get("status") or {}
        kubelet = self._kubelets.get(spec.get("nodeName") or "")
        if kubelet is None or not kubelet.running or self._tg is None:
            return
        key = (meta["namespace"], meta["name"])
        if meta.get("deletionTimestamp"):
            if self._pending.get(meta["uid"]) == _FINISH:
                return
            self.held.pop(key, None)
            grace = meta.get("deletionGracePeriodSeconds") or 0
            self._pending[meta["uid"]] = _FINISH
            self._tg.start_soon(self._finish, pod, min(float(grace), self.termination_cap))
            return
        if meta["uid"] in self._pending:
            return
        ready = any(
            c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or []
        )
        failing = key in kubelet.failing or self._never_ready(pod)
        if status.get("phase") in ("Succeeded", "Failed"):
            return
        recovering = key in kubelet.recovering and not ready
        if status.get("phase") != "Running" or (ready and failing) or recovering:
            kubelet.recovering.discard(key)
            self._pending[meta["uid"]] = _START
            delay = self.pod_start_delay if status.get("phase") != "Running" else 0.0
            self._tg.start_soon(self._run_pod, pod, kubelet, delay)

    def release(self, namespace: str, name: str) -> None:
        """A gated pod passes its readiness probe now."""
        key = (namespace, name)
        entry = self.held.pop(key, None)
        if entry is None or self._tg is None:
            return
        self._released.add(key)
        self._pending[entry[0]["metadata"]["uid"]] = _START
        self._tg.start_soon(self._run_pod, entry[0], entry[1], 0.0)

    def _never_ready(self, pod: Obj) -> bool:
        """A container runs an image whose readiness probe never passes: a rollout that cannot progress."""
        containers = (pod.get("spec") or {}).get("containers") or []
        return any(c.get("image") in self.never_ready_images for c in containers)

    async def _run_pod(self, pod: Obj, kubelet: ApiKubelet, delay: float) -> None:
        meta = pod["metadata"]
        key = (meta["namespace"], meta["name"])
        try:
            await anyio.sleep(delay)
            ready = key not in kubelet.failing and not self._never_ready(pod)
            if ready and self.gate_readiness and key not in self._released:
                ready = False
                self.held[key] = (pod, kubelet)
            flag = "True" if ready else "False"
            started = (pod.get("status") or {}).get("startTime") or _now()
            now = _now()
            containers = [
                {
                    "name": c["name"],
                    "ready": ready,
                    "started": True,
                    "restartCount": 0,
                    "image": c.get("image", ""),
                    "imageID": "fake://" + str(c.get("image", "")),
                    "containerID": f"fake://{meta['uid'][:12]}{c['name']}",
                    "state": {"running": {"startedAt": started}},
                }
                for c in (pod.get("spec") or {}).get("containers") or []
            ]
            ip = f"10.244.{kubelet.index}.{(hash(meta['uid']) % 250) + 2}"
            status: Obj = {
                "phase": "Running",
                "hostIP": kubelet.host_ip,
                "podIP": ip,
                "podIPs": [{"ip": ip}],
                "startTime": started,
                "conditions": [
                    {"type": "Initialized", "status": "True", "lastTransitionTime": now},
                    {"type": "Ready", "status": flag, "lastTransitionTime": now},
                    {"type": "ContainersReady", "status": flag, "lastTransitionTime": now},
                ],
                "containerStatuses": containers,
            }
            await self._retry(
                lambda: self.client.patch(
                    PODS,
                    meta["name"],
                    {"status": status, "metadata": {"uid": meta["uid"]}},
                    namespace=meta["namespace"],
                    subresource="status",
                    patch_type="strategic",
                ),
                give_up=(404, 409, 422),
            )
        finally:
            if self._pending.get(meta["uid"]) == _START:  # a finish that came meanwhile stays
                del self._pending[meta["uid"]]

    async def _finish(self, pod: Obj, delay: float) -> None:
        meta = pod["metadata"]
        try:
            await anyio.sleep(delay)
            await self._retry(
                lambda: self.client.delete(
                    PODS,
                    meta["name"],
                    namespace=meta["namespace"],
                    grace_period_seconds=0,
                    preconditions={"uid": meta["uid"]},
                ),
                give_up=(404, 409),
            )
        finally:
            self._pending.pop(meta["uid"], None)
