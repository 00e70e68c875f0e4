"""Benchmark: drain one node with `aiokcm drain` and with the real `kubectl drain`, same layout.

Layout (issue 10): three nodes; Deployments `single` (1 replica) and `triple` (3 replicas), both
with `maxSurge: 1, maxUnavailable: 0`; `guarded`, a single-replica Deployment with a PDB
`minAvailable: 1`. Every app pod starts on the drained node (the other nodes are cordoned while the
apps roll out, then uncordoned). aiokcm's ReplicaSet, Deployment and disruption controllers run in
both modes (KCM's job); the NodeMaintenance controller and its CRD only in the aiokcm mode.

A third mode, `kubectl_surge`, runs the same real `kubectl drain` with aiokcm's eviction webhook
on (bench/surge_webhook.py; the eviction-surge controller beside the three): a held-back eviction
surges a replacement first. `--skip-surge` leaves it out.

Figures per mode: time to drained (or "timeout"), and per app the least number of available
replicas seen and the seconds spent at zero (sampled every `--sample` seconds). A chart of available
replicas over time for both modes goes to `bench/out/drain.png` and `.svg` (for the README). Prints a
table, then as its LAST line one JSON object with the figures.

    python -m bench.drain [--timeout 120] [--sample 0.1] [--evacuation-timeout 60] [--apps N --nodes N]
    python -m bench.drain --real [...]     # on a real control plane ($KUBEBUILDER_ASSETS)

With `--real` each mode gets a fresh real control plane (etcd, kube-apiserver, kube-scheduler and
kube-controller-manager, simulated kubelets over the API): the aiokcm mode runs KCM without the
controllers aiokcm replaces plus aiokcm's controllers at `--kube-api-qps 20 --kube-api-burst 30`;
the kubectl mode runs the whole real KCM (its default 20/30) and the real `kubectl drain`. The
API server's audit log counts the requests of the drain's actors (aiokcm's controllers and its
CLI; KCM's replicaset, deployment and disruption controllers and kubectl) while the drain runs,
reported per evacuated pod.
"""

from __future__ import annotations

import argparse
import io
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import orjson
import yaml

from apiclient import ApiError, KubeClient
from apiclient.config import build_api_client
from apiclient.resources import (
    CUSTOMRESOURCEDEFINITIONS,
    DEPLOYMENTS,
    NODEMAINTENANCES,
    NODES,
    PODDISRUPTIONBUDGETS,
    PODS,
)
from bench import surge_webhook
from controller_manager.maintenance_cli import build_parser
from controller_manager.maintenance_cli import run as run_cli
from controller_manager.registry import import_controller_class
from controllers.base import Controller
from controllers.context import ControllerContext, StaticGates
from informers import SharedInformerFactory
from localcluster.cluster import LocalCluster

NS = "default"
APPS = {"single": 1, "triple": 3, "guarded": 1}
# The actors whose requests a real-plane run counts: users of the audit log.
DRAIN_ACTORS = frozenset({
    "aiokcm", "drainer",
    "system:serviceaccount:kube-system:replicaset-controller",
    "system:serviceaccount:kube-system:deployment-controller",
    "system:serviceaccount:kube-system:disruption-controller",
})
ROOT = Path(__file__).resolve().parents[1]
CRD = ROOT / "deploy" / "crds" / "nodemaintenance.yaml"
OUT = ROOT / "bench" / "out"
GATES = {"DeclarativeNodeMaintenance": True, "NodeMaintenanceDeployment": True}
KCM_CONTROLLERS = (
    "controllers.replicaset:ReplicaSetController",
    "controllers.deployment:DeploymentController",
    "controllers.disruption:DisruptionController",
)
NM_CONTROLLER = "controllers.nodemaintenance:NodeMaintenanceController"
# The third mode, `kubectl_surge`: the real `kubectl drain` with aiokcm's eviction webhook on.
SURGE_CONTROLLER = "controllers.evictionsurge:EvictionSurgeController"
SURGE_GATES = {**GATES, "EvictionSurge": True}


@dataclass
class Run:
    mode: str
    seconds: float | None = None  # None: did not finish before the timeout
    samples: list[tuple[float, dict[str, int]]] = field(default_factory=list)
    note: str = ""
    pods_moved: int = 0
    requests: int | None = None  # requests of the drain's actors while draining (real plane only)

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
            "template": {"metadata": {"labels": labels},
                         "spec": {"containers": [{"name": "app", "image": "pause"}]}},
        },
    }


def _ready(pod: dict[str, Any]) -> bool:
    if pod["metadata"].get("deletionTimestamp"):
        return False
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (pod.get("status") or {}).get("conditions") or [])


async def available(client: KubeClient) -> dict[str, int]:
    pods = await client.list_all(PODS, namespace=NS)
    counts = dict.fromkeys(APPS, 0)
    for pod in pods:
        app = (pod["metadata"].get("labels") or {}).get("app")
        if app in counts and _ready(pod):
            counts[app] += 1
    return counts


async def wait_for(check: Callable[[], Any], what: str, timeout: float = 60.0) -> None:
    with anyio.move_on_after(timeout):
        while True:
            if await check():
                return
            await anyio.sleep(0.1)
    raise RuntimeError(f"bench set-up: timed out waiting for {what}")


async def set_layout(client: KubeClient, target: str, others: list[str]) -> None:
    """Every app pod on `target`: the other nodes are cordoned during the roll-out."""
    for n in others:
        await client.patch(NODES, n, {"spec": {"unschedulable": True}})
    for name, replicas in APPS.items():
        await client.create(DEPLOYMENTS, deployment(name, replicas), namespace=NS)
    if "guarded" in APPS:
        await client.create(PODDISRUPTIONBUDGETS, {
            "apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "guarded", "namespace": NS},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "guarded"}}},
        }, namespace=NS)

    async def all_up() -> bool:
        return await available(client) == APPS

    await wait_for(all_up, "every app available")
    for n in others:
        await client.patch(NODES, n, {"spec": {"unschedulable": None}})


async def install_crd(client: KubeClient) -> None:
    await client.create(CUSTOMRESOURCEDEFINITIONS, yaml.safe_load(CRD.read_text()))

    async def served() -> bool:
        try:
            await client.list(NODEMAINTENANCES, limit=1)
        except ApiError:
            return False
        return True

    await wait_for(served, "the NodeMaintenance API")


async def sample(client: KubeClient, run: Run, start: float, every: float) -> None:
    while True:
        run.samples.append((time.monotonic() - start, await available(client)))
        await anyio.sleep(every)


async def _drain(mode: str, target: str, kubeconfig: str, client: KubeClient, run: Run, args: argparse.Namespace) -> int:
    """Drain `target` the mode's way: `aiokcm drain` (a NodeMaintenance) or the real `kubectl drain`."""
    if mode == "aiokcm":
        cli_args = build_parser().parse_args([
            "drain", target, "--timeout", f"{args.timeout}s",
            "--evacuation-timeout", f"{args.evacuation_timeout}s", "--poll-interval", "0.2",
        ])
        return await run_cli(cli_args, client, out=io.StringIO(), err=io.StringIO())
    result = await anyio.run_process(
        ["kubectl", "--kubeconfig", kubeconfig, "drain", target,
         "--ignore-daemonsets", "--delete-emptydir-data", f"--timeout={int(args.timeout)}s"],
        check=False,
    )
    if result.returncode:
        lines = result.stderr.decode(errors="replace").strip().splitlines()
        run.note = lines[-1] if lines else f"exit {result.returncode}"
    return result.returncode


async def _pods_on(client: KubeClient, node: str) -> int:
    return len(await client.list_all(PODS, namespace=NS, field_selector=f"spec.nodeName={node}"))


async def _run_drain(mode: str, args: argparse.Namespace, run: Run, *, setup: KubeClient, controllers_client: KubeClient,
                     drain_client: KubeClient, drain_kubeconfig: str, controller_paths: list[str]) -> tuple[float, float]:
    """Lay the apps out, drain the first node; returns the drain's start and end on the wall clock."""
    nodes = sorted(n["metadata"]["name"] for n in await setup.list_all(NODES))
    target, others = nodes[0], nodes[1:]
    if mode == "aiokcm":
        await install_crd(setup)
    factory = SharedInformerFactory(controllers_client, gc_freeze=True)  # as the manager runs (--gc-freeze)
    gates = SURGE_GATES if mode == "kubectl_surge" else GATES
    ctx = ControllerContext(client=controllers_client, informers=factory, gates=StaticGates(gates))
    controllers: list[Controller] = [import_controller_class(p)(ctx) for p in controller_paths]
    async with anyio.create_task_group() as tg:
        factory.start(tg)
        for c in controllers:
            tg.start_soon(c.run, None)
        webhook: surge_webhook.CountingWebhook | None = None
        if mode == "kubectl_surge":
            webhook = await tg.start(surge_webhook.serve, setup, controllers)
        await set_layout(setup, target, others)
        unreviewed = webhook is not None and not await surge_webhook.called(setup, webhook)
        run.pods_moved = await _pods_on(setup, target)
        start, wall_start = time.monotonic(), time.time()
        tg.start_soon(sample, setup, run, start, args.sample)
        code = await _drain(mode, target, drain_kubeconfig, drain_client, run, args)
        if unreviewed:
            run.note = "; ".join(filter(None, ["this cluster does not call admission webhooks", run.note]))
        run.seconds = time.monotonic() - start if code == 0 else None
        wall_end = time.time()
        await anyio.sleep(1.0)  # see the apps settle after the drain
        tg.cancel_scope.cancel()
    return wall_start, wall_end


async def one_mode(mode: str, args: argparse.Namespace) -> Run:
    run = Run(mode)
    async with LocalCluster(nodes=args.nodes) as cluster:
        client = await cluster.client(qps=100, burst=200)
        try:
            paths = [*KCM_CONTROLLERS, *([NM_CONTROLLER] if mode == "aiokcm" else []),
                     *([SURGE_CONTROLLER] if mode == "kubectl_surge" else [])]
            await _run_drain(mode, args, run, setup=client, controllers_client=client, drain_client=client,
                             drain_kubeconfig=str(cluster.kubeconfig_path), controller_paths=paths)
        finally:
            await client.close()
    return run


def count_requests(audit_log: Path, users: frozenset[str], start: float, end: float) -> int:
    """Requests by `users` that kube-apiserver answered between `start` and `end` (epoch seconds)."""
    import datetime as dt

    count = 0
    for line in audit_log.read_text().splitlines():
        event = orjson.loads(line)
        if (event.get("user") or {}).get("username") not in users:
            continue
        stamp = dt.datetime.fromisoformat(event["stageTimestamp"].replace("Z", "+00:00")).timestamp()
        if start <= stamp <= end and event.get("stage") == "ResponseComplete":
            count += 1
    return count


async def one_mode_real(mode: str, args: argparse.Namespace) -> Run:
    """One mode on a fresh real control plane; see the module docstring."""
    from realcluster import KCM_BESIDE_AIOKCM, ApiKubelets, ControlPlane, assets_from_env

    assets = assets_from_env()
    if assets is None:
        raise SystemExit("bench.drain --real: set KUBEBUILDER_ASSETS (e.g. $(../shared/realk8s/assets.sh))")
    run = Run(mode)
    plane = ControlPlane(assets, kcm_controllers=KCM_BESIDE_AIOKCM if mode in ("aiokcm", "kubectl_surge") else "*",
                         extra_users={"aiokcm": "system:masters", "drainer": "system:masters", "bench": "system:masters"},
                         audit=True)
    await anyio.to_thread.run_sync(plane.start)
    try:
        async def client_of(user: str, qps: float, burst: int) -> KubeClient:
            return KubeClient(await build_api_client(kubeconfig=str(plane.kubeconfig(user))), qps=qps, burst=burst)

        setup = await client_of("bench", 1000, 2000)
        kubelet_client = await client_of("kubelet", 1000, 2000)
        controllers_client = await client_of("aiokcm", 20, 30)
        drain_client = await client_of("drainer", 20, 30)
        try:
            kubelets = ApiKubelets(kubelet_client)
            for i in range(1, args.nodes + 1):
                kubelets.add_node(f"node-{i}")
            async with anyio.create_task_group() as tg:
                tg.start_soon(kubelets.run)
                await kubelets.registered.wait()
                await _wait_service_account(setup)
                paths = ([*KCM_CONTROLLERS, NM_CONTROLLER] if mode == "aiokcm"
                         else [*KCM_CONTROLLERS, SURGE_CONTROLLER] if mode == "kubectl_surge" else [])
                start, end = await _run_drain(mode, args, run, setup=setup, controllers_client=controllers_client,
                                              drain_client=drain_client, drain_kubeconfig=str(plane.kubeconfig("drainer")),
                                              controller_paths=paths)
                tg.cancel_scope.cancel()
            await anyio.sleep(2.5)  # the audit log is written in batches of at most a second
            run.requests = count_requests(plane.audit_log, DRAIN_ACTORS, start, end)
        finally:
            for c in (setup, kubelet_client, controllers_client, drain_client):
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
            ax.step([t for t, _ in run.samples], [s[app] for _, s in run.samples], where="post", label=app,
                    linestyle=dashes, linewidth=width)
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
        cells = ("  ".join(f"{run.min_available(a):>12} / {run.seconds_at_zero(a):5.1f}" for a in APPS)
                 if wide else f"{at_zero:>10}")
        print(f"{run.mode:13} {done:>12} {run.pods_moved:>10} {per_pod:>8}  {cells}" + (f"   ({run.note})" if run.note else ""))
        figures[run.mode] = {
            "seconds_to_drained": None if run.seconds is None else round(run.seconds, 2),
            "pods_moved": run.pods_moved,
            "requests": run.requests,
            "requests_per_evacuated_pod": None if run.requests_per_pod is None else round(run.requests_per_pod, 2),
            "apps_at_zero": at_zero,
            "apps": {a: {"min_available": run.min_available(a), "seconds_at_zero": round(run.seconds_at_zero(a), 2)}
                     for a in APPS},
        }
        if run.note:
            figures[run.mode]["note"] = run.note
    return figures


async def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="bench.drain")
    parser.add_argument("--timeout", type=float, default=120.0, help="give each drain this long")
    parser.add_argument("--sample", type=float, default=0.1, help="seconds between availability samples")
    parser.add_argument("--evacuation-timeout", type=float, default=60.0)
    parser.add_argument("--skip-kubectl", action="store_true")
    parser.add_argument("--skip-surge", action="store_true", help="leave out kubectl drain with the eviction webhook")
    parser.add_argument("--real", action="store_true", help="on a real control plane from $KUBEBUILDER_ASSETS")
    parser.add_argument("--apps", type=int, default=3, help="more than 3: that many apps of 1-3 replicas")
    parser.add_argument("--nodes", type=int, default=3)
    args = parser.parse_args(argv)
    apps = layout(args.apps)
    APPS.clear()
    APPS.update(apps)
    modes = ["aiokcm"] + ([] if args.skip_kubectl or not shutil.which("kubectl") else ["kubectl"])
    if shutil.which("kubectl") and not args.skip_surge:
        modes.append("kubectl_surge")
    runs = [await (one_mode_real if args.real else one_mode)(mode, args) for mode in modes]
    figures = report(runs, chart(runs) if len(APPS) <= 3 else [], backend="real" if args.real else "local")
    print(orjson.dumps(figures).decode())
    return 0


if __name__ == "__main__":
    sys.exit(anyio.run(main, sys.argv[1:]))
