"""`aiokcm drain|cordon|uncordon NODE...` (and `kubectl maintenance ...`): declarative maintenance.

Each node gets its own NodeMaintenance named `maintenance-<node>` (label
`app.kubernetes.io/managed-by=aiokcm-cli`), so nodes can be released one by one and a repeated
command updates instead of piling up objects. Every named node is checked before anything is
created: a typo changes nothing. The command then follows the object's status and shows a
per-node table (redrawn in place on a terminal, one line per change otherwise):

- `drain` sets `cordon: true, drain: true` (plus `kubectl drain`'s flags: `--force`,
  `--delete-emptydir-data`, `--pod-selector`, `--grace-period`, as spec fields) and exits 0 once
  `Drained=True` for the current spec. It stops with exit 1 when the maintenance is deleted by
  someone else, when a node is deleted before it drained, or on `--timeout`: then it lists what
  blocks (the budget, the lease holder, when the eviction fallback fires) and says the maintenance
  is still active and how to cancel it (`--cancel-on-timeout` cancels it there and then);
- `drain --dry-run` prints what would happen to each pod (surge, evict, wait, skip, block, and why)
  and changes nothing;
- `cordon` sets `cordon: true` and waits until the node is unschedulable;
- `uncordon` deletes our maintenance and waits for its finalizer (the controller uncordons and
  withdraws the evacuation requests), then tells whether the node is still cordoned and by whom.

`cordon` and `uncordon` warn when another active NodeMaintenance selects the node, as the KEP asks of
kubectl. When the NodeMaintenance API is not installed the commands do what `kubectl drain` does,
refusing what it refuses: cordon through `spec.unschedulable`, then evict every pod its filters let
through (DaemonSet pods need `--ignore-daemonsets`, pods with emptyDir data
`--delete-emptydir-data`, pods without a controller `--force`), retrying an eviction a
PodDisruptionBudget refuses (429) every 5 seconds.

Exit codes: 0 done, 1 timed out or failed (one line on stderr), 2 bad usage.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TextIO

import anyio
from anyio import TASK_STATUS_IGNORED
from anyio.abc import TaskStatus

from apiclient import ApiError, KubeClient, WatchEvent
from apiclient.resources import NODEMAINTENANCES, NODES, PODS, Resource
from controller_manager import drain_preview
from controller_manager.clientcli import CliError, run_with_client
from controller_manager.options import OneLineParser, UsageError
from controller_manager.options import parse_duration as go_duration
from controllers.nodemaintenance import api
from controllers.nodemaintenance.drain import (
    BLOCK_AWAITING_OWNER,
    BLOCK_ONE_AT_A_TIME,
    BLOCK_TERMINATING,
    EVICTION_RETRY_SECONDS,
    DrainOptions,
    evict,
    kubectl_filter,
)
from controllers.nodemaintenance.nodeselector import names_selector
from kubeutil.nodeaffinity import selector_matches
from kubeutil.selectors import SelectorError
from kubeutil.selectors import parse as parse_selector

MANAGED_BY = {"app.kubernetes.io/managed-by": "aiokcm-cli"}


def parse_duration(text: str) -> float:
    """`90`, `90s`, `5m`, `1h30m` -> seconds, as the manager's flags parse them; never negative.

    0 means no limit, as kubectl's `--timeout=0`.
    """
    seconds = go_duration(text)
    if seconds < 0:
        raise argparse.ArgumentTypeError(f"invalid duration {text!r}: must not be negative")
    return seconds


def pod_selector(text: str) -> str:
    """`--pod-selector`: checked here so that a typo is a usage error, not a drain of nothing."""
    try:
        parse_selector(text)
    except SelectorError as exc:
        raise argparse.ArgumentTypeError(f"invalid pod selector {text!r}: {exc}") from exc
    return text


def maintenance_name(node: str) -> str:
    return f"maintenance-{node}"[:253]


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="aiokcm", description="Declarative node maintenance (KEP-4212).")
    parser.add_argument("command", choices=("drain", "cordon", "uncordon"))
    parser.add_argument("nodes", nargs="+", metavar="NODE")
    parser.add_argument("--kubeconfig", default=None, help="path to the kubeconfig file")
    parser.add_argument("--context", default=None, help="the kubeconfig context to use")
    parser.add_argument("--server", "--master", dest="server", default=None, help="the API server URL")
    parser.add_argument("--reason", default="", help="why; shown on each pod's EvacuationRequest")
    parser.add_argument(
        "--timeout",
        type=parse_duration,
        default=0.0,
        help="give up after this long (drain: exit 1 listing the blocking pods); 0 = wait forever",
    )
    parser.add_argument(
        "--evacuation-timeout",
        type=parse_duration,
        default=api.DEFAULT_EVACUATION_TIMEOUT_SECONDS,
        help="how long owners get to answer before pods are evicted (default 3m)",
    )
    parser.add_argument(
        "--cancel-on-timeout",
        action="store_true",
        help="drain: on --timeout, delete the maintenance (uncordon, withdraw the requests)",
    )
    parser.add_argument(
        "--dry-run",
        nargs="?",
        const="client",
        default="none",
        choices=("none", "client"),
        help="drain: print what would happen to each pod, change nothing",
    )
    # kubectl drain's flags: the opt-ins for pods whose eviction loses something.
    parser.add_argument(
        "--force",
        action="store_true",
        help="also evict pods that declare no controller (nobody recreates them)",
    )
    parser.add_argument(
        "--delete-emptydir-data",
        "--delete-local-data",
        dest="delete_emptydir_data",
        action="store_true",
        help="also evict pods with emptyDir volumes (their data is lost)",
    )
    parser.add_argument(
        "--ignore-daemonsets",
        action="store_true",
        help="leave DaemonSet pods (the NodeMaintenance drain always does)",
    )
    parser.add_argument(
        "--pod-selector",
        type=pod_selector,
        default="",
        help="only drain the pods this label selector matches",
    )
    parser.add_argument(
        "--grace-period",
        type=int,
        default=-1,
        help="termination grace period for evicted pods; negative: each pod's own",
    )
    parser.add_argument(
        "--eviction-api",
        choices=("PodCondition", "EvictionRequest"),
        default="PodCondition",
        help="how pods are asked to leave: the EvacuationRequest pod condition, or one "
        "EvictionRequest per pod for its eviction responders (needs the controller manager's "
        "EvictionRequestAPI gate)",
    )
    parser.add_argument("--poll-interval", type=float, default=1.0, help=argparse.SUPPRESS)
    return parser


def drain_spec(args: argparse.Namespace) -> dict[str, Any]:
    """The spec `drain` writes; flags not given are reset, so a re-run never inherits an opt-in."""
    return {
        "cordon": True,
        "drain": True,
        "reason": args.reason or "aiokcm drain",
        "evacuationTimeoutSeconds": int(args.evacuation_timeout),
        "force": bool(args.force),
        "deleteEmptyDirData": bool(args.delete_emptydir_data),
        "podSelector": args.pod_selector or None,
        "gracePeriodSeconds": args.grace_period if args.grace_period >= 0 else None,
        "evictionAPI": args.eviction_api,
    }


def drain_options(args: argparse.Namespace) -> DrainOptions:
    return DrainOptions(
        force=bool(args.force),
        delete_emptydir_data=bool(args.delete_emptydir_data),
        pod_selector=parse_selector(args.pod_selector) if args.pod_selector else None,
        grace_period_seconds=args.grace_period if args.grace_period >= 0 else None,
    )


# -- progress display -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    node: str
    phase: str
    pending: int
    evacuating: int
    blocking: str

    def cells(self) -> tuple[str, ...]:
        return (self.node, self.phase, str(self.pending), str(self.evacuating), self.blocking)


HEADER = ("NODE", "PHASE", "PENDING", "EVACUATING", "BLOCKING")
# How much of the first blocker's message a progress row shows (the timeout report shows it all).
SUMMARY_MESSAGE_CHARS = 120


class ProgressTable:
    """A per-node table: redrawn in place on a terminal, changed rows printed otherwise."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.tty = out.isatty()
        self._drawn = 0
        self._last: dict[str, Row] = {}

    def show(self, rows: Sequence[Row]) -> None:
        if self.tty:
            self._redraw(rows)
            return
        for row in rows:
            if self._last.get(row.node) != row:
                self._last[row.node] = row
                blocking = f" blocking: {row.blocking}" if row.blocking else ""
                print(
                    f"{row.node}: {row.phase}, {row.pending} pending, {row.evacuating} evacuating{blocking}",
                    file=self.out,
                    flush=True,
                )

    def _redraw(self, rows: Sequence[Row]) -> None:
        table = [HEADER, *(r.cells() for r in rows)]
        widths = [max(len(line[i]) for line in table) for i in range(len(HEADER))]
        text = "\n".join(
            "  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip() for line in table
        )
        if self._drawn:
            self.out.write(f"\x1b[{self._drawn}A\x1b[J")
        self.out.write(text + "\n")
        self.out.flush()
        self._drawn = len(table)


def _summarise_blocking(entries: Sequence[Mapping[str, Any]], note: str = "") -> str:
    if not entries:
        return note
    first = entries[0]
    more = f" (+{len(entries) - 1})" if len(entries) > 1 else ""
    message = str(first.get("message") or "")
    if len(message) > SUMMARY_MESSAGE_CHARS:
        message = message[: SUMMARY_MESSAGE_CHARS - 3] + "..."
    why = f" ({message})" if message else ""
    return f"{first.get('namespace')}/{first.get('name')}: {first.get('reason')}{why}{more}"


def _may_have_departures(before: Row | None, now: Row) -> bool:
    """Whether pods may have left since `before`: fewer pending, or another phase (one LIST each,
    not one per change of the evacuating count or of a blocker's message)."""
    return before is None or now.pending < before.pending or now.phase != before.phase


def node_status(nm: Mapping[str, Any] | None, node: str) -> Mapping[str, Any]:
    return ((nm or {}).get("status") or {}).get("nodes", {}).get(node) or {}


def row_for(node: str, nm: Mapping[str, Any] | None) -> Row:
    status = node_status(nm, node)
    return Row(
        node,
        str(status.get("phase") or "Pending"),
        int(status.get("podsPendingEvacuation") or 0),
        int(status.get("podsEvacuating") or 0),
        _summarise_blocking(status.get("blockingPods") or [], str(status.get("message") or "")),
    )


def blocker_lines(node: str, nm: Mapping[str, Any] | None) -> list[str]:
    """Every blocker of `node` with its reason and message: the budget, the lease holder, the deadline."""
    status = node_status(nm, node)
    lines = [f"  {node}  {status['message']}"] if status.get("message") else []
    for b in status.get("blockingPods") or []:
        msg = f": {b['message']}" if b.get("message") else ""
        lines.append(f"  {node}  {b.get('namespace')}/{b.get('name')}  {b.get('reason')}{msg}")
    return lines


def _condition(obj: Mapping[str, Any] | None, type_: str) -> Mapping[str, Any] | None:
    for cond in ((obj or {}).get("status") or {}).get("conditions") or []:
        if cond.get("type") == type_:
            return dict(cond)
    return None


def is_current(obj: Mapping[str, Any] | None) -> bool:
    """The status was computed for the spec we wrote (not a leftover from an earlier spec)."""
    generation = int(((obj or {}).get("metadata") or {}).get("generation") or 0)
    observed = int(((obj or {}).get("status") or {}).get("observedGeneration") or 0)
    return observed >= generation


def is_current_and_true(obj: Mapping[str, Any] | None, type_: str) -> bool:
    """`type_` is True for the spec we wrote."""
    cond = _condition(obj, type_)
    return cond is not None and cond.get("status") == "True" and is_current(obj)


# -- the commands -------------------------------------------------------------------------------------


class _Followed:
    """The maintenances a command follows, as the watch last saw them, and an event set on each change."""

    def __init__(self, names: Mapping[str, str]) -> None:
        self.names = names  # maintenance name -> node
        self.objs: dict[str, dict[str, Any] | None] = dict.fromkeys(names.values())
        self.changed = anyio.Event()

    def replace(self, items: Sequence[dict[str, Any]]) -> None:
        self.objs = dict.fromkeys(self.names.values())
        for obj in items:
            self.update(obj, deleted=False, notify=False)
        self.changed.set()

    def update(self, obj: dict[str, Any], *, deleted: bool, notify: bool = True) -> None:
        node = self.names.get(str((obj.get("metadata") or {}).get("name", "")))
        if node is None:
            return
        self.objs[node] = None if deleted else obj
        if notify:
            self.changed.set()


class Maintenance:
    """The commands, over one client; `out` for progress, `err` for warnings."""

    def __init__(self, client: KubeClient, args: argparse.Namespace, *, out: TextIO, err: TextIO) -> None:
        self.client = client
        self.args = args
        self.out = out
        self.err = err
        self._last_seen: dict[str, Mapping[str, Any]] = {}  # pods expected to leave, as last listed
        self._blockers: dict[str, tuple[str, str]] = {}  # pod -> the blocking reason last printed
        self._departed: set[str] = set()
        self._fates: dict[str, str] = {}  # pod -> the verb its preview printed
        self._gone: set[str] = set()  # pods expected to leave that a pod watch saw deleted
        self._pods_watched: set[str] = set()  # nodes whose pod watch is open

    def warn(self, message: str) -> None:
        print(f"warning: {message}", file=self.err, flush=True)

    async def api_installed(self) -> bool:
        try:
            await self.client.list(NODEMAINTENANCES, limit=1)
        except ApiError as exc:
            if exc.not_found:
                return False
            raise
        return True

    async def node(self, name: str) -> dict[str, Any]:
        try:
            return await self.client.get(NODES, name)
        except ApiError as exc:
            if exc.not_found:
                raise CliError(f'node "{name}" not found') from exc
            raise

    async def others_on(self, node: Mapping[str, Any]) -> list[Mapping[str, Any]]:
        """Active maintenances other than ours that select `node`."""
        ours = maintenance_name(str(node["metadata"]["name"]))
        items = (await self.client.list(NODEMAINTENANCES)).get("items") or []
        return [
            o
            for o in items
            if o["metadata"]["name"] != ours
            and not o["metadata"].get("deletionTimestamp")
            and selector_matches((o.get("spec") or {}).get("nodeSelector"), node)
        ]

    async def apply(self, node: str, spec: dict[str, Any]) -> dict[str, Any]:
        """Create our maintenance for `node`, or patch its spec if it is there already."""
        name = maintenance_name(node)
        body = {
            "apiVersion": NODEMAINTENANCES.api_version,
            "kind": NODEMAINTENANCES.kind,
            "metadata": {"name": name, "labels": dict(MANAGED_BY)},
            "spec": {
                "nodeSelector": names_selector([node]),
                **{k: v for k, v in spec.items() if v is not None},
            },
        }
        try:
            return await self.client.create(NODEMAINTENANCES, body)
        except ApiError as exc:
            if not exc.already_exists:
                raise
        return await self.client.patch(NODEMAINTENANCES, name, {"spec": spec})

    async def apply_all(self, nodes: Sequence[str], spec: dict[str, Any]) -> None:
        """Every node's maintenance at once, not one after the other: as `kubectl drain` cordons
        every node it is given before it evicts, so the replacements of the first node's pods do
        not land on a node of the same command whose maintenance is not there yet (and move twice)."""
        errors: list[Exception] = []

        async def one(node: str) -> None:
            try:
                await self.apply(node, spec)
            except Exception as exc:  # the first is raised as the command's one error line
                errors.append(exc)

        async with anyio.create_task_group() as tg:
            for n in nodes:
                tg.start_soon(one, n)
        if errors:
            raise errors[0]

    async def get_nm(self, node: str) -> dict[str, Any] | None:
        return await self.client.get_or_none(NODEMAINTENANCES, maintenance_name(node))

    def _warn_collisions(self, node: str, others: Sequence[Mapping[str, Any]], *, verb: str) -> None:
        for o in others:
            spec = o.get("spec") or {}
            modes = [k for k in ("cordon", "drain") if spec.get(k)] or ["planning"]
            self.warn(
                f"node {node} is also under NodeMaintenance {o['metadata']['name']} ({', '.join(modes)}); "
                f"{verb}"
            )

    async def follow(
        self, nodes: Sequence[str], *, until: str, leaving: dict[str, set[str]] | None = None
    ) -> int:
        """Watch our maintenances, draw the table, return 0 once `until` holds for all, 1 otherwise.

        Stops early, with the reason, when a maintenance disappears or is being deleted (someone
        else cancelled it), when a node was deleted before it drained, or when the selector
        matches no node. A watch rather than polling: each change is seen as it happens, and a
        long drain costs a few requests instead of one per node per second.
        """
        followed = _Followed({maintenance_name(n): n for n in nodes})
        async with anyio.create_task_group() as tg:
            await tg.start(self._watch_maintenances, followed)
            for node, keys in (leaving or {}).items():
                if keys:
                    tg.start_soon(self._watch_pods, node, keys, followed)
            code = await self._follow(nodes, followed, until=until, leaving=leaving)
            tg.cancel_scope.cancel()
        return code

    async def _follow(
        self, nodes: Sequence[str], followed: _Followed, *, until: str, leaving: dict[str, set[str]] | None
    ) -> int:
        table = ProgressTable(self.out)
        deadline = anyio.current_time() + self.args.timeout if self.args.timeout > 0 else None
        last: dict[str, Row] = {}
        while True:
            changed = followed.changed = anyio.Event()
            objs = dict(followed.objs)
            rows = [row_for(n, objs[n]) for n in nodes]
            table.show(rows)
            for row in rows:
                if leaving is not None and leaving.get(row.node):
                    self.report_watched_departures(row.node, leaving[row.node])
                if leaving is not None and last.get(row.node) != row:
                    if (
                        leaving.get(row.node)
                        and row.node not in self._pods_watched
                        and _may_have_departures(last.get(row.node), row)
                    ):
                        await self.report_departures(row.node, leaving[row.node])
                    self.report_blockers(row.node, objs[row.node])
                last[row.node] = row
            if all(is_current_and_true(objs[n], until) for n in nodes):
                return 0
            problem = self._stopped(nodes, objs)
            if problem is not None:
                print(f"error: {problem}", file=self.err, flush=True)
                return 1
            if deadline is not None and anyio.current_time() >= deadline:
                await self.timed_out(nodes, objs, until=until)
                return 1
            with anyio.move_on_after(
                max(0.0, deadline - anyio.current_time()) if deadline is not None else None
            ):
                await changed.wait()

    async def _watch_from(
        self,
        res: Resource,
        listed: Mapping[str, Any],
        on_event: Callable[[WatchEvent], None],
        *,
        field_selector: str | None = None,
    ) -> None:
        """Hand `on_event` every change after the LIST `listed`, reopening the watch each time the
        server ends it, until an ERROR event raises the status it carries (410 Gone: list again)
        or the connection drops; the callers' LIST loops decide what then."""
        rv = str((listed.get("metadata") or {}).get("resourceVersion") or "")
        while True:
            async with self.client.watch(
                res, resource_version=rv, field_selector=field_selector, timeout_seconds=300
            ) as events:
                async for event in events:
                    if event.type == "ERROR":
                        raise ApiError(
                            int(event.object.get("code") or 500), event.object, method="WATCH", path=""
                        )
                    rv = str((event.object.get("metadata") or {}).get("resourceVersion") or rv)
                    if event.type != "BOOKMARK":
                        on_event(event)

    async def _watch_maintenances(
        self, followed: _Followed, *, task_status: TaskStatus[None] = TASK_STATUS_IGNORED
    ) -> None:
        """Keep `followed.objs` current: a LIST, then a WATCH from its resourceVersion, relisting
        when the watch expires and retrying after a dropped connection (`--poll-interval` apart)."""
        started = False
        while True:
            try:
                listed = await self.client.list(NODEMAINTENANCES)
                followed.replace(listed.get("items") or [])
                if not started:
                    started = True
                    task_status.started()

                def on_maintenance(event: WatchEvent) -> None:
                    followed.update(event.object, deleted=event.type == "DELETED")

                await self._watch_from(NODEMAINTENANCES, listed, on_maintenance)
            except ApiError as exc:
                if not (exc.gone or exc.status >= 500 or exc.status == 429):
                    raise
            except (OSError, TimeoutError):
                pass  # a dropped connection: list again
            await anyio.sleep(self.args.poll_interval)

    async def _watch_pods(self, node: str, expected: set[str], followed: _Followed) -> None:
        """Keep the last state of each pod of `expected` on `node`, and note each one deleted.

        How a pod left (its owner's answer, the eviction's DisruptionTarget) is in its last state,
        which a pod evicted and gone between two LISTs would never show; the watch's DELETED event
        carries it. While the watch is down, departures fall back to a LIST per status change.
        """
        selector = f"spec.nodeName={node}"
        while True:
            try:
                listed = await self.client.list(PODS, field_selector=selector)
                present = set()
                for pod in listed.get("items") or []:
                    key = _key(pod)
                    present.add(key)
                    if key in expected:
                        self._last_seen[key] = pod
                for key in expected - present - self._gone:  # gone while the watch was down
                    self._gone.add(key)
                    followed.changed.set()
                self._pods_watched.add(node)

                def on_pod(event: WatchEvent) -> None:
                    key = _key(event.object)
                    if key not in expected:
                        return
                    self._last_seen[key] = event.object
                    if event.type == "DELETED":
                        self._gone.add(key)
                        followed.changed.set()

                await self._watch_from(PODS, listed, on_pod, field_selector=selector)
            except ApiError as exc:
                if not (exc.gone or exc.status >= 500 or exc.status == 429):
                    # Not allowed to watch pods (RBAC), or a server without it: the LIST per
                    # status change reports departures instead.
                    self._pods_watched.discard(node)
                    return
            except (OSError, TimeoutError):
                pass  # a dropped connection: list again
            self._pods_watched.discard(node)
            await anyio.sleep(self.args.poll_interval)

    def report_watched_departures(self, node: str, expected: set[str]) -> None:
        """Print how each pod of `expected` the pod watch saw deleted left `node`."""
        for key in sorted(expected & self._gone):
            print(
                f"  {node}  {key}  {how_it_left(self._last_seen.get(key) or {}, self._fates.get(key))}",
                file=self.out,
                flush=True,
            )
            self._last_seen.pop(key, None)
            self._departed.add(key)
            expected.discard(key)

    async def report_departures(self, node: str, expected: set[str]) -> None:
        """Print how each pod of `expected` left `node` (one LIST, only when its row changed)."""
        pods = await self.client.list_all(PODS, field_selector=f"spec.nodeName={node}")
        listed = {_key(p): p for p in pods}
        present = {k for k, p in listed.items() if not (p.get("metadata") or {}).get("deletionTimestamp")}
        for key in sorted(expected - present):
            last = listed.get(key) or self._last_seen.get(key) or {}
            print(f"  {node}  {key}  {how_it_left(last, self._fates.get(key))}", file=self.out, flush=True)
            self._last_seen.pop(key, None)
            self._departed.add(key)
        expected &= present
        self._last_seen.update((k, listed[k]) for k in expected)

    def report_blockers(self, node: str, nm: Mapping[str, Any] | None) -> None:
        """Each pod that blocks the drain, once per new reason: which budget, which opt-in it needs."""
        if not is_current(nm):
            return  # a status written for the spec before ours
        for b in node_status(nm, node).get("blockingPods") or []:
            key = f"{b.get('namespace')}/{b.get('name')}"
            if b.get("reason") in MOVING or key in self._departed:
                continue
            said = (str(b.get("reason")), str(b.get("message") or ""))
            if self._blockers.get(key) == said:
                continue
            self._blockers[key] = said
            why = f": {said[1]}" if said[1] else ""
            print(f"  {node}  {key}  blocked: {said[0]}{why}", file=self.out, flush=True)

    def _stopped(self, nodes: Sequence[str], objs: Mapping[str, Mapping[str, Any] | None]) -> str | None:
        for n in nodes:
            obj = objs[n]
            name = maintenance_name(n)
            if obj is None or (obj.get("metadata") or {}).get("deletionTimestamp"):
                return (
                    f"nodemaintenance/{name} was deleted by someone else: the maintenance of node {n} "
                    "is cancelled (the controller uncordons it and withdraws the evacuation requests)"
                )
            if node_status(obj, n).get("phase") == api.PHASE_NODE_NOT_FOUND:
                return f"node {n} was deleted before it drained; its pods were not evacuated"
            cond = _condition(obj, "NodesSelected")
            if cond is not None and cond.get("status") == "False" and is_current(obj):
                return f"nodemaintenance/{name} selects no node: {cond.get('message', '')}"
        return None

    async def timed_out(
        self, nodes: Sequence[str], objs: Mapping[str, Mapping[str, Any] | None], *, until: str
    ) -> None:
        """Say what blocks, that the maintenance goes on, and how to stop it (or stop it)."""
        lines = [line for n in nodes for line in blocker_lines(n, objs.get(n))]
        print(f"error: timed out after {self.args.timeout:g}s waiting for {until}", file=self.err)
        if lines:
            print("blocking:", file=self.err)
            print("\n".join(lines), file=self.err)
        names = " ".join(maintenance_name(n) for n in nodes)
        if self.args.cancel_on_timeout:
            for n in nodes:
                await self.delete_nm(n)
            print(
                f"cancelled: deleted nodemaintenance {names}; the controller uncordons "
                f"{', '.join(nodes)} and withdraws the evacuation requests",
                file=self.err,
                flush=True,
            )
            return
        goes_on = " and the drain goes on (pods may still be evicted later)" if until == "Drained" else ""
        print(
            f"nodemaintenance {names} is still active: {', '.join(nodes)} stay cordoned{goes_on}.\n"
            f"To cancel it: aiokcm uncordon {' '.join(nodes)}  (or: kubectl delete nodemaintenance {names}); "
            "or run with --cancel-on-timeout.",
            file=self.err,
            flush=True,
        )

    async def delete_nm(self, node: str) -> None:
        try:
            await self.client.delete(NODEMAINTENANCES, maintenance_name(node))
        except ApiError as exc:
            if not exc.not_found:
                raise

    async def check_nodes(self, nodes: Sequence[str]) -> dict[str, dict[str, Any]]:
        """Every named node, or an error naming the missing ones before anything is changed."""
        found: dict[str, dict[str, Any]] = {}
        missing: list[str] = []
        for n in nodes:
            try:
                found[n] = await self.client.get(NODES, n)
            except ApiError as exc:
                if not exc.not_found:
                    raise
                missing.append(n)
        if missing:
            listed = ", ".join(f'"{n}"' for n in missing)
            raise CliError(f"nodes {listed} not found; nothing was changed")
        return found

    # drain / cordon / uncordon with the NodeMaintenance API -------------------------------------

    async def _preview(
        self, nodes: Sequence[str], *, dry_run: bool = True, fates: dict[str, str] | None = None
    ) -> dict[str, set[str]]:
        """Each pod's expected fate under this command's drain options, as `--dry-run` prints it."""
        return await drain_preview.print_preview(
            self.client,
            nodes,
            options=drain_options(self.args),
            timeout=self.args.evacuation_timeout,
            out=self.out,
            pod_selector=self.args.pod_selector or None,
            dry_run=dry_run,
            fates=fates,
        )

    async def drain(self, nodes: Sequence[str]) -> int:
        found = await self.check_nodes(nodes)
        if self.args.dry_run != "none":
            await self._preview(nodes)
            return 0
        for n in nodes:
            others = await self.others_on(found[n])
            if others:
                self._warn_collisions(n, others, verb="draining it too")
        # Each pod's expected fate first, then each departure as it happens.
        leaving = await self._preview(nodes, dry_run=False, fates=self._fates)
        await self.apply_all(nodes, drain_spec(self.args))
        for n in nodes:
            print(f"nodemaintenance/{maintenance_name(n)} draining node {n}", file=self.out, flush=True)
        code = await self.follow(nodes, until="Drained", leaving=leaving)
        if code == 0:
            print(f"drained: {', '.join(nodes)}", file=self.out, flush=True)
        return code

    async def cordon(self, nodes: Sequence[str]) -> int:
        found = await self.check_nodes(nodes)
        for n in nodes:
            others = await self.others_on(found[n])
            if others:
                self._warn_collisions(n, others, verb="it stays cordoned until every maintenance lets go")
        spec: dict[str, Any] = {"cordon": True}
        if self.args.reason:
            spec["reason"] = self.args.reason
        await self.apply_all(nodes, spec)
        code = await self.follow(nodes, until="Cordoned")
        if code == 0:
            for n in nodes:
                print(f"node/{n} cordoned", file=self.out, flush=True)
        return code

    async def uncordon(self, nodes: Sequence[str]) -> int:
        deadline = anyio.current_time() + self.args.timeout if self.args.timeout > 0 else None
        await self.check_nodes(nodes)
        for n in nodes:
            if await self.get_nm(n) is not None:
                await self.delete_nm(n)
        for n in nodes:
            while await self.get_nm(n) is not None:
                if deadline is not None and anyio.current_time() >= deadline:
                    raise CliError(
                        f"timed out waiting for NodeMaintenance {maintenance_name(n)} to be released"
                    )
                await anyio.sleep(self.args.poll_interval)
            node = await self.node(n)
            others = [o for o in await self.others_on(node) if (o.get("spec") or {}).get("cordon")]
            if others:
                self._warn_collisions(n, others, verb="the node stays cordoned")
                continue
            if (node.get("spec") or {}).get("unschedulable"):
                # Cordoned outside any maintenance (by hand or before one): uncordon as kubectl does.
                await self.client.patch(NODES, n, {"spec": {"unschedulable": None}})
            print(f"node/{n} uncordoned", file=self.out, flush=True)
        return 0

    # without the NodeMaintenance API: what `kubectl drain` does ---------------------------------

    async def legacy(self, nodes: Sequence[str]) -> int:
        command = self.args.command
        await self.check_nodes(nodes)
        if command == "drain" and self.args.dry_run != "none":
            await drain_preview.print_kubectl_preview(
                self.client,
                nodes,
                force=self.args.force,
                delete_emptydir_data=self.args.delete_emptydir_data,
                ignore_daemonsets=self.args.ignore_daemonsets,
                out=self.out,
                pod_selector=self.args.pod_selector or None,
            )
            return 0
        self.warn(
            "the NodeMaintenance API is not installed; falling back to cordon and eviction as kubectl does"
        )
        for n in nodes:
            unschedulable: bool | None = None if command == "uncordon" else True
            await self.client.patch(NODES, n, {"spec": {"unschedulable": unschedulable}})
            print(
                f"node/{n} {'uncordoned' if command == 'uncordon' else 'cordoned'}", file=self.out, flush=True
            )
        if command != "drain":
            return 0
        selected: dict[str, list[dict[str, Any]]] = {}
        refused: list[str] = []
        for n in nodes:
            selected[n], errors = await self.kubectl_filters(n)
            if errors:
                print(
                    f'error: unable to drain node "{n}" due to error: {"; ".join(errors)}, continuing command...',
                    file=self.err,
                    flush=True,
                )
                refused.append(n)
        if refused:
            print(
                "There are pending nodes to be drained:\n" + "\n".join(f" {n}" for n in refused),
                file=self.err,
                flush=True,
            )
            return 1
        return await self.evict_all(nodes, selected)

    async def kubectl_filters(self, node: str) -> tuple[list[dict[str, Any]], list[str]]:
        """kubectl's `GetPodsForDeletion`: the pods to evict, and its errors (then nothing is evicted)."""
        owners = drain_preview.Owners(self.client)
        pods = await drain_preview.node_pods(self.client, node, self.args.pod_selector or None)
        delete: list[dict[str, Any]] = []
        errors: dict[str, list[str]] = {}
        warnings: dict[str, list[str]] = {}
        for pod in pods:
            verdict = kubectl_filter(
                pod,
                force=self.args.force,
                delete_emptydir_data=self.args.delete_emptydir_data,
                ignore_daemonsets=self.args.ignore_daemonsets,
                daemonset_error=await drain_preview.daemonset_error(owners, pod),
            )
            if verdict.kind == "Error":
                errors.setdefault(verdict.message, []).append(_key(pod))
            elif verdict.kind == "Warning":
                warnings.setdefault(verdict.message, []).append(_key(pod))
            if verdict.delete:
                delete.append(pod)
        if warnings and not errors:
            self.warn("; ".join(f"{msg}: {', '.join(keys)}" for msg, keys in warnings.items()))
        return delete, [f"{msg}: {', '.join(keys)}" for msg, keys in errors.items()]

    async def evict_all(
        self, nodes: Sequence[str], selected: Mapping[str, Sequence[Mapping[str, Any]]]
    ) -> int:
        """Evict what the filters let through, until it is gone; 429s are retried every 5 s."""
        table = ProgressTable(self.out)
        deadline = anyio.current_time() + self.args.timeout if self.args.timeout > 0 else None
        refused: dict[str, tuple[str, str]] = {}
        next_try: dict[str, float] = {}
        grace = self.args.grace_period if self.args.grace_period >= 0 else None
        uids = {_key(p): (p.get("metadata") or {}).get("uid") for pods in selected.values() for p in pods}
        while True:
            rows: list[Row] = []
            remaining: dict[str, list[dict[str, Any]]] = {}
            for n in nodes:
                pods = await self.client.list_all(PODS, field_selector=f"spec.nodeName={n}")
                remaining[n] = [
                    p
                    for p in pods
                    if uids.get(_key(p)) == (p.get("metadata") or {}).get("uid") and _key(p) in uids
                ]
                for pod in remaining[n]:
                    key = _key(pod)
                    if (
                        pod["metadata"].get("deletionTimestamp")
                        or next_try.get(key, 0.0) > anyio.current_time()
                    ):
                        continue
                    print(f"evicting pod {key}", file=self.out, flush=True)
                    outcome = await evict(self.client, pod, grace_period_seconds=grace)
                    if outcome.blocked_reason is None:
                        refused.pop(key, None)
                        next_try[key] = anyio.current_time() + EVICTION_RETRY_SECONDS
                    else:
                        print(
                            f"error when evicting pods/{pod['metadata']['name']} -n {pod['metadata']['namespace']} "
                            f"(will retry after {outcome.retry_after:g}s): {outcome.message}",
                            file=self.err,
                            flush=True,
                        )
                        refused[key] = (outcome.blocked_reason, outcome.message)
                        next_try[key] = anyio.current_time() + outcome.retry_after
                blocking = [k for k in refused if any(_key(p) == k for p in remaining[n])]
                summary = f"{blocking[0]}: {refused[blocking[0]][0]}" if blocking else ""
                rows.append(
                    Row(n, "Drained" if not remaining[n] else "Draining", len(remaining[n]), 0, summary)
                )
            table.show(rows)
            if not any(remaining.values()):
                print(f"drained: {', '.join(nodes)}", file=self.out, flush=True)
                return 0
            if deadline is not None and anyio.current_time() >= deadline:
                print(
                    f"error: timed out after {self.args.timeout:g}s waiting for the pods to leave",
                    file=self.err,
                )
                print("blocking pods:", file=self.err)
                for n, pods in remaining.items():
                    for pod in pods:
                        reason, message = refused.get(_key(pod), ("Terminating", "waiting for the pod to go"))
                        print(f"  {n}  {_key(pod)}  {reason}: {message}", file=self.err)
                print(
                    f"{', '.join(nodes)} stay cordoned (uncordon with: aiokcm uncordon {' '.join(nodes)})",
                    file=self.err,
                    flush=True,
                )
                return 1
            await anyio.sleep(self.args.poll_interval)


# Listed in blockingPods but on their way out by themselves: not worth a line of their own.
MOVING = frozenset({BLOCK_AWAITING_OWNER, BLOCK_TERMINATING, BLOCK_ONE_AT_A_TIME})


def _true(pod: Mapping[str, Any], type_: str) -> Mapping[str, Any] | None:
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if cond.get("type") == type_ and cond.get("status") == "True":
            return dict(cond)
    return None


def how_it_left(pod: Mapping[str, Any], expected: str | None = None) -> str:
    """A departed pod's outcome from its last known state: surged by its owner, or evicted.

    A pod evicted and gone between two looks leaves no trace in the last state seen; if the drain
    meant to evict it (`expected`, the verb its preview printed), the drain's eviction is what moved it.
    """
    if _true(pod, api.EVACUATION_INITIATED):
        return "surged: its owner answered the EvacuationRequest and removed it once a replacement was ready"
    target = _true(pod, "DisruptionTarget")
    if target is not None and target.get("reason") == "EvictionByEvictionAPI":
        return "evicted: through the eviction API, under its PodDisruptionBudget"
    request = _true(pod, api.EVACUATION_REQUEST)
    if request is not None and request.get("reason") == api.REASON_NODE_MAINTENANCE:
        return "evicted: nobody moved it, so the drain evicted it under its PodDisruptionBudget"
    if expected == "evict":
        return "evicted: its owner cannot answer, so the drain evicted it under its PodDisruptionBudget"
    return "left the node"


def _key(pod: Mapping[str, Any]) -> str:
    return f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"


async def run(args: argparse.Namespace, client: KubeClient, *, out: TextIO, err: TextIO) -> int:
    """The command on an existing client (what tests and the bench call)."""
    cmd = Maintenance(client, args, out=out, err=err)
    nodes: list[str] = list(dict.fromkeys(args.nodes))
    try:
        if args.dry_run != "none" and args.command != "drain":
            await cmd.check_nodes(nodes)
            for n in nodes:
                print(f"node/{n} would be {args.command}ed (dry run)", file=out, flush=True)
            return 0
        if not await cmd.api_installed():
            return await cmd.legacy(nodes)
        if args.command == "drain":
            return await cmd.drain(nodes)
        if args.command == "cordon":
            return await cmd.cordon(nodes)
        return await cmd.uncordon(nodes)
    except CliError as exc:
        print(f"error: {exc}", file=err, flush=True)
        return 1


async def main(argv: list[str]) -> int:
    """Entry point: `argv` starts with the subcommand (`drain`, `cordon` or `uncordon`)."""
    try:
        args = build_parser().parse_args(argv)
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except SystemExit as exc:  # --help
        return int(exc.code or 0) if isinstance(exc.code, int) else 2

    async def work(client: KubeClient) -> int:
        return await run(args, client, out=sys.stdout, err=sys.stderr)

    return await run_with_client(work, kubeconfig=args.kubeconfig, context=args.context, server=args.server)
