"""Benchmark: the whole manager, as `aiokcm run` builds it, against a local cluster at scale.

    python -m bench.manager                                   # 100 nodes / 3,000 pods, ~1-2 min
    python -m bench.manager --nodes 5000 --pods 150000 --quiet 60 --idle 30 --samples 20

The local cluster runs in this process (its simulated kubelets renew every node's Lease every
10 s and post status as real ones do); the manager runs in its own process with every
controller and every gate on, at KCM's default client budget (qps 20 / burst 30 per client).
Every write request reaching the API server is recorded by a middleware with its arrival time
and User-Agent, so the figures are what the server saw.

The world: `--pods` pods shaped like a real Deployment's (labels, an owner, a container with
env, resources and probes, the kubelet's status), 100 per Deployment, all in one namespace
(1,500 ReplicaSets at 150,000 pods). Steps:

0. the cluster is settled as the maintenance-lease controller leaves it: every node's maintenance
   Lease (and its namespace) is created in-process, as that controller makes them
   (`settle_maintenance_leases`). It makes them once, paced at 10 a second (2,000 s at 20,000
   nodes), and a restart finds them; the bench measures a restart, not that first pass;
1. baseline: a manager against the cluster with its nodes but no workloads; its RSS once ready
   and quiet, and the writes of this start (`first_start_writes`: with the leases there, only
   the node lifecycle's `RegisteredNode` events);
2. the workloads are created in-process and scheduled and started by the local cluster;
3. a first manager (qps 5000) brings the world to what the controllers want (Deployment and
   ReplicaSet status), then stops: the measured manager is a restart into a steady cluster,
   as after an upgrade;
4. the measured manager: time from exec to ready (`/readyz`, caches synced); writes during
   the `--quiet` seconds after ready (a quiet cluster gets none); RSS growth over the
   baseline per cached pod (every node, Deployment and ReplicaSet counted against the pods);
   then, once every work queue is empty (the handlers' replay of the caches is over), CPU over
   `--idle` seconds with nothing changing (cores = CPU seconds / wall seconds);
5. latency, event -> first write by the manager, `--samples` of each: a NoExecute taint on a
   node (the taint-eviction controller's first pod write), a Deployment scaled by one (the
   Deployment controller's ReplicaSet patch), a NodeMaintenance for one node (the
   NodeMaintenance controller's first write). Samples are spaced so one's work (and its use
   of the client budget) is over before the next, and each kind starts once the manager has
   settled (queues empty, no write for 2 s) after the previous kind. Each sample times from
   the request that makes the change, so it includes this process serving that request (its
   round trip in the JSON line, `<kind>_request_round_trip_ms`); `<kind>_after_answer` is the
   sample less that round trip, from the change stored to the manager's first write.

Measured on 2026-12-02 (2 cores, the machine otherwise quiet: load 0.0 -> 0.5), `python -m
bench.manager --nodes 20000 --pods 600000 --quiet 60 --idle 30 --samples 20 --timeout 1800`:
synced in 73.8 s (queues empty 61 s later), 2,512 B per cached pod, idle 0.061 core, first write
p50 / p99 taint 10.6 / 20.0 ms, scale 3.8 / 6.8 ms, NodeMaintenance 5.2 / 6.0 ms; only
`RegisteredNode` events after ready. The local cluster holds that size in this process;
populating it took 322 s. README.md's benchmark table has the rest.

A taint's sample waits, before its spacing, for the taint-eviction controller to delete every pod
of the node (two writes a pod through its one client budget: 30 pods are 2-3 s at qps 20), so the
next taint measures the reaction to its event, not a place in the queue behind the last one's
deletions. The write log is searched by arrival time (bisection, then only the new writes): a
walk of the whole log every 2 ms, in the process that also serves the API, slowed the server
being measured once the converge had left tens of thousands of writes in it.

`--manager-root` runs the manager from another checkout (e.g. before a change) with the same
cluster and driver. Prints a table, then as its last line one JSON object with the figures.
"""

from __future__ import annotations

import argparse
import bisect
import gc
import math
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import anyio
import anyio.lowlevel
import orjson
from aiohttp import web
from anyio.abc import Process

from apiclient import KubeClient
from apiclient.resources import DEPLOYMENTS, NODEMAINTENANCES, NODES
from controllers.deployment.util import compute_hash
from localcluster.cluster import LocalCluster
from localcluster.demo import ensure_crd, node_maintenance
from nodemaintenancelease.lease import NAMESPACE as LEASE_NAMESPACE
from nodemaintenancelease.lease import lease_body
from realcluster.ports import free_port

ROOT = Path(__file__).resolve().parents[1]
NS = "default"
PODS_PER_DEPLOYMENT = 100
DRIVER = "bench-driver"
GATES = "DeclarativeNodeMaintenance=true,NodeMaintenanceDeployment=true,NodeMaintenanceLease=true"
TAINT = {"key": "bench.aiokcm.io/evict", "effect": "NoExecute"}
CLK_TCK = os.sysconf("SC_CLK_TCK")


# -- the world ----------------------------------------------------------------------------


def template(app: str) -> dict[str, Any]:
    return {
        "metadata": {"labels": {"app": app, "tier": "frontend"}},
        "spec": {
            "containers": [
                {
                    "name": "app",
                    "image": "registry.example.com/team/web:1.27.3",
                    "ports": [{"containerPort": 8080, "name": "http", "protocol": "TCP"}],
                    "env": [
                        {"name": "LOG_LEVEL", "value": "info"},
                        {
                            "name": "POD_NAME",
                            "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}},
                        },
                    ],
                    "resources": {
                        "requests": {"cpu": "10m", "memory": "16Mi"},
                        "limits": {"memory": "256Mi"},
                    },
                    "readinessProbe": {"httpGet": {"path": "/healthz", "port": 8080}, "periodSeconds": 10},
                    "livenessProbe": {"httpGet": {"path": "/livez", "port": 8080}, "periodSeconds": 10},
                }
            ],
            "tolerations": [
                {
                    "key": "node.kubernetes.io/not-ready",
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": 300,
                }
            ],
        },
    }


async def populate(cluster: LocalCluster, pods: int) -> list[tuple[str, str]]:
    """Deployments, their ReplicaSets and pods, created in-process; [(deployment, replicaset)]."""
    d_rt = cluster.registry.get("apps", "v1", "deployments")
    rs_rt = cluster.registry.get("apps", "v1", "replicasets")
    pod_rt = cluster.registry.get("", "v1", "pods")
    assert d_rt is not None and rs_rt is not None and pod_rt is not None
    made: list[tuple[str, str]] = []
    for n in range(math.ceil(pods / PODS_PER_DEPLOYMENT)):
        app = f"web-{n:04d}"
        count = min(PODS_PER_DEPLOYMENT, pods - n * PODS_PER_DEPLOYMENT)
        tmpl = template(app)
        d = cluster.objects.create(
            d_rt,
            NS,
            {
                "metadata": {"name": app},
                "spec": {
                    "replicas": count,
                    "selector": {"matchLabels": {"app": app}},
                    "template": tmpl,
                    "strategy": {
                        "type": "RollingUpdate",
                        "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0},
                    },
                },
            },
        ).load()
        pod_hash = compute_hash(d["spec"]["template"], None)
        labels = {**tmpl["metadata"]["labels"], "pod-template-hash": pod_hash}
        rs_name = f"{app}-{pod_hash}"
        rs = cluster.objects.create(
            rs_rt,
            NS,
            {
                "metadata": {
                    "name": rs_name,
                    "labels": labels,
                    "annotations": {
                        "deployment.kubernetes.io/revision": "1",
                        "deployment.kubernetes.io/desired-replicas": str(count),
                        "deployment.kubernetes.io/max-replicas": str(count + 1),
                    },
                    "ownerReferences": [
                        {
                            "apiVersion": "apps/v1",
                            "kind": "Deployment",
                            "name": app,
                            "uid": d["metadata"]["uid"],
                            "controller": True,
                            "blockOwnerDeletion": True,
                        }
                    ],
                },
                "spec": {
                    "replicas": count,
                    "selector": {"matchLabels": {"app": app, "pod-template-hash": pod_hash}},
                    "template": {**tmpl, "metadata": {"labels": labels}},
                },
            },
        ).load()
        owner = [
            {
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "name": rs_name,
                "uid": rs["metadata"]["uid"],
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]
        for i in range(count):
            cluster.objects.create(
                pod_rt,
                NS,
                {
                    "metadata": {"name": f"{rs_name}-{i:05x}", "labels": labels, "ownerReferences": owner},
                    "spec": tmpl["spec"],
                },
            )
        made.append((app, rs_name))
        await anyio.lowlevel.checkpoint()  # the scheduler and kubelets keep up
    return made


def settle_maintenance_leases(cluster: LocalCluster) -> int:
    """Every node's maintenance Lease, created in-process as the maintenance-lease controller makes
    it (`lease_body`: free, owned by the node), with its namespace; the number made.

    A settled cluster has them: the controller made them once, paced at 10 a second, and a restart
    finds them. Without this the baseline would wait for that pacing (2,000 s at 20,000 nodes),
    which is a first start's cost, not a restart's."""
    ns_rt = cluster.registry.get("", "v1", "namespaces")
    lease_rt = cluster.registry.get("coordination.k8s.io", "v1", "leases")
    assert ns_rt is not None and lease_rt is not None
    if not any(e.name == LEASE_NAMESPACE for e in cluster.storage.iter_entries("namespaces")):
        cluster.objects.create(
            ns_rt, None, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": LEASE_NAMESPACE}}
        )
    have = {e.name for e in cluster.storage.iter_entries("leases.coordination.k8s.io", LEASE_NAMESPACE)}
    made = 0
    for entry in list(cluster.storage.iter_entries("nodes")):
        if entry.name not in have:
            cluster.objects.create(lease_rt, LEASE_NAMESPACE, lease_body(entry.load()))
            made += 1
    return made


def running_pods(cluster: LocalCluster) -> int:
    return sum(
        1 for e in cluster.storage.iter_entries("pods", NS) if e.fields.get("status.phase") == "Running"
    )


# -- what the server saw ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Write:
    at: float
    method: str
    path: str
    agent: str


@dataclass
class WriteLog:
    writes: list[Write] = field(default_factory=list)

    @web.middleware
    async def middleware(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        if request.method not in ("GET", "HEAD") and not request.headers.get("User-Agent", "").endswith(
            "/" + DRIVER
        ):
            self.writes.append(
                Write(time.monotonic(), request.method, request.path, request.headers.get("User-Agent", ""))
            )
        return await handler(request)

    def since(self, t: float, until: float = math.inf) -> list[Write]:
        # Appended in arrival order, so `at` is sorted: a bisection, not a walk of the whole run's
        # writes (tens of thousands after the converge, in the process serving the API).
        writes = self.writes
        return writes[bisect.bisect_left(writes, t, key=_at) : bisect.bisect_left(writes, until, key=_at)]

    async def first_after(
        self, t: float, match: Callable[[Write], bool], timeout: float = 30.0
    ) -> float | None:
        """Seconds from `t` to the first write matching; each poll looks only at the new ones."""
        deadline = time.monotonic() + timeout
        seen = bisect.bisect_left(self.writes, t, key=_at)
        while time.monotonic() < deadline:
            writes = self.writes
            for i in range(seen, len(writes)):
                if match(writes[i]):
                    return writes[i].at - t
            seen = len(writes)
            await anyio.sleep(0.002)
        return None

    async def count_after(
        self, t: float, match: Callable[[Write], bool], count: int, timeout: float = 30.0
    ) -> bool:
        """Wait until `count` writes after `t` match; False at `timeout`."""
        deadline = time.monotonic() + timeout
        seen = bisect.bisect_left(self.writes, t, key=_at)
        found = 0
        while found < count and time.monotonic() < deadline:
            writes = self.writes
            found += sum(1 for i in range(seen, len(writes)) if match(writes[i]))
            seen = len(writes)
            if found < count:
                await anyio.sleep(0.05)
        return found >= count


def _at(w: Write) -> float:
    return w.at


def summarize(writes: list[Write]) -> dict[str, int]:
    out: dict[str, int] = {}
    for w in writes:
        parts = w.path.strip("/").split("/")
        resource = next(
            (p for p in reversed(parts[:-1]) if p.endswith("s") and p not in ("namespaces",)), parts[-1]
        )
        component = w.agent.rsplit("/", 1)[-1]
        key = f"{w.method} {resource} ({component})"
        out[key] = out.get(key, 0) + 1
    return out


# -- the manager process ------------------------------------------------------------------


def proc_rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for {pid}")


def proc_cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


@dataclass
class ManagerProcess:
    kubeconfig: str
    root: Path
    workdir: Path
    qps: int
    burst: int
    port: int = field(default_factory=free_port)
    proc: Process | None = None
    started: float = 0.0

    async def start(self, label: str) -> None:
        env = {**os.environ, "PYTHONPATH": str(self.root)}
        log = (self.workdir / f"manager-{label}.log").open("wb")
        self.started = time.monotonic()
        self.proc = await anyio.open_process(
            [
                sys.executable,
                "-m",
                "controller_manager",
                "run",
                "--kubeconfig",
                self.kubeconfig,
                "--leader-elect=false",
                "--secure-port",
                str(self.port),
                "--bind-address",
                "127.0.0.1",
                "--feature-gates",
                GATES,
                # the driver reads /metrics without credentials (the manager's own self-signed port)
                "--authorization-always-allow-paths",
                "/healthz,/readyz,/livez,/metrics",
                "--kube-api-qps",
                str(self.qps),
                "--kube-api-burst",
                str(self.burst),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=self.root,
            env=env,
        )

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    async def wait_ready(self, timeout: float) -> float:
        """Seconds from exec to `/readyz` answering 200."""
        url = f"https://127.0.0.1:{self.port}/readyz"  # its own self-signed certificate
        deadline = time.monotonic() + timeout
        async with aiohttp.ClientSession() as http:
            while time.monotonic() < deadline:
                assert self.proc is not None
                if self.proc.returncode is not None:
                    raise RuntimeError(f"manager exited with {self.proc.returncode}; see {self.workdir}")
                try:
                    async with http.get(url, ssl=False) as resp:
                        if resp.status == 200:
                            return time.monotonic() - self.started
                except aiohttp.ClientError:
                    pass
                await anyio.sleep(0.05)
        raise TimeoutError(f"manager not ready after {timeout} s; see {self.workdir}")

    async def stop(self) -> None:
        if self.proc is None or self.proc.returncode is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        with anyio.move_on_after(30):
            await self.proc.wait()
        if self.proc.returncode is None:
            self.proc.kill()
            await self.proc.wait()


async def settled_rss(pid: int, *, quiet: float = 3.0, timeout: float = 120.0) -> int:
    """RSS once it has not grown by more than 1 % for `quiet` seconds."""
    last = proc_rss(pid)
    stable_since = time.monotonic()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        await anyio.sleep(0.5)
        now = proc_rss(pid)
        if now > last * 1.01:
            last, stable_since = now, time.monotonic()
        elif time.monotonic() - stable_since >= quiet:
            return now
    return last


async def queues_empty(port: int) -> bool:
    """Whether every work queue of the manager is empty and no worker is busy (from `/metrics`)."""
    async with (
        aiohttp.ClientSession() as http,
        http.get(f"https://127.0.0.1:{port}/metrics", ssl=False) as resp,
    ):
        text = await resp.text()
    busy = 0.0
    for line in text.splitlines():
        if line.startswith(("workqueue_depth{", "workqueue_unfinished_work_seconds{")):
            busy += float(line.rsplit(" ", 1)[1])
    return busy == 0.0


async def loop_lag_buckets(port: int) -> dict[str, float]:
    """The manager's event-loop lag histogram (`aiokcm_event_loop_lag_seconds`): le -> count."""
    async with (
        aiohttp.ClientSession() as http,
        http.get(f"https://127.0.0.1:{port}/metrics", ssl=False) as resp,
    ):
        text = await resp.text()
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("aiokcm_event_loop_lag_seconds_bucket{"):
            le = line.split('le="', 1)[1].split('"', 1)[0]
            out[le] = float(line.rsplit(" ", 1)[1])
    return out


def lag_over(before: dict[str, float], after: dict[str, float], threshold: str) -> int:
    """Ticks whose lag exceeded `threshold` (a bucket bound) between two histogram reads."""
    total = after.get("+Inf", 0.0) - before.get("+Inf", 0.0)
    within = after.get(threshold, 0.0) - before.get(threshold, 0.0)
    return round(total - within)


async def converged(log: WriteLog, port: int, *, quiet: float, timeout: float) -> bool:
    """Queues empty and no write for `quiet` seconds, twice in a row; False at `timeout`."""
    deadline = time.monotonic() + timeout
    streak = 0
    while time.monotonic() < deadline:
        last = log.writes[-1].at if log.writes else 0.0
        if time.monotonic() - last >= quiet and await queues_empty(port):
            streak += 1
            if streak >= 2:
                return True
        else:
            streak = 0
        await anyio.sleep(1.0)
    return False


async def quiet_for(log: WriteLog, seconds: float, timeout: float) -> bool:
    """Wait until the manager has written nothing for `seconds`; False at `timeout`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        last = log.writes[-1].at if log.writes else 0.0
        if time.monotonic() - last >= seconds:
            return True
        await anyio.sleep(0.5)
    return False


# -- the latency samples ------------------------------------------------------------------


def pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(q * len(ordered)) - 1)]


def _pod_write_on(names: set[str]) -> Callable[[Write], bool]:
    return lambda w: "/pods/" in w.path and w.path.split("/pods/")[1].split("/")[0] in names


def _pod_deletes_by(component: str, names: set[str]) -> Callable[[Write], bool]:
    on = _pod_write_on(names)
    return lambda w: w.method == "DELETE" and component in w.agent and on(w)


def _path_ends(*suffixes: str) -> Callable[[Write], bool]:
    return lambda w: w.path.endswith(suffixes)


async def taint_samples(
    cluster: LocalCluster,
    kube: KubeClient,
    log: WriteLog,
    nodes: list[str],
    spacing: float,
    patch_times: list[float] | None = None,
) -> list[float]:
    """Seconds from sending each node's NoExecute taint to the manager's first write on its pods;
    `patch_times` gets each taint PATCH's own round trip, the part of a sample spent in the
    process that serves the API (this one) before the manager can have heard of the taint."""
    out: list[float] = []
    for node in nodes:
        on_node = {
            e.name for e in cluster.storage.iter_entries("pods", NS) if e.fields.get("spec.nodeName") == node
        }
        if not on_node:
            continue
        n = await kube.get(NODES, node)
        taints = [*(n["spec"].get("taints") or []), TAINT]
        t0 = time.monotonic()
        await kube.patch(NODES, node, {"spec": {"taints": taints}})
        answered = time.monotonic() - t0
        got = await log.first_after(t0, _pod_write_on(on_node))
        if got is not None:
            out.append(got)
            if patch_times is not None:
                patch_times.append(answered)
        # The node's evictions are two writes per pod (the DisruptionTarget condition, then the
        # DELETE) through the controller's one client budget: 30 pods take ~2 s at qps 20 and
        # 50 take ~4 s. A next taint sent before they are over measures its wait in that queue
        # behind this node's deletions, not the reaction to the event; so the spacing counts from
        # the last of them.
        await log.count_after(t0, _pod_deletes_by("taint-eviction", on_node), len(on_node), timeout=120.0)
        await anyio.sleep(spacing)
        n = await kube.get(NODES, node)
        rest = [t for t in n["spec"].get("taints") or [] if t.get("key") != TAINT["key"]]
        await kube.patch(NODES, node, {"spec": {"taints": rest or None}})
    return out


async def scale_samples(
    kube: KubeClient,
    log: WriteLog,
    apps: list[tuple[str, str]],
    spacing: float,
    patch_times: list[float] | None = None,
) -> list[float]:
    out: list[float] = []
    for i, (app, rs_name) in enumerate(apps):
        d = await kube.get(DEPLOYMENTS, app, namespace=NS)
        replicas = int(d["spec"]["replicas"]) + (1 if i % 2 == 0 else -1)
        t0 = time.monotonic()
        await kube.patch(DEPLOYMENTS, app, {"spec": {"replicas": replicas}}, namespace=NS)
        answered = time.monotonic() - t0
        got = await log.first_after(t0, _path_ends(f"/replicasets/{rs_name}"))
        if got is not None:
            out.append(got)
            if patch_times is not None:
                patch_times.append(answered)
        await anyio.sleep(spacing)
    return out


async def maintenance_samples(
    kube: KubeClient,
    log: WriteLog,
    nodes: list[str],
    spacing: float,
    patch_times: list[float] | None = None,
) -> list[float]:
    out: list[float] = []
    for i, node in enumerate(nodes):
        name = f"bench-{i}"
        t0 = time.monotonic()
        await kube.create(NODEMAINTENANCES, node_maintenance(name, node, "bench", drain=False))
        answered = time.monotonic() - t0
        got = await log.first_after(
            t0, _path_ends(f"/nodemaintenances/{name}", f"/nodemaintenances/{name}/status", f"/nodes/{node}")
        )
        if got is not None:
            out.append(got)
            if patch_times is not None:
                patch_times.append(answered)
        await anyio.sleep(spacing)
        await kube.delete(NODEMAINTENANCES, name)
        await anyio.sleep(spacing)
    return out


# -- the run ------------------------------------------------------------------------------


async def bench(args: argparse.Namespace) -> dict[str, Any]:
    root: Path = args.manager_root
    f: dict[str, Any] = {
        "nodes": args.nodes,
        "pods": args.pods,
        "manager_root": str(root),
        "qps": args.qps,
        "burst": args.burst,
        "cpus": os.cpu_count(),
        "loadavg_start": os.getloadavg()[0],
    }
    log = WriteLog()
    workdir = Path(tempfile.mkdtemp(prefix="bench-manager-"))
    cluster = LocalCluster(nodes=args.nodes, pod_events=False)  # pods created in bulk: no per-pod Events
    cluster.app.middlewares.append(log.middleware)
    async with cluster:
        setup = await cluster.client(qps=5000, burst=5000)
        kube = setup.derive(DRIVER, qps=5000, burst=5000)
        await ensure_crd(kube)
        f["maintenance_leases_precreated"] = settle_maintenance_leases(cluster)

        def manager(qps: int, burst: int) -> ManagerProcess:
            return ManagerProcess(cluster.kubeconfig_path, root, workdir, qps, burst)

        base = manager(args.qps, args.burst)
        await base.start("baseline")
        t = time.monotonic()
        await base.wait_ready(args.timeout)
        await converged(log, base.port, quiet=3.0, timeout=args.timeout)
        rss_base = await settled_rss(base.pid)
        await base.stop()
        f["baseline_rss_mib"] = round(rss_base / 2**20, 1)
        f["first_start_writes"] = summarize(log.since(t))

        t = time.monotonic()
        apps = await populate(cluster, args.pods)
        # Polled every 2 s: a count walks every pod, in the process whose scheduler and kubelets
        # are starting them (at 600,000 pods, a walk every 0.5 s took half a core from them).
        while running_pods(cluster) < args.pods:  # noqa: ASYNC110 (the cluster's state, polled)
            await anyio.sleep(2.0)
        gc.freeze()
        f["populate_s"] = round(time.monotonic() - t, 1)

        first = manager(5000, 5000)
        await first.start("converge")
        t = time.monotonic()
        await first.wait_ready(args.timeout)
        f["converged"] = await converged(log, first.port, quiet=5.0, timeout=args.timeout)
        f["converge_s"] = round(time.monotonic() - t, 1)
        f["converge_writes"] = summarize(log.since(t))
        await first.stop()
        await quiet_for(log, 2.0, 30)

        m = manager(args.qps, args.burst)
        await m.start("measured")
        f["time_to_synced_s"] = round(await m.wait_ready(args.timeout), 2)
        ready = time.monotonic()
        await anyio.sleep(args.quiet)
        quiet_writes = log.since(ready, ready + args.quiet)
        f["quiet_window_s"] = args.quiet
        f["writes_after_ready"] = len(quiet_writes)
        f["writes_after_ready_by_kind"] = summarize(quiet_writes)
        # The handlers' replay of every cached object ends in syncs that write nothing; idle and
        # latency are measured once it is over.
        await converged(log, m.port, quiet=1.0, timeout=args.timeout)
        f["ready_to_steady_s"] = round(time.monotonic() - ready, 1)
        rss = await settled_rss(m.pid)
        f["rss_mib"] = round(rss / 2**20, 1)
        f["rss_growth_mib"] = round((rss - rss_base) / 2**20, 1)
        f["bytes_per_cached_pod"] = round((rss - rss_base) / max(1, args.pods))
        cpu0, t0 = proc_cpu(m.pid), time.monotonic()
        writes_before_idle = len(log.writes)
        lag0 = await loop_lag_buckets(m.port)
        await anyio.sleep(args.idle)
        f["idle_cores"] = round((proc_cpu(m.pid) - cpu0) / (time.monotonic() - t0), 4)
        lag1 = await loop_lag_buckets(m.port)
        f["idle_loop_lag_ticks_over_50ms"] = lag_over(lag0, lag1, "0.05")
        f["idle_loop_lag_ticks_over_100ms"] = lag_over(lag0, lag1, "0.1")
        f["idle_window_s"] = args.idle
        f["writes_during_idle"] = len(log.writes) - writes_before_idle

        node_names = [f"node-{1 + (i * 7919) % args.nodes}" for i in range(args.samples)]
        lat: dict[str, list[float]] = {}
        trips: dict[str, list[float]] = {"taint": [], "scale": [], "nodemaintenance": []}
        lat["taint"] = await taint_samples(
            cluster, kube, log, node_names, args.spacing * 3, patch_times=trips["taint"]
        )
        # Each kind starts on a settled manager: the taints' evictions leave hundreds of pods to
        # recreate and Deployment statuses to write, whose queue and client budget a scale would
        # otherwise wait behind (the same backlog in any controller manager, but not this
        # measure's subject: event -> first write when the controller is free to act).
        await converged(log, m.port, quiet=2.0, timeout=args.timeout)
        lat["scale"] = await scale_samples(
            kube, log, apps[: args.samples], args.spacing, patch_times=trips["scale"]
        )
        await converged(log, m.port, quiet=2.0, timeout=args.timeout)
        lat["nodemaintenance"] = await maintenance_samples(
            kube, log, node_names, args.spacing, patch_times=trips["nodemaintenance"]
        )
        for kind, values in list(lat.items()):
            # From the change's answer: the sample less its own request's round trip, which is
            # this process (serving the API) storing the change before any watch can carry it.
            f[f"{kind}_request_round_trip_ms"] = [round(v * 1000, 1) for v in trips[kind]]
            lat[f"{kind}_after_answer"] = [max(0.0, v - t) for v, t in zip(values, trips[kind], strict=True)]
        for kind, values in lat.items():
            f[f"{kind}_samples"] = len(values)
            f[f"{kind}_ms"] = [round(v * 1000, 1) for v in values]  # in sample order: a slow first one shows
            for q, label in ((0.5, "p50"), (0.99, "p99")):
                v = pct(values, q)
                f[f"{kind}_{label}_ms"] = round(v * 1000, 1) if v is not None else None
        lag2 = await loop_lag_buckets(m.port)
        f["samples_loop_lag_ticks_over_100ms"] = lag_over(lag1, lag2, "0.1")
        f["loadavg_end"] = os.getloadavg()[0]
        await m.stop()
        await kube.close()
        await setup.close()
    f["logs"] = str(workdir)
    return f


def main() -> None:
    parser = argparse.ArgumentParser(
        prog="bench.manager", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", type=int, default=100)
    parser.add_argument("--pods", type=int, default=3000)
    parser.add_argument(
        "--quiet", type=float, default=20.0, help="seconds after ready in which writes are counted"
    )
    parser.add_argument(
        "--idle", type=float, default=10.0, help="seconds of CPU measurement with nothing changing"
    )
    parser.add_argument("--samples", type=int, default=5, help="latency samples of each kind")
    parser.add_argument("--spacing", type=float, default=1.0, help="seconds between samples")
    parser.add_argument("--qps", type=int, default=20)
    parser.add_argument("--burst", type=int, default=30)
    parser.add_argument("--timeout", type=float, default=900.0)
    parser.add_argument(
        "--manager-root",
        type=lambda p: Path(p).resolve(),
        default=ROOT,
        help="checkout to run the manager from",
    )
    args = parser.parse_args()
    f = anyio.run(bench, args)
    rows = [
        (
            "nodes / pods",
            f"{f['nodes']} / {f['pods']} (loadavg {f['loadavg_start']:.1f} -> {f['loadavg_end']:.1f} on {f['cpus']} cpus)",
        ),
        ("time to synced (to queues empty)", f"{f['time_to_synced_s']} s (+{f['ready_to_steady_s']} s)"),
        (
            f"writes in {f['quiet_window_s']:.0f} s after ready",
            f"{f['writes_after_ready']} {f['writes_after_ready_by_kind'] or ''}",
        ),
        (
            "RSS (baseline, growth)",
            f"{f['rss_mib']} MiB ({f['baseline_rss_mib']} MiB, +{f['rss_growth_mib']} MiB)",
        ),
        ("bytes per cached pod", f"{f['bytes_per_cached_pod']}"),
        (
            f"idle cores ({f['idle_window_s']:.0f} s)",
            f"{f['idle_cores']} (writes meanwhile: {f['writes_during_idle']}, "
            f"loop lag > 100 ms: {f['idle_loop_lag_ticks_over_100ms']} ticks)",
        ),
    ]
    for kind in (
        "taint",
        "scale",
        "nodemaintenance",
        "taint_after_answer",
        "scale_after_answer",
        "nodemaintenance_after_answer",
    ):
        rows.append(
            (
                f"{kind} -> first write p50 / p99",
                f"{f[f'{kind}_p50_ms']} / {f[f'{kind}_p99_ms']} ms ({f[f'{kind}_samples']} samples)",
            )
        )
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        print(f"{key:<{width}}  {value}")
    print(orjson.dumps(f).decode())


if __name__ == "__main__":
    main()
