"""The `make run` demo: a node drained without downtime, narrated for a person.

`aiokcm run --embedded` starts a local cluster through the `aiokcm.embedded` plugin and runs the
manager against it. With the demo on (the default there), this module runs beside the manager in
the same process and tells, in plain lines on stdout, what aiokcm's controllers do:

1. the cluster's nodes;
2. two Deployments — `solo` (1 replica, guarded by a PDB `minAvailable: 1`) and `web` (3 replicas),
   both `maxSurge: 1, maxUnavailable: 0` — scaled up and Ready. The local cluster has no
   controllers of its own, so every pod here was made by aiokcm's deployment and replicaset
   controllers;
3. a NodeMaintenance (cordon + drain, KEP-4212) of the node that holds `solo`'s only replica, with
   one line per second: pods pending evacuation / evacuating, and each app's available replicas,
   until the maintenance reports `Drained`; then the least availability seen per app, which is the
   point of the exercise: a single-replica app drained with `kubectl drain` drops to zero (or, with
   its PDB, blocks the drain forever); with declarative maintenance the Deployment surges a
   replacement elsewhere first.

Availability is measured independently of the controllers' own status: Ready pods that are not
terminating, sampled several times a second (the narration prints one line per second, the
minimum is kept over every sample).

The demo only uses the API (through `apiclient`), like any user would; it never reaches into the
manager. It installs the NodeMaintenance CRD (the package data in `controller_manager.crds`, so it
works from an installed wheel or the image) if the cluster lacks it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TextIO

import anyio

from apiclient import ApiError, KubeClient
from apiclient.resources import (
    CUSTOMRESOURCEDEFINITIONS,
    DEPLOYMENTS,
    NODEMAINTENANCES,
    NODES,
    PODDISRUPTIONBUDGETS,
    PODS,
)
from controller_manager.crds import eviction_api_crds, nodemaintenance_crd
from evictionapi.served import AIOKCM as AIOKCM_EVICTION_API

NS = "default"
SAMPLE_SECONDS = 0.2
# Bounds on waits that only a broken set-up would hit (a controller disabled, the CRD missing);
# generous so a loaded machine never trips them, finite so the demo says what is wrong.
SETUP_TIMEOUT = 180.0
DRAIN_TIMEOUT = 600.0


@dataclass(frozen=True)
class App:
    name: str
    replicas: int
    max_surge: int = 1
    max_unavailable: int = 0
    pdb_min_available: int | None = None

    @property
    def floor(self) -> int:
        """The fewest available replicas the Deployment's own strategy allows."""
        return max(0, self.replicas - self.max_unavailable)


APPS: tuple[App, ...] = (App("solo", 1, pdb_min_available=1), App("web", 3))


class DemoError(Exception):
    """A step that cannot go on; its text is one line for the person watching."""


@dataclass
class DemoResult:
    node: str = ""
    drained: bool = False
    seconds_to_drained: float | None = None
    least_available: dict[str, int] = field(default_factory=dict)

    def zero_downtime(self, apps: tuple[App, ...] = APPS) -> bool:
        return self.drained and all(self.least_available.get(a.name, 0) >= max(1, a.floor) for a in apps)


# -- objects ------------------------------------------------------------------------------------------


def deployment(app: App) -> dict[str, Any]:
    labels = {"app": app.name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": app.name, "namespace": NS, "labels": {"demo.aiokcm.io/app": app.name}},
        "spec": {
            "replicas": app.replicas,
            "selector": {"matchLabels": labels},
            "strategy": {
                "type": "RollingUpdate",
                "rollingUpdate": {"maxSurge": app.max_surge, "maxUnavailable": app.max_unavailable},
            },
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "terminationGracePeriodSeconds": 2,
                    "containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10"}],
                },
            },
        },
    }


def pdb(app: App) -> dict[str, Any]:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": app.name, "namespace": NS},
        "spec": {"minAvailable": app.pdb_min_available, "selector": {"matchLabels": {"app": app.name}}},
    }


def node_maintenance(name: str, node: str, reason: str, *, drain: bool = True) -> dict[str, Any]:
    """A NodeMaintenance that cordons `node` and (unless `drain` is False, as the manager bench's
    cordon-only samples ask) drains it."""
    return {
        "apiVersion": NODEMAINTENANCES.api_version,
        "kind": NODEMAINTENANCES.kind,
        "metadata": {"name": name},
        "spec": {
            "nodeSelector": {
                "nodeSelectorTerms": [
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
                ]
            },
            "cordon": True,
            "drain": drain,
            "reason": reason,
        },
    }


# -- reading state ----------------------------------------------------------------------------------


def _condition_true(obj: Mapping[str, Any], type_: str) -> bool:
    return any(
        c.get("type") == type_ and c.get("status") == "True"
        for c in (obj.get("status") or {}).get("conditions") or []
    )


def pod_available(pod: Mapping[str, Any]) -> bool:
    """Serving traffic: Ready and not on its way out (minReadySeconds is 0 here)."""
    return not pod["metadata"].get("deletionTimestamp") and _condition_true(pod, "Ready")


def drained(nm: Mapping[str, Any]) -> bool:
    """`Drained=True` for the spec we wrote, not a leftover of an older generation."""
    generation = int(nm["metadata"].get("generation") or 0)
    observed = int((nm.get("status") or {}).get("observedGeneration") or 0)
    return _condition_true(nm, "Drained") and observed >= generation


def node_ready(node: Mapping[str, Any]) -> bool:
    return _condition_true(node, "Ready")


@dataclass
class Snapshot:
    available: dict[str, int]
    nodes_of: dict[str, list[str]]


async def snapshot(client: KubeClient, apps: tuple[App, ...] = APPS) -> Snapshot:
    available = {a.name: 0 for a in apps}
    nodes_of: dict[str, list[str]] = {a.name: [] for a in apps}
    for pod in await client.list_all(PODS, namespace=NS):
        app = (pod["metadata"].get("labels") or {}).get("app")
        if app in available and pod_available(pod):
            available[app] += 1
            nodes_of[app].append(str((pod.get("spec") or {}).get("nodeName") or "?"))
    return Snapshot(available, {k: sorted(v) for k, v in nodes_of.items()})


async def wait_until(check: Callable[[], Any], what: str, timeout: float, every: float = 0.2) -> Any:
    with anyio.move_on_after(timeout):
        while True:
            result = await check()
            if result:
                return result
            await anyio.sleep(every)
    raise DemoError(f"gave up after {timeout:.0f}s waiting for {what}")


# -- the scenario ---------------------------------------------------------------------------------


class Narrator:
    """Plain lines for a person; flushed at once so a pipe sees them as they happen."""

    def __init__(self, out: TextIO) -> None:
        self.out = out

    def say(self, text: str = "") -> None:
        print(text, file=self.out, flush=True)


async def ensure_crd(client: KubeClient) -> None:
    """Install the NodeMaintenance CRD unless the API is served already, then wait until it is."""

    async def served() -> bool:
        try:
            await client.list(NODEMAINTENANCES, limit=1)
        except ApiError as exc:
            if exc.not_found:
                return False
            raise
        return True

    if await served():
        return
    try:
        await client.create(CUSTOMRESOURCEDEFINITIONS, nodemaintenance_crd())
    except ApiError as exc:
        if not exc.already_exists:
            raise
    await wait_until(served, "the NodeMaintenance API to be served", SETUP_TIMEOUT)


async def ensure_eviction_api(client: KubeClient) -> None:
    """Install the EvictionRequest API's CRDs unless served, so `aiokcm run --embedded` with the
    `EvictionRequestAPI` gate has the API (`aiokcm evict` against it) as a real install would."""
    with contextlib.suppress(ApiError):
        await client.list(AIOKCM_EVICTION_API.requests, limit=1)
        return  # served already (a restart): nothing to write
    for crd in eviction_api_crds():
        try:
            await client.create(CUSTOMRESOURCEDEFINITIONS, crd)
        except ApiError as exc:
            if not exc.already_exists:
                raise


async def _create(client: KubeClient, res: Any, body: dict[str, Any]) -> None:
    try:
        await client.create(res, body, namespace=NS)
    except ApiError as exc:
        if not exc.already_exists:  # a re-run against the same cluster keeps the old objects
            raise


def _apps_line(available: Mapping[str, int], apps: tuple[App, ...]) -> str:
    return "  ".join(f"{a.name} {available.get(a.name, 0)}/{a.replicas}" for a in apps)


async def run_demo(
    client: KubeClient,
    *,
    out: TextIO | None = None,
    apps: tuple[App, ...] = APPS,
    kubeconfig: str = "",
) -> DemoResult:
    """The scenario; returns what it measured. Raises DemoError with one line when a step fails."""
    say = Narrator(out or sys.stdout).say
    result = DemoResult()
    say("aiokcm demo: declarative node maintenance (KEP-4212) on an embedded local cluster")
    if kubeconfig:
        say(
            f"  kubeconfig: {kubeconfig}   (try: kubectl --kubeconfig {kubeconfig} get nm,deploy,pods -o wide)"
        )

    async def ready_nodes() -> list[str]:
        return sorted(n["metadata"]["name"] for n in await client.list_all(NODES) if node_ready(n))

    nodes = await wait_until(ready_nodes, "a Ready node", SETUP_TIMEOUT)
    say(f"  nodes: {', '.join(nodes)} (Ready, from the local cluster's simulated kubelets)")
    await ensure_crd(client)

    say()
    pdb_text = {a.name: f", PDB minAvailable {a.pdb_min_available}" for a in apps if a.pdb_min_available}
    say(
        "1. Deployments created ("
        + "; ".join(
            f"{a.name}: {a.replicas} replica{'s' if a.replicas != 1 else ''}, maxSurge {a.max_surge}, "
            f"maxUnavailable {a.max_unavailable}{pdb_text.get(a.name, '')}"
            for a in apps
        )
        + ")"
    )
    for app in apps:
        await _create(client, DEPLOYMENTS, deployment(app))
        if app.pdb_min_available is not None:
            await _create(client, PODDISRUPTIONBUDGETS, pdb(app))
    say("   the local cluster has no controllers of its own: aiokcm's deployment and replicaset")
    say("   controllers create the pods; its scheduler and kubelets place and start them")
    started = time.monotonic()

    async def all_up() -> Snapshot | None:
        snap = await snapshot(client, apps)
        return snap if all(snap.available[a.name] >= a.replicas for a in apps) else None

    snap: Snapshot = await wait_until(
        all_up, "every Deployment to be available (is aiokcm's deployment controller enabled?)", SETUP_TIMEOUT
    )
    for app in apps:
        say(
            f"   {app.name:5} {snap.available[app.name]}/{app.replicas} available on {', '.join(snap.nodes_of[app.name])}"
        )
    say(f"   all available after {time.monotonic() - started:.1f}s")

    single = next((a for a in apps if a.replicas == 1), apps[0])
    node = snap.nodes_of[single.name][0]
    result.node = node
    nm_name = f"demo-{node}"
    say()
    say(f"2. NodeMaintenance {nm_name}: cordon + drain {node}, where {single.name}'s only replica runs")
    say("   (a plain `kubectl drain` would have to take that replica down, or be blocked by its PDB)")
    await client.create(NODEMAINTENANCES, node_maintenance(nm_name, node, "aiokcm demo: kernel upgrade"))
    least = dict(snap.available)
    start = time.monotonic()
    last_print = -1.0
    header = f"   {'t':>5}  {'phase':10} {'pending':>7} {'evacuating':>10}   available"
    say(header)
    with anyio.move_on_after(DRAIN_TIMEOUT):
        while True:
            current = await snapshot(client, apps)
            for name, count in current.available.items():
                least[name] = min(least[name], count)
            nm = await client.get(NODEMAINTENANCES, nm_name)
            done = drained(nm)
            elapsed = time.monotonic() - start
            if done or elapsed - last_print >= 1.0:
                last_print = elapsed
                status = ((nm.get("status") or {}).get("nodes") or {}).get(node) or {}
                say(
                    f"   {elapsed:4.1f}s  {status.get('phase') or 'Pending':10} "
                    f"{int(status.get('podsPendingEvacuation') or 0):>7} {int(status.get('podsEvacuating') or 0):>10}"
                    f"   {_apps_line(current.available, apps)}"
                )
            if done:
                result.drained = True
                result.seconds_to_drained = elapsed
                break
            await anyio.sleep(SAMPLE_SECONDS)
    result.least_available = least
    say()
    if not result.drained:
        raise DemoError(
            f"{node} was not Drained within {DRAIN_TIMEOUT:.0f}s "
            f"(kubectl get nm {nm_name} -o yaml shows what blocks)"
        )
    least_text = ", ".join(f"{a.name} {least[a.name]}/{a.replicas}" for a in apps)
    at_zero = [a.name for a in apps if least[a.name] == 0]
    say(
        f"3. {node} Drained after {result.seconds_to_drained:.1f}s. Least available while draining: {least_text}"
    )
    if at_zero:
        say(f"   DOWNTIME: {', '.join(at_zero)} dropped to zero available replicas")
    else:
        say("   no app dropped to zero: each replacement was Ready elsewhere before its old pod went away")
    final = await snapshot(client, apps)
    for app in apps:
        say(
            f"   {app.name:5} {final.available[app.name]}/{app.replicas} available on {', '.join(final.nodes_of[app.name])}"
        )
    return result


@contextlib.asynccontextmanager
async def running(
    cluster_client: Callable[[], Awaitable[KubeClient]],
    *,
    kubeconfig: str = "",
    exit_after_drain: bool = False,
    out: TextIO | None = None,
) -> AsyncIterator[None]:
    """Run the demo in the background for as long as the block runs (the manager, in `aiokcm run`).

    `cluster_client` is an async factory of a KubeClient (e.g. `LocalCluster.client`). The CRD is
    installed before the block starts, so the manager's informers find the NodeMaintenance API
    on their first LIST. The demo never takes the process down on failure: it says what went
    wrong in one line and lets the manager keep running. With `exit_after_drain` (tests, CI),
    once the demo has finished, or failed, it sends this process SIGTERM — what Ctrl-C does — so
    the manager shuts down gracefully and `aiokcm run` exits by its ordinary path.
    """
    say = Narrator(out or sys.stdout).say
    client = await cluster_client()

    async def scenario(ready: bool) -> None:
        try:
            if ready:
                result = await run_demo(client, out=out, kubeconfig=kubeconfig)
                say()
                say(
                    "demo result: "
                    + (
                        "Drained with zero downtime"
                        if result.zero_downtime()
                        else "Drained, but with DOWNTIME"
                    )
                )
        except (DemoError, ApiError) as exc:
            say(f"demo failed: {exc}")
        if exit_after_drain:
            say("demo over (--demo-exit-after-drain): stopping the manager")
            os.kill(os.getpid(), signal.SIGTERM)
        else:
            say("aiokcm keeps running its controllers against the cluster; Ctrl-C to stop.")

    try:
        ready = True
        try:
            await ensure_crd(client)
            await ensure_eviction_api(client)
        except (DemoError, ApiError) as exc:
            say(f"demo failed: {exc}")
            ready = False
        async with anyio.create_task_group() as tg:
            tg.start_soon(scenario, ready)
            try:
                yield
            finally:
                tg.cancel_scope.cancel()
    finally:
        await client.close()
