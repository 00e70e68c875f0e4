"""`aiokcm drain|cordon|uncordon NODE...` (and `kubectl maintenance ...`): declarative maintenance.

Each node gets its own NodeMaintenance named `maintenance-<node>` (label
`app.kubernetes.io/managed-by=aiokcm-cli`), so nodes can be released one by one and a repeated
command updates instead of piling up objects. The command then follows the object's status and
shows a per-node table (redrawn in place on a terminal, one line per change otherwise):

- `drain` sets `cordon: true, drain: true` and exits 0 once `Drained=True` for the current spec; on
  `--timeout` it exits 1 listing the pods that block and why (PDB refusals, silent owners);
- `cordon` sets `cordon: true` and waits until the node is unschedulable;
- `uncordon` deletes our maintenance and waits for its finalizer (the controller uncordons and
  withdraws the evacuation requests), then tells whether the node is still cordoned and by whom.

`cordon` and `uncordon` warn when another active NodeMaintenance selects the node, as the KEP asks of
kubectl. When the NodeMaintenance API is not installed the commands do what `kubectl drain` does:
cordon through `spec.unschedulable` and evict every pod but DaemonSet and mirror pods, retrying an
eviction a PodDisruptionBudget refuses (429) every 5 seconds.

Exit codes: 0 done, 1 timed out or failed (one line on stderr), 2 bad usage.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TextIO

import anyio

from apiclient import ApiError, KubeClient
from apiclient.resources import NODEMAINTENANCES, NODES, PODS
from controller_manager.clientcli import CliError, run_with_client
from controller_manager.options import OneLineParser, UsageError
from controller_manager.options import parse_duration as go_duration
from controllers.nodemaintenance import api
from controllers.nodemaintenance.drain import EVICTION_RETRY_SECONDS, evict, is_targeted
from controllers.nodemaintenance.nodeselector import names_selector, selector_matches

MANAGED_BY = {"app.kubernetes.io/managed-by": "aiokcm-cli"}
def parse_duration(text: str) -> float:
    """`90`, `90s`, `5m`, `1h30m` -> seconds, as the manager's flags parse them; never negative.

    0 means no limit, as kubectl's `--timeout=0`.
    """
    seconds = go_duration(text)
    if seconds < 0:
        raise argparse.ArgumentTypeError(f"invalid duration {text!r}: must not be negative")
    return seconds


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
    parser.add_argument("--timeout", type=parse_duration, default=0.0,
                        help="give up after this long (drain: exit 1 listing the blocking pods); 0 = wait forever")
    parser.add_argument("--evacuation-timeout", type=parse_duration, default=api.DEFAULT_EVACUATION_TIMEOUT_SECONDS,
                        help="how long owners get to answer before pods are evicted (default 3m)")
    parser.add_argument("--poll-interval", type=float, default=1.0, help=argparse.SUPPRESS)
    return parser


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
                print(f"{row.node}: {row.phase}, {row.pending} pending, {row.evacuating} evacuating{blocking}",
                      file=self.out, flush=True)

    def _redraw(self, rows: Sequence[Row]) -> None:
        table = [HEADER, *(r.cells() for r in rows)]
        widths = [max(len(line[i]) for line in table) for i in range(len(HEADER))]
        text = "\n".join("  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip() for line in table)
        if self._drawn:
            self.out.write(f"\x1b[{self._drawn}A\x1b[J")
        self.out.write(text + "\n")
        self.out.flush()
        self._drawn = len(table)


def _summarise_blocking(entries: Sequence[Mapping[str, Any]]) -> str:
    if not entries:
        return ""
    first = entries[0]
    more = f" (+{len(entries) - 1})" if len(entries) > 1 else ""
    return f"{first.get('namespace')}/{first.get('name')}: {first.get('reason')}{more}"


def row_for(node: str, nm: Mapping[str, Any] | None) -> Row:
    status = ((nm or {}).get("status") or {}).get("nodes", {}).get(node) or {}
    return Row(
        node,
        str(status.get("phase") or "Pending"),
        int(status.get("podsPendingEvacuation") or 0),
        int(status.get("podsEvacuating") or 0),
        _summarise_blocking(status.get("blockingPods") or []),
    )


def _condition(obj: Mapping[str, Any] | None, type_: str) -> Mapping[str, Any] | None:
    for cond in ((obj or {}).get("status") or {}).get("conditions") or []:
        if cond.get("type") == type_:
            return dict(cond)
    return None


def is_current_and_true(obj: Mapping[str, Any] | None, type_: str) -> bool:
    """`type_` is True for the spec we wrote (not a leftover from an earlier spec)."""
    cond = _condition(obj, type_)
    if cond is None or cond.get("status") != "True":
        return False
    generation = int(((obj or {}).get("metadata") or {}).get("generation") or 0)
    observed = int(((obj or {}).get("status") or {}).get("observedGeneration") or 0)
    return observed >= generation


# -- the commands -------------------------------------------------------------------------------------


class Maintenance:
    """The commands, over one client; `out` for progress, `err` for warnings."""

    def __init__(self, client: KubeClient, args: argparse.Namespace, *, out: TextIO, err: TextIO) -> None:
        self.client = client
        self.args = args
        self.out = out
        self.err = err

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
            o for o in items
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
            "spec": {"nodeSelector": names_selector([node]), **spec},
        }
        try:
            return await self.client.create(NODEMAINTENANCES, body)
        except ApiError as exc:
            if not exc.already_exists:
                raise
        return await self.client.patch(NODEMAINTENANCES, name, {"spec": spec})

    async def get_nm(self, node: str) -> dict[str, Any] | None:
        try:
            return await self.client.get(NODEMAINTENANCES, maintenance_name(node))
        except ApiError as exc:
            if exc.not_found:
                return None
            raise

    def _warn_collisions(self, node: str, others: Sequence[Mapping[str, Any]], *, verb: str) -> None:
        for o in others:
            spec = o.get("spec") or {}
            modes = [k for k in ("cordon", "drain") if spec.get(k)] or ["planning"]
            self.warn(f"node {node} is also under NodeMaintenance {o['metadata']['name']} ({', '.join(modes)}); "
                      f"{verb}")

    async def follow(self, nodes: Sequence[str], *, until: str) -> int:
        """Poll our maintenances, draw the table, return 0 once `until` holds for all, 1 on timeout."""
        table = ProgressTable(self.out)
        deadline = anyio.current_time() + self.args.timeout if self.args.timeout > 0 else None
        while True:
            objs = {n: await self.get_nm(n) for n in nodes}
            table.show([row_for(n, objs[n]) for n in nodes])
            if all(is_current_and_true(objs[n], until) for n in nodes):
                return 0
            if deadline is not None and anyio.current_time() >= deadline:
                self.report_blocking(nodes, objs, until=until)
                return 1
            await anyio.sleep(self.args.poll_interval)

    def report_blocking(self, nodes: Sequence[str], objs: Mapping[str, Mapping[str, Any] | None], *, until: str) -> None:
        lines = []
        for n in nodes:
            status = ((objs.get(n) or {}).get("status") or {}).get("nodes", {}).get(n) or {}
            for b in status.get("blockingPods") or []:
                msg = f": {b['message']}" if b.get("message") else ""
                lines.append(f"  {n}  {b.get('namespace')}/{b.get('name')}  {b.get('reason')}{msg}")
        print(f"error: timed out after {self.args.timeout:g}s waiting for {until}", file=self.err)
        if lines:
            print("blocking pods:", file=self.err)
            print("\n".join(lines), file=self.err, flush=True)

    # drain / cordon / uncordon with the NodeMaintenance API -------------------------------------

    async def drain(self, nodes: Sequence[str]) -> int:
        for n in nodes:
            node = await self.node(n)
            others = await self.others_on(node)
            if others:
                self._warn_collisions(n, others, verb="draining it too")
            await self.apply(n, {"cordon": True, "drain": True, "reason": self.args.reason or "aiokcm drain",
                                 "evacuationTimeoutSeconds": int(self.args.evacuation_timeout)})
            print(f"nodemaintenance/{maintenance_name(n)} draining node {n}", file=self.out, flush=True)
        code = await self.follow(nodes, until="Drained")
        if code == 0:
            print(f"drained: {', '.join(nodes)}", file=self.out, flush=True)
        return code

    async def cordon(self, nodes: Sequence[str]) -> int:
        for n in nodes:
            node = await self.node(n)
            others = await self.others_on(node)
            if others:
                self._warn_collisions(n, others, verb="it stays cordoned until every maintenance lets go")
            spec: dict[str, Any] = {"cordon": True}
            if self.args.reason:
                spec["reason"] = self.args.reason
            await self.apply(n, spec)
        code = await self.follow(nodes, until="Cordoned")
        if code == 0:
            for n in nodes:
                print(f"node/{n} cordoned", file=self.out, flush=True)
        return code

    async def uncordon(self, nodes: Sequence[str]) -> int:
        deadline = anyio.current_time() + self.args.timeout if self.args.timeout > 0 else None
        for n in nodes:
            await self.node(n)
            if await self.get_nm(n) is not None:
                await self.client.delete(NODEMAINTENANCES, maintenance_name(n))
        for n in nodes:
            while await self.get_nm(n) is not None:
                if deadline is not None and anyio.current_time() >= deadline:
                    raise CliError(f"timed out waiting for NodeMaintenance {maintenance_name(n)} to be released")
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
        self.warn("the NodeMaintenance API is not installed; falling back to cordon and eviction as kubectl does")
        for n in nodes:
            await self.node(n)
            unschedulable: bool | None = None if command == "uncordon" else True
            await self.client.patch(NODES, n, {"spec": {"unschedulable": unschedulable}})
            print(f"node/{n} {'uncordoned' if command == 'uncordon' else 'cordoned'}", file=self.out, flush=True)
        if command != "drain":
            return 0
        return await self.evict_all(nodes)

    async def evict_all(self, nodes: Sequence[str]) -> int:
        table = ProgressTable(self.out)
        deadline = anyio.current_time() + self.args.timeout if self.args.timeout > 0 else None
        refused: dict[str, tuple[str, str]] = {}
        next_try: dict[str, float] = {}
        while True:
            rows: list[Row] = []
            remaining: dict[str, list[dict[str, Any]]] = {}
            for n in nodes:
                pods = await self.client.list_all(PODS, field_selector=f"spec.nodeName={n}")
                remaining[n] = [p for p in pods if is_targeted(p)]
                for pod in remaining[n]:
                    key = f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"
                    if pod["metadata"].get("deletionTimestamp") or next_try.get(key, 0.0) > anyio.current_time():
                        continue
                    outcome = await evict(self.client, pod)
                    if outcome.blocked_reason is None:
                        refused.pop(key, None)
                        next_try[key] = anyio.current_time() + EVICTION_RETRY_SECONDS
                    else:
                        refused[key] = (outcome.blocked_reason, outcome.message)
                        next_try[key] = anyio.current_time() + outcome.retry_after
                blocking = [k for k in refused if any(_key(p) == k for p in remaining[n])]
                summary = f"{blocking[0]}: {refused[blocking[0]][0]}" if blocking else ""
                rows.append(Row(n, "Drained" if not remaining[n] else "Draining", len(remaining[n]), 0, summary))
            table.show(rows)
            if not any(remaining.values()):
                print(f"drained: {', '.join(nodes)}", file=self.out, flush=True)
                return 0
            if deadline is not None and anyio.current_time() >= deadline:
                print(f"error: timed out after {self.args.timeout:g}s waiting for the pods to leave", file=self.err)
                print("blocking pods:", file=self.err)
                for n, pods in remaining.items():
                    for pod in pods:
                        reason, message = refused.get(_key(pod), ("Terminating", "waiting for the pod to go"))
                        print(f"  {n}  {_key(pod)}  {reason}: {message}", file=self.err)
                return 1
            await anyio.sleep(self.args.poll_interval)


def _key(pod: Mapping[str, Any]) -> str:
    return f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"


async def run(args: argparse.Namespace, client: KubeClient, *, out: TextIO, err: TextIO) -> int:
    """The command on an existing client (what tests and the bench call)."""
    cmd = Maintenance(client, args, out=out, err=err)
    nodes: list[str] = list(dict.fromkeys(args.nodes))
    if not await cmd.api_installed():
        return await cmd.legacy(nodes)
    if args.command == "drain":
        return await cmd.drain(nodes)
    if args.command == "cordon":
        return await cmd.cordon(nodes)
    return await cmd.uncordon(nodes)


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
