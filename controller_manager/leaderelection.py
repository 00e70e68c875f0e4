"""Lease-based leader election, client-go's `tools/leaderelection` on `KubeClient`.

Why a rewrite rather than wrapping kubernetes_asyncio's `LeaderElection` + `LeaseLock`: its
`run()` starts the leader's work with a bare `asyncio.create_task` (owned by no task group, so
cancellation and errors escape structured concurrency), measures expiry with `time.time()`
(wall-clock jumps break it, and a virtual clock cannot drive it in tests), writes local time as
if it were UTC, never increments `leaseTransitions`, logs a traceback on every lost race and
never releases. Patching all of that leaves little of the original; the algorithm itself is
short, so it is ported here from client-go, on the same throttled, instrumented client as
everything else:

- `try_acquire_or_renew`: GET the Lease (CREATE if missing). A lease held by someone else is
  taken only when it has not changed for `leaseDurationSeconds` as observed on *our* monotonic
  clock (never compare our clock with the holder's timestamps). Writes are PUTs carrying the
  resourceVersion we read, so two candidates racing cannot both win.
- The leader renews every `retry_period`; if no renewal succeeds within `renew_deadline` it has
  lost the lease and `LeadershipLost` is raised (the manager exits 1, as KCM does).
- On a clean shutdown the leader releases: empty holder, `leaseDurationSeconds: 1`, so the
  other replica takes over at its next retry instead of waiting out the lease.
- Unlike client-go, a standby also watches its Lease: a renewal polled up to 2.2 retry periods
  late moved the observed expiry (and so the take-over) as much past the real one, while a
  watched renewal is observed at once. The expiry rule is unchanged (local monotonic time at
  which a changed record was seen); polling stays the fallback when the watch fails.
"""

from __future__ import annotations

import random
import socket
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import anyio
import structlog
from prometheus_client import Gauge

from apiclient import ApiError, KubeClient
from apiclient.resources import LEASES
from kubeutil.timestamps import format_micro_time, utcnow

JITTER_FACTOR = 1.2
HEALTHZ_TIMEOUT = 20.0  # KCM's leader-election healthz adaptor timeout
EXPIRY_MARGIN = 0.01  # past the expiry instant, so the holder check sees it expired
WATCH_BACKOFF_MAX = 30.0  # cap of the standby's re-watch backoff; polling covers the gap

MASTER_STATUS = Gauge(
    "leader_election_master_status",
    "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, "
    "1 indicates master. 'name' is the string used to identify the lease. Please make sure "
    "to group by name.",
    ["name"],
)

log = structlog.get_logger()


class LeadershipLost(Exception):
    """The leader could not renew within the renew deadline."""


def default_identity() -> str:
    """KCM's identity: hostname plus a random suffix, so two processes on one host differ."""
    return f"{socket.gethostname()}_{uuid.uuid4()}"


class LeaderElector:
    def __init__(
        self,
        client: KubeClient,
        *,
        namespace: str,
        name: str,
        identity: str | None = None,
        lease_duration: float = 15.0,
        renew_deadline: float = 10.0,
        retry_period: float = 2.0,
    ) -> None:
        self.client = client
        self.namespace = namespace
        self.name = name
        self.identity = identity or default_identity()
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self._lease: dict[str, Any] | None = None  # last Lease read or written, with its resourceVersion
        self._observed_spec: dict[str, Any] | None = None
        self._observed_time = 0.0
        self._read_version: str | None = None  # resourceVersion of the last Lease read
        self._changed = anyio.Event()  # the watch saw a new record: the acquire loop re-plans its wait
        self._wake_now = False  # the watch saw the lease deleted or released: try at once
        self._leader = False
        self.log = log.bind(lease=f"{namespace}/{name}", identity=self.identity)
        MASTER_STATUS.labels(name).set(0)

    # -- state --------------------------------------------------------------------------

    @property
    def is_leader(self) -> bool:
        return self._leader

    def _set_leader(self, value: bool) -> None:
        if value != self._leader:
            self.log.info("became leader" if value else "stopped leading")
        self._leader = value
        MASTER_STATUS.labels(self.name).set(1 if value else 0)

    def healthy(self) -> bool:
        """`/healthz/leaderElection`: a leader that has not renewed for lease + 20 s is wedged."""
        if not self._leader:
            return True
        return anyio.current_time() <= self._observed_time + self.lease_duration + HEALTHZ_TIMEOUT

    def holder(self) -> str:
        spec = self._observed_spec or {}
        return str(spec.get("holderIdentity") or "")

    # -- one round ----------------------------------------------------------------------

    def _record(self, now: str) -> dict[str, Any]:
        return {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": round(self.lease_duration),
            "acquireTime": now,
            "renewTime": now,
        }

    async def try_acquire_or_renew(self) -> bool:
        """One attempt, as client-go's `tryAcquireOrRenew`; True when we hold the lease after it."""
        now = format_micro_time(utcnow())
        record = self._record(now)
        try:
            lease = await self.client.get(LEASES, self.name, namespace=self.namespace)
        except ApiError as exc:
            if not exc.not_found:
                self.log.warning("error retrieving lease", error=str(exc))
                return False
            return await self._create(record)
        except (aiohttp.ClientError, OSError) as exc:
            self.log.warning("error retrieving lease", error=str(exc))
            return False

        self._read_version = (lease.get("metadata") or {}).get("resourceVersion")
        old: dict[str, Any] = dict(lease.get("spec") or {})
        self._observe(old)
        holder = old.get("holderIdentity") or ""
        duration = float(old.get("leaseDurationSeconds") or self.lease_duration)
        if holder and holder != self.identity and self._observed_time + duration > anyio.current_time():
            self.log.debug("lease is held by another candidate and has not yet expired", holder=holder)
            return False
        transitions = int(old.get("leaseTransitions") or 0)
        if holder == self.identity:
            record["acquireTime"] = old.get("acquireTime") or now
            record["leaseTransitions"] = transitions
        else:
            record["leaseTransitions"] = transitions + 1
        return await self._update(lease, record)

    async def _create(self, record: dict[str, Any]) -> bool:
        body = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": self.name, "namespace": self.namespace},
            "spec": {**record, "leaseTransitions": 0},
        }
        return await self._write(
            lambda: self.client.create(LEASES, body, namespace=self.namespace),
            "error creating lease",
            lambda exc: exc.already_exists,
        )

    async def _update(self, lease: dict[str, Any], spec: dict[str, Any]) -> bool:
        body = {**lease, "spec": spec}
        return await self._write(
            lambda: self.client.replace(LEASES, body, namespace=self.namespace, name=self.name),
            "error updating lease",
            lambda exc: exc.conflict,
        )

    async def _write(
        self,
        write: Callable[[], Awaitable[dict[str, Any]]],
        failure: str,
        lost_race: Callable[[ApiError], bool],
    ) -> bool:
        """Another candidate writing the lease first is how an election is lost, not an error
        worth a warning; either way this candidate does not hold the lease."""
        try:
            written = await write()
        except ApiError as exc:
            if not lost_race(exc):
                self.log.warning(failure, error=str(exc))
            return False
        except (aiohttp.ClientError, OSError) as exc:
            self.log.warning(failure, error=str(exc))
            return False
        self._observe_written(written)
        return True

    def _observe(self, spec: dict[str, Any]) -> bool:
        """client-go's rule: the observed time moves only when the record changes."""
        if spec == self._observed_spec:
            return False
        self._observed_spec = spec
        self._observed_time = anyio.current_time()
        return True

    def _observe_written(self, lease: dict[str, Any]) -> None:
        self._lease = lease
        self._observed_spec = dict(lease.get("spec") or {})
        self._observed_time = anyio.current_time()

    # -- loops --------------------------------------------------------------------------

    async def acquire(self) -> None:
        """Retry every `retry_period` (jittered, as client-go) until this candidate leads.

        A retry never waits past the moment the holder's lease expires on our clock: with
        client-go's jitter alone a standby could sleep up to 2.2 retry periods after the
        expiry, so a dead leader was replaced up to ~4 s later than it had to be. Meanwhile
        the Lease is watched, so that expiry counts from the holder's last renewal as seen
        when it happened, not at the next poll.
        """
        self.log.info("attempting to acquire leader lease")
        self._wake_now = False
        async with anyio.create_task_group() as tg:
            watching = False
            while not await self.try_acquire_or_renew():
                if not watching:  # from the resourceVersion just read
                    tg.start_soon(self._watch_lease)
                    watching = True
                await self._wait_for_retry()
            tg.cancel_scope.cancel()
        self._set_leader(True)

    async def _wait_for_retry(self) -> None:
        """Sleep until the jittered poll, the observed expiry, or a deletion/release the watch saw."""
        poll_at = anyio.current_time() + self.retry_period * (1 + random.random() * JITTER_FACTOR)
        while not self._wake_now:
            deadline = poll_at
            expires_at = self._other_holder_expires_at()
            if expires_at is not None:
                deadline = min(deadline, expires_at + EXPIRY_MARGIN)
            remaining = deadline - anyio.current_time()
            if remaining <= 0:
                break
            self._changed = anyio.Event()
            with anyio.move_on_after(remaining):
                await self._changed.wait()
        self._wake_now = False

    async def _watch_lease(self) -> None:
        """Observe the Lease's changes as they happen; never fails the election.

        A watch error or a closed stream only costs timeliness (the polls go on), so it is
        opened again after a backoff (reset by each event, bounded) from the last
        resourceVersion seen.
        """
        backoff = self.retry_period
        version = self._read_version
        while True:
            try:
                async with self.client.watch(
                    LEASES,
                    resource_version=version,
                    namespace=self.namespace,
                    field_selector=f"metadata.name={self.name}",
                    timeout_seconds=int(300 * (1 + random.random())),  # as client-go's reflector
                ) as events:
                    async for event in events:
                        meta = event.object.get("metadata") or {}
                        if event.type == "ERROR":
                            if event.object.get("code") == 410:
                                version = None  # too old: start again from the current record
                            break
                        version = meta.get("resourceVersion") or version
                        backoff = self.retry_period
                        if event.type in ("ADDED", "MODIFIED"):
                            self._on_watched(dict(event.object.get("spec") or {}), deleted=False)
                        elif event.type == "DELETED":
                            self._on_watched({}, deleted=True)
            except ApiError as exc:  # e.g. Forbidden: a Role without `watch` on leases
                self.log.warning("cannot watch lease; polling meanwhile", error=str(exc))
                version = self._read_version
            except (aiohttp.ClientError, OSError, ValueError) as exc:
                self.log.debug("lease watch dropped; polling meanwhile", error=str(exc))
                version = self._read_version
            await anyio.sleep(backoff)
            backoff = min(backoff * 2, max(WATCH_BACKOFF_MAX, self.retry_period))

    def _on_watched(self, spec: dict[str, Any], *, deleted: bool) -> None:
        if deleted:
            self._wake_now = True
        elif self._observe(spec):
            holder = spec.get("holderIdentity") or ""
            self._wake_now = not holder or holder == self.identity  # released: free to take now
        else:
            return
        self._changed.set()

    def _other_holder_expires_at(self) -> float | None:
        """When another holder's lease expires, as observed on our monotonic clock."""
        spec = self._observed_spec or {}
        holder = spec.get("holderIdentity") or ""
        if not holder or holder == self.identity:
            return None
        duration = float(spec.get("leaseDurationSeconds") or self.lease_duration)
        return self._observed_time + duration

    async def renew_until_lost(self) -> None:
        """Renew every `retry_period`; return once a renewal has failed for `renew_deadline`."""
        while True:
            renewed = False
            with anyio.move_on_after(self.renew_deadline):
                while True:
                    renewed = await self.try_acquire_or_renew()
                    if renewed:
                        break
                    await anyio.sleep(self.retry_period)
            if not renewed:
                self._set_leader(False)
                self.log.error("failed to renew lease", renew_deadline=self.renew_deadline)
                return
            await anyio.sleep(self.retry_period)

    async def release(self) -> bool:
        """Give the lease up (client-go's `release`): empty holder, 1 s duration. Idempotent."""
        if not self._leader or self._lease is None:
            return True
        now = format_micro_time(utcnow())
        old = self._observed_spec or {}
        spec = {
            "holderIdentity": None,
            "leaseDurationSeconds": 1,
            "acquireTime": now,
            "renewTime": now,
            "leaseTransitions": int(old.get("leaseTransitions") or 0),
        }
        ok = await self._update(self._lease, spec)
        self._set_leader(False)
        if ok:
            self.log.info("released leader lease")
        return ok

    async def run(self, lead: Callable[[], Awaitable[None]]) -> None:
        """Acquire, then run `lead()` while renewing.

        `lead()` returning means a clean stop: renewing stops and the lease is released.
        Failing to renew cancels `lead()` and raises `LeadershipLost`.
        """
        await self.acquire()
        lost = False
        try:
            async with anyio.create_task_group() as tg:

                async def renewer() -> None:
                    nonlocal lost
                    await self.renew_until_lost()
                    lost = True
                    tg.cancel_scope.cancel()

                tg.start_soon(renewer)
                await lead()
                tg.cancel_scope.cancel()
        finally:
            if not lost:
                with anyio.CancelScope(shield=True), anyio.move_on_after(self.renew_deadline):
                    await self.release()
        if lost:
            raise LeadershipLost(f"leader election lost for lease {self.namespace}/{self.name}")
