"""The node reconcile (sharded by node name): one node against every maintenance that selects it.

The desired state of a node is a function of *all* active maintenances that select it, so
overlapping maintenances compose instead of fighting: the node is cordoned while any of them
cordons, its pods carry our EvacuationRequest while any of them drains, and it is uncordoned only
when none is left (and only if it was schedulable before). Order inside one sync: cordon first
(the KEP's prerequisite for drain), then the pods (requests and withdrawals side by side, then the
eviction fallback one pod at a time), and last the node annotation listing the maintenances applied; that annotation is the commit record a
deleted maintenance waits for before its finalizer goes. A sync that has just cordoned its node
while other nodes wait on its shard stops there: the node's own update event brings it back behind
them, so nodes started together are all cordoned before any of their pods is asked (across
shards too: maintenances created within `STARTING_TOGETHER_SECONDS` of each other are one drain,
as `kubectl drain a b` is one command, so a node's pods wait for the cordons they start); and while
others wait, a sync asks one round of pods (`PER_POD_WRITES_IN_FLIGHT`) and comes back behind
them, so a node whose maintenance starts later is cordoned within a round, not after this node's
whole drain has been asked.

Each pod's plan is `drain.plan_pod` with the options of the maintenances whose pod selector picks it
(combined so that data is lost only if all of them allow it) and its owner's answer (`workload.py`).
Pods nobody answers for are evicted one per owner at a time: a sibling still terminating holds the
next one back, so a StatefulSet loses one replica at a time even without a budget. Every write is
logged at info with maintenance, node and pod; an eviction refusal is an event once per new refusal
and a log line on every attempt.

The node sync acts only for maintenances started on its node (cordon only while the node waits
for its turn to drain); which those are is the maintenance sync's decision (`maintenancesync`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

import anyio
import structlog

from apiclient import ApiError, KubeClient
from apiclient.resources import NODES
from controllers.base import RequeueAfter
from controllers.common.evacuation import EVACUATION_REQUEST
from controllers.common.pods import is_pod_terminal, pod_key
from controllers.context import EventRecorder
from controllers.nodemaintenance import api, cordon, drain, evictionrequests, metrics
from controllers.nodemaintenance.state import DrainState, Listers, holds_cordon, utcnow
from controllers.nodemaintenance.status import (
    BlockingPod,
    NodeProgress,
    node_phase,
    node_progress,
)
from controllers.nodemaintenance.workload import Workload
from evictionapi import names as eviction_names
from evictionapi.served import EvictionAPI
from informers import CONTROLLER_UID_INDEX
from kubeutil.conditions import condition_index
from kubeutil.nodeaffinity import selector_matches
from kubeutil.timestamps import parse_time
from maintenancerollout.planner import COMPLETE_ANNOTATION
from nodemaintenancelease.gate import LeaseGate

log = structlog.get_logger()

Obj = Mapping[str, Any]
LEASE_RETRY_SECONDS = 5.0
# Evacuation requests (and withdrawals) the node syncs write at once, all shards together; the
# client's token bucket still paces them (burst 30, then qps 20 by default). 8 keep the bucket
# busy up to 0.4 s a request; more in flight buys no throughput, only a longer line in the bucket
# ahead of the next node's cordon and lease and the maintenances' own writes.
PER_POD_WRITES_IN_FLIGHT = 8
_PER_POD_WRITES = frozenset({drain.Action.REQUEST, drain.Action.WITHDRAW})
# A node that wrote one round while others waited on its shard is back this soon (behind them;
# its pods' own update events usually bring it back first).
NEXT_ROUND_SECONDS = 0.01
# Maintenances created this close together are one drain, as `kubectl drain a b c` is one command
# that cordons every node before it evicts: a node's pods are asked only once the others' cordons
# are in (or this long after they were created, whatever holds them up). Rechecked this often.
STARTING_TOGETHER_SECONDS = 5.0
STARTING_TOGETHER_RECHECK_SECONDS = 0.1


@dataclass(kw_only=True, eq=False)
class NodeSync:
    """Every write to a node or its pods, so one node is only ever worked on by its shard's worker.

    `enqueue_maintenance` looks at a maintenance's status at once; `batch_maintenance` a little
    later, so the many pod changes of a node that is still draining make one status write.
    """

    client: KubeClient
    listers: Listers
    state: DrainState
    gate: LeaseGate
    recorder: EventRecorder
    enqueue_maintenance: Callable[[str], None]
    batch_maintenance: Callable[[str], None]
    clock: Callable[[], datetime] = utcnow
    # Where EvictionRequests are served; None while the EvictionRequestAPI gate is off.
    eviction_api: EvictionAPI | None = None
    # Whether other nodes wait on this node's shard: a node just cordoned lets them be cordoned
    # before its pods are asked (its own update event brings it back), as `kubectl drain`
    # cordons every node it is given before it evicts, so replacements do not land on a node
    # about to drain.
    others_waiting: Callable[[str], bool] = lambda _node: False
    _pod_writes: anyio.CapacityLimiter | None = field(default=None, init=False)

    async def sync(self, node_name: str) -> None:
        cached = self.listers.nodes.get(node_name)
        if cached is None:
            self.state.forget_node(node_name)
            for m in self.listers.all_maintenances():
                self.enqueue_maintenance(m.name)
            return
        node: Obj = self._current(node_name, cached)
        applied = api.applied_maintenances(node)
        selecting = api.oldest_first(
            [
                w
                for m in self.listers.all_maintenances()
                if m.active and selector_matches(m.selector, node)
                if (w := self._as_started(m, node_name, node)) is not None
            ]
        )
        granted, waiting = await self._leases(node_name, selecting)
        wanted_names = sorted(m.name for m in selecting)
        now = self.clock()
        pending: int | None = None
        try:
            cordoned = await self._cordon_first(node, granted, applied, selecting, now)
            if cordoned is not node and self.others_waiting(node_name):
                log.debug("pods next, after the nodes waiting on the shard", node=node_name)
                pending = 1  # the statuses follow in a batch: nothing has left yet
                return
            node = cordoned
            if self._cordons_to_come(node_name, now):
                log.debug("pods next, after the cordons of maintenances started together", node=node_name)
                pending = 1
                raise RequeueAfter(STARTING_TOGETHER_RECHECK_SECONDS)
            released = ",".join(sorted(set(applied) - {m.name for m in granted if m.drain}))
            retry = await self._pods(node_name, granted, now, released=released)
            pending = await self._commit(node, granted, selecting, wanted_names, waiting, now)
        finally:
            # While pods are still leaving, the statuses follow in batches (each pod's departure
            # is several pod changes); the change that drains the node is reported at once.
            enqueue = self.batch_maintenance if pending else self.enqueue_maintenance
            for name in {*applied, *wanted_names}:
                enqueue(name)
        for name in applied:
            if name not in wanted_names:
                await self.gate.release(node=node_name, holder=f"aiokcm/nodemaintenance/{name}")
        if waiting:
            retry = LEASE_RETRY_SECONDS if retry is None else min(retry, LEASE_RETRY_SECONDS)
        if retry is not None:
            raise RequeueAfter(retry)

    def _as_started(self, m: api.Maintenance, node: str, cached: Obj) -> api.Maintenance | None:
        """`m` as far as it has started on `node`: not at all (None), cordon only, or all of it.

        Before its maintenance sync has run (a restart) a cordon `m` holds on the node counts as
        started even if the status written before the restart does not show it yet: never undone.
        """
        if not m.paced:
            return m
        working = self.state.working_on(m, self.listers.maintenances.get(m.name))
        if node not in working.cordoning and not (not self.state.knows(m) and holds_cordon(m, cached)):
            return None
        if m.drain and node not in working.draining:
            return replace(m, drain=False)
        return m

    async def _leases(
        self, node: str, selecting: list[api.Maintenance]
    ) -> tuple[list[api.Maintenance], set[str]]:
        granted: list[api.Maintenance] = []
        waiting: dict[str, str] = {}
        for m in selecting:
            if not (m.cordon or m.drain):
                granted.append(m)
                continue
            decision = await self.gate.acquire(node=node, holder=m.holder)
            if decision.granted:
                granted.append(m)
            else:
                holder = decision.holder or "someone else"
                waiting[m.name] = holder
                if self.state.waiting_for_lease(node, m.name) != holder:
                    log.info(
                        "waiting for the node's maintenance lease",
                        maintenance=m.name,
                        node=node,
                        holder=holder,
                    )
                    target = self.listers.maintenances.get(m.name)
                    if target is not None:
                        self.recorder.event(
                            target,
                            "Warning",
                            "WaitingForLease",
                            f"node {node}: maintenance lease held by {holder}",
                        )
        if waiting:
            self.state.lease_waiting[node] = waiting
        else:
            self.state.lease_waiting.pop(node, None)
        return granted, set(waiting)

    def _current(self, node_name: str, cached: Obj) -> Obj:
        """The cached node, or our last patch's answer while the cache still holds the version
        that patch was planned on (the node's update event brings the sync back first)."""
        written = self.state.written_nodes.get(node_name)
        if written is None:
            return cached
        planned_on, answer = written
        if _rv(cached) == planned_on:
            return answer
        del self.state.written_nodes[node_name]  # the cache has caught up, or moved on
        return cached

    async def _patch_node(
        self, node: Obj, spec: dict[str, Any], notes: dict[str, Any]
    ) -> dict[str, Any] | None:
        """One merge patch of the node's spec fields and annotations; None when there is nothing to write."""
        if not spec and not notes:
            return None
        patch: dict[str, Any] = {"metadata": {"annotations": notes}}
        if spec:
            patch["spec"] = spec
        name = str(node["metadata"]["name"])
        cached = self.listers.nodes.get(name)
        patched_over = _rv(cached if cached is not None else node)  # before the answer can reach the cache
        updated = await self.client.patch(NODES, name, patch)
        self.state.written_nodes[name] = (patched_over, updated)
        return updated

    async def _cordon_first(
        self,
        node: Obj,
        granted: list[api.Maintenance],
        applied: list[str],
        selecting: list[api.Maintenance],
        now: datetime,
    ) -> Obj:
        """Cordon (and record the new maintenances) before any pod is asked to leave.

        The cordon carries the phase the node enters with it, as the commit after the requests
        would write it: one node write where there were two, as `kubectl drain`'s one cordon."""
        want = any(m.cordon for m in granted)
        if not want:
            return node
        spec, notes = cordon.plan_cordon(node, want_cordon=True)
        union = sorted({*applied, *(m.name for m in granted)})
        if union != applied:
            notes[api.MAINTENANCES_ANNOTATION] = ",".join(union)
        if spec:
            cordoned = {**node, "spec": {**(node.get("spec") or {}), **spec}}
            phase = node_phase(self._progresses(cordoned, selecting, now))
            annotations = (node.get("metadata") or {}).get("annotations") or {}
            if phase is not None and annotations.get(api.PHASE_ANNOTATION) != phase:
                notes[api.PHASE_ANNOTATION] = phase
        updated = await self._patch_node(node, spec, notes)
        if updated is None:
            return node
        if spec:
            owners = ", ".join(m.name for m in granted if m.cordon)
            log.info("cordoned node", maintenance=owners, node=str(node["metadata"]["name"]))
            self.recorder.event(updated, "Normal", "Cordoned", f"cordoned by NodeMaintenance {owners}")
        return updated

    def _cordons_to_come(self, node_name: str, now: datetime) -> bool:
        """Whether a maintenance created moments ago is still to cordon another node: its first
        sync (which starts its nodes) has not run, or a node it started is not cordoned yet.

        Otherwise the replacements of this node's pods could land on that node and move twice.
        A maintenance the cluster's limit holds back, and one older than
        `STARTING_TOGETHER_SECONDS` (whatever keeps its cordon: a lease, a failing write), holds
        nobody up."""
        for m in self.listers.all_maintenances():
            if not m.cordon or m.deleting or m.name in self.state.held_by_cluster:
                continue
            created = parse_time(m.created)
            if created is None or abs((now - created).total_seconds()) > STARTING_TOGETHER_SECONDS:
                continue
            if not self.state.knows(m):
                return True
            for name in self.state.working_on(m, None).cordoning:
                cached = self.listers.nodes.get(name) if name != node_name else None
                if cached is not None and not cordon.is_unschedulable(self._current(name, cached)):
                    return True
        return False

    async def _pods(
        self, node: str, granted: list[api.Maintenance], now: datetime, *, released: str
    ) -> float | None:
        """Requests, withdrawals and evictions for every pod on the node; the soonest recheck."""
        drainers = [m for m in granted if m.drain and not m.invalid and not m.by_eviction_request]
        requesters = [m for m in granted if m.drain and not m.invalid and m.by_eviction_request]
        retry: float | None = None
        first_error: ApiError | None = None
        blocks: dict[str, BlockingPod] = {}
        evicting_owners: set[str] = set()
        steps: list[_Step] = []
        for pod in self.listers.node_pods(node):
            selecting = [m for m in drainers if m.options.selects(pod)]
            workload = self.listers.workload(pod)
            plan = drain.plan_pod(
                pod,
                draining=bool(selecting),
                timeout=drain.combine_timeouts([m.evacuation_timeout for m in selecting]),
                now=now,
                options=drain.combine([m.options for m in selecting]),
                workload=workload,
            )
            steps.append(_Step(pod, plan, workload, selecting, node, released))

        async def one(step: _Step) -> None:
            nonlocal retry, first_error
            try:
                wait = await self._act(step, now=now, blocks=blocks, evicting_owners=evicting_owners)
                if self.eviction_api is not None and self.listers.requests is not None:
                    asking = [m for m in requesters if m.options.selects(step.pod)]
                    await self._ask(step.pod, asking, node, released, self.eviction_api)
            except ApiError as exc:
                if exc.not_found:
                    return
                if first_error is None or (first_error.conflict and not exc.conflict):
                    first_error = exc  # an error outranks a lost race in what the worker counts
                return
            if wait is not None:
                retry = wait if retry is None else min(retry, wait)

        # A request or a withdrawal is one write to its own pod, planned from nothing another pod's
        # write changes: they go side by side (as `kubectl drain` evicts), so the last pod of a full
        # node is not asked a whole round of write latencies after the first (its owner's surge, and
        # the drain, start that much later). Evictions stay one by one, in order: one owner's pods
        # leave one at a time (`_sibling_leaving`), which needs the previous eviction's outcome.
        alone = self._not_written_yet(node, [s for s in steps if s.plan.action in _PER_POD_WRITES])
        if alone:
            if self._pod_writes is None:  # made on the loop that runs the syncs
                self._pod_writes = anyio.CapacityLimiter(PER_POD_WRITES_IN_FLIGHT)
            limiter = self._pod_writes
            failed: list[Exception] = []  # raised as itself, as the loop would, not as a group
            started = 0

            async def bounded(step: _Step) -> None:
                nonlocal started, retry
                async with limiter:
                    if started >= PER_POD_WRITES_IN_FLIGHT and self.others_waiting(node):
                        # A round written and other nodes wait on the shard (a new maintenance's
                        # cordon among them): they go first; the next sync plans the rest again.
                        retry = NEXT_ROUND_SECONDS
                        return
                    started += 1
                    try:
                        await one(step)
                    except Exception as exc:  # re-raised below, once the others are done
                        failed.append(exc)

            async with anyio.create_task_group() as tg:
                for step in alone:
                    tg.start_soon(bounded, step)
            if failed:
                raise failed[0]
        for step in steps:
            if step.plan.action not in _PER_POD_WRITES:
                await one(step)
        if blocks:
            self.state.blocks[node] = blocks
        else:
            self.state.blocks.pop(node, None)
        evicted = self.state.evicted.get(node)
        if evicted:  # forget what the cache now shows going or gone
            evicted &= {
                _uid(p)
                for p in self.listers.node_pods(node)
                if not (p.get("metadata") or {}).get("deletionTimestamp")
            }
            if not evicted:
                self.state.evicted.pop(node, None)
        if first_error is not None:
            raise first_error
        return retry

    def _not_written_yet(self, node: str, steps: list[_Step]) -> list[_Step]:
        """The steps whose pod the cache shows past our last write to it (or never written).

        A sync that wrote one round and came back may find some of those pods still at the
        version it planned on: planned again, each would be a request the server refuses as stale.
        """
        written = self.state.written_pods.get(node)
        if not written:
            return steps
        current = {_uid(p): _rv(p) for p in self.listers.node_pods(node)}
        for uid in [u for u, rv in written.items() if current.get(u) != rv]:
            del written[uid]  # the cache has caught up (or the pod is gone)
        if not written:
            self.state.written_pods.pop(node, None)
            return steps
        return [s for s in steps if written.get(_uid(s.pod)) != _rv(s.pod)]

    def _sibling_leaving(self, step: _Step, evicting_owners: set[str]) -> str | None:
        """Another pod of the same owner being evicted or terminating: evictions go one by one."""
        uid = step.workload.owner_uid
        if not uid or not step.workload.evict_promptly:
            return None
        if uid in evicting_owners:
            return "another of its pods"
        evicted = self.state.evicted.get(step.node, set())
        for other in self.listers.pods.by_index(CONTROLLER_UID_INDEX, uid):
            if pod_key(other) == step.key or is_pod_terminal(other):
                continue
            if (other.get("metadata") or {}).get("deletionTimestamp") or _uid(other) in evicted:
                return pod_key(other)
        return None

    async def _act(
        self,
        step: _Step,
        *,
        now: datetime,
        blocks: dict[str, BlockingPod],
        evicting_owners: set[str],
    ) -> float | None:
        action, plan, pod = step.plan.action, step.plan, step.pod
        ns, name = step.key.split("/", 1)
        fields = {"maintenance": step.maintenance, "node": step.node, "pod": step.key}
        if action is drain.Action.REQUEST:
            message = step.drainers[0].reason if step.drainers else ""
            await drain.request_evacuation(self.client, pod, message=message, now=now)
            self.state.written_pods.setdefault(step.node, {})[_uid(pod)] = _rv(pod)
            log.info("requested evacuation", **fields, owner=step.workload.describe())
            # Recheck at the deadline: a silent owner is then evicted.
            if plan.deadline is None:
                return None
            return max((plan.deadline - now).total_seconds(), 0.0) + 0.5
        if action is drain.Action.WITHDRAW:
            await drain.withdraw_evacuation(self.client, pod)
            if condition_index(pod.get("status"), EVACUATION_REQUEST) is not None:  # it wrote
                self.state.written_pods.setdefault(step.node, {})[_uid(pod)] = _rv(pod)
            log.info("withdrew evacuation request", **fields)
            return None
        if action is drain.Action.WAIT:
            if plan.deadline is None:
                return None
            return max((plan.deadline - now).total_seconds(), 0.0) + 0.5
        if action is drain.Action.BLOCK:
            block = BlockingPod(ns, name, plan.reason, plan.message)
            blocks[step.key] = block
            if self.state.blocks.get(step.node, {}).get(step.key) != block:
                log.info("eviction withheld", **fields, reason=plan.reason, message=plan.message)
            return None
        if action is not drain.Action.EVICT:
            return None
        if _uid(pod) in self.state.evicted.get(step.node, set()):
            return None  # evicted already; the cache has not caught up (its update re-enqueues the node)
        sibling = self._sibling_leaving(step, evicting_owners)
        if sibling is not None:
            blocks[step.key] = BlockingPod(
                ns,
                name,
                drain.BLOCK_ONE_AT_A_TIME,
                f"{step.workload.owner} is evicted one pod at a time; waiting for {sibling}",
            )
            return drain.EVICTION_RETRY_SECONDS
        options = drain.combine([m.options for m in step.drainers])
        outcome = await drain.evict(self.client, pod, grace_period_seconds=options.grace_period_seconds)
        if outcome.conflict:
            metrics.EVICTIONS.labels("conflict").inc()
            log.info("eviction conflicted, looking again", **fields, message=outcome.message)
            return outcome.retry_after
        metrics.EVICTIONS.labels(outcome.blocked_reason or "evicted").inc()
        failures = self.state.eviction_failures.setdefault(step.node, {})
        if outcome.blocked_reason == drain.BLOCK_EVICTION_FAILED:
            # A refusal that is not "not now" (a 500, e.g. a pod under two budgets) backs off per pod.
            failures[step.key] = failures.get(step.key, 0) + 1
            outcome = replace(outcome, retry_after=drain.failure_backoff(failures[step.key]))
        else:
            failures.pop(step.key, None)
        target = self.listers.maintenances.get(step.drainers[0].name) if step.drainers else None
        if outcome.blocked_reason is None:
            if step.workload.owner_uid:
                evicting_owners.add(step.workload.owner_uid)
            if _uid(pod):
                self.state.evicted.setdefault(step.node, set()).add(_uid(pod))
            log.info("evicted pod", **fields, why=plan.message)
            if target is not None:
                self.recorder.event(target, "Normal", "EvictedPod", f"evicted {step.key}: {plan.message}")
            return None
        log.info("eviction refused", **fields, reason=outcome.blocked_reason, message=outcome.message)
        block = BlockingPod(ns, name, outcome.blocked_reason, outcome.message)
        blocks[step.key] = block
        if target is not None and self.state.blocks.get(step.node, {}).get(step.key) != block:
            # One event per new refusal, not one per retry: the log has every attempt.
            self.recorder.event(target, "Warning", outcome.blocked_reason, f"{step.key}: {outcome.message}")
        return outcome.retry_after

    async def _ask(
        self, pod: Obj, drainers: list[api.Maintenance], node: str, released: str, eviction_api: EvictionAPI
    ) -> None:
        """The pod's EvictionRequest: ask, ask again, add an owner, or withdraw (evictionrequests.py)."""
        request = self.listers.request_of(pod)
        options = drain.combine([m.options for m in drainers])
        plan = evictionrequests.plan_request(pod, request, drainers=drainers, options=options)
        action = plan.action
        fields = {
            "maintenance": ",".join(m.name for m in drainers) or released,
            "node": node,
            "pod": pod_key(pod),
            "request": evictionrequests.name_for(pod),
        }
        RA = evictionrequests.RequestAction
        if action is RA.CREATE:
            await evictionrequests.create_request(self.client, eviction_api, pod, drainers)
            log.info("requested eviction", **fields)
        elif action in (RA.REQUEST, RA.ADOPT) and request is not None:
            owners = evictionrequests.wanted_owners(request, drainers)
            await evictionrequests.patch_request(
                self.client, eviction_api, request, intent=eviction_names.INTENT_EVICTION, owners=owners
            )
            log.info(
                "requested eviction again" if action is RA.REQUEST else "joined eviction request", **fields
            )
        elif action is RA.WITHDRAW and request is not None:
            await evictionrequests.patch_request(
                self.client, eviction_api, request, intent=eviction_names.INTENT_WITHDRAWN
            )
            log.info("withdrew eviction request", **fields)
        else:
            return
        metrics.EVICTION_REQUESTS.labels(action.value).inc()

    async def _commit(
        self,
        node: Obj,
        granted: list[api.Maintenance],
        selecting: list[api.Maintenance],
        wanted_names: list[str],
        waiting: set[str],
        now: datetime,
    ) -> int:
        """Uncordon if no one cordons any more, then record phase and the applied maintenances;
        returns how many pods are still to leave the node."""
        want_cordon = any(m.cordon for m in granted)
        spec, notes = cordon.plan_cordon(node, want_cordon=want_cordon)
        node_name = str(node["metadata"]["name"])
        progresses = self._progresses(node, selecting, now)
        phase = node_phase(progresses)
        annotations = (node.get("metadata") or {}).get("annotations") or {}
        applied_value = ",".join(wanted_names) or None
        if annotations.get(api.MAINTENANCES_ANNOTATION) != applied_value:
            notes[api.MAINTENANCES_ANNOTATION] = applied_value
        if annotations.get(api.PHASE_ANNOTATION) != phase:
            notes[api.PHASE_ANNOTATION] = phase
        done = annotations.get(COMPLETE_ANNOTATION)
        if done and done in api.applied_maintenances(node) and done not in wanted_names:
            notes[COMPLETE_ANNOTATION] = None  # said for a maintenance now released from the node
        pending = max((p.pending for p in progresses), default=0)
        blocked: dict[str, str] = {}
        for p in progresses:
            for b in p.blocking:
                blocked.setdefault(f"{b.namespace}/{b.name}", b.reason)
        self.state.gauges.set(node_name, phase=phase, pending=pending, blocked=blocked)
        updated = await self._patch_node(node, spec, notes)
        if updated is None:
            return pending
        if "unschedulable" in spec and spec["unschedulable"] is None:
            log.info("uncordoned node", node=node_name, maintenance=",".join(api.applied_maintenances(node)))
            self.recorder.event(
                updated, "Normal", "Uncordoned", "no NodeMaintenance cordons the node any more"
            )
        return pending

    def _progresses(self, node: Obj, selecting: list[api.Maintenance], now: datetime) -> list[NodeProgress]:
        """Each selecting maintenance's progress on the node, from the cache's pods."""
        node_name = str(node["metadata"]["name"])
        pods = self.listers.node_pods(node_name)
        return [
            evictionrequests.node_progress(
                m,
                node=node,
                pods=pods,
                request_of=self.listers.request_of,
                now=now,
                lease_holder=self.state.waiting_for_lease(node_name, m.name),
            )
            if m.by_eviction_request
            else node_progress(
                node=node,
                pods=pods,
                cordon=m.cordon,
                drain=m.drain,
                timeout=m.evacuation_timeout,
                now=now,
                lease_holder=self.state.waiting_for_lease(node_name, m.name),
                eviction_blocks=self.state.blocks.get(node_name),
                options=m.options,
                workload=self.listers.workload,
                invalid=m.invalid,
            )
            for m in selecting
        ]


@dataclass(frozen=True, slots=True)
class _Step:
    """One pod's plan in a node sync, with who asked for it."""

    pod: Obj
    plan: drain.PodPlan
    workload: Workload
    drainers: list[api.Maintenance]
    node: str
    released: str  # the maintenances that no longer drain the node (for withdrawals)

    @property
    def key(self) -> str:
        return pod_key(self.pod)

    @property
    def maintenance(self) -> str:
        return ",".join(m.name for m in self.drainers) or self.released


def _uid(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("uid") or "")


def _rv(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")
