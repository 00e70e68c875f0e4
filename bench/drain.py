"""Benchmark: drain one node with `aiokcm drain` and with the real `kubectl drain`, same layout.

Layout (issue 10): three nodes; Deployments `single` (1 replica) and `triple` (3 replicas), both
with `maxSurge: 1, maxUnavailable: 0`; `guarded`, a single-replica Deployment with a PDB
`minAvailable: 1`. Every app pod starts on the drained node (the other nodes are cordoned while the
apps roll out, then uncordoned). aiokcm's ReplicaSet, Deployment and disruption controllers run in
both modes (KCM's job); the NodeMaintenance controller and its CRD only in the aiokcm mode.

Figures per mode: time to drained (or "timeout"), and per app the least number of available
replicas seen and the seconds spent at zero (sampled every `--sample` seconds). A chart of available
replicas over time for both modes goes to `bench/out/drain.png` and `.svg` (for the README). Prints a
table, then as its LAST line one JSON object with the figures.

    python -m bench.drain [--timeout 120] [--sample 0.1] [--evacuation-timeout 60]
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
from apiclient.resources import (
    CUSTOMRESOURCEDEFINITIONS,
    DEPLOYMENTS,
    NODEMAINTENANCES,
    NODES,
    PODDISRUPTIONBUDGETS,
    PODS,
)
from controller_manager.maintenance_cli import build_parser
from controller_manager.maintenance_cli import run as run_cli
from controller_manager.registry import import_controller_class
from controllers.base import Controller
from controllers.context import ControllerContext, StaticGates
from informers import SharedInformerFactory
from localcluster.cluster import LocalCluster

NS = "default"
APPS = {"single": 1, "triple": 3, "guarded": 1}
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


@dataclass
class Run:
    mode: str
    seconds: float | None = None  # None: did not finish before the timeout
    samples: list[tuple[float, dict[str, int]]] = field(default_factory=list)
    note: str = ""

    def min_available(self, app: str) -> int:
        return min((s[app] for _, s in self.samples), default=0)

    def seconds_at_zero(self, app: str) -> float:
        total = 0.0
        for (t0, s0), (t1, _) in zip(self.samples, self.samples[1:], strict=False):
            if s0[app] == 0:
                total += t1 - t0
        return total


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


async def one_mode(mode: str, args: argparse.Namespace) -> Run:
    run = Run(mode)
    async with LocalCluster(nodes=3) as cluster:
        client = await cluster.client(qps=100, burst=200)
        try:
            nodes = sorted(n["metadata"]["name"] for n in await client.list_all(NODES))
            target, others = nodes[0], nodes[1:]
            if mode == "aiokcm":
                await install_crd(client)
            factory = SharedInformerFactory(client, gc_freeze=True)  # as the manager runs (--gc-freeze)
            ctx = ControllerContext(client=client, informers=factory, gates=StaticGates(GATES))
            paths = [*KCM_CONTROLLERS, *([NM_CONTROLLER] if mode == "aiokcm" else [])]
            controllers: list[Controller] = [import_controller_class(p)(ctx) for p in paths]
            async with anyio.create_task_group() as tg:
                factory.start(tg)
                for c in controllers:
                    tg.start_soon(c.run, None)
                await set_layout(client, target, others)
                start = time.monotonic()
                tg.start_soon(sample, client, run, start, args.sample)
                if mode == "aiokcm":
                    cli_args = build_parser().parse_args([
                        "drain", target, "--timeout", f"{args.timeout}s",
                        "--evacuation-timeout", f"{args.evacuation_timeout}s", "--poll-interval", "0.2",
                    ])
                    code = await run_cli(cli_args, client, out=io.StringIO(), err=io.StringIO())
                else:
                    result = await anyio.run_process(
                        ["kubectl", "--kubeconfig", str(cluster.kubeconfig_path), "drain", target,
                         "--ignore-daemonsets", "--delete-emptydir-data", f"--timeout={int(args.timeout)}s"],
                        check=False,
                    )
                    code = result.returncode
                    if code:
                        lines = result.stderr.decode(errors="replace").strip().splitlines()
                        run.note = lines[-1] if lines else f"exit {code}"
                elapsed = time.monotonic() - start
                run.seconds = elapsed if code == 0 else None
                await anyio.sleep(1.0)  # see the apps settle after the drain
                tg.cancel_scope.cancel()
        finally:
            await client.close()
    return run


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


def report(runs: list[Run], pictures: list[str]) -> dict[str, Any]:
    print(f"{'mode':8} {'drained in':>12}  " + "  ".join(f"{app + ' min/zero s':>20}" for app in APPS))
    figures: dict[str, Any] = {"pictures": pictures}
    for run in runs:
        done = f"{run.seconds:.1f}s" if run.seconds is not None else "timeout"
        cells = "  ".join(f"{run.min_available(a):>12} / {run.seconds_at_zero(a):5.1f}" for a in APPS)
        print(f"{run.mode:8} {done:>12}  {cells}" + (f"   ({run.note})" if run.note else ""))
        figures[run.mode] = {
            "seconds_to_drained": None if run.seconds is None else round(run.seconds, 2),
            "apps": {a: {"min_available": run.min_available(a), "seconds_at_zero": round(run.seconds_at_zero(a), 2)}
                     for a in APPS},
        }
    return figures


async def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="bench.drain")
    parser.add_argument("--timeout", type=float, default=120.0, help="give each drain this long")
    parser.add_argument("--sample", type=float, default=0.1, help="seconds between availability samples")
    parser.add_argument("--evacuation-timeout", type=float, default=60.0)
    parser.add_argument("--skip-kubectl", action="store_true")
    args = parser.parse_args(argv)
    modes = ["aiokcm"] + ([] if args.skip_kubectl or not shutil.which("kubectl") else ["kubectl"])
    runs = [await one_mode(mode, args) for mode in modes]
    figures = report(runs, chart(runs))
    print(orjson.dumps(figures).decode())
    return 0


if __name__ == "__main__":
    sys.exit(anyio.run(main, sys.argv[1:]))
