"""Simulated kubelets: nodes that register, heartbeat and run pods, without containers.

What a real kubelet does that controllers can observe, and nothing else:
- Registration: a Node with capacity / allocatable (`pods: 110`), a podCIDR, addresses and the
  conditions the kubelet's setters own (MemoryPressure, DiskPressure, PIDPressure, Ready).
- Heartbeats on the real intervals, divided by `speed`: the node Lease in `kube-node-lease` is
  renewed every 10 s (a quarter of its 40 s duration), and the node status is posted every 5 min
  when nothing changed (`nodeStatusReportFrequency`) or at once when a condition changes.
- Pods bound to the node go Pending -> Running and Ready after `pod_start_delay` (containerStatuses,
  startTime, podIP, hostIP and the PodReadyToStartContainers / Initialized / ContainersReady /
  Ready / PodScheduled conditions), with the kubelet's events for each container (Pulling and
  Pulled, or "already present on machine" for an image the node has and need not pull again;
  Created, Started; Killing when the pod is deleted), unless `events` is off (worlds of 100,000
  pods created in bulk in-process: five Event writes per pod would be most of the API's work).
- A pod being deleted is finished after min(its grace period, `termination_cap`): its containers
  are reported terminated (exit 0 if that was within the grace period, 137 if killed at its end),
  Ready=False and the pod in a terminal phase, then it is deleted with grace 0, as the kubelet does.
- Containers of a pod whose `restartPolicy` is `Never` or `OnFailure` (Jobs' pods) exit
  `run_seconds` after they started (the pod annotation `localcluster.aiokcm.io/run-seconds`
  overrides it) with exit code 0, or the code in `localcluster.aiokcm.io/exit-code`. Exit 0, or
  any exit under `Never`, ends the pod (Succeeded / Failed, the pod kept as the kubelet keeps
  it); a failed exit under `OnFailure` restarts the containers (`restartCount` + 1, the exit in
  `lastState`) to run again. `Always` pods run until deleted.
- A reboot (`cluster.kubelets["node-1"].reboot(down_seconds=2.0)`) is a machine going down and
  coming back: the node posts Ready=False ("node is rebooting") at once and falls silent (no
  lease renewals, no status posts, no pod work, as after `stop()`), and every container on it
  dies (its pods Ready=False, containers terminated with exit 255, reason `Unknown`, what
  containerd reports for a container lost with its machine). After `down_seconds` (divided by
  `speed`) the kubelet is back with a new `status.nodeInfo.bootID` (machineID and systemUUID
  are the machine's and stay), records the `Rebooted` event, posts Ready, renews its lease and,
  after `pod_start_delay`, starts the containers of the pods still bound to it again
  (`restartCount` + 1, the lost container in `lastState`); a `Never` pod ends Failed instead. A
  pod deleted meanwhile is finished once the kubelet is back, or is simply gone. `stop()` during
  a reboot keeps the machine down; `start()` brings it up at once.

Why one ticker and not a task per node: 5,000 nodes with a task each cost 5,000 sleeping
coroutines and timer handles; here every due action (lease, status, pod start, pod finish, the
end of a reboot) sits in one heap and one task pops what is due. Stale entries are dropped by
comparing the node's epoch, so stopping a kubelet is just bumping the epoch. Lateness of lease
renewals (`lag`) is what the benchmark reports: it is the one number that says the cluster keeps
up.

Everything runs in-process through `ObjectAPI` (the same code path as HTTP, no HTTP cost), and
pod events come from the storage watch hub, so nothing polls.
"""

from __future__ import annotations

import heapq
import itertools
import math
import secrets
from collections import deque
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.lowlevel

from kubeutil.timestamps import format_micro_time, utcnow
from localcluster import errors
from localcluster.builtin.core import NOT_READY_TAINT
from localcluster.objects import ObjectAPI, now_rfc3339
from localcluster.recorder import EventRecorder
from localcluster.storage import StoredEvent

Obj = dict[str, Any]

LEASE_NAMESPACE = "kube-node-lease"
PRESSURE_CONDITIONS = ("MemoryPressure", "DiskPressure", "PIDPressure", "NetworkUnavailable")
# (reason when False, message when False, reason when True, message when True), as the kubelet's setters.
_CONDITION_TEXT: dict[str, tuple[str, str, str, str]] = {
    "MemoryPressure": (
        "KubeletHasSufficientMemory",
        "kubelet has sufficient memory available",
        "KubeletHasInsufficientMemory",
        "kubelet has insufficient memory available",
    ),
    "DiskPressure": (
        "KubeletHasNoDiskPressure",
        "kubelet has no disk pressure",
        "KubeletHasDiskPressure",
        "kubelet has disk pressure",
    ),
    "PIDPressure": (
        "KubeletHasSufficientPID",
        "kubelet has sufficient PID available",
        "KubeletHasInsufficientPID",
        "kubelet has insufficient PID available",
    ),
    "NetworkUnavailable": (
        "RouteCreated",
        "RouteController created a route",
        "NoRouteCreated",
        "Node created without a route",
    ),
}


def node_conditions(
    *, ready: bool, not_ready_message: str, pressure: Mapping[str, bool], old: list[Obj], now: str
) -> list[Obj]:
    """The kubelet's condition setters: heartbeat `now`, transition time kept unless the status
    flips. Shared with the simulated kubelets that run against a real API server."""
    previous = {c.get("type"): c for c in old}
    out: list[Obj] = []

    def put(type_: str, status: str, reason: str, message: str) -> None:
        before = previous.get(type_) or {}
        changed = before.get("status") != status
        out.append(
            {
                "type": type_,
                "status": status,
                "lastHeartbeatTime": now,
                "lastTransitionTime": now if changed else before.get("lastTransitionTime", now),
                "reason": reason,
                "message": message,
            }
        )

    for type_, (r_false, m_false, r_true, m_true) in _CONDITION_TEXT.items():
        if type_ == "NetworkUnavailable" and type_ not in pressure and type_ not in previous:
            continue
        on = pressure.get(type_, False)
        put(type_, "True" if on else "False", r_true if on else r_false, m_true if on else m_false)
    if ready:
        put("Ready", "True", "KubeletReady", "kubelet is posting ready status")
    else:
        put("Ready", "False", "KubeletNotReady", not_ready_message)
    return out


def node_labels(name: str) -> dict[str, str]:
    """The well-known labels a kubelet puts on its Node, which node selectors and the
    scheduler's topology spreading rely on."""
    return {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"}


def node_info(*, runtime: str, version: str) -> dict[str, str]:
    """`status.nodeInfo` of a simulated machine; its IDs are fresh, so each registration reads
    as a new machine, as it does when a real node is replaced."""
    return {
        "machineID": secrets.token_hex(16),
        "systemUUID": secrets.token_hex(16),
        "bootID": secrets.token_hex(16),
        "kernelVersion": "6.1.0",
        "osImage": "aiokcm simulated node",
        "containerRuntimeVersion": runtime,
        "kubeletVersion": version,
        "kubeProxyVersion": version,
        "operatingSystem": "linux",
        "architecture": "amd64",
    }


# heap actions
_LEASE, _STATUS, _START, _FINISH, _EXIT = "lease", "status", "start", "finish", "exit"
_BOOT, _RESTART = "boot", "restart"
#: What the kubelet says while its machine is down for a reboot.
REBOOTING_MESSAGE = "node is rebooting"
#: The exit a container lost with its machine is reported with (containerd's after a reboot).
LOST_EXIT_CODE = 255
#: How a simulated pod asks its containers to exit with a given code, or after a given time.
EXIT_CODE_ANNOTATION = "localcluster.aiokcm.io/exit-code"
RUN_SECONDS_ANNOTATION = "localcluster.aiokcm.io/run-seconds"


@dataclass(slots=True)
class KubeletConfig:
    """Intervals in real seconds; every one is divided by `speed` (speed 100: a 10 s lease in 0.1 s)."""

    speed: float = 1.0
    lease_duration_seconds: int = 40
    lease_renew_interval: float = 10.0
    status_report_interval: float = 300.0
    pod_start_delay: float = 1.0
    termination_cap: float = 2.0
    max_pods: int = 110
    #: Record the kubelet's container events (Pulling, Pulled, Created, Started, Killing).
    events: bool = True
    #: How long a run-to-completion pod's containers run before they exit.
    run_seconds: float = 1.0
    #: Lift the `not-ready:NoSchedule` taint kube-apiserver puts on a new Node right after
    #: registering it, standing in for the node lifecycle controller that lifts it once the node
    #: is Ready (aiokcm replaces that controller, and a test may not run it).
    untaint_not_ready: bool = True

    def scaled(self, seconds: float) -> float:
        return seconds / self.speed


@dataclass(slots=True)
class LagStats:
    """How late lease renewals ran, in seconds (the bench's figure of merit)."""

    count: int = 0
    total: float = 0.0
    max: float = 0.0
    recent: deque[float] = field(default_factory=lambda: deque(maxlen=50_000))

    def add(self, lag: float) -> None:
        self.count += 1
        self.total += lag
        self.max = max(self.max, lag)
        self.recent.append(lag)

    def percentile(self, q: float) -> float:
        if not self.recent:
            return 0.0
        ordered = sorted(self.recent)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]

    def reset(self) -> None:
        self.count, self.total, self.max = 0, 0.0, 0.0
        self.recent.clear()


class Kubelet:
    """One simulated kubelet: the per-node controls tests use (`cluster.kubelets["node-1"]`)."""

    def __init__(self, fleet: Kubelets, name: str, index: int) -> None:
        self._fleet = fleet
        self.name = name
        self.index = index
        self.running = True
        self.epoch = 0
        self.node_uid: str | None = None
        self.ready = True
        self.not_ready_message = "container runtime is down"
        self.pressure: dict[str, bool] = {}
        self.failing_readiness: set[tuple[str, str]] = set()
        self._next_ip = itertools.count(2)
        #: Images pulled on this node: an `IfNotPresent` container of one is "already present".
        self.images: set[str] = set()
        self._recorder: EventRecorder | None = None
        #: Down for a reboot (see `reboot`): silent until the machine is back.
        self.rebooting = False
        #: Reboots begun; run-to-completion exits scheduled before the last one are void.
        self.reboots = 0
        #: The boot ID of the running machine once it has rebooted (None: the one it registered with).
        self.boot_id: str | None = None
        #: Pods whose containers a reboot killed, to start again once the machine is back.
        self.killed: set[tuple[str, str, str]] = set()

    def recorder(self) -> EventRecorder:
        if self._recorder is None:
            self._recorder = EventRecorder(self._fleet.objects, "kubelet", host=self.name)
        return self._recorder

    def container_events(self, pod: Obj, pull_seconds: float) -> None:
        """What the kubelet records starting each container (`kuberuntime_container.go`, `images/image_manager.go`)."""
        recorder = self.recorder()
        for c in (pod.get("spec") or {}).get("containers") or []:
            name, image = c.get("name", ""), c.get("image", "")
            path = f"spec.containers{{{name}}}"
            if c.get("imagePullPolicy") != "Always" and image in self.images:
                recorder.event(
                    pod,
                    "Normal",
                    "Pulled",
                    f'Container image "{image}" already present on machine',
                    field_path=path,
                )
            else:
                recorder.event(pod, "Normal", "Pulling", f'Pulling image "{image}"', field_path=path)
                recorder.event(
                    pod,
                    "Normal",
                    "Pulled",
                    f'Successfully pulled image "{image}" in {go_duration(pull_seconds)}',
                    field_path=path,
                )
                self.images.add(image)
            recorder.event(pod, "Normal", "Created", f"Created container {name}", field_path=path)
            recorder.event(pod, "Normal", "Started", f"Started container {name}", field_path=path)

    def killing_events(self, pod: Obj) -> None:
        """`Killing` for each running container of a pod being deleted (`killContainer`)."""
        recorder = self.recorder()
        for cs in (pod.get("status") or {}).get("containerStatuses") or []:
            if "running" in (cs.get("state") or {}):
                name = cs.get("name", "")
                recorder.event(
                    pod,
                    "Normal",
                    "Killing",
                    f"Stopping container {name}",
                    field_path=f"spec.containers{{{name}}}",
                )

    # -- controls ---------------------------------------------------------------------
    def stop(self) -> None:
        """The kubelet dies: no more lease renewals, status posts or pod work on this node.

        During a reboot the machine stays down (its return is called off) until `start()`."""
        if self.running or self.rebooting:
            self.running = False
            self.epoch += 1

    def start(self) -> None:
        """The kubelet comes back: heartbeats resume at once and pods left waiting are handled.

        During a reboot the machine is up at once (a new boot ID, its pods' containers restarted)."""
        if self.rebooting:
            self._fleet._boot(self)
        elif not self.running:
            self.running = True
            self.epoch += 1
            self._fleet._resume(self)

    def reboot(self, *, down_seconds: float = 2.0) -> None:
        """The machine reboots: Ready=False at once, silent and its containers dead for
        `down_seconds` (divided by `speed`), then back with a new boot ID (see the module doc).

        A reboot while down starts the down time again; a stopped kubelet's machine reboots too."""
        self._fleet._reboot(self, down_seconds)

    def set_ready(self, ready: bool, message: str = "container runtime is down") -> None:
        """Post Ready=True/False at once (the kubelet keeps heartbeating its lease either way)."""
        self.ready = ready
        self.not_ready_message = message
        self._fleet._post_status(self)

    def set_condition(self, condition: str, status: bool) -> None:
        """Set MemoryPressure / DiskPressure / PIDPressure / NetworkUnavailable and post status."""
        if condition not in PRESSURE_CONDITIONS:
            raise ValueError(
                f"unknown node condition {condition!r} (one of {', '.join(PRESSURE_CONDITIONS)})"
            )
        self.pressure[condition] = status
        self._fleet._post_status(self)

    def fail_readiness(self, namespace: str, name: str, failing: bool = True) -> None:
        """Make a pod's readiness probe fail (Ready=False) or pass again."""
        key = (namespace, name)
        if failing:
            self.failing_readiness.add(key)
        else:
            self.failing_readiness.discard(key)
        self._fleet._refresh_readiness(self, namespace, name)

    # -- helpers ------------------------------------------------------------------------
    def pod_ip(self) -> str:
        n = next(self._next_ip)
        return f"10.{(self.index >> 8) & 255}.{self.index & 255}.{2 + n % 252}"

    @property
    def host_ip(self) -> str:
        return f"192.168.{(self.index >> 8) & 255}.{self.index & 255}"


class Kubelets(Mapping[str, Kubelet]):
    """All simulated kubelets, driven by one ticker task and one pod watch (see the module doc)."""

    def __init__(self, objects: ObjectAPI, config: KubeletConfig | None = None) -> None:
        self.objects = objects
        self.config = config or KubeletConfig()
        self._nodes: dict[str, Kubelet] = {}
        self._heap: list[tuple[float, int, str, str, Any]] = []
        self._seq = itertools.count()
        self._wake = anyio.Event()
        self._pending: dict[str, str] = {}  # pod uid -> action scheduled for it
        self._started = False
        self.lag = LagStats()
        self.renewals = 0
        self._node_rt = objects.registry.require("", "v1", "nodes")
        self._pod_rt = objects.registry.require("", "v1", "pods")
        self._lease_rt = objects.registry.require("coordination.k8s.io", "v1", "leases")

    # -- Mapping ------------------------------------------------------------------------
    def __getitem__(self, name: str) -> Kubelet:
        return self._nodes[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._nodes)

    def __len__(self) -> int:
        return len(self._nodes)

    # -- registration -------------------------------------------------------------------
    def add_node(self, name: str, *, labels: dict[str, str] | None = None) -> Kubelet:
        """Register a node (synchronously) and schedule its heartbeats."""
        kubelet = Kubelet(self, name, len(self._nodes) + 1)
        self._nodes[name] = kubelet
        obj = self._node_object(kubelet, labels or {})
        try:
            self.objects.create(self._node_rt, None, obj)
        except errors.StatusError as exc:
            if exc.code != 409:
                raise
            self._post_status(kubelet)
        else:
            self._lift_not_ready(name)
        self._renew_lease(kubelet)
        if self._started:
            self._schedule_heartbeats(kubelet, anyio.current_time())
        return kubelet

    def _lift_not_ready(self, name: str) -> None:
        if self.config.untaint_not_ready:
            lift_not_ready_taint(self.objects, name)

    def _schedule_heartbeats(self, kubelet: Kubelet, now: float) -> None:
        phase = _spread(kubelet.index)
        self._push(
            now + self.config.scaled(self.config.lease_renew_interval) * phase,
            _LEASE,
            kubelet.name,
            kubelet.epoch,
        )
        self._push(
            now + self.config.scaled(self.config.status_report_interval) * phase,
            _STATUS,
            kubelet.name,
            kubelet.epoch,
        )

    def _node_object(self, kubelet: Kubelet, labels: dict[str, str]) -> Obj:
        capacity = {
            "cpu": "8",
            "memory": "32Gi",
            "pods": str(self.config.max_pods),
            "ephemeral-storage": "100Gi",
            "hugepages-2Mi": "0",
        }
        allocatable = dict(capacity, memory="31Gi", **{"ephemeral-storage": "95Gi"})
        name, i = kubelet.name, kubelet.index
        cidr = f"10.{(i >> 8) & 255}.{i & 255}.0/24"
        info = node_info(runtime="containerd://1.7.22", version="v1.32.0")
        if kubelet.boot_id is not None:
            info["bootID"] = kubelet.boot_id
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": name,
                "labels": {
                    **node_labels(name),
                    "beta.kubernetes.io/os": "linux",
                    "beta.kubernetes.io/arch": "amd64",
                    **labels,
                },
                "annotations": {
                    "node.alpha.kubernetes.io/ttl": "0",
                    "volumes.kubernetes.io/controller-managed-attach-detach": "true",
                },
            },
            "spec": {"podCIDR": cidr, "podCIDRs": [cidr]},
            "status": {
                "capacity": capacity,
                "allocatable": allocatable,
                "conditions": self._conditions(kubelet, []),
                "addresses": [
                    {"type": "InternalIP", "address": kubelet.host_ip},
                    {"type": "Hostname", "address": name},
                ],
                "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
                "nodeInfo": info,
            },
        }

    def _conditions(self, kubelet: Kubelet, old: list[Obj]) -> list[Obj]:
        """The kubelet's condition setters (see `node_conditions`); NotReady while rebooting."""
        return node_conditions(
            ready=kubelet.ready and not kubelet.rebooting,
            not_ready_message=REBOOTING_MESSAGE if kubelet.rebooting else kubelet.not_ready_message,
            pressure=kubelet.pressure,
            old=old,
            now=now_rfc3339(),
        )

    # -- heartbeats ---------------------------------------------------------------------
    def _renew_lease(self, kubelet: Kubelet) -> None:
        if kubelet.node_uid is None:
            node = self.objects.storage.get("nodes", "", kubelet.name)
            kubelet.node_uid = node.load()["metadata"]["uid"] if node is not None else None
        owner = []
        if kubelet.node_uid is not None:
            owner = [{"apiVersion": "v1", "kind": "Node", "name": kubelet.name, "uid": kubelet.node_uid}]
        lease: Obj = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": kubelet.name, "namespace": LEASE_NAMESPACE, "ownerReferences": owner},
            "spec": {
                "holderIdentity": kubelet.name,
                "leaseDurationSeconds": self.config.lease_duration_seconds,
                "renewTime": format_micro_time(utcnow()),
            },
        }
        self.renewals += 1
        try:
            self.objects.update(self._lease_rt, LEASE_NAMESPACE, kubelet.name, lease)
        except errors.StatusError as exc:
            if exc.code != 404:
                raise
            # gone (deleted, or collected because its node was deleted): recreate it, owned by the
            # node if there is one, as the kubelet's lease controller does
            node = self.objects.storage.get("nodes", "", kubelet.name)
            kubelet.node_uid = node.load()["metadata"]["uid"] if node is not None else None
            lease["metadata"]["ownerReferences"] = (
                [{"apiVersion": "v1", "kind": "Node", "name": kubelet.name, "uid": kubelet.node_uid}]
                if kubelet.node_uid
                else []
            )
            self.objects.create(self._lease_rt, LEASE_NAMESPACE, lease)

    def _post_status(self, kubelet: Kubelet) -> None:
        if not kubelet.running:
            return
        try:
            node = self.objects.get(self._node_rt, None, kubelet.name)
        except errors.StatusError:
            return
        status = node.setdefault("status", {})
        status["conditions"] = self._conditions(kubelet, status.get("conditions") or [])
        if kubelet.boot_id is not None:  # the setter of nodeInfo reports the running machine's boot
            status.setdefault("nodeInfo", {})["bootID"] = kubelet.boot_id
        self.objects.update_status(self._node_rt, None, kubelet.name, node)

    def _resume(self, kubelet: Kubelet) -> None:
        now = anyio.current_time()
        if self.objects.storage.get("nodes", "", kubelet.name) is None:
            # a restarted kubelet registers its node again if it was deleted meanwhile
            self.objects.create(self._node_rt, None, self._node_object(kubelet, {}))
            self._lift_not_ready(kubelet.name)
            kubelet.node_uid = None
        self._renew_lease(kubelet)
        self._post_status(kubelet)
        self._push(
            now + self.config.scaled(self.config.lease_renew_interval), _LEASE, kubelet.name, kubelet.epoch
        )
        self._push(
            now + self.config.scaled(self.config.status_report_interval), _STATUS, kubelet.name, kubelet.epoch
        )
        for entry in self.objects.storage.iter_entries("pods"):
            if entry.fields.get("spec.nodeName") == kubelet.name:
                self._on_pod(entry.load())
        for key in sorted(kubelet.killed):  # containers a reboot killed start again
            if key[2] not in self._pending:
                self._pending[key[2]] = _RESTART
                self._push(now + self.config.scaled(self.config.pod_start_delay), _RESTART, kubelet.name, key)

    # -- reboots ------------------------------------------------------------------------
    def _reboot(self, kubelet: Kubelet, down_seconds: float) -> None:
        """Down: Ready=False posted while the kubelet can still post it, then silent, and every
        running container on the node dead; `_BOOT` ends it unless a stop or another reboot
        (a newer epoch) comes first."""
        going_down = not kubelet.rebooting
        if going_down:
            kubelet.rebooting = True
            kubelet.reboots += 1
            self._post_status(kubelet)
        kubelet.running = False
        kubelet.epoch += 1
        if going_down:
            self._kill_containers(kubelet)
        due = anyio.current_time() + self.config.scaled(max(down_seconds, 0.0))
        self._push(due, _BOOT, kubelet.name, kubelet.epoch)

    def _kill_containers(self, kubelet: Kubelet) -> None:
        for entry in list(self.objects.storage.iter_entries("pods")):
            if entry.fields.get("spec.nodeName") != kubelet.name:
                continue
            pod = entry.load()
            if (pod.get("status") or {}).get("phase") != "Running":
                continue
            meta = pod["metadata"]
            pod["status"] = killed_status(pod)
            self._write_pod_status(pod)
            if not meta.get("deletionTimestamp"):  # a pod being deleted is finished, not restarted
                kubelet.killed.add((meta["namespace"], meta["name"], meta["uid"]))

    def _boot(self, kubelet: Kubelet) -> None:
        """Up: a new boot ID, then the kubelet starts as after `stop()` (lease, status with the
        new boot ID, pods), restarting what the reboot killed (see `_resume`)."""
        kubelet.rebooting = False
        kubelet.boot_id = secrets.token_hex(16)
        kubelet.running = False
        kubelet.start()
        if self.config.events:
            node = self.objects.storage.get("nodes", "", kubelet.name)
            if node is not None:
                kubelet.recorder().event(
                    node.load(),
                    "Warning",
                    "Rebooted",
                    f"Node {kubelet.name} has been rebooted, boot id: {kubelet.boot_id}",
                )

    def _running_pod(self, ns: str, name: str, uid: str) -> Obj | None:
        """The stored pod if it is still this one (`uid`), Running and not being deleted."""
        entry = self.objects.storage.get("pods", ns, name)
        if entry is None:
            return None
        pod: Obj = entry.load()
        meta = pod["metadata"]
        if (
            meta["uid"] != uid
            or meta.get("deletionTimestamp")
            or (pod.get("status") or {}).get("phase") != "Running"
        ):
            return None
        return pod

    def _restart_pod(self, kubelet: Kubelet, key: tuple[str, str, str]) -> None:
        """Start the containers a reboot killed again, as the kubelet does for a pod whose
        sandbox is gone; a `Never` pod's lost containers end it instead (Failed)."""
        ns, name, uid = key
        if self._pending.get(uid) == _RESTART:
            del self._pending[uid]
        kubelet.killed.discard(key)
        pod = self._running_pod(ns, name, uid)
        if pod is None:
            return
        if (pod.get("spec") or {}).get("restartPolicy") == "Never":
            pod["status"] = terminated_status(pod, exit_code=LOST_EXIT_CODE)
            self._write_pod_status(pod)
            return
        if self.config.events:
            kubelet.container_events(pod, self.config.scaled(self.config.pod_start_delay))
        pod["status"] = rebooted_status(pod, ready=(ns, name) not in kubelet.failing_readiness)
        self._write_pod_status(pod)
        self._schedule_exit(kubelet, pod, key)

    # -- pods ---------------------------------------------------------------------------
    def _on_pod(self, pod: Obj) -> None:
        """Schedule the work a pod on one of our nodes needs (start it, or finish its deletion)."""
        spec, meta = pod.get("spec") or {}, pod["metadata"]
        kubelet = self._nodes.get(spec.get("nodeName") or "")
        if kubelet is None or not kubelet.running:
            return
        uid = meta["uid"]
        key = (meta["namespace"], meta["name"], uid)
        now = anyio.current_time()
        if meta.get("deletionTimestamp"):
            if self._pending.get(uid) != _FINISH:
                self._pending[uid] = _FINISH
                if self.config.events:
                    kubelet.killing_events(pod)
                grace = min(float(meta.get("deletionGracePeriodSeconds") or 0), self.config.termination_cap)
                self._push(now + self.config.scaled(grace), _FINISH, kubelet.name, key)
            return
        status = pod.get("status") or {}
        if (
            status.get("phase", "Pending") == "Pending"
            and not status.get("startTime")
            and uid not in self._pending
        ):
            self._pending[uid] = _START
            self._push(now + self.config.scaled(self.config.pod_start_delay), _START, kubelet.name, key)

    def _start_pod(self, kubelet: Kubelet, key: tuple[str, str, str]) -> None:
        ns, name, uid = key
        self._pending.pop(uid, None)
        entry = self.objects.storage.get("pods", ns, name)
        if entry is None:
            return
        pod = entry.load()
        meta, status = pod["metadata"], pod.get("status") or {}
        if meta["uid"] != uid or meta.get("deletionTimestamp") or status.get("phase", "Pending") != "Pending":
            return
        ready = (ns, name) not in kubelet.failing_readiness
        if self.config.events:
            kubelet.container_events(pod, self.config.scaled(self.config.pod_start_delay))
        pod["status"] = running_status(pod, pod_ip=kubelet.pod_ip(), host_ip=kubelet.host_ip, ready=ready)
        self._write_pod_status(pod)
        self._schedule_exit(kubelet, pod, key)

    def _schedule_exit(self, kubelet: Kubelet, pod: Obj, key: tuple[str, str, str]) -> None:
        if (pod.get("spec") or {}).get("restartPolicy", "Always") == "Always":
            return
        annotations = pod["metadata"].get("annotations") or {}
        try:
            run = float(annotations.get(RUN_SECONDS_ANNOTATION, self.config.run_seconds))
        except ValueError:
            run = self.config.run_seconds
        due = anyio.current_time() + self.config.scaled(max(run, 0.0))
        self._push(due, _EXIT, kubelet.name, (*key, kubelet.reboots))

    def _exit_pod(self, kubelet: Kubelet, payload: tuple[str, str, str, int]) -> None:
        """The containers of a run-to-completion pod exit (see the module doc); an exit of
        containers a reboot has killed since is void."""
        ns, name, uid, boots = payload
        if boots != kubelet.reboots:
            return
        key = (ns, name, uid)
        pod = self._running_pod(ns, name, uid)
        if pod is None:
            return
        meta = pod["metadata"]
        try:
            code = int((meta.get("annotations") or {}).get(EXIT_CODE_ANNOTATION, 0))
        except ValueError:
            code = 1
        if code != 0 and (pod.get("spec") or {}).get("restartPolicy") == "OnFailure":
            pod["status"] = restarted_status(pod, exit_code=code)
            self._write_pod_status(pod)
            self._schedule_exit(kubelet, pod, key)
            return
        pod["status"] = terminated_status(pod, exit_code=code)
        self._write_pod_status(pod)

    def _refresh_readiness(self, kubelet: Kubelet, namespace: str, name: str) -> None:
        entry = self.objects.storage.get("pods", namespace, name)
        if entry is None:
            return
        pod = entry.load()
        status = pod.get("status") or {}
        if status.get("phase") != "Running" or (pod.get("spec") or {}).get("nodeName") != kubelet.name:
            return
        if (namespace, name, pod["metadata"]["uid"]) in kubelet.killed:
            return  # its containers are dead: the probe's verdict counts once they are restarted
        ready = (namespace, name) not in kubelet.failing_readiness
        set_readiness(pod, ready)
        self._write_pod_status(pod)

    def _write_pod_status(self, pod: Obj) -> None:
        meta = pod["metadata"]
        try:
            self.objects.update_status(self._pod_rt, meta["namespace"], meta["name"], pod)
        except errors.StatusError as exc:
            if exc.code not in (404, 409):
                raise

    def _finish_pod(self, key: tuple[str, str, str]) -> None:
        """The containers have stopped: report them terminated (Ready=False, terminal phase),
        then delete the pod with grace 0, as the kubelet's status manager does."""
        ns, name, uid = key
        # kept as finishing until the DELETED event: the status write below must not schedule it again
        entry = self.objects.storage.get("pods", ns, name)
        if entry is None:
            self._pending.pop(uid, None)
        else:
            pod = entry.load()
            meta = pod["metadata"]
            if meta["uid"] == uid and (pod.get("status") or {}).get("phase") == "Running":
                killed = float(meta.get("deletionGracePeriodSeconds") or 0) <= self.config.termination_cap
                pod["status"] = terminated_status(pod, exit_code=137 if killed else 0)
                self._write_pod_status(pod)
        try:
            self.objects.delete(self._pod_rt, ns, name, grace_period_seconds=0, preconditions={"uid": uid})
        except errors.StatusError as exc:
            if exc.code not in (404, 409):
                raise

    # -- the ticker ---------------------------------------------------------------------
    def _push(self, due: float, action: str, node: str, payload: Any) -> None:
        heapq.heappush(self._heap, (due, next(self._seq), action, node, payload))
        if self._heap[0][0] == due:
            self._wake.set()

    async def run(self) -> None:
        """Watch pods and run the ticker until cancelled (start it in the cluster's task group)."""
        self._started = True
        now = anyio.current_time()
        for kubelet in self._nodes.values():
            if kubelet.running:
                self._schedule_heartbeats(kubelet, now)
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._watch_pods)
            tg.start_soon(self._tick)

    async def _watch_pods(self) -> None:
        storage = self.objects.storage
        while True:  # a closed subscription (a fault dropping every watch) starts over
            with storage.subscribe("pods") as sub:
                for entry in list(storage.iter_entries("pods")):
                    if entry.fields.get("spec.nodeName") in self._nodes:
                        self._on_pod(entry.load())
                while not sub.closed:
                    await sub.wait()
                    for ev in sub.drain():
                        self._on_event(ev)
            await anyio.lowlevel.checkpoint()

    def _on_event(self, ev: StoredEvent) -> None:
        if ev.type == "DELETED":
            meta = ev.obj["metadata"]
            self._pending.pop(meta["uid"], None)
            killed_on = self._nodes.get(ev.fields.get("spec.nodeName") or "")
            if killed_on is not None:
                killed_on.killed.discard((meta["namespace"], meta["name"], meta["uid"]))
            return
        if ev.fields.get("spec.nodeName") in self._nodes:
            self._on_pod(ev.obj)

    async def _tick(self) -> None:
        while True:
            now = anyio.current_time()
            handled = 0
            while self._heap and self._heap[0][0] <= now:
                due, _, action, node, payload = heapq.heappop(self._heap)
                self._run_action(now, due, action, node, payload)
                handled += 1
                if handled % 500 == 0:
                    await anyio.lowlevel.checkpoint()
                    now = anyio.current_time()
            timeout = self._heap[0][0] - anyio.current_time() if self._heap else math.inf
            if timeout > 0:
                self._wake = anyio.Event()
                with anyio.move_on_after(timeout):
                    await self._wake.wait()
            else:
                await anyio.lowlevel.checkpoint()

    def _run_action(self, now: float, due: float, action: str, node: str, payload: Any) -> None:
        kubelet = self._nodes.get(node)
        if kubelet is None:
            return
        if action == _BOOT:
            if payload == kubelet.epoch and kubelet.rebooting:
                self._boot(kubelet)
            return
        if action in (_LEASE, _STATUS):
            if payload != kubelet.epoch or not kubelet.running:
                return
            if action == _LEASE:
                self.lag.add(now - due)
                self._renew_lease(kubelet)
                self._push(due + self.config.scaled(self.config.lease_renew_interval), _LEASE, node, payload)
            else:
                self._post_status(kubelet)
                self._push(
                    due + self.config.scaled(self.config.status_report_interval), _STATUS, node, payload
                )
            return
        if not kubelet.running:
            self._pending.pop(payload[2], None)  # picked up again by `start()`
            return
        if action == _START:
            self._start_pod(kubelet, payload)
        elif action == _FINISH:
            self._finish_pod(payload)
        elif action == _EXIT:
            self._exit_pod(kubelet, payload)
        elif action == _RESTART:
            self._restart_pod(kubelet, payload)


def lift_not_ready_taint(objects: ObjectAPI, name: str) -> None:
    """Remove `node.kubernetes.io/not-ready:NoSchedule` from a node, as the node lifecycle
    controller does once the node is Ready."""
    node_rt = objects.registry.require("", "v1", "nodes")
    node = objects.get(node_rt, None, name)
    taints = (node.get("spec") or {}).get("taints") or []
    kept = [t for t in taints if not (t.get("key") == NOT_READY_TAINT and t.get("effect") == "NoSchedule")]
    if len(kept) != len(taints):
        node["spec"]["taints"] = kept
        if not kept:
            del node["spec"]["taints"]
        objects.update(node_rt, None, name, node)


def running_status(pod: Obj, *, pod_ip: str, host_ip: str, ready: bool) -> Obj:
    """The status a kubelet reports once every container of the pod has started."""
    now = now_rfc3339()
    spec = pod.get("spec") or {}
    old = pod.get("status") or {}
    scheduled = next((c for c in old.get("conditions") or [] if c.get("type") == "PodScheduled"), None)
    statuses = [
        {
            "name": c["name"],
            "image": c.get("image", ""),
            "imageID": f"{c.get('image', '')}@sha256:{secrets.token_hex(32)}",
            "containerID": f"containerd://{secrets.token_hex(32)}",
            "ready": ready,
            "started": True,
            "restartCount": 0,
            "state": {"running": {"startedAt": now}},
        }
        for c in spec.get("containers") or []
    ]
    status: Obj = {
        "phase": "Running",
        "conditions": [
            {
                "type": "PodReadyToStartContainers",
                "status": "True",
                "lastProbeTime": None,
                "lastTransitionTime": now,
            },
            {"type": "Initialized", "status": "True", "lastProbeTime": None, "lastTransitionTime": now},
            {"type": "Ready", "status": "True", "lastProbeTime": None, "lastTransitionTime": now},
            {"type": "ContainersReady", "status": "True", "lastProbeTime": None, "lastTransitionTime": now},
            scheduled
            or {"type": "PodScheduled", "status": "True", "lastProbeTime": None, "lastTransitionTime": now},
        ],
        "hostIP": host_ip,
        "hostIPs": [{"ip": host_ip}],
        "podIP": pod_ip,
        "podIPs": [{"ip": pod_ip}],
        "startTime": now,
        "containerStatuses": statuses,
        "qosClass": old.get("qosClass", "BestEffort"),
    }
    # keep conditions other actors own (DisruptionTarget, EvacuationRequest, ...)
    own = {c["type"] for c in status["conditions"]}
    status["conditions"].extend(c for c in old.get("conditions") or [] if c.get("type") not in own)
    pod["status"] = status
    set_readiness(pod, ready)
    return status


def terminated_status(pod: Obj, *, exit_code: int) -> Obj:
    """The status a kubelet reports once a deleted pod's containers have stopped: each
    container terminated with `exit_code` (0 when it stopped within its grace period, 137 when
    killed at its end), not ready, and the pod in a terminal phase (`getPhase` for a pod that
    is terminal: Succeeded when every container exited 0, else Failed)."""
    now = now_rfc3339()
    status = dict(pod.get("status") or {})
    succeeded = exit_code == 0
    statuses = []
    for cs in status.get("containerStatuses") or []:
        started = (
            ((cs.get("state") or {}).get("running") or {}).get("startedAt") or status.get("startTime") or now
        )
        terminated = {
            "exitCode": exit_code,
            "reason": "Completed" if succeeded else "Error",
            "startedAt": started,
            "finishedAt": now,
            "containerID": cs.get("containerID", ""),
        }
        statuses.append({**cs, "ready": False, "started": False, "state": {"terminated": terminated}})
    status["containerStatuses"] = statuses
    status["phase"] = "Succeeded" if succeeded else "Failed"
    names = " ".join(cs["name"] for cs in statuses)
    conditions = []
    for cond in status.get("conditions") or []:
        cond = dict(cond)
        kind = cond.get("type")
        if kind in ("Ready", "ContainersReady", "PodReadyToStartContainers"):
            if cond.get("status") != "False":
                cond["lastTransitionTime"] = now
            cond["status"] = "False"
            cond.pop("reason", None)
            cond.pop("message", None)
            if kind != "PodReadyToStartContainers":
                if succeeded:
                    cond["reason"] = "PodCompleted"
                else:
                    cond["reason"] = "ContainersNotReady"
                    cond["message"] = f"containers with unready status: [{names}]"
        conditions.append(cond)
    status["conditions"] = conditions
    return status


def restarted_status(pod: Obj, *, exit_code: int) -> Obj:
    """An `OnFailure` pod's containers exited with `exit_code` and were started again."""
    now = now_rfc3339()
    status = dict(pod.get("status") or {})
    statuses = []
    for cs in status.get("containerStatuses") or []:
        started = ((cs.get("state") or {}).get("running") or {}).get("startedAt") or now
        last = {
            "terminated": {
                "exitCode": exit_code,
                "reason": "Error",
                "startedAt": started,
                "finishedAt": now,
                "containerID": cs.get("containerID", ""),
            }
        }
        statuses.append(
            {
                **cs,
                "restartCount": int(cs.get("restartCount") or 0) + 1,
                "lastState": last,
                "state": {"running": {"startedAt": now}},
            }
        )
    status["containerStatuses"] = statuses
    return status


def killed_status(pod: Obj) -> Obj:
    """The status of a pod whose machine went down: each running container terminated with
    exit 255, reason `Unknown` (what containerd reports for a container lost in a reboot), the
    pod not ready and its sandbox gone. The phase stays: the pod is still bound to the node."""
    now = now_rfc3339()
    status = dict(pod.get("status") or {})
    statuses = []
    for cs in status.get("containerStatuses") or []:
        state = cs.get("state") or {}
        if "running" in state:
            started = (state.get("running") or {}).get("startedAt") or status.get("startTime") or now
            state = {
                "terminated": {
                    "exitCode": LOST_EXIT_CODE,
                    "reason": "Unknown",
                    "startedAt": started,
                    "finishedAt": now,
                    "containerID": cs.get("containerID", ""),
                }
            }
        statuses.append({**cs, "started": False, "state": state})
    status["containerStatuses"] = statuses
    status["conditions"] = [dict(c) for c in status.get("conditions") or []]
    _set_condition(status, "PodReadyToStartContainers", "False", now)
    pod = {**pod, "status": status}
    set_readiness(pod, False)
    return status


def rebooted_status(pod: Obj, *, ready: bool) -> Obj:
    """The status once the kubelet, back from a reboot, has started a killed pod's containers
    again: `restartCount` + 1, the lost container in `lastState`, a new container ID."""
    now = now_rfc3339()
    status = dict(pod.get("status") or {})
    statuses = []
    for cs in status.get("containerStatuses") or []:
        old_id = str(cs.get("containerID") or "")
        runtime = old_id.split("://", 1)[0] if "://" in old_id else "containerd"
        state = cs.get("state") or {}
        statuses.append(
            {
                **cs,
                "restartCount": int(cs.get("restartCount") or 0) + 1,
                "lastState": state if "terminated" in state else cs.get("lastState") or {},
                "state": {"running": {"startedAt": now}},
                "started": True,
                "containerID": f"{runtime}://{secrets.token_hex(32)}",
            }
        )
    status["containerStatuses"] = statuses
    status["conditions"] = [dict(c) for c in status.get("conditions") or []]
    _set_condition(status, "PodReadyToStartContainers", "True", now)
    pod = {**pod, "status": status}
    set_readiness(pod, ready)
    return status


def _set_condition(status: Obj, type_: str, value: str, now: str) -> None:
    for cond in status.get("conditions") or []:
        if cond.get("type") == type_:
            if cond.get("status") != value:
                cond["lastTransitionTime"] = now
            cond["status"] = value
            return


def set_readiness(pod: Obj, ready: bool) -> None:
    """Ready / ContainersReady as the kubelet's status manager derives them from container readiness."""
    status = pod["status"]
    now = now_rfc3339()
    names = []
    for cs in status.get("containerStatuses") or []:
        cs["ready"] = ready
        names.append(cs["name"])
    for cond in status.get("conditions") or []:
        if cond.get("type") not in ("Ready", "ContainersReady"):
            continue
        value = "True" if ready else "False"
        if cond.get("status") != value:
            cond["lastTransitionTime"] = now
        cond["status"] = value
        if ready:
            cond.pop("reason", None)
            cond.pop("message", None)
        else:
            cond["reason"] = "ContainersNotReady"
            cond["message"] = f"containers with unready status: [{' '.join(names)}]"


def go_duration(seconds: float) -> str:
    """A duration as Go's `time.Duration.String` prints one (`812.5ms`, `1.25s`)."""
    if seconds < 1:
        return f"{seconds * 1000:.6f}".rstrip("0").rstrip(".") + "ms"
    return f"{seconds:.9f}".rstrip("0").rstrip(".") + "s"


def _spread(index: int) -> float:
    """A node's first heartbeat phase in (0, 1]: spreads thousands of nodes over the interval."""
    return ((index * 0.6180339887) % 1.0) or 1.0
