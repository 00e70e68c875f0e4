"""Simulated kubelets that work against any API server, through the API only.

What a real kubelet does that controllers can observe, and nothing else: nodes registered with
capacity and the kubelet's conditions; the node Lease renewed every 10 s; pods bound to a node
go Running and Ready after `pod_start_delay`; a pod being deleted is finished after
min(its grace period, `termination_cap`) by a delete with grace 0, as the kubelet does once its
containers have stopped. Per-node controls (`stop`, `start`, `reboot`, `set_ready`,
`set_condition`, `fail_readiness`) have the same names as the embedded cluster's kubelets, so one
test can drive either. Pods running one of `never_ready_images` go Running but never Ready, as a
release whose readiness probe never passes: the rollout that misses its progress deadline. With
`gate_readiness`, pods go Running but become Ready only when `release`d one at a time, so a test
can pace a rollout the same way on two clusters.

kube-apiserver's TaintNodesByCondition admission puts `node.kubernetes.io/not-ready:NoSchedule`
on every new Node, and the node lifecycle controller lifts it once the node is Ready. When that
controller is not running (aiokcm replaces it and a test does not start it), `untaint_not_ready`
lifts it at registration instead, so pods schedule as on the embedded cluster.

A reboot (`reboot(down_seconds=2.0)`, the down time divided by `set_speed`'s speed as the
embedded kubelets divide it by theirs) is the embedded kubelets' too, through the API: Ready=False
("node is rebooting") at once, no lease renewal, status post or pod work while down, every
running container terminated (exit 255, `Unknown`) and its pod not Ready; then a new
`status.nodeInfo.bootID`, the `Rebooted` event, Ready again, the lease renewed, and after
`pod_start_delay` the killed pods' containers running again (`restartCount` + 1; a `Never` pod
Failed). The call is synchronous: the work runs in the fleet's task group, each kubelet's lease
renewals and status posts one at a time (`ApiKubelet.lock`), so once Ready=False is seen no
renewal begun before it can land after it. A pod's status is rewritten whole, guarded by its
resourceVersion (a conflict is read again), since a strategic merge would keep a container's
old `running` state beside its new `terminated` one.

Every request is retried through API server and etcd restarts, and the pod watch relists after
any break: a fault test restarts the control plane under these kubelets.
"""

from __future__ import annotations

import functools
import math
import secrets
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

import aiohttp
import anyio
from anyio.abc import TaskGroup

from apiclient import ApiError, KubeClient
from apiclient.resources import EVENTS, LEASES, NODES, PODS
from kubeutil.timestamps import format_micro_time, format_time, utcnow
from localcluster.kubelet import (
    LOST_EXIT_CODE,
    REBOOTING_MESSAGE,
    killed_status,
    node_conditions,
    node_info,
    rebooted_status,
    terminated_status,
)

Obj = dict[str, Any]
T = TypeVar("T")

LEASE_NAMESPACE = "kube-node-lease"
NOT_READY_TAINT = "node.kubernetes.io/not-ready"
_TRANSIENT = (aiohttp.ClientError, OSError, TimeoutError)


# What is scheduled for a pod (`ApiKubelets._pending`): its start, or its finish, which wins;
# or the restart of containers a reboot killed.
_START = "start"
_FINISH = "finish"
_RESTART = "restart"


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
    #: Down for a reboot: silent until the machine is back (`boot_due`, None while held down).
    rebooting: bool = False
    reboots: int = 0
    #: The running machine's boot ID once it has rebooted (None: the one it registered with).
    boot_id: str | None = None
    boot_due: float | None = None
    #: Pods whose containers a reboot killed, by uid: (namespace, name), to start again.
    killed: dict[str, tuple[str, str]] = field(default_factory=dict)
    #: Held by each lease renewal and status post: they reach the API server in order.
    lock: anyio.Lock = field(default_factory=anyio.Lock, repr=False, compare=False)
    _wake: anyio.Event = field(default_factory=anyio.Event, repr=False, compare=False)

    @property
    def host_ip(self) -> str:
        return f"10.1.{self.index // 250}.{self.index % 250 + 1}"

    def stop(self) -> None:
        """The kubelet dies: no more heartbeats, pods left as they are. During a reboot the
        machine stays down until `start()`."""
        self.running = False
        if self.rebooting:
            self._set_boot_due(None)

    def start(self) -> None:
        """The kubelet comes back; during a reboot the machine is up at once."""
        if self.rebooting:
            self._set_boot_due(anyio.current_time())
            return
        self.running = True
        self.owner.post_status(self)
        self.owner.resync_pods()
        self.owner.restart_killed(self)

    def reboot(self, *, down_seconds: float = 2.0) -> None:
        """The machine reboots (see the module doc); the work runs in the fleet's task group.
        A reboot while down starts the down time again."""
        self.owner.reboot(self, down_seconds)

    def _set_boot_due(self, due: float | None) -> None:
        self.boot_due = due
        self._wake.set()

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
        self.speed = 1.0
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
        self.speed = speed
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

    # -- reboots ----------------------------------------------------------------------------

    def reboot(self, kubelet: ApiKubelet, down_seconds: float) -> None:
        """Take `kubelet`'s machine down now and have it back after `down_seconds` / speed."""
        if self._tg is None:
            raise RuntimeError("the kubelets are not running: reboot a node once the cluster is up")
        due = anyio.current_time() + max(down_seconds, 0.0) / self.speed
        if kubelet.rebooting:
            kubelet._set_boot_due(due)
            return
        was_running = kubelet.running
        kubelet.rebooting, kubelet.running = True, False
        kubelet.reboots += 1
        kubelet.boot_due = due
        self._tg.start_soon(self._reboot, kubelet, was_running)

    async def _reboot(self, kubelet: ApiKubelet, was_running: bool) -> None:
        if was_running:
            await self._post_status(kubelet, force=True)  # the kubelet's last word: NotReady
        await self._kill_containers(kubelet)
        while True:
            kubelet._wake = anyio.Event()
            due = kubelet.boot_due
            left = math.inf if due is None else due - anyio.current_time()
            if left <= 0:
                break
            with anyio.move_on_after(left):
                await kubelet._wake.wait()
        await self._boot(kubelet)

    async def _kill_containers(self, kubelet: ApiKubelet) -> None:
        listed = await self._retry(
            lambda: self.client.list(PODS, field_selector=f"spec.nodeName={kubelet.name}")
        )
        for pod in (listed or {}).get("items") or []:
            meta = pod["metadata"]
            if (pod.get("status") or {}).get("phase") != "Running":
                continue
            self.held.pop((meta["namespace"], meta["name"]), None)
            written = await self._rewrite_status(pod, killed_status)
            if written is not None and not meta.get("deletionTimestamp"):
                kubelet.killed[meta["uid"]] = (meta["namespace"], meta["name"])

    async def _boot(self, kubelet: ApiKubelet) -> None:
        kubelet.rebooting, kubelet.running = False, True
        kubelet.boot_id = secrets.token_hex(16)
        await self._post_status(kubelet)  # Ready, with the new boot ID
        await self._renew_lease(kubelet)
        await self._rebooted_event(kubelet)
        self.resync_pods()
        self.restart_killed(kubelet)

    async def _rebooted_event(self, kubelet: ApiKubelet) -> None:
        node = await self._retry(lambda: self.client.get(NODES, kubelet.name))
        if node is None:
            return
        now = _now()
        event: Obj = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"generateName": f"{kubelet.name}.", "namespace": "default"},
            "involvedObject": {
                "apiVersion": "v1",
                "kind": "Node",
                "name": kubelet.name,
                "uid": node["metadata"]["uid"],
            },
            "reason": "Rebooted",
            "message": f"Node {kubelet.name} has been rebooted, boot id: {kubelet.boot_id}",
            "type": "Warning",
            "source": {"component": "kubelet", "host": kubelet.name},
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
        await self._retry(
            lambda: self.client.create(EVENTS, event, namespace="default"), give_up=(403, 404, 409, 422)
        )

    def restart_killed(self, kubelet: ApiKubelet) -> None:
        """Start again, after `pod_start_delay`, the containers a reboot killed on `kubelet`."""
        if self._tg is None:
            return
        for uid, (namespace, name) in list(kubelet.killed.items()):
            if uid not in self._pending:
                self._pending[uid] = _RESTART
                self._tg.start_soon(self._restart, kubelet, namespace, name, uid)

    async def _restart(self, kubelet: ApiKubelet, namespace: str, name: str, uid: str) -> None:
        key = (namespace, name)
        try:
            await anyio.sleep(self.pod_start_delay)
            if not kubelet.running:
                return  # stopped meanwhile: `start()` schedules it again
            pod = await self._retry(lambda: self.client.get(PODS, name, namespace=namespace))

            def restarted(current: Obj) -> Obj | None:
                meta = current["metadata"]
                if (
                    meta.get("uid") != uid
                    or meta.get("deletionTimestamp")
                    or (current.get("status") or {}).get("phase") != "Running"
                ):
                    return None
                if (current.get("spec") or {}).get("restartPolicy") == "Never":
                    return terminated_status(current, exit_code=LOST_EXIT_CODE)
                ready = key not in kubelet.failing and not self._never_ready(current)
                if ready and self.gate_readiness and key not in self._released:
                    ready = False
                    self.held[key] = (current, kubelet)
                return rebooted_status(current, ready=ready)

            if pod is not None:
                await self._rewrite_status(pod, restarted)
            kubelet.killed.pop(uid, None)
        finally:
            if self._pending.get(uid) == _RESTART:
                del self._pending[uid]

    async def _rewrite_status(self, pod: Obj, make: Callable[[Obj], Obj | None]) -> Obj | None:
        """Replace the pod's status with `make(pod)` (None: leave it), guarded by its
        resourceVersion; on a conflict read it again and remake. The pod written, or None."""
        meta = pod["metadata"]
        namespace, name = meta["namespace"], meta["name"]
        current: Obj | None = pod
        for _ in range(10):
            if current is None:
                return None
            status = make(current)
            if status is None:
                return None
            replace = functools.partial(
                self.client.replace,
                PODS,
                {**current, "status": status},
                namespace=namespace,
                subresource="status",
            )
            written = await self._retry(replace, give_up=(404, 409, 422))
            if written is not None:
                return written
            current = await self._retry(lambda: self.client.get(PODS, name, namespace=namespace))
        return None

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
            # Registered with its status, as the kubelet's `initialNode` registers it: no scheduler
            # or controller sees the node without capacity, as none sees a real kubelet's so.
            "status": self._node_status(kubelet, old=[], initial=True),
        }
        created = await self._retry(lambda: self.client.create(NODES, body), give_up=(409,))
        if self.untaint_not_ready:
            node = created or await self._retry(lambda: self.client.get(NODES, kubelet.name))
            taints = (node or {}).get("spec", {}).get("taints") or []
            kept = [t for t in taints if t.get("key") != NOT_READY_TAINT]
            if len(kept) != len(taints):
                await self._retry(
                    lambda: self.client.patch(NODES, kubelet.name, {"spec": {"taints": kept or None}})
                )
        if created is None:  # registered before: its status is an earlier kubelet's
            await self._post_status(kubelet, initial=True)
        await self._renew_lease(kubelet, registering=True)

    async def _post_status(self, kubelet: ApiKubelet, *, initial: bool = False, force: bool = False) -> None:
        """Post the node's status unless the kubelet is down (`force`: the last word of one
        going down for a reboot)."""
        async with kubelet.lock:
            if kubelet.running or force:
                await self._write_status(kubelet, initial=initial)

    async def _write_status(self, kubelet: ApiKubelet, *, initial: bool) -> None:
        node = await self._retry(lambda: self.client.get(NODES, kubelet.name))
        if node is None:
            return
        old = (node.get("status") or {}).get("conditions") or []
        status = self._node_status(kubelet, old=old, initial=initial)
        await self._retry(
            lambda: self.client.patch(
                NODES, kubelet.name, {"status": status}, subresource="status", patch_type="strategic"
            )
        )

    def _node_status(self, kubelet: ApiKubelet, *, old: list[Obj], initial: bool) -> Obj:
        """The node's status as the kubelet's setters make it; `initial` adds what it reports once
        it has registered (capacity, allocatable, addresses, its versions)."""
        status: Obj = {
            "conditions": node_conditions(
                ready=kubelet.ready and not kubelet.rebooting,
                not_ready_message=REBOOTING_MESSAGE if kubelet.rebooting else kubelet.not_ready_message,
                pressure=kubelet.pressure,
                old=old,
                now=_now(),
            )
        }
        if kubelet.boot_id is not None:  # the running machine's boot, as the kubelet's nodeInfo setter
            status["nodeInfo"] = {"bootID": kubelet.boot_id}
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
        return status

    async def _renew_lease(self, kubelet: ApiKubelet, *, registering: bool = False) -> None:
        """Renew the node's Lease (create it if it is gone), unless the kubelet went down
        while this renewal waited its turn."""
        async with kubelet.lock:
            if kubelet.running or registering:
                await self._write_lease(kubelet)

    async def _write_lease(self, kubelet: ApiKubelet) -> None:
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
            if kubelet.rebooting:
                return  # the machine went down meanwhile: started once it is back (a relist)
            ready = key not in kubelet.failing and not self._never_ready(pod)
            if ready and self.gate_readiness and key not in self._released:
                ready = False
                self.held[key] = (pod, kubelet)
            flag = "True" if ready else "False"
            started = (pod.get("status") or {}).get("startTime") or _now()
            now = _now()
            restarts = {
                cs.get("name"): int(cs.get("restartCount") or 0)
                for cs in (pod.get("status") or {}).get("containerStatuses") or []
            }
            containers = [
                {
                    "name": c["name"],
                    "ready": ready,
                    "started": True,
                    "restartCount": restarts.get(c["name"], 0),
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
            kubelet = self._kubelets.get((pod.get("spec") or {}).get("nodeName") or "")
            if kubelet is not None and kubelet.rebooting:
                return  # the machine went down meanwhile: finished once it is back (a relist)
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
