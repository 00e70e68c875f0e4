"""Benchmark: drain one node with `aiokcm drain` and with the real `kubectl drain`, same layout.

Layout (issue 10): three nodes; Deployments `single` (1 replica) and `triple` (3 replicas), both
with `maxSurge: 1, maxUnavailable: 0`; `guarded`, a single-replica Deployment with a PDB
`minAvailable: 1`. Every app pod starts on the drained node (the other nodes are cordoned while the
apps roll out, then uncordoned). aiokcm's ReplicaSet, Deployment and disruption controllers run in
both modes (KCM's job); the NodeMaintenance controller and its CRD only in the aiokcm mode.

A mode `aiokcm_stock` is aiokcm's default install beside the stock KCM (every managed cluster):
only the NodeMaintenance drain and the replacement surge are aiokcm's, KCM's own ReplicaSet,
Deployment and disruption controllers answer nothing in-controller (on the embedded cluster aiokcm's
three with `NodeMaintenanceDeployment` off stand for them; with `--real`, the whole real KCM). It is
compared with the `kubectl` mode, the same layout drained by the real `kubectl drain`.
`--skip-stock` leaves it out.

A third mode, `kubectl_surge`, runs the same real `kubectl drain` with aiokcm's eviction webhook
on (bench/surge_webhook.py; the eviction-surge controller beside the three): a held-back eviction
surges a replacement first. `--skip-surge` leaves it out.

Then, unless `--skip-statefulset`, a StatefulSet's pod (nobody answers for it) drained by a
NodeMaintenance, once waiting the whole `--evacuation-timeout` for an answer as every such pod did
before, once evicted at once as now (bench/drain_statefulset.py; JSON key `statefulset`).

Figures per mode: time to drained (or "timeout"), and per app the least number of available
replicas seen and the seconds spent at zero (sampled every `--sample` seconds). A chart of available
replicas over time for both modes goes to `bench/out/drain.png` and `.svg` (for the README). Prints a
table, then as its LAST line one JSON object with the figures.

    python -m bench.drain [--timeout 120] [--sample 0.1] [--evacuation-timeout 60] [--apps N --nodes N]
    python -m bench.drain --real [...]     # on a real control plane ($KUBEBUILDER_ASSETS)
    python -m bench.drain --scale [--drains 1,3,10] [--apps 340] [--breakdown]
    python -m bench.drain --real --scale [--keep-audit]   # both layouts on real planes

`--scale`: 340 apps of 1, 3, 1, 2 replicas (595 pods) spread by the scheduler over 30 nodes; for
each drain size (1, 3 and 10 nodes), a fresh cluster per tool, both tools in the same run. One
row per drain and tool: time to drained, pods moved, requests per evacuated pod (every request of
the drain's actors while it runs: the controllers, their event broadcaster and informers, and
`aiokcm drain` or `kubectl`; from the local cluster's request log, by User-Agent), 409s, and the
apps with a pod on the drained nodes that ever had no available replica. `--breakdown` adds the
writes per actor, verb and resource. The JSON line has, per drain and tool,
`seconds_to_drained`, `requests_per_evacuated_pod` and each moved app's `min_available` and
`seconds_at_zero`.

Controllers are wired as `aiokcm run` wires them: a client (so a token bucket) per controller,
one for events and one for the informers, each at `--qps`/`--burst` (KCM's defaults 20/30).

With `--real` each mode gets a fresh real control plane (etcd, kube-apiserver, kube-scheduler and
kube-controller-manager, simulated kubelets over the API): the aiokcm mode runs KCM without the
controllers aiokcm replaces plus aiokcm's controllers at `--kube-api-qps 20 --kube-api-burst 30`;
the kubectl mode runs the whole real KCM (its default 20/30) and the real `kubectl drain`. The
API server's audit log counts the requests of the drain's actors (aiokcm's controllers and its
CLI; KCM's replicaset, deployment and disruption controllers and kubectl) while the drain runs,
reported per evacuated pod.

`--real --scale` runs the scale layout (30 simulated-kubelet nodes, 595 pods of 340 apps; drains of
1, 3 and 10 nodes) on a fresh real plane per drain and mode: layout (a), `aiokcm`, is KCM minus the
controllers aiokcm replaces (replicaset, deployment, disruption, nodelifecycle) plus aiokcm's four
and its NodeMaintenance controller; layout (b), `aiokcm_stock`, is the stock KCM with all its
controllers plus aiokcm's default install (NodeMaintenance drain and replacement-surge answers);
both against the stock KCM + `kubectl drain`. After the per-mode rows it prints the two layouts side
by side with `kubectl drain`, then the writes per evacuated pod by kind (pod status, ReplicaSet
scale and status, Deployment status, events, NodeMaintenance status, ...) of every mode, from the
audit log; a `!` marks an aiokcm figure above the stock KCM + kubectl's for the same drain (the
pod status kind, which carries the evacuation handshake, may be up to 2 more). `--keep-audit`
keeps each plane's audit log and the drain's window in bench/out/.
"""

from __future__ import annotations

import argparse
import dataclasses
import io
import shutil
import sys
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import orjson

from apiclient import ApiError, KubeClient
from apiclient.config import build_api_client
from apiclient.events import EventBroadcaster
from apiclient.resources import (
    DEPLOYMENTS,
    NODES,
    PODDISRUPTIONBUDGETS,
    PODS,
)
from apiclient.throttle import TokenBucket
from bench import drain_statefulset, surge_webhook
from controller_manager.maintenance_cli import build_parser
from controller_manager.maintenance_cli import run as run_cli
from controller_manager.options import ManagerOptions
from controller_manager.registry import default_descriptors
from controllers import features
from controllers.base import Controller
from controllers.context import ControllerContext, StaticGates
from informers import Lister, SharedInformerFactory
from localcluster.cluster import LocalCluster
from localcluster.demo import ensure_crd, pod_available
from localcluster.requestlog import RequestLog

NS = "default"
AGENT = "aiokcm-bench"  # the User-Agent base of every client the bench builds (then "/<component>")
SETUP_COMPONENT = "bench"  # the set-up and sampling client: not an actor of the drain
APPS = {"single": 1, "triple": 3, "guarded": 1}
# The actors whose requests a real-plane run counts: users of the audit log. KCM's node lifecycle
# controller is one: it taints a cordoned node `node.kubernetes.io/unschedulable`, a node write
# of every drain, made by aiokcm's own (user `aiokcm`) where aiokcm replaces it.
DRAIN_ACTORS = frozenset(
    {
        "aiokcm",
        "drainer",
        "system:serviceaccount:kube-system:replicaset-controller",
        "system:serviceaccount:kube-system:deployment-controller",
        "system:serviceaccount:kube-system:disruption-controller",
        "system:serviceaccount:kube-system:node-controller",
    }
)
SCALE_NODES = 30
SCALE_APPS = 340  # 1, 3, 1, 2 replicas in turn: 595 pods, about 20 a node as in the figures
ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "out"
GATES = {features.DECLARATIVE_NODE_MAINTENANCE: True, features.NODE_MAINTENANCE_DEPLOYMENT: True}
KCM_CONTROLLERS = (
    "controllers.replicaset:ReplicaSetController",
    "controllers.deployment:DeploymentController",
    "controllers.disruption:DisruptionController",
)
NM_CONTROLLER = "controllers.nodemaintenance:NodeMaintenanceController"
# On a real plane aiokcm replaces KCM's node lifecycle controller too (realcluster.REPLACED_BY_AIOKCM).
NODE_LIFECYCLE_CONTROLLER = "controllers.nodelifecycle:NodeLifecycleController"
# The third mode, `kubectl_surge`: the real `kubectl drain` with aiokcm's eviction webhook on.
SURGE_CONTROLLER = "controllers.evictionsurge:EvictionSurgeController"
SURGE_GATES = {**GATES, features.EVICTION_SURGE: True}
# The default install beside the stock KCM: the drain and the replacement surge. Without the
# NodeMaintenanceDeployment gate the embedded cluster's stand-ins for KCM answer nothing.
REPLACEMENT_CONTROLLER = "controllers.replacementsurge:ReplacementSurgeController"
STOCK_GATES = {features.DECLARATIVE_NODE_MAINTENANCE: True}
DRAINED_BY_AIOKCM = frozenset({"aiokcm", "aiokcm_stock"})


@dataclass
class Run:
    mode: str
    seconds: float | None = None  # None: did not finish before the timeout
    samples: list[tuple[float, dict[str, int]]] = field(default_factory=list)
    note: str = ""
    pods_moved: int = 0
    requests: int | None = None  # requests of the drain's actors while draining
    drained_nodes: int = 1
    moved_apps: list[str] = field(default_factory=list)  # apps with a pod on a drained node
    #: actor -> (requests, of which 409 Conflicts) while draining (local cluster only)
    by_actor: dict[str, tuple[int, int]] = field(default_factory=dict)
    #: "actor METHOD resource" -> writes while draining (local cluster only; printed with --breakdown)
    writes: dict[str, int] = field(default_factory=dict)
    #: write kind (`write_kind`) -> writes of the drain's actors while draining (real planes only)
    kinds: dict[str, int] = field(default_factory=dict)

    @property
    def requests_per_pod(self) -> float | None:
        if self.requests is None or not self.pods_moved:
            return None
        return self.requests / self.pods_moved

    def min_available(self, app: str) -> int:
        return min((s[app] for _, s in self.samples), default=0)

    def seconds_at_zero(self, app: str) -> float:
        total = 0.0
        for (t0, s0), (t1, _) in zip(self.samples, self.samples[1:], strict=False):
            if s0[app] == 0:
                total += t1 - t0
        return total


def layout(apps: int) -> dict[str, int]:
    """The default three apps (a PDB guards `guarded`), or `apps` apps of 1, 3, 1, 2, ... replicas
    and no PDB, so `kubectl drain` can finish and the two drains' times compare."""
    if apps <= 3:
        return dict(APPS)
    sizes = (1, 3, 1, 2)
    return {f"app-{i:02d}": sizes[i % len(sizes)] for i in range(apps)}


def deployment(name: str, replicas: int) -> dict[str, Any]:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "app", "image": "pause"}]},
            },
        },
    }


async def available(client: KubeClient) -> dict[str, int]:
    return _count(await client.list_all(PODS, namespace=NS))


async def wait_for(check: Callable[[], Any], what: str, timeout: float = 60.0, every: float = 0.1) -> None:
    with anyio.move_on_after(timeout):
        while True:
            if await check():
                return
            await anyio.sleep(every)
    raise RuntimeError(f"bench set-up: timed out waiting for {what}")


async def set_layout(client: KubeClient, target: str, others: list[str]) -> None:
    """Every app pod on `target`: the other nodes are cordoned during the roll-out."""
    for n in others:
        await client.patch(NODES, n, {"spec": {"unschedulable": True}})
    for name, replicas in APPS.items():
        await client.create(DEPLOYMENTS, deployment(name, replicas), namespace=NS)
    if "guarded" in APPS:
        await client.create(
            PODDISRUPTIONBUDGETS,
            {
                "apiVersion": "policy/v1",
                "kind": "PodDisruptionBudget",
                "metadata": {"name": "guarded", "namespace": NS},
                "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "guarded"}}},
            },
            namespace=NS,
        )

    async def all_up() -> bool:
        return await available(client) == APPS

    await wait_for(all_up, "every app available")
    for n in others:
        await client.patch(NODES, n, {"spec": {"unschedulable": None}})


async def spread_layout(client: KubeClient) -> None:
    """The apps wherever the scheduler puts them (it spreads by pod count)."""
    for name, replicas in APPS.items():
        await client.create(DEPLOYMENTS, deployment(name, replicas), namespace=NS)

    async def all_up() -> bool:
        return await available(client) == APPS

    await wait_for(all_up, "every app available", timeout=600.0, every=1.0)


def _count(pods: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    counts = dict.fromkeys(APPS, 0)
    for pod in pods:
        app = (pod["metadata"].get("labels") or {}).get("app")
        if app in counts and pod_available(pod):
            counts[app] += 1
    return counts


async def sample(pods: Lister, run: Run, start: float, every: float) -> None:
    """Available replicas per app from a watch-fed cache: a LIST of every pod ten times a second
    would load the cluster both tools share more than the drain itself."""
    while True:
        run.samples.append((time.monotonic() - start, _count(pods.list(NS))))
        await anyio.sleep(every)


async def _drain(
    mode: str, targets: list[str], kubeconfig: str, client: KubeClient, run: Run, args: argparse.Namespace
) -> int:
    """Drain `targets` the mode's way: `aiokcm drain` (a NodeMaintenance each) or the real `kubectl drain`."""
    if mode in DRAINED_BY_AIOKCM:
        cli_args = build_parser().parse_args(
            [
                "drain",
                *targets,
                "--timeout",
                f"{args.timeout}s",
                "--evacuation-timeout",
                f"{args.evacuation_timeout}s",
                "--poll-interval",
                "0.2",
            ]
        )
        return await run_cli(cli_args, client, out=io.StringIO(), err=io.StringIO())
    result = await anyio.run_process(
        [
            "kubectl",
            "--kubeconfig",
            kubeconfig,
            "drain",
            *targets,
            "--ignore-daemonsets",
            "--delete-emptydir-data",
            f"--timeout={int(args.timeout)}s",
        ],
        check=False,
    )
    if result.returncode:
        lines = result.stderr.decode(errors="replace").strip().splitlines()
        run.note = lines[-1] if lines else f"exit {result.returncode}"
    return result.returncode


async def _pods_on(client: KubeClient, nodes: list[str]) -> int:
    total = 0
    for node in nodes:
        total += len(await client.list_all(PODS, namespace=NS, field_selector=f"spec.nodeName={node}"))
    return total


def _actor(user_agent: str) -> str | None:
    """Whose request this is: `kubectl`, or the component of one of the bench's aiokcm clients."""
    if user_agent.startswith("kubectl"):
        return "kubectl"
    base, _, component = user_agent.rpartition("/")
    if not base.startswith(AGENT) or component in ("", SETUP_COMPONENT):
        return None
    return component


def count_local(requests: RequestLog, start: float, reads_before: Counter[str]) -> dict[str, tuple[int, int]]:
    """Requests per actor since `start` (monotonic): writes from the log, reads from its counter."""
    counts: dict[str, list[int]] = {}
    for w in requests.since(start):
        actor = _actor(w.user_agent)
        if actor is not None:
            row = counts.setdefault(actor, [0, 0])
            row[0] += 1
            row[1] += int(w.status == 409)
    for agent, n in (requests.reads_by_agent - reads_before).items():
        actor = _actor(agent)
        if actor is not None:
            counts.setdefault(actor, [0, 0])[0] += n
    return {a: (n, c) for a, (n, c) in sorted(counts.items())}


async def _quiet(requests: RequestLog, seconds: float = 1.0) -> None:
    """Until no actor of the drain has written for `seconds`."""
    while True:
        last = max((w.at for w in requests.writes[-200:] if _actor(w.user_agent)), default=0.0)
        if time.monotonic() - last >= seconds:
            return
        await anyio.sleep(0.2)


def _node_order(name: str) -> tuple[int, str]:
    digits = "".join(ch for ch in name if ch.isdigit())
    return (int(digits) if digits else 0, name)


def typical_nodes(nodes: list[str], pods: Iterable[Mapping[str, Any]], count: int) -> list[str]:
    """The `count` nodes whose pod count is nearest the mean (ties in node order), in node order.

    Each mode lays the apps out on a fresh plane and the scheduler breaks ties at random, so the
    first nodes hold 20 pods in one mode and 23 in the next; nodes of the typical size make every
    mode's drain move about the same pods, so their times compare the same work."""
    on = Counter((p.get("spec") or {}).get("nodeName") for p in pods)
    mean = sum(on[n] for n in nodes) / max(len(nodes), 1)
    chosen = sorted(nodes, key=lambda n: (abs(on[n] - mean), _node_order(n)))[:count]
    return sorted(chosen, key=_node_order)


async def _run_drain(
    mode: str,
    args: argparse.Namespace,
    run: Run,
    *,
    setup: KubeClient,
    base: KubeClient,
    drain_kubeconfig: str,
    controller_paths: list[str],
    requests: RequestLog | None = None,
    settle: Callable[[], Awaitable[None]] | None = None,
) -> tuple[float, float]:
    """Lay the apps out, drain the first `run.drained_nodes` nodes (with `--scale`, as many nodes of
    the typical size: `typical_nodes`); returns the drain's start and end on the wall clock.

    Controllers are wired as `aiokcm run` wires them: a client (so a rate limiter) per controller,
    one for the event broadcaster and one for the informers, all at `--qps`/`--burst` while the drain
    runs (unthrottled while the apps roll out, which only shortens the set-up)."""
    nodes = sorted((n["metadata"]["name"] for n in await setup.list_all(NODES)), key=_node_order)
    targets = nodes[: run.drained_nodes]
    if mode in DRAINED_BY_AIOKCM:
        await ensure_crd(setup)
    clients = [base.derive("shared-informers", qps=0), base.derive("events", qps=0)]
    factory = SharedInformerFactory(clients[0], gc_freeze=True)  # as the manager runs (--gc-freeze)
    broadcaster = EventBroadcaster(clients[1])
    gates = {"kubectl_surge": SURGE_GATES, "aiokcm_stock": STOCK_GATES}.get(mode, GATES)
    ctx = ControllerContext(client=base, informers=factory, events=broadcaster, gates=StaticGates(gates))
    opts = ManagerOptions()
    if mode == "aiokcm_stock":  # as the manager sets it when the replacement surge answers
        beside = dataclasses.replace(opts.node_maintenance, surge_answers=True, bare_replicasets_answer=True)
        opts = dataclasses.replace(opts, node_maintenance=beside)
    controllers: list[Controller] = []
    rows = {d.import_path: d for d in default_descriptors()}
    for path in controller_paths:
        row = rows[path]
        client = base.derive(row.name, qps=0)
        clients.append(client)
        controllers.append(row.build(dataclasses.replace(ctx, client=client), opts))
    watcher = SharedInformerFactory(setup)
    pods = watcher.informer(PODS).lister
    async with anyio.create_task_group() as tg:
        factory.start(tg)
        watcher.start(tg)
        tg.start_soon(broadcaster.run)
        for c in controllers:
            tg.start_soon(c.run)
        webhook: surge_webhook.CountingWebhook | None = None
        if mode == "kubectl_surge":
            webhook = await tg.start(surge_webhook.serve, setup, controllers)
        if args.scale:
            await spread_layout(setup)
        else:
            await set_layout(setup, targets[0], nodes[1:])
        await watcher.wait_for_cache_sync()
        if args.scale:
            targets = typical_nodes(nodes, pods.list(NS), run.drained_nodes)
        unreviewed = webhook is not None and not await surge_webhook.called(setup, webhook)
        # The roll-out's trailing work (status writes, buffered events) is not the drain's.
        with anyio.move_on_after(300):
            await broadcaster.flush()
            if requests is not None:
                await _quiet(requests)
            if settle is not None:
                await settle()
        run.pods_moved = await _pods_on(setup, targets)
        run.moved_apps = sorted(
            {
                (p["metadata"].get("labels") or {}).get("app", "")
                for p in pods.list(NS)
                if (p.get("spec") or {}).get("nodeName") in targets
            }
            & set(APPS)
        )
        for throttled in clients:
            throttled.bucket = TokenBucket(args.qps, args.burst)
        drain_client = base.derive("drain", qps=args.qps, burst=args.burst)
        reads_before = Counter(requests.reads_by_agent) if requests is not None else Counter()
        start, wall_start = time.monotonic(), time.time()
        tg.start_soon(sample, pods, run, start, args.sample)
        code = await _drain(mode, targets, drain_kubeconfig, drain_client, run, args)
        if unreviewed:
            run.note = "; ".join(filter(None, ["this cluster does not call admission webhooks", run.note]))
        run.seconds = time.monotonic() - start if code == 0 else None
        wall_end = time.time()
        if requests is not None:
            run.by_actor = count_local(requests, start, reads_before)
            run.writes = dict(
                sorted(
                    Counter(
                        f"{_actor(w.user_agent)} {w.method} {w.resource}{' 409' if w.status == 409 else ''}"
                        for w in requests.since(start)
                        if _actor(w.user_agent)
                    ).items()
                )
            )
            run.requests = sum(n for n, _ in run.by_actor.values())
        await anyio.sleep(1.0)  # see the apps settle after the drain
        tg.cancel_scope.cancel()
    return wall_start, wall_end


def _controller_paths(mode: str, *, real: bool = False) -> list[str]:
    """aiokcm's controllers in a mode: KCM's three (where aiokcm stands for them), plus the ones the
    mode's drain talks to. On a real plane the stock KCM runs its own beside `aiokcm_stock`."""
    extra = {
        "aiokcm": [NM_CONTROLLER],
        "kubectl_surge": [SURGE_CONTROLLER],
        "aiokcm_stock": [NM_CONTROLLER, REPLACEMENT_CONTROLLER],
    }.get(mode, [])
    if real and mode in ("kubectl", "aiokcm_stock"):
        return extra  # the whole real KCM runs
    if real:  # KCM minus the four aiokcm replaces
        return [*KCM_CONTROLLERS, NODE_LIFECYCLE_CONTROLLER, *extra]
    return [*KCM_CONTROLLERS, *extra]


async def one_mode(mode: str, args: argparse.Namespace, drained: int = 1) -> Run:
    run = Run(mode, drained_nodes=drained)
    async with LocalCluster(nodes=args.nodes) as cluster:
        client = await cluster.client(qps=1000, burst=2000)
        client.api_client.user_agent = AGENT
        try:
            setup = client.derive(SETUP_COMPONENT)
            paths = _controller_paths(mode)
            await _run_drain(
                mode,
                args,
                run,
                setup=setup,
                base=client,
                drain_kubeconfig=str(cluster.kubeconfig_path),
                controller_paths=paths,
                requests=cluster.requests,
            )
        finally:
            await client.close()
    return run


# Write kinds as the issue names them: (resource, subresource, verb) -> label; others keep
# "resource[/subresource] verb". The evacuation handshake is two pod status writes: the
# NodeMaintenance controller's EvacuationRequest condition and its owner's answer.
KIND_LABELS = {
    ("pods", "", "create"): "pod create",
    ("pods", "", "delete"): "pod delete or eviction",
    ("pods", "eviction", "create"): "pod delete or eviction",
    ("pods", "", "patch"): "pod metadata (deletion cost, adoption)",
    ("pods", "", "update"): "pod metadata (deletion cost, adoption)",
    ("pods", "status", "patch"): "pod status",
    ("pods", "status", "update"): "pod status",
    ("replicasets", "", "update"): "ReplicaSet scale",
    ("replicasets", "", "patch"): "ReplicaSet scale",
    ("replicasets", "scale", "update"): "ReplicaSet scale",
    ("replicasets", "scale", "patch"): "ReplicaSet scale",
    ("replicasets", "status", "update"): "ReplicaSet status",
    ("replicasets", "status", "patch"): "ReplicaSet status",
    ("deployments", "", "update"): "Deployment spec",
    ("deployments", "", "patch"): "Deployment spec",
    ("deployments", "status", "update"): "Deployment status",
    ("deployments", "status", "patch"): "Deployment status",
    ("events", "", "create"): "events",
    ("events", "", "patch"): "events",
    ("events", "", "update"): "events",
    ("nodemaintenances", "", "create"): "NodeMaintenance create",
    ("nodemaintenances", "status", "update"): "NodeMaintenance status",
    ("nodemaintenances", "status", "patch"): "NodeMaintenance status",
    ("nodes", "", "patch"): "node (cordon, taints)",
    ("nodes", "", "update"): "node (cordon, taints)",
}
WRITE_VERBS = frozenset({"create", "update", "patch", "delete", "deletecollection"})
HANDSHAKE_KIND = "pod status"
HANDSHAKE_WRITES = 2  # per evacuated pod: the request and its answer (KCM has no such step)


def write_kind(event: Mapping[str, Any]) -> str | None:
    """The kind of write an audit event records, or None for a read."""
    verb = event.get("verb", "")
    if verb not in WRITE_VERBS:
        return None
    ref = event.get("objectRef") or {}
    resource, sub = ref.get("resource", ""), ref.get("subresource", "")
    return KIND_LABELS.get((resource, sub, verb), f"{resource}{'/' + sub if sub else ''} {verb}")


def read_audit(audit_log: Path, users: frozenset[str], start: float, end: float) -> tuple[int, Counter[str]]:
    """Requests by `users` that kube-apiserver answered between `start` and `end` (epoch seconds),
    and their writes by kind (a 409 counts as its kind + " 409")."""
    import datetime as dt

    count = 0
    kinds: Counter[str] = Counter()
    for line in audit_log.read_text().splitlines():
        event = orjson.loads(line)
        if event.get("stage") != "ResponseComplete":
            continue
        if (event.get("user") or {}).get("username") not in users:
            continue
        stamp = dt.datetime.fromisoformat(event["stageTimestamp"].replace("Z", "+00:00")).timestamp()
        if not start <= stamp <= end:
            continue
        count += 1
        kind = write_kind(event)
        if kind is not None:
            conflict = (event.get("responseStatus") or {}).get("code") == 409
            kinds[kind + (" 409" if conflict else "")] += 1
    return count, kinds


async def quiet_audit(audit_log: Path, users: frozenset[str], *, seconds: float = 3.0) -> None:
    """Until `users` have written nothing for `seconds` by the audit log. The stock KCM works
    through the roll-out's status writes at its qps 20 long after the last pod is available: a
    drain started before would count (and wait behind) that backlog."""
    import datetime as dt

    offset, last = 0, time.time()
    while time.time() - last < seconds:
        await anyio.sleep(0.5)
        with audit_log.open("rb") as f:
            f.seek(offset)
            chunk = f.read()
        done = chunk.rfind(b"\n") + 1
        offset += done
        for line in chunk[:done].splitlines():
            event = orjson.loads(line)
            if (event.get("user") or {}).get("username") in users and write_kind(event) is not None:
                stamp = dt.datetime.fromisoformat(event["stageTimestamp"].replace("Z", "+00:00")).timestamp()
                last = max(last, stamp)


async def one_mode_real(mode: str, args: argparse.Namespace, drained: int = 1) -> Run:
    """One mode on a fresh real control plane; see the module docstring."""
    from realcluster import KCM_BESIDE_AIOKCM, ApiKubelets, ControlPlane, assets_from_env

    assets = assets_from_env()
    if assets is None:
        raise SystemExit("bench.drain --real: set KUBEBUILDER_ASSETS (e.g. $(../shared/realk8s/assets.sh))")
    run = Run(mode, drained_nodes=drained)
    plane = ControlPlane(
        assets,
        kcm_controllers=KCM_BESIDE_AIOKCM if mode in ("aiokcm", "kubectl_surge") else "*",  # stock: all
        extra_users={"aiokcm": "system:masters", "drainer": "system:masters", "bench": "system:masters"},
        audit=True,
    )
    await anyio.to_thread.run_sync(plane.start)
    try:

        async def client_of(user: str, qps: float, burst: int) -> KubeClient:
            return KubeClient(
                await build_api_client(kubeconfig=str(plane.kubeconfig(user))), qps=qps, burst=burst
            )

        setup = await client_of("bench", 1000, 2000)
        kubelet_client = await client_of("kubelet", 1000, 2000)
        controllers_client = await client_of("aiokcm", args.qps, args.burst)
        try:
            kubelets = ApiKubelets(kubelet_client)
            for i in range(1, args.nodes + 1):
                kubelets.add_node(f"node-{i}")
            async with anyio.create_task_group() as tg:
                tg.start_soon(kubelets.run)
                await kubelets.registered.wait()
                await _wait_service_account(setup)
                paths = _controller_paths(mode, real=True)
                start, end = await _run_drain(
                    mode,
                    args,
                    run,
                    setup=setup,
                    base=controllers_client,
                    drain_kubeconfig=str(plane.kubeconfig("drainer")),
                    controller_paths=paths,
                    settle=lambda: quiet_audit(plane.audit_log, DRAIN_ACTORS),
                )
                tg.cancel_scope.cancel()
            await anyio.sleep(2.5)  # the audit log is written in batches of at most a second
            run.requests, kinds = read_audit(plane.audit_log, DRAIN_ACTORS, start, end)
            run.kinds = dict(sorted(kinds.items()))
            if args.keep_audit:  # for reading where the time went: the drain's window and its log
                OUT.mkdir(parents=True, exist_ok=True)
                kept = OUT / f"audit-{mode}-{drained}.log"
                shutil.copyfile(plane.audit_log, kept)
                kept.with_suffix(".window").write_text(f"{start} {end}\n")
        finally:
            for c in (setup, kubelet_client, controllers_client):
                await c.close()
    finally:
        await anyio.to_thread.run_sync(plane.stop)
    return run


async def _wait_service_account(client: KubeClient) -> None:
    async def present() -> bool:
        try:
            await client.request("GET", f"/api/v1/namespaces/{NS}/serviceaccounts/default")
        except ApiError:
            return False
        return True

    await wait_for(present, "KCM's default service account")


def chart(runs: list[Run]) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    OUT.mkdir(parents=True, exist_ok=True)
    fig, axes = plt.subplots(1, len(runs), figsize=(6 * len(runs), 3.6), sharey=True)
    for ax, run in zip(axes if len(runs) > 1 else [axes], runs, strict=True):
        # Apps often share a value (1 replica each): distinct widths and dashes keep every line visible.
        styles = [("-", 4.0), ("--", 2.5), (":", 2.0)]
        for app, (dashes, width) in zip(APPS, styles * len(APPS), strict=False):
            ax.step(
                [t for t, _ in run.samples],
                [s[app] for _, s in run.samples],
                where="post",
                label=app,
                linestyle=dashes,
                linewidth=width,
            )
        done = f"drained in {run.seconds:.1f}s" if run.seconds is not None else "did not finish"
        ax.set_title(f"{run.mode}: {done}")
        ax.set_xlabel("seconds since drain started")
        ax.grid(alpha=0.3)
    (axes[0] if len(runs) > 1 else axes).set_ylabel("available replicas")
    (axes[0] if len(runs) > 1 else axes).legend(loc="center right")  # the band between 1 and 3 is empty
    fig.tight_layout()
    paths = [OUT / "drain.png", OUT / "drain.svg"]
    for p in paths:
        fig.savefig(p)
    plt.close(fig)
    return [str(p.relative_to(ROOT)) for p in paths]


def _figures(run: Run) -> dict[str, Any]:
    return {
        "seconds_to_drained": None if run.seconds is None else round(run.seconds, 2),
        "pods_moved": run.pods_moved,
        "requests": run.requests,
        "requests_per_evacuated_pod": None
        if run.requests_per_pod is None
        else round(run.requests_per_pod, 2),
        "conflicts": sum(c for _, c in run.by_actor.values()) if run.by_actor else None,
        "requests_per_pod_by_actor": {
            a: round(n / max(run.pods_moved, 1), 2) for a, (n, _) in run.by_actor.items()
        },
        "apps_at_zero": sum(1 for a in run.moved_apps if run.min_available(a) == 0),
        "writes_per_evacuated_pod_by_kind": {
            k: round(n / max(run.pods_moved, 1), 2) for k, n in run.kinds.items()
        },
        "apps": {
            a: {"min_available": run.min_available(a), "seconds_at_zero": round(run.seconds_at_zero(a), 2)}
            for a in run.moved_apps
        },
    }


def _actors_line(run: Run) -> str:
    per_pod = max(run.pods_moved, 1)
    return "    requests/pod by actor: " + ", ".join(
        f"{a} {n / per_pod:.1f}" + (f" ({c} x 409)" if c else "") for a, (n, c) in run.by_actor.items()
    )


def report(runs: list[Run], pictures: list[str], *, backend: str) -> dict[str, Any]:
    wide = len(APPS) <= 3
    apps_header = "  ".join(f"{app + ' min/zero s':>20}" for app in APPS) if wide else f"{'apps at 0':>10}"
    print(f"backend: {backend}; {len(APPS)} apps")
    print(f"{'mode':13} {'drained in':>12} {'pods moved':>10} {'req/pod':>8}  " + apps_header)
    figures: dict[str, Any] = {"backend": backend, "pictures": pictures}
    for run in runs:
        done = f"{run.seconds:.1f}s" if run.seconds is not None else "timeout"
        per_pod = f"{run.requests_per_pod:.1f}" if run.requests_per_pod is not None else "-"
        at_zero = sum(1 for a in APPS if run.min_available(a) == 0)
        cells = (
            "  ".join(f"{run.min_available(a):>12} / {run.seconds_at_zero(a):5.1f}" for a in APPS)
            if wide
            else f"{at_zero:>10}"
        )
        print(
            f"{run.mode:13} {done:>12} {run.pods_moved:>10} {per_pod:>8}  {cells}"
            + (f"   ({run.note})" if run.note else "")
        )
        if run.by_actor:
            print(_actors_line(run))
        figures[run.mode] = _figures(run)
        if run.note:
            figures[run.mode]["note"] = run.note
    return figures


def report_scale(
    pairs: list[tuple[int, dict[str, Run]]], args: argparse.Namespace, *, backend: str
) -> dict[str, Any]:
    """One row per drain and tool; the ratio is aiokcm's time to drained over kubectl drain's."""
    print(
        f"backend: {backend}; {args.nodes} nodes, {len(APPS)} apps, {sum(APPS.values())} pods; "
        f"qps {args.qps:g} / burst {args.burst}"
    )
    print(
        f"{'drain':>6} {'mode':12} {'drained in':>11} {'pods moved':>10} {'req/pod':>8} {'409s':>5} "
        f"{'apps moved':>10} {'apps at 0':>9} {'ratio':>6}"
    )
    drains: list[dict[str, Any]] = []
    for count, runs in pairs:
        row: dict[str, Any] = {"nodes_drained": count}
        theirs = runs.get("kubectl")
        ratios: dict[str, float | None] = {}
        for mode in DRAINED_BY_AIOKCM:
            mine = runs.get(mode)
            ratios[mode] = (
                mine.seconds / theirs.seconds if mine and theirs and mine.seconds and theirs.seconds else None
            )
        row["ratio"] = None if ratios["aiokcm"] is None else round(ratios["aiokcm"], 2)
        row["ratio_stock"] = None if ratios["aiokcm_stock"] is None else round(ratios["aiokcm_stock"], 2)
        for mode, run in runs.items():
            f = row[mode] = _figures(run)
            done = f"{run.seconds:.1f}s" if run.seconds is not None else "timeout"
            per_pod = f"{run.requests_per_pod:.1f}" if run.requests_per_pod is not None else "-"
            ratio = ratios.get(mode)
            shown = f"{ratio:.2f}x" if ratio is not None else ""
            print(
                f"{count:>6} {mode:12} {done:>11} {run.pods_moved:>10} {per_pod:>8} {f['conflicts'] or 0:>5} "
                f"{len(run.moved_apps):>10} {f['apps_at_zero']:>9} {shown:>6}"
                + (f"   ({run.note})" if run.note else "")
            )
            if run.by_actor:
                print(_actors_line(run))
            if args.breakdown:
                for what, n in run.writes.items():
                    print(f"      {what}: {n} ({n / max(run.pods_moved, 1):.2f}/pod)")
        drains.append(row)
    if any(run.kinds for _, runs in pairs for run in runs.values()):
        print()
        report_layouts(pairs)
        print()
        report_kinds(pairs)
    return {
        "backend": backend,
        "nodes": args.nodes,
        "apps": len(APPS),
        "pods": sum(APPS.values()),
        "qps": args.qps,
        "burst": args.burst,
        "drains": drains,
    }


LAYOUTS = {
    "aiokcm": "(a) aiokcm replaces KCM's controllers",
    "aiokcm_stock": "(b) aiokcm's default install beside the stock KCM",
}


def report_layouts(pairs: list[tuple[int, dict[str, Run]]]) -> None:
    """Both layouts side by side with the stock KCM + `kubectl drain` of the same drain size."""
    print(
        f"{'drain':>6} {'layout':52} {'aiokcm':>8} {'kubectl':>8} {'ratio':>6} "
        f"{'apps at 0':>10} {'least available (aiokcm)':>25}"
    )
    for count, runs in pairs:
        theirs = runs.get("kubectl")
        for mode, label in LAYOUTS.items():
            mine = runs.get(mode)
            if mine is None:
                continue
            t_mine = f"{mine.seconds:.1f}s" if mine.seconds is not None else "timeout"
            t_theirs = f"{theirs.seconds:.1f}s" if theirs and theirs.seconds is not None else "-"
            ratio = (
                f"{mine.seconds / theirs.seconds:.2f}x" if mine.seconds and theirs and theirs.seconds else "-"
            )
            zero_mine = sum(1 for a in mine.moved_apps if mine.min_available(a) == 0)
            zero_theirs = sum(1 for a in theirs.moved_apps if theirs.min_available(a) == 0) if theirs else 0
            least = min((mine.min_available(a) for a in mine.moved_apps), default=0)
            print(
                f"{count:>6} {label:52} {t_mine:>8} {t_theirs:>8} {ratio:>6} "
                f"{f'{zero_mine} / {zero_theirs}':>10} {least:>25}"
            )


def report_kinds(pairs: list[tuple[int, dict[str, Run]]]) -> None:
    """Writes per evacuated pod, per kind, every mode of every drain size, from the audit log; a
    `!` marks an aiokcm figure above the stock KCM + kubectl's for the same drain (the handshake
    kind may carry HANDSHAKE_WRITES more)."""
    columns = [(count, mode, run) for count, runs in pairs for mode, run in runs.items()]
    kinds = sorted({k for _, _, run in columns for k in run.kinds})
    short = {"aiokcm": "a", "aiokcm_stock": "b", "kubectl": "kubectl"}
    heads = [f"{count}:{short.get(mode, mode)}" for count, mode, _ in columns]
    print(
        "writes per evacuated pod by kind (audit log; a = layout (a), b = layout (b), kubectl = stock KCM + kubectl)"
    )
    print(f"{'kind':42} " + " ".join(f"{h:>10}" for h in heads))
    for kind in kinds:
        cells = []
        for count, mode, run in columns:
            mine = run.kinds.get(kind, 0) / max(run.pods_moved, 1)
            theirs_run = dict(pairs)[count].get("kubectl")
            over = ""
            if mode in DRAINED_BY_AIOKCM and theirs_run is not None:
                theirs = theirs_run.kinds.get(kind, 0) / max(theirs_run.pods_moved, 1)
                allowed = theirs + (HANDSHAKE_WRITES if kind == HANDSHAKE_KIND else 0)
                over = "!" if mine > allowed + 0.005 else ""
            cells.append(f"{mine:.2f}{over}")
        print(f"{kind:42} " + " ".join(f"{c:>10}" for c in cells))


async def statefulset_row(timeout: int) -> dict[str, float]:
    """A NodeMaintenance drain of a StatefulSet's pod, which nobody answers for: evicted after the
    whole `evacuationTimeoutSeconds` as every such pod was before (now only when the workload asks to
    wait), and evicted at once as now."""
    before = await drain_statefulset.one_run(wait=True, timeout=timeout)
    after = await drain_statefulset.one_run(wait=False, timeout=timeout)
    print(
        f"statefulset pod, seconds to evicted (evacuationTimeoutSeconds {timeout}): "
        f"before {before:.2f} s (waited for an answer), now {after:.2f} s"
    )
    return {
        "evacuation_timeout_seconds": timeout,
        "seconds_to_evicted_before": round(before, 3),
        "seconds_to_evicted": round(after, 3),
    }


async def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="bench.drain")
    parser.add_argument("--timeout", type=float, default=120.0, help="give each drain this long")
    parser.add_argument("--sample", type=float, default=0.1, help="seconds between availability samples")
    parser.add_argument("--evacuation-timeout", type=float, default=60.0)
    parser.add_argument("--skip-kubectl", action="store_true")
    parser.add_argument(
        "--skip-surge", action="store_true", help="leave out kubectl drain with the eviction webhook"
    )
    parser.add_argument(
        "--skip-stock", action="store_true", help="leave out aiokcm's default install beside the stock KCM"
    )
    parser.add_argument(
        "--skip-statefulset",
        action="store_true",
        help="leave out the StatefulSet pod's time to evicted (bench.drain_statefulset, once each way)",
    )
    parser.add_argument(
        "--real", action="store_true", help="on a real control plane from $KUBEBUILDER_ASSETS"
    )
    parser.add_argument("--apps", type=int, default=None, help="more than 3: that many apps of 1-3 replicas")
    parser.add_argument("--nodes", type=int, default=None)
    parser.add_argument(
        "--qps", type=float, default=20.0, help="each controller's --kube-api-qps (KCM's default)"
    )
    parser.add_argument(
        "--burst", type=int, default=30, help="each controller's --kube-api-burst (KCM's default)"
    )
    parser.add_argument(
        "--scale",
        action="store_true",
        help="apps spread over 30 nodes; drain 1, 3 and 10 of them (see --drains), both tools each time",
    )
    parser.add_argument("--drains", default="1,3,10", help="with --scale: how many nodes each drain takes")
    parser.add_argument(
        "--breakdown", action="store_true", help="with --scale: writes per actor, verb and resource"
    )
    parser.add_argument(
        "--keep-audit",
        action="store_true",
        help="with --real: copy each plane's audit log and the drain's window to bench/out/audit-MODE-N.*",
    )
    args = parser.parse_args(argv)
    if args.nodes is None:
        args.nodes = SCALE_NODES if args.scale else 3
    if args.apps is None:
        args.apps = SCALE_APPS if args.scale else 3
    if args.scale and args.timeout == 120.0:
        args.timeout = 600.0
    apps = layout(args.apps)
    APPS.clear()
    APPS.update(apps)
    modes = ["aiokcm"] + ([] if args.skip_stock else ["aiokcm_stock"])
    modes += [] if args.skip_kubectl or not shutil.which("kubectl") else ["kubectl"]
    if shutil.which("kubectl") and not args.skip_surge and not args.scale:
        modes.append("kubectl_surge")
    one = one_mode_real if args.real else one_mode
    backend = "real" if args.real else "local"
    if args.scale:
        pairs = []
        for count in (int(c) for c in args.drains.split(",")):
            pairs.append((count, {mode: await one(mode, args, count) for mode in modes}))
        figures = report_scale(pairs, args, backend=backend)
    else:
        runs = [await one(mode, args) for mode in modes]
        figures = report(runs, chart(runs) if len(APPS) <= 3 else [], backend=backend)
        if not args.real and not args.skip_statefulset:
            figures["statefulset"] = await statefulset_row(int(args.evacuation_timeout))
    print(orjson.dumps(figures).decode())
    return 0


if __name__ == "__main__":
    sys.exit(anyio.run(main, sys.argv[1:]))
