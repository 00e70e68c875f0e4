"""Leader failover between two `aiokcm run` processes, measured by the API server itself.

Two managers with leader election run as subprocesses against a local cluster, each with its own
credential (the server's request log tells their writes apart by its fingerprint). The leader is
killed with SIGKILL (no release: the standby must wait the lease out); right after the kill a
ReplicaSet is scaled so that there is work to do. Measured from the kill: when the server
accepted the standby's takeover of the Lease, and when it received the standby's first write
that is not to the Lease. Over the whole run, every write that is not to the Lease must come from
the holder of the lease at that moment: never two writers. KCM's bound for the takeover is the
lease duration plus the retry period.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import anyio
import anyio.abc
import yaml

from apiclient import KubeClient
from apiclient.resources import LEASES, NAMESPACES, REPLICASETS
from localcluster.cluster import LocalCluster
from localcluster.requestlog import Write, fingerprint
from realcluster.ports import free_port
from tests.support.waiting import eventually

NS = "failover"
LEASE_COLLECTION = "/namespaces/kube-system/leases"
LEASE_PATH = f"{LEASE_COLLECTION}/aiokcm"


@dataclass(frozen=True)
class Election:
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0

    @property
    def bound(self) -> float:
        """KCM's bound on a takeover after the leader dies: lease duration + retry period."""
        return self.lease_duration + self.retry_period

    def flags(self) -> list[str]:
        return [
            f"--leader-elect-lease-duration={self.lease_duration}s",
            f"--leader-elect-renew-deadline={self.renew_deadline}s",
            f"--leader-elect-retry-period={self.retry_period}s",
        ]


@dataclass
class Try:
    killed: str
    took_over: str
    lease_s: float
    first_write_s: float


@dataclass
class FailoverResult:
    tries: list[Try] = field(default_factory=list)
    two_writers: list[str] = field(default_factory=list)


class ManagerProcess:
    """One `aiokcm run` subprocess with its own credential and health port."""

    def __init__(self, cluster: LocalCluster, name: str, election: Election, workdir: Path) -> None:
        self.name = name
        self.token = f"manager-{name}-token"
        self.credential = fingerprint(f"Bearer {self.token}")
        self.port = free_port()
        config = cluster.kubeconfig()
        config["users"][0]["user"]["token"] = self.token
        self.kubeconfig = workdir / f"kubeconfig-{name}"
        self.kubeconfig.write_text(yaml.safe_dump(config))
        self.log = workdir / f"manager-{name}.log"
        self.argv = [
            sys.executable,
            "-m",
            "controller_manager",
            "run",
            "--kubeconfig",
            str(self.kubeconfig),
            "--controllers=replicaset",
            "--leader-elect=true",
            *election.flags(),
            "--bind-address=127.0.0.1",
            f"--secure-port={self.port}",
            "--log-format=json",
        ]
        self.process: anyio.abc.Process | None = None

    async def start(self) -> None:
        with self.log.open("ab") as out:
            self.process = await anyio.open_process(
                self.argv, stdout=out, stderr=out, env={**os.environ, "PYTHONUNBUFFERED": "1"}
            )

    async def wait_serving(self, limit: float = 60.0) -> None:
        """Until its /readyz answers (a standby is ready: it is up and polling the lease)."""
        url = f"https://127.0.0.1:{self.port}/readyz"  # its own self-signed certificate
        with anyio.fail_after(limit):
            async with aiohttp.ClientSession() as session:
                while True:
                    with contextlib.suppress(aiohttp.ClientError, OSError):
                        async with session.get(url, ssl=False) as response:
                            if response.status == 200:
                                return
                    await anyio.sleep(0.1)

    async def kill(self) -> None:
        if self.process is not None and self.process.returncode is None:
            self.process.send_signal(signal.SIGKILL)
            await self.process.wait()

    async def stop(self) -> None:
        if self.process is not None and self.process.returncode is None:
            self.process.terminate()
            with anyio.move_on_after(10):
                await self.process.wait()
            await self.kill()


def _is_lease(w: Write) -> bool:
    """A write of the leader-election Lease: its create (POST to the collection) or an update."""
    return w.resource == "leases" and (w.path.endswith(LEASE_PATH) or w.path.endswith(LEASE_COLLECTION))


def _takeovers(writes: list[Write]) -> list[tuple[float, str]]:
    """(time, credential) of each successful Lease write by a new holder, in order."""
    out: list[tuple[float, str]] = []
    for w in writes:
        if (
            _is_lease(w)
            and w.succeeded
            and w.method in ("PUT", "POST")
            and (not out or out[-1][1] != w.credential)
        ):
            out.append((w.at, w.credential))
    return out


def two_writers(writes: list[Write], names: dict[str, str]) -> list[str]:
    """Writes not to the Lease whose sender did not hold the lease when the server got them."""
    takeovers = _takeovers(writes)
    bad: list[str] = []
    for w in writes:
        if _is_lease(w) or w.credential not in names:
            continue
        holder = next((c for at, c in reversed(takeovers) if at <= w.at), None)
        if holder != w.credential:
            bad.append(
                f"{w.method} {w.path} by {names[w.credential]} while "
                f"{names.get(holder or '', 'nobody')} held the lease"
            )
    return bad


async def _holder(kube: KubeClient) -> str:
    lease = await kube.get(LEASES, "aiokcm", namespace="kube-system")
    return str(lease["spec"].get("holderIdentity") or "")


@contextlib.asynccontextmanager
async def _managers(
    cluster: LocalCluster, election: Election, workdir: Path
) -> AsyncIterator[dict[str, ManagerProcess]]:
    procs = {n: ManagerProcess(cluster, n, election, workdir) for n in ("a", "b")}
    try:
        yield procs
    finally:
        for p in procs.values():
            await p.stop()


async def run_failover(*, tries: int, election: Election, workdir: Path) -> FailoverResult:
    result = FailoverResult()
    async with LocalCluster(nodes=3, scheduler=False, kubelets=False) as cluster:
        kube = await cluster.client()
        try:
            await kube.create(NAMESPACES, {"metadata": {"name": NS}})
            await kube.create(REPLICASETS, _replica_set(0), namespace=NS)
            async with _managers(cluster, election, workdir) as procs:
                names = {p.credential: p.name for p in procs.values()}
                leader, standby = procs["a"], procs["b"]
                await leader.start()
                await leader.wait_serving()
                await _until_leading(cluster, leader)
                await standby.start()
                await standby.wait_serving()
                replicas = 0
                for _ in range(tries):
                    replicas += 1
                    asked = time.monotonic()
                    await kube.patch(REPLICASETS, "big", {"spec": {"replicas": replicas}}, namespace=NS)
                    await _until_written(cluster, leader, asked)  # the leader is at work
                    await anyio.sleep(election.retry_period)  # and has seen the standby polling
                    killed_at = time.monotonic()
                    await leader.kill()
                    replicas += 1
                    await kube.patch(REPLICASETS, "big", {"spec": {"replicas": replicas}}, namespace=NS)
                    took = await _until_leading(cluster, standby, since=killed_at)
                    wrote = await _until_written(cluster, standby, killed_at)
                    result.tries.append(Try(leader.name, standby.name, took - killed_at, wrote - killed_at))
                    await leader.start()  # the killed one comes back as the standby
                    await leader.wait_serving()
                    leader, standby = standby, leader
            result.two_writers = two_writers(cluster.requests.writes, names)
        finally:
            await kube.close()
    return result


def _replica_set(replicas: int) -> dict[str, Any]:
    return {
        "metadata": {"name": "big"},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "big"}},
            "template": {
                "metadata": {"labels": {"app": "big"}},
                "spec": {"containers": [{"name": "c", "image": "nginx:1"}]},
            },
        },
    }


async def _until_leading(
    cluster: LocalCluster, proc: ManagerProcess, *, since: float = 0.0, limit: float = 60.0
) -> float:
    """When the server accepted `proc`'s write of the Lease as its new holder."""
    taken: float = await eventually(
        lambda: next(
            (
                at
                for at, credential in _takeovers(cluster.requests.since(since))
                if credential == proc.credential
            ),
            None,
        ),
        f"manager {proc.name} holding the Lease",
        timeout=limit,
        interval=0.02,
    )
    return taken


async def _until_written(
    cluster: LocalCluster, proc: ManagerProcess, since: float, *, limit: float = 60.0
) -> float:
    """When the server received `proc`'s first write that is not to the Lease, after `since`."""
    written: float = await eventually(
        lambda: next(
            (
                w.at
                for w in cluster.requests.since(since)
                if w.credential == proc.credential and not _is_lease(w)
            ),
            None,
        ),
        f"a write from manager {proc.name}",
        timeout=limit,
        interval=0.02,
    )
    return written
