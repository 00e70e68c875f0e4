"""Node maintenance leases for holders: the proposal's rules, acquire / renew / release, a context manager.

The Node Maintenance Lease proposal: one `coordination.k8s.io/v1` Lease per node, named after the node,
in namespace `kube-node-maintenance`, tells every disruptive actor who is disrupting that node now.
The lease is voluntary: this module is the "library with an easy to use interface" the proposal asks
for so that well-behaved clients agree on what "held" means.

The rules, as the proposal states them:

- **Expiry**: a lease is expired once `renewTime + leaseDurationSeconds + 3 s` has passed (3 s of
  allowed clock drift). A lease without a holder is free.
- **Administrators**: a holder starting with `kubeadm` always holds the lease, whatever the times
  say (an admin sets it with kubectl without computing timestamps). Clients never take that prefix:
  `acquire` and `renew` refuse it with `ReservedHolderError`.
- **At most 1 hour without renewal**: `leaseDurationSeconds` above 3600 is refused.
- **Acquire** sets every field (holder, duration, acquireTime, renewTime, transitions).
- **Release** gives the lease up if we still hold it. The proposal says "set leaseDurationSeconds to
  0", but the Lease API rejects 0 ("must be greater than 0"), so release removes the duration (read
  as 0) and the holder, and stamps `renewTime` with the release moment: the lease is then free at
  once and a monitor does not mistake a released lease for an abandoned one.
- **One per node, owned by it**: the maintenance-lease controller makes every node's lease ahead
  of need (free, at a pace, with `create_lease`) and makes a deleted one again; a node without a
  lease (the controller off, or not there yet) is free, and `acquire` creates the lease itself,
  with the same body plus its holder fields. Either way the lease is owned by the node, so it goes
  with the node.
- **Every write is guarded by resourceVersion**: a PUT of the object as read. A 409 means someone
  wrote in between; we read again and decide again, so of two holders racing for a free lease exactly
  one wins and the other sees the winner.

The clock is injectable everywhere (`clock=`) so that expiry is tested without waiting.
"""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import anyio
import structlog

from apiclient import ApiError, KubeClient
from apiclient.resources import LEASES, NAMESPACES, NODES
from kubeutil.timestamps import format_micro_time, parse_time, utcnow

log = structlog.get_logger()

Obj = dict[str, Any]
Clock = Callable[[], datetime]

NAMESPACE = "kube-node-maintenance"
CLOCK_SKEW = timedelta(seconds=3)
MAX_DURATION_SECONDS = 3600
ADMIN_PREFIX = "kubeadm"
DEFAULT_DURATION_SECONDS = 600
_WRITE_ATTEMPTS = 5


class LeaseError(Exception):
    """A lease operation that cannot be done; the message is meant for a person."""


class ReservedHolderError(LeaseError):
    """A client tried to use the `kubeadm` prefix, which only administrators may set."""


class InvalidDurationError(LeaseError):
    """A lease duration outside (0 s, 1 h]."""


class LeaseHeldError(LeaseError):
    """Someone else holds the lease (unexpired, or an administrator's)."""

    def __init__(self, state: LeaseState) -> None:
        super().__init__(f"node {state.node}: lease held by {state.holder!r}")
        self.state = state


class LeaseLostError(LeaseError):
    """We thought we held the lease but someone else has it now (or it is gone)."""


def is_admin_holder(holder: str | None) -> bool:
    return bool(holder) and str(holder).startswith(ADMIN_PREFIX)


def check_client_holder(holder: str) -> None:
    """Refuse identities clients may not take: empty, or the administrators' `kubeadm` prefix."""
    if not holder:
        raise LeaseError("a holder identity is required")
    if is_admin_holder(holder):
        raise ReservedHolderError(
            f"holder {holder!r}: identities starting with {ADMIN_PREFIX!r} are reserved for administrators "
            "(set holderIdentity with kubectl instead); choose another identity"
        )


def check_duration(seconds: int) -> None:
    if seconds <= 0:
        raise InvalidDurationError(f"lease duration {seconds}s: must be greater than 0")
    if seconds > MAX_DURATION_SECONDS:
        raise InvalidDurationError(
            f"lease duration {seconds}s: at most {MAX_DURATION_SECONDS}s (1h) without renewal; "
            "hold longer by renewing"
        )


def holder_prefix(holder: str) -> str:
    """A low-cardinality label for metrics: `kubeadm`, the path before the last `/`, or the holder."""
    if is_admin_holder(holder):
        return ADMIN_PREFIX
    return holder.rsplit("/", 1)[0] if "/" in holder else holder


@dataclass(frozen=True, slots=True)
class LeaseState:
    """What a Lease says, read once; every rule of the proposal is a method here."""

    node: str
    holder: str | None
    duration_seconds: int | None
    acquire_time: datetime | None
    renew_time: datetime | None
    transitions: int
    resource_version: str
    created: datetime | None = None

    @classmethod
    def from_obj(cls, obj: Mapping[str, Any]) -> LeaseState:
        meta = obj.get("metadata") or {}
        spec = obj.get("spec") or {}
        duration = spec.get("leaseDurationSeconds")
        return cls(
            node=str(meta.get("name", "")),
            holder=str(spec["holderIdentity"]) if spec.get("holderIdentity") else None,
            duration_seconds=int(duration) if isinstance(duration, int) else None,
            acquire_time=parse_time(spec.get("acquireTime")),
            renew_time=parse_time(spec.get("renewTime")),
            transitions=int(spec.get("leaseTransitions") or 0),
            resource_version=str(meta.get("resourceVersion", "")),
            created=parse_time(meta.get("creationTimestamp")),
        )

    @property
    def admin(self) -> bool:
        return is_admin_holder(self.holder)

    def expires_at(self) -> datetime | None:
        """When a client holder's claim ends: renewTime + duration + 3 s; None when it never does or is free."""
        if self.holder is None or self.admin:
            return None
        if self.renew_time is None:
            return datetime.min.replace(tzinfo=UTC)  # a holder that never renewed holds nothing
        return self.renew_time + timedelta(seconds=self.duration_seconds or 0) + CLOCK_SKEW

    def held(self, now: datetime) -> bool:
        """Somebody holds it now: an administrator, or a client whose claim has not expired."""
        if self.holder is None:
            return False
        if self.admin:
            return True
        expiry = self.expires_at()
        return expiry is not None and now < expiry

    def held_by_other(self, holder: str, now: datetime) -> bool:
        return self.held(now) and self.holder != holder

    def abandoned(self, now: datetime) -> bool:
        """Expired but never released: the holder went away. What monitoring alerts on."""
        return self.holder is not None and not self.admin and not self.held(now)


def _spec(obj: Obj) -> Obj:
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        spec = {}
        obj["spec"] = spec
    return spec


async def _read(client: KubeClient, node: str) -> Obj | None:
    return await client.get_or_none(LEASES, node, namespace=NAMESPACE)


def lease_body(node: Mapping[str, Any], spec: Mapping[str, Any] | None = None) -> Obj:
    """A fresh Lease for `node` (unheld unless `spec` says), owned by it so the garbage collector
    removes it with the node."""
    meta = node.get("metadata") or {}
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {
            "name": str(meta["name"]),
            "namespace": NAMESPACE,
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "Node", "name": str(meta["name"]), "uid": str(meta["uid"])}
            ],
        },
        "spec": dict(spec or {}),
    }


async def namespace_exists(client: KubeClient) -> bool:
    return await client.get_or_none(NAMESPACES, NAMESPACE) is not None


async def ensure_namespace(client: KubeClient) -> None:
    """Create `kube-node-maintenance` unless it exists (as kube-node-lease is created)."""
    try:
        await client.create(
            NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
        )
    except ApiError as exc:
        if not exc.already_exists:
            raise


async def create_lease(
    client: KubeClient, node: Mapping[str, Any], *, spec: Mapping[str, Any] | None = None
) -> Obj | None:
    """Create the node's lease (and the namespace if missing); None when it already exists.

    The one create of a lease: the maintenance-lease controller's (free, no `spec`) and a first
    holder's (`acquire`: its holder fields) make the same object but for those fields."""
    body = lease_body(node, spec)
    for _ in range(2):
        try:
            return await client.create(LEASES, body, namespace=NAMESPACE)
        except ApiError as exc:
            if exc.already_exists:
                return None
            if not exc.not_found:  # 404 on create: the namespace is missing
                raise
            await ensure_namespace(client)
    return await client.create(LEASES, body, namespace=NAMESPACE)


async def _create_held(client: KubeClient, node: str, spec: Obj) -> Obj | None:
    """Create the node's lease already held (`spec`): one write, as client-go's LeaseLock creates
    its record. None when someone created it first (read it again and decide)."""
    try:
        node_obj = await client.get(NODES, node)
    except ApiError as exc:
        if exc.not_found:
            raise LeaseError(f"node {node!r} not found") from exc
        raise
    return await create_lease(client, node_obj, spec=spec)


async def status(client: KubeClient, node: str) -> LeaseState | None:
    obj = await _read(client, node)
    return LeaseState.from_obj(obj) if obj is not None else None


async def acquire(
    client: KubeClient,
    node: str,
    *,
    holder: str,
    duration_seconds: int = DEFAULT_DURATION_SECONDS,
    clock: Clock = utcnow,
) -> LeaseState:
    """Take the node's lease for `holder` (or renew it if `holder` has it); raise `LeaseHeldError` if taken.

    The maintenance-lease controller makes every node's lease ahead; one still missing is free,
    and this creates it held (owned by the node, so it goes with the node) together with its
    namespace. Never waits for another holder: callers decide whether to poll.
    """
    check_client_holder(holder)
    check_duration(duration_seconds)
    for _ in range(_WRITE_ATTEMPTS):
        obj = await _read(client, node)
        now = clock()
        if obj is None:
            stamp = format_micro_time(now)
            created = await _create_held(
                client,
                node,
                {
                    "holderIdentity": holder,
                    "leaseDurationSeconds": duration_seconds,
                    "acquireTime": stamp,
                    "renewTime": stamp,
                    "leaseTransitions": 0,
                },
            )
            if created is None:
                continue  # another holder created it first: read it and see who holds it
            return LeaseState.from_obj(created)
        state = LeaseState.from_obj(obj)
        if state.held_by_other(holder, now):
            raise LeaseHeldError(state)
        body = copy.deepcopy(obj)
        spec = _spec(body)
        if state.holder != holder or state.acquire_time is None:
            spec["acquireTime"] = format_micro_time(now)
            if state.holder is not None and state.holder != holder:
                spec["leaseTransitions"] = state.transitions + 1
        spec.setdefault("leaseTransitions", state.transitions)
        spec["holderIdentity"] = holder
        spec["leaseDurationSeconds"] = duration_seconds
        spec["renewTime"] = format_micro_time(now)
        try:
            written = await client.replace(LEASES, body, namespace=NAMESPACE)
        except ApiError as exc:
            if exc.conflict or exc.not_found:
                continue  # someone wrote first: read again and see who holds it now
            raise
        return LeaseState.from_obj(written)
    raise LeaseError(f"node {node}: lease kept changing under us; try again")


async def renew(
    client: KubeClient,
    node: str,
    *,
    holder: str,
    duration_seconds: int | None = None,
    clock: Clock = utcnow,
) -> LeaseState:
    """Push our claim forward; `LeaseLostError` if `holder` does not have the lease any more.

    A claim that expired but that nobody took is still ours to renew, as client-go's leader
    election treats its own record.
    """
    check_client_holder(holder)
    if duration_seconds is not None:
        check_duration(duration_seconds)
    for _ in range(_WRITE_ATTEMPTS):
        obj = await _read(client, node)
        if obj is None:
            raise LeaseLostError(f"node {node}: the lease does not exist")
        state = LeaseState.from_obj(obj)
        if state.holder != holder:
            raise LeaseLostError(f"node {node}: lease held by {state.holder!r}, not {holder!r}")
        body = copy.deepcopy(obj)
        spec = _spec(body)
        spec["renewTime"] = format_micro_time(clock())
        spec["leaseDurationSeconds"] = duration_seconds or state.duration_seconds or DEFAULT_DURATION_SECONDS
        try:
            written = await client.replace(LEASES, body, namespace=NAMESPACE)
        except ApiError as exc:
            if exc.conflict:
                continue
            if exc.not_found:
                raise LeaseLostError(f"node {node}: the lease was deleted") from exc
            raise
        return LeaseState.from_obj(written)
    raise LeaseError(f"node {node}: lease kept changing under us; try again")


async def release(client: KubeClient, node: str, *, holder: str, clock: Clock = utcnow) -> bool:
    """Give the lease up if `holder` still has it; False (and nothing written) otherwise.

    Administrators may release their own `kubeadm...` claim this way too: releasing takes nothing.
    """
    if not holder:
        raise LeaseError("a holder identity is required")
    for _ in range(_WRITE_ATTEMPTS):
        obj = await _read(client, node)
        if obj is None:
            return False
        state = LeaseState.from_obj(obj)
        if state.holder != holder:
            return False
        body = copy.deepcopy(obj)
        spec = _spec(body)
        for key in ("holderIdentity", "leaseDurationSeconds", "acquireTime"):
            spec.pop(key, None)
        spec["renewTime"] = format_micro_time(clock())
        try:
            await client.replace(LEASES, body, namespace=NAMESPACE)
        except ApiError as exc:
            if exc.conflict:
                continue
            if exc.not_found:
                return False
            raise
        return True
    raise LeaseError(f"node {node}: lease kept changing under us; try again")


@dataclass
class HeldLease:
    """The handle `maintenance_lease` yields: the last state written and whether renewal failed."""

    node: str
    holder: str
    state: LeaseState
    lost: bool = False


@asynccontextmanager
async def maintenance_lease(
    client: KubeClient,
    node: str,
    *,
    holder: str,
    duration_seconds: int = DEFAULT_DURATION_SECONDS,
    renew_every: float | None = None,
    wait: bool = False,
    poll_interval: float = 2.0,
    clock: Clock = utcnow,
) -> AsyncIterator[HeldLease]:
    """Hold the node's lease for the body: acquire, renew in the background, release on the way out.

        async with maintenance_lease(client, "node-1", holder="reboot-agent/node-1", duration_seconds=300):
            await reboot()

    `wait=True` polls every `poll_interval` seconds while someone else holds it, otherwise
    `LeaseHeldError` is raised at once. Renewal runs every `renew_every` seconds (a third of the
    duration by default) in a task group owned here. If the lease is lost (taken after expiry,
    deleted), the body is cancelled and `LeaseLostError` raised: disruptive work must not go on
    unannounced.
    """
    while True:
        try:
            state = await acquire(client, node, holder=holder, duration_seconds=duration_seconds, clock=clock)
            break
        except LeaseHeldError:
            if not wait:
                raise
            await anyio.sleep(poll_interval)
    held = HeldLease(node=node, holder=holder, state=state)
    interval = renew_every if renew_every is not None else max(duration_seconds / 3.0, 0.1)

    async def keep_renewing(scope: anyio.CancelScope) -> None:
        while True:
            await anyio.sleep(interval)
            try:
                held.state = await renew(
                    client, node, holder=holder, duration_seconds=duration_seconds, clock=clock
                )
            except LeaseLostError as exc:
                log.warning("maintenance lease lost", node=node, holder=holder, error=str(exc))
                held.lost = True
                scope.cancel()
                return
            except (ApiError, OSError) as exc:
                expiry = held.state.expires_at()
                if expiry is not None and clock() >= expiry:
                    log.warning("maintenance lease expired while renewal failed", node=node, error=str(exc))
                    held.lost = True
                    scope.cancel()
                    return
                log.info("maintenance lease renewal failed, retrying", node=node, error=str(exc))

    body_error: Exception | None = None
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(keep_renewing, tg.cancel_scope)
            try:
                yield held
            except anyio.get_cancelled_exc_class():
                raise
            except Exception as exc:  # re-raised below as itself, not wrapped in an ExceptionGroup
                body_error = exc
            tg.cancel_scope.cancel()
    finally:
        if not held.lost:
            with anyio.CancelScope(shield=True):
                try:
                    await release(client, node, holder=holder, clock=clock)
                except (ApiError, OSError, LeaseError) as exc:
                    log.warning("maintenance lease release failed", node=node, holder=holder, error=str(exc))
    if body_error is not None:
        raise body_error
    if held.lost:
        raise LeaseLostError(f"node {node}: lease lost by {holder!r} while held")
