"""The whole manager in process against the local cluster, and what the server saw it write.

`running_manager` runs `controller_manager.app.Manager` with every controller and gate on (the
way an operator who wants node maintenance runs it); `settled` waits until the manager has made
no write for a while; `writes_over` is the list of writes the server received in a window. The
server's request log only sees clients, so the cluster's own scheduler and kubelets never count.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import anyio

from apiclient import KubeClient
from controller_manager.app import Manager
from controller_manager.options import ManagerOptions, parse_run_args
from controller_manager.registry import default_registry
from localcluster.cluster import LocalCluster
from localcluster.requestlog import WRITE_METHODS, Write
from tests.support.waiting import eventually

ALL_GATES = "DeclarativeNodeMaintenance=true,NodeMaintenanceDeployment=true,NodeMaintenanceLease=true"


def manager_options(cluster: Any, *extra: str) -> ManagerOptions:
    """Every controller and gate on, no leader election, no HTTP port, unless `extra` says otherwise."""
    argv = [
        "--kubeconfig",
        cluster.kubeconfig_path,
        "--feature-gates",
        ALL_GATES,
        "--leader-elect=false",
        "--secure-port=0",
        *extra,
    ]
    return parse_run_args(argv, default_registry())


@asynccontextmanager
async def running_manager(
    cluster: Any,
    opts: ManagerOptions,
    *,
    identity: str | None = None,
) -> AsyncIterator[Manager]:
    """A started Manager on its own client (the options' qps and burst); stopped and awaited on exit."""
    client = await cluster.client(qps=opts.kube_api_qps, burst=opts.kube_api_burst)
    manager = Manager(opts, client, identity=identity)
    codes: list[int] = []
    try:
        async with anyio.create_task_group() as tg:

            async def run() -> None:
                codes.append(await manager.run(handle_signals=False))

            tg.start_soon(run)
            try:
                yield manager
            finally:
                manager.stop()
    finally:
        await client.close()
    assert codes == [0], f"the manager exited with {codes}"


def writes_over(cluster: LocalCluster, start: float, ignore: Sequence[str] = ()) -> list[Write]:
    """Writes since `start` (monotonic), leaving out User-Agents that contain any of `ignore`."""
    return [w for w in cluster.requests.since(start) if not any(i in w.user_agent for i in ignore)]


async def settled(
    cluster: LocalCluster, *, quiet: float = 2.0, limit: float = 60.0, ignore: Sequence[str] = ()
) -> None:
    """Return once no write has reached the server for `quiet` seconds; `limit` bounds a hang only."""
    await eventually(
        lambda: not writes_over(cluster, time.monotonic() - quiet, ignore),
        f"{quiet} s without a write",
        timeout=limit,
        interval=0.2,
    )


def describe(writes: Sequence[Write]) -> str:
    """`METHOD path (agent) status` per write, for an assertion message."""
    return "\n".join(f"{w.method} {w.path} ({w.user_agent}) {w.status}" for w in writes[:40])


@dataclass(frozen=True)
class ClientWrite:
    at: float
    method: str
    url: str
    status: str


class ClientWrites:
    """Every write the manager's client sends, recorded at its REST layer: the same count on
    any backend (the real kube-apiserver has no request log, and its kubelets also write)."""

    def __init__(self, client: KubeClient) -> None:
        self.writes: list[ClientWrite] = []
        rest: Any = client.api_client.rest_client
        original = rest.request

        async def request(method: str, url: str, *args: Any, **kwargs: Any) -> Any:
            if method.upper() not in WRITE_METHODS:
                return await original(method, url, *args, **kwargs)
            status = "<error>"
            try:
                response = await original(method, url, *args, **kwargs)
                status = str(getattr(response, "status", "<error>"))
                return response
            finally:
                self.writes.append(ClientWrite(time.monotonic(), method.upper(), url, status))

        rest.request = request

    def since(self, start: float) -> list[ClientWrite]:
        return [w for w in self.writes if w.at >= start]

    async def settled(self, *, quiet: float = 2.0, limit: float = 90.0) -> None:
        """Return once the manager has sent no write for `quiet` seconds."""
        await eventually(
            lambda: not self.since(time.monotonic() - quiet),
            f"{quiet} s without a write from the manager",
            timeout=limit,
            interval=0.2,
        )
