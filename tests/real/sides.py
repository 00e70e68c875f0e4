"""Two real control planes side by side: one run by the real KCM, one by aiokcm beside KCM.

The `kcm` side runs kube-controller-manager with every default controller; the `aiokcm` side
runs KCM without the controllers aiokcm replaces and `aiokcm run` as a separate process, as an
operator would deploy it. Both get the same simulated kubelets and the same steps, so whatever
differs at the end is the controllers' doing. The API server's audit log, with the pods that
came and went, counts each side's pod creates, which is how "no extra pod" is checked.
"""

from __future__ import annotations

import datetime as dt
import os
import signal
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import orjson
from anyio.abc import Process, TaskGroup

from apiclient import KubeClient
from apiclient.config import build_api_client
from apiclient.resources import PODS
from realcluster import KCM_BESIDE_AIOKCM, ApiKubelets, Assets, ControlPlane

ROOT = Path(__file__).resolve().parents[2]
AIOKCM_CONTROLLERS = "replicaset,deployment,disruption"
# Who creates pods on each side, as the audit log names them.
POD_CREATORS = {
    "kcm": "system:serviceaccount:kube-system:replicaset-controller",
    "aiokcm": "aiokcm",
}


@dataclass
class Side:
    name: str
    plane: ControlPlane
    client: KubeClient
    kubelet_client: KubeClient
    kubelets: ApiKubelets
    controllers: str = AIOKCM_CONTROLLERS
    manager_flags: tuple[str, ...] = ()
    manager: Process | None = None
    manager_log: Path | None = None

    # -- the controller manager of this side ----------------------------------------------

    async def start_manager(self) -> None:
        """aiokcm's side: `aiokcm run` as its own process. KCM's side: KCM is part of the plane."""
        if self.name != "aiokcm":
            await anyio.to_thread.run_sync(self.plane.start_component, "kube-controller-manager")
            return
        self.manager_log = self.plane.workdir / "aiokcm.log"
        log = self.manager_log.open("ab")
        self.manager = await anyio.open_process(
            [
                str(Path(sys.executable).with_name("aiokcm")),
                "run",
                "--kubeconfig",
                str(self.plane.kubeconfig("aiokcm")),
                "--controllers",
                self.controllers,
                "--leader-elect=false",
                "--secure-port",
                "0",
                "--log-format",
                "json",
                "-v",
                "4",
                *self.manager_flags,
            ],
            stdout=log,
            stderr=log,
            cwd=ROOT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        log.close()

    async def kill_manager(self) -> None:
        """SIGKILL, as a node failure or an OOM kill would."""
        if self.name != "aiokcm":
            await anyio.to_thread.run_sync(self.plane.kill, "kube-controller-manager")
            return
        if self.manager is not None and self.manager.returncode is None:
            self.manager.kill()
            await self.manager.wait()

    async def terminate_manager(self, *, timeout: float = 10.0) -> tuple[int | None, float]:
        """SIGTERM; returns the exit code (None if it had to be killed) and the seconds it took."""
        if self.manager is None or self.manager.returncode is not None:
            return (self.manager.returncode if self.manager else None), 0.0
        started = time.monotonic()
        self.manager.send_signal(signal.SIGTERM)
        with anyio.move_on_after(timeout):
            await self.manager.wait()
        took = time.monotonic() - started
        if self.manager.returncode is None:
            self.manager.kill()
            await self.manager.wait()
            return None, took
        return self.manager.returncode, took

    def manager_output(self) -> str:
        if self.name == "aiokcm":
            return self.manager_log.read_text(errors="replace") if self.manager_log else ""
        return self.plane.log_tail("kube-controller-manager", lines=100_000)

    # -- faults -------------------------------------------------------------------------------

    async def kill_component(self, component: str) -> None:
        await anyio.to_thread.run_sync(self.plane.kill, component)

    async def start_component(self, component: str) -> None:
        await anyio.to_thread.run_sync(self.plane.start_component, component)
        if component in ("kube-apiserver", "etcd"):
            await anyio.to_thread.run_sync(lambda: self.plane.wait_ready(timeout=60))

    # -- observations -------------------------------------------------------------------------

    def writes(self, namespace: str) -> list[str]:
        """Every write the audit log records in `namespace` but pods': who changed what, in order;
        what a failed comparison shows to tell which side wrote more."""
        out: list[str] = []
        log = self.plane.audit_log
        if not log.exists():
            return out
        for line in log.read_text().splitlines():
            event = orjson.loads(line)
            ref = event.get("objectRef") or {}
            if (
                ref.get("namespace") != namespace
                or event.get("verb") in ("get", "list", "watch")
                or ref.get("resource") in ("pods", "events")
            ):
                continue
            user = (event.get("user") or {}).get("username", "").rsplit(":", 1)[-1]
            sub = "/" + ref["subresource"] if ref.get("subresource") else ""
            code = (event.get("responseStatus") or {}).get("code")
            out.append(
                f"{event['stageTimestamp'][11:23]} {user} {event['verb']} {ref.get('resource')}/"
                f"{ref.get('name', '')}{sub} {code}"
            )
        return out

    def pod_creates(
        self, *, since: float = 0.0, before: frozenset[str] = frozenset(), after: frozenset[str] = frozenset()
    ) -> int:
        """Pods the side's controllers created since `since` (epoch seconds), from two views that can
        each only miss some: the audit log's 201 answers to the side's creates, and the pods that came
        and went (`pods_stored`).

        A SIGKILLed kube-apiserver loses the audit events of creates that reached etcd and were not
        yet logged (generateName creates are logged without the name, so the views cannot be joined);
        those pods still show up in the second view, so the larger of the two is the count."""
        audited, _ = self._audited_pods(since, before)
        return max(audited, len(self.pods_stored(since=since, before=before, after=after)))

    def pods_stored(
        self, *, since: float = 0.0, before: frozenset[str] = frozenset(), after: frozenset[str] = frozenset()
    ) -> frozenset[str]:
        """The pods that came and went since `since`: named in `after` but not in `before`, or
        deleted since while not in `before`."""
        _, deleted = self._audited_pods(since, before)
        return (after - before) | deleted

    def _audited_pods(self, since: float, before: frozenset[str]) -> tuple[int, frozenset[str]]:
        """The side's pod creates answered 201 since `since`, and the pods deleted since then that
        were not in `before`, by the audit log."""
        user = POD_CREATORS[self.name]
        audited = 0
        deleted: set[str] = set()
        log = self.plane.audit_log
        for line in log.read_text().splitlines() if log.exists() else ():
            event = orjson.loads(line)
            ref = event.get("objectRef") or {}
            if ref.get("resource") != "pods" or ref.get("subresource"):
                continue
            stamp = dt.datetime.fromisoformat(event["stageTimestamp"].replace("Z", "+00:00")).timestamp()
            if stamp < since:
                continue
            code = (event.get("responseStatus") or {}).get("code")
            if event.get("verb") == "delete" and code in (200, 202) and ref.get("name") not in before:
                deleted.add(ref["name"])
            elif (
                event.get("verb") == "create"
                and (event.get("user") or {}).get("username") == user
                and code == 201
            ):
                audited += 1
        return audited, frozenset(deleted)

    def pods_created_unanswered(self, stored: frozenset[str]) -> int:
        """Of `stored`, the pods aiokcm never learned it had created: their create reached etcd but
        the answer was lost with the server (a SIGKILLed kube-apiserver, a dropped connection), so
        the ReplicaSet controller, as KCM's, counted it failed and may create another in its place.

        The manager (at `-v 4`) logs each `SuccessfulCreate` event as it is recorded, once the
        answer is in, so a stored pod its log never names is one whose answer never came."""
        answered: set[str] = set()
        for line in self.manager_output().splitlines():
            if '"Event occurred"' not in line or '"SuccessfulCreate"' not in line:
                continue
            try:
                entry = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue
            message = str(entry.get("message", ""))
            if entry.get("reason") == "SuccessfulCreate" and message.startswith("Created pod: "):
                answered.add(message.removeprefix("Created pod: "))
        return len(stored - answered)

    async def pod_names(self, namespace: str) -> frozenset[str]:
        """The names of the pods in `namespace` now."""
        return frozenset(
            pod["metadata"]["name"] for pod in await self.client.list_all(PODS, namespace=namespace)
        )


def planes_side_by_side(assets: Assets, *, kcm_flags: Sequence[str] = ()) -> dict[str, ControlPlane]:
    """The two control planes, not started: `kcm` runs all of KCM, `aiokcm` KCM minus what aiokcm
    replaces. `kcm_flags` go to both KCMs (e.g. short node-monitor grace periods)."""
    users = {"aiokcm": "system:masters"}
    return {
        "kcm": ControlPlane(
            assets, kcm_controllers="*", extra_users=users, audit=True, audit_reads=False, kcm_flags=kcm_flags
        ),
        "aiokcm": ControlPlane(
            assets,
            kcm_controllers=KCM_BESIDE_AIOKCM,
            extra_users=users,
            audit=True,
            audit_reads=False,
            kcm_flags=kcm_flags,
        ),
    }


@asynccontextmanager
async def side_by_side(assets: Assets, *, nodes: int = 3, **options: Any) -> AsyncIterator[tuple[Side, Side]]:
    """Both sides started (planes, kubelets, managers); everything stopped on exit."""
    planes = planes_side_by_side(assets)

    async def start(plane: ControlPlane) -> None:
        await anyio.to_thread.run_sync(plane.start)

    async def stop(plane: ControlPlane) -> None:
        await anyio.to_thread.run_sync(plane.stop)

    try:
        async with anyio.create_task_group() as starting:
            for plane in planes.values():
                starting.start_soon(start, plane)
        async with sides_running(planes, nodes=nodes, **options) as sides:
            yield sides
    finally:
        with anyio.CancelScope(shield=True):
            async with anyio.create_task_group() as stopping:  # each waits out its scheduler's grace
                for plane in planes.values():
                    stopping.start_soon(stop, plane)


@asynccontextmanager
async def sides_running(
    planes: dict[str, ControlPlane],
    *,
    nodes: int = 3,
    aiokcm_controllers: str = AIOKCM_CONTROLLERS,
    aiokcm_flags: Sequence[str] = (),
    kubelet_options: dict[str, Any] | None = None,
) -> AsyncIterator[tuple[Side, Side]]:
    """Kubelets and clients on two started planes, and aiokcm (`aiokcm_controllers`, plus
    `aiokcm_flags`) on its side; kubelets stopped and aiokcm killed on exit, planes left running.

    Nodes `node-1`.. are registered, or taken over when a previous run registered them."""
    options = {"pod_start_delay": 0.5, "termination_cap": 0.5} | dict(kubelet_options or {})
    sides: dict[str, Side] = {}
    try:
        async with _running(planes, sides, nodes, aiokcm_controllers, aiokcm_flags, options) as pair:
            yield pair
    finally:
        with anyio.CancelScope(shield=True):
            for side in sides.values():
                await side.client.close()
                await side.kubelet_client.close()


@asynccontextmanager
async def _running(
    planes: dict[str, ControlPlane],
    sides: dict[str, Side],
    nodes: int,
    aiokcm_controllers: str,
    aiokcm_flags: Sequence[str],
    options: dict[str, Any],
) -> AsyncIterator[tuple[Side, Side]]:
    async with anyio.create_task_group() as tg:
        for name, plane in planes.items():
            client = KubeClient(
                await build_api_client(kubeconfig=str(plane.kubeconfig("admin"))), qps=1000, burst=2000
            )
            kubelet_client = KubeClient(
                await build_api_client(kubeconfig=str(plane.kubeconfig("kubelet"))), qps=1000, burst=2000
            )
            kubelets = ApiKubelets(kubelet_client, **options)
            for i in range(1, nodes + 1):
                kubelets.add_node(f"node-{i}")
            tg.start_soon(kubelets.run)
            sides[name] = Side(
                name,
                plane,
                client,
                kubelet_client,
                kubelets,
                controllers=aiokcm_controllers,
                manager_flags=tuple(aiokcm_flags),
            )
        for side in sides.values():
            await side.kubelets.registered.wait()
            await _default_service_account(side.client)
        await sides["aiokcm"].start_manager()
        try:
            yield sides["kcm"], sides["aiokcm"]
        finally:
            for side in sides.values():
                if side.name == "aiokcm":
                    await side.kill_manager()
            tg.cancel_scope.cancel()


async def _default_service_account(client: KubeClient, *, timeout: float = 60.0) -> None:
    with anyio.fail_after(timeout):
        while True:
            try:
                await client.request("GET", "/api/v1/namespaces/default/serviceaccounts/default")
                return
            except Exception:
                await anyio.sleep(0.2)


async def on_both(kcm: Side, aiokcm: Side, step: Callable[[Side], Awaitable[Any]]) -> dict[str, Any]:
    """Run `step` on both sides at once; returns each side's result by name."""
    results: dict[str, Any] = {}

    async def one(side: Side, tg: TaskGroup) -> None:
        results[side.name] = await step(side)

    async with anyio.create_task_group() as tg:
        for side in (kcm, aiokcm):
            tg.start_soon(one, side, tg)
    return results


async def first_time(check: Callable[[], Awaitable[bool]], *, timeout: float, every: float = 0.1) -> float:
    """Monotonic time at which `check` first holds; fails after `timeout`."""
    with anyio.fail_after(timeout):
        while True:
            if await check():
                return time.monotonic()
            await anyio.sleep(every)
