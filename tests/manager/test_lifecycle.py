"""The manager process end to end against the fake API: lease, health, SIGTERM, lost leadership."""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import aiohttp
import anyio
from anyio.abc import Process

from realcluster.ports import free_port
from tests.manager.fakeapi import FakeApi, serve_fake_api
from tests.support.waiting import eventually

LEASE = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/aiokcm"


@asynccontextmanager
async def _manager(api: FakeApi, port: int, *extra: str) -> AsyncIterator[Process]:
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    args = [
        sys.executable,
        "-m",
        "controller_manager",
        "run",
        f"--master={api.url}",
        "--controllers=",
        "--bind-address=127.0.0.1",
        f"--secure-port={port}",
        "--leader-elect-lease-duration=3s",
        "--leader-elect-renew-deadline=2s",
        "--leader-elect-retry-period=200ms",
        "--log-format=json",
        # No review kubeconfigs here (the fake API serves no TokenReview): paths open to anyone.
        "--authorization-always-allow-paths=/healthz,/healthz/*,/livez,/readyz,/metrics",
        *extra,
    ]
    async with await anyio.open_process(args, env=env) as proc:
        try:
            yield proc
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()


async def _get(port: int, path: str) -> tuple[int, str]:
    async with aiohttp.ClientSession() as s, s.get(f"https://127.0.0.1:{port}{path}", ssl=False) as r:
        return r.status, await r.text()


async def _serving(port: int) -> None:
    async def live() -> bool:
        try:
            await _get(port, "/livez")
        except aiohttp.ClientError:
            return False
        return True

    await eventually(live, "/livez served", timeout=30)


def _holder(api: FakeApi) -> str:
    lease = api.get(LEASE) or {}
    return str((lease.get("spec") or {}).get("holderIdentity") or "")


async def test_sigterm_stops_cleanly_and_releases_the_lease() -> None:
    async with serve_fake_api() as api:
        port = free_port()
        async with _manager(api, port) as proc:
            await eventually(lambda: _holder(api) != "", "_holder(api) != ''")
            await _serving(port)
            assert (await _get(port, "/healthz"))[0] == 200
            assert (await _get(port, "/healthz/leaderElection"))[0] == 200
            await eventually(lambda: api.requests.count(("PUT", LEASE)) >= 2, "the lease renewed")
            _, metrics = await _get(port, "/metrics")
            assert 'leader_election_master_status{name="aiokcm"} 1.0' in metrics
            assert "rest_client_requests_total" in metrics
            assert (await _get(port, "/healthz/nope"))[0] == 404
            proc.send_signal(signal.SIGTERM)
            with anyio.fail_after(30):
                code = await proc.wait()
        assert code == 0
        spec = api.get(LEASE)["spec"]  # type: ignore[index]
        assert spec["holderIdentity"] is None or spec["holderIdentity"] == ""
        assert spec["leaseDurationSeconds"] == 1


async def test_losing_the_lease_exits_1() -> None:
    async with serve_fake_api() as api:
        port = free_port()
        async with _manager(api, port) as proc:
            await eventually(lambda: _holder(api) != "", "_holder(api) != ''")
            api.fail_writes = True  # renewals fail from now on
            with anyio.fail_after(30):
                code = await proc.wait()
        assert code == 1


async def test_standby_is_ready_and_waits_for_the_holder_then_stops_on_sigterm() -> None:
    async with serve_fake_api() as api:
        api.objects[LEASE] = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": "aiokcm", "namespace": "kube-system", "resourceVersion": "1"},
            "spec": {"holderIdentity": "someone-else", "leaseDurationSeconds": 3600},
        }
        port = free_port()
        async with _manager(api, port) as proc:
            await _serving(port)
            await eventually(
                lambda: api.requests.count(("GET", LEASE)) >= 2, "api.requests.count(('GET', LEASE)) >= 2"
            )
            assert (await _get(port, "/readyz"))[0] == 200
            _, metrics = await _get(port, "/metrics")
            assert 'leader_election_master_status{name="aiokcm"} 0.0' in metrics
            proc.send_signal(signal.SIGTERM)
            with anyio.fail_after(30):
                assert await proc.wait() == 0
        assert _holder(api) == "someone-else"
