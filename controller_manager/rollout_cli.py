"""`aiokcm maintenance status|pause|resume NAME` and `aiokcm maintenance complete NODE`: rolling maintenance.

    aiokcm maintenance status kernel-patch [-o json]
    aiokcm maintenance pause kernel-patch
    aiokcm maintenance resume kernel-patch
    aiokcm maintenance complete node-3 [--maintenance kernel-patch]

(also `kubectl maintenance status|pause|resume|complete ...`). The commands read and write only what
docs/rolling-maintenance.md documents; the controller does the rest:

- `status` prints the rollout from the object's status: its phase, nodes done out of selected, the
  node in progress, the next window, a pause or an abort with its reason and message, each gate's
  last result, value, counts and message, and one row per node (phase, message). A maintenance
  without `spec.completion` (not rolling) shows its drain: conditions and nodes. `-o json` prints
  `status` as stored.
- `pause` merge-patches `spec.paused: true`. `resume` merge-patches `spec.paused: false` and sets
  `maintenance.aiokcm.io/resume-requested` to now (RFC 3339, UTC, never before the pause the status
  records, so a client clock behind the cluster's still asks after it): a rollout paused by a gate
  runs its failed gates again. An aborted rollout stays aborted: `resume` says so and writes
  nothing. Both refuse a maintenance that is not rolling, where `spec.paused` does nothing.
- `complete` annotates the node with `maintenance.aiokcm.io/maintenance-complete: <maintenance>`
  (`spec.completion: Annotation`): the maintenance named by `--maintenance`, else the one of the
  node's `maintenance.aiokcm.io/maintenances` that completes by annotation. With several such
  maintenances, or none, the user must name it. A named maintenance must be applied to the node
  (listed there) and complete by annotation: a mark left on a node not yet started would end its
  maintenance as soon as it drained.

The commands run with the user's credentials (get and patch of nodemaintenances and nodes); they
need nothing of the manager's RBAC. Exit codes: 0 done, 1 refused or failed (a missing object, an
aborted rollout, the API's refusal), 2 bad usage (flags, `complete` without a maintenance to pick),
always with one line on stderr.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, TextIO

import orjson

from apiclient import KubeClient
from apiclient.resources import NODEMAINTENANCES, NODES
from controller_manager.clientcli import CliError, main_with_client
from controller_manager.options import OneLineParser
from controllers.nodemaintenance import api
from kubeutil.timestamps import format_time, parse_time, utcnow
from maintenancerollout import planner
from maintenancerollout import spec as rspec
from maintenancerollout.analysis import Result
from maintenancerollout.planner import COMPLETE_ANNOTATION, RESUME_ANNOTATION

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2

# The rolling maintenance's vocabulary, from the package that defines it.
COMPLETION_ANNOTATION = rspec.COMPLETION_ANNOTATION
PHASE_ABORTED = planner.PHASE_ABORTED
GATE_PAUSES = frozenset(
    {planner.PAUSED_GATE_FAILED, planner.PAUSED_GATE_INCONCLUSIVE, planner.PAUSED_GATE_ERROR}
)
PAUSED_ALERT_FIRING = planner.PAUSED_ALERT_FIRING
PAUSED_BY_SPEC = planner.PAUSED_BY_SPEC
RESULT_RUNNING = Result.RUNNING.value

Obj = Mapping[str, Any]
Clock = Callable[[], datetime]


class BadInput(Exception):
    """Input the cluster cannot settle (which maintenance to complete): one line on stderr, exit 2."""


def _object_name(*kinds: str) -> Callable[[str], str]:
    """`NAME` or `KIND/NAME`, as kubectl takes them, for the given spellings of one kind."""

    def parse(text: str) -> str:
        kind, sep, name = text.partition("/")
        if sep and kind not in kinds:
            raise argparse.ArgumentTypeError(f"{text!r} is not a {kinds[0]} (give NAME or {kinds[0]}/NAME)")
        name = name if sep else text
        if not name:
            raise argparse.ArgumentTypeError(f"{text!r}: empty name")
        return name

    return parse


_maintenance = _object_name("nodemaintenance", "nodemaintenances", "nm")
_node = _object_name("node", "nodes", "no")


def build_parser() -> OneLineParser:
    parser = OneLineParser(
        prog="aiokcm maintenance",
        allow_abbrev=False,
        description="Rolling NodeMaintenances: progress, pause, resume, per-node completion.",
    )
    parser.add_argument("maintenance", choices=("maintenance",), help=argparse.SUPPRESS)
    common = OneLineParser(add_help=False)
    common.add_argument("--kubeconfig", default=None, help="path to the kubeconfig file")
    common.add_argument("--context", default=None, help="the kubeconfig context to use")
    common.add_argument("--server", "--master", dest="server", default=None, help="the API server URL")
    sub = parser.add_subparsers(dest="action", required=True, parser_class=OneLineParser)
    status = sub.add_parser(
        "status", parents=[common], allow_abbrev=False, help="the rollout: phase, gates, nodes"
    )
    status.add_argument("name", metavar="NAME", type=_maintenance)
    status.add_argument("-o", "--output", choices=("json",), default=None, help="json: the status as stored")
    pause = sub.add_parser(
        "pause", parents=[common], allow_abbrev=False, help="start no node and run no gate (spec.paused)"
    )
    pause.add_argument("name", metavar="NAME", type=_maintenance)
    resume = sub.add_parser(
        "resume",
        parents=[common],
        allow_abbrev=False,
        help="go on after a pause by hand or by a gate (the failed gates run again)",
    )
    resume.add_argument("name", metavar="NAME", type=_maintenance)
    complete = sub.add_parser(
        "complete",
        parents=[common],
        allow_abbrev=False,
        help="mark a node's maintenance done (spec.completion: Annotation)",
    )
    complete.add_argument("node", metavar="NODE", type=_node)
    complete.add_argument(
        "--maintenance",
        type=_maintenance,
        default=None,
        help="the maintenance to complete (default: the node's only one completing by annotation)",
    )
    return parser


# -- reading the object ----------------------------------------------------------------------------


def _status(nm: Obj) -> Obj:
    status = nm.get("status")
    return status if isinstance(status, Mapping) else {}


def _spec(nm: Obj) -> Obj:
    spec = nm.get("spec")
    return spec if isinstance(spec, Mapping) else {}


def _rollout(nm: Obj) -> Obj:
    rollout = _status(nm).get("rollout")
    return rollout if isinstance(rollout, Mapping) else {}


def _annotations(obj: Obj) -> Mapping[str, str]:
    return ((obj.get("metadata") or {}).get("annotations")) or {}


def completion(nm: Obj) -> str:
    """`spec.completion`: empty for a maintenance that is not rolling."""
    return str(_spec(nm).get("completion") or "")


def is_aborted(nm: Obj) -> bool:
    return bool(_rollout(nm).get("abortedReason")) or _status(nm).get("phase") == PHASE_ABORTED


def _text(value: object) -> str:
    return "" if value is None else str(value)


def _ago(seconds: float) -> str:
    """kubectl's short human durations: 45s, 3m20s, 2h5m, 3d."""
    s = int(abs(seconds))
    if s < 120:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60}s" if s % 60 else f"{s // 60}m"
    if s < 86400:
        return f"{s // 3600}h{(s % 3600) // 60}m" if (s % 3600) // 60 else f"{s // 3600}h"
    return f"{s // 86400}d"


def when(raw: object, now: datetime) -> str:
    """A status time as stored, with how far it is from now: `2026-12-02T21:00:00Z (in 3h)`."""
    at = parse_time(raw)
    if at is None:
        return _text(raw)
    delta = (at - now).total_seconds()
    relative = f"in {_ago(delta)}" if delta > 0 else f"{_ago(delta)} ago"
    return f"{raw} ({relative})"


def format_table(header: Sequence[str], rows: Sequence[Sequence[str]], indent: str = "") -> list[str]:
    table = [tuple(header), *(tuple(r) for r in rows)]
    widths = [max(len(r[i]) for r in table) for i in range(len(header))]
    return [indent + "   ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in table]


GATE_HEADER = (
    "GATE",
    "TYPE",
    "NODE",
    "RESULT",
    "VALUE",
    "SUCCESSFUL",
    "FAILED",
    "INCONCLUSIVE",
    "ERROR",
    "NEXT",
    "MESSAGE",
)
NODE_HEADER = ("NODE", "PHASE", "MESSAGE")


def gate_row(gate: Obj, now: datetime) -> tuple[str, ...]:
    result = _text(gate.get("result")) or RESULT_RUNNING
    following = gate.get("nextEvaluationTime") if result == RESULT_RUNNING else None
    return (
        _text(gate.get("name")),
        _text(gate.get("type")),
        _text(gate.get("node")),
        result,
        _text(gate.get("value")),
        *(str(int(gate.get(key) or 0)) for key in ("successful", "failed", "inconclusive", "error")),
        when(following, now) if following else "",
        _text(gate.get("message")),
    )


def _node_message(entry: Obj) -> str:
    message = _text(entry.get("message"))
    if message:
        return message
    blocking = entry.get("blockingPods") or []
    if not blocking:
        return ""
    first = blocking[0]
    more = f" (+{len(blocking) - 1})" if len(blocking) > 1 else ""
    why = f": {first.get('message')}" if first.get("message") else ""
    return f"blocked by {first.get('namespace')}/{first.get('name')}: {first.get('reason')}{why}{more}"


def node_rows(nm: Obj) -> list[tuple[str, str, str]]:
    nodes = _status(nm).get("nodes") or {}
    return [
        (name, _text((entry or {}).get("phase")) or "Pending", _node_message(entry or {}))
        for name, entry in sorted(nodes.items())
    ]


def describe(nm: Obj, now: datetime) -> list[str]:
    """The lines `status` prints for one NodeMaintenance."""
    meta = nm.get("metadata") or {}
    name = _text(meta.get("name"))
    spec, status, rollout = _spec(nm), _status(nm), _rollout(nm)
    fields: list[tuple[str, str]] = [("Name", name)]
    how = completion(nm)
    if how:
        fields.append(("Rolling", f"yes (completion: {how})"))
        fields.append(("Phase", _text(status.get("phase")) or "Pending (no status from the controller yet)"))
        done = int(status.get("completedNodes") or 0)
        total = status.get("nodeCount")
        fields.append(("Done", f"{done}/{int(total)} nodes" if total is not None else f"{done} nodes"))
        fields.append(("In progress", _text(status.get("currentNode")) or "-"))
        if status.get("nextWindowTime"):
            fields.append(("Next window", when(status.get("nextWindowTime"), now)))
    else:
        fields.append(("Rolling", "no (no spec.completion): its nodes stay cordoned until it is deleted"))
        fields.append(("Cordon", "yes" if spec.get("cordon") else "no"))
        fields.append(("Drain", "yes" if spec.get("drain") else "no"))
        if status.get("nodeCount") is not None:
            fields.append(("Nodes", str(int(status.get("nodeCount") or 0))))
        fields.append(("Pending pods", str(int(status.get("podsPendingEvacuation") or 0))))
    if spec.get("paused") is True:
        fields.append(("Spec", "paused (spec.paused: true)"))
    if rollout.get("pausedReason"):
        since = f" since {when(rollout.get('pausedTime'), now)}" if rollout.get("pausedTime") else ""
        message = f": {rollout.get('pausedMessage')}" if rollout.get("pausedMessage") else ""
        fields.append(("Paused", f"{rollout.get('pausedReason')}{since}{message}"))
        if rollout.get("pausedReason") in GATE_PAUSES and not is_aborted(nm):
            fields.append(("", f"to run the gates again: aiokcm maintenance resume {name}"))
    if rollout.get("abortedReason") or status.get("phase") == PHASE_ABORTED:
        at = f" at {when(rollout.get('abortedTime'), now)}" if rollout.get("abortedTime") else ""
        message = f": {rollout.get('abortedMessage')}" if rollout.get("abortedMessage") else ""
        fields.append(("Aborted", f"{_text(rollout.get('abortedReason')) or 'yes'}{at}{message}"))
        fields.append(("", "an aborted rollout stays aborted; delete the maintenance to end it"))
    requested = _annotations(nm).get(RESUME_ANNOTATION)
    if requested and requested != rollout.get("resumeHonoured") and rollout.get("pausedReason"):
        fields.append(("Resume", f"requested at {requested}, not acted on yet"))
    if rollout.get("lastCompletionTime"):
        soak = f" (soak {spec.get('soakSeconds')}s)" if spec.get("soakSeconds") else ""
        fields.append(("Last node done", f"{when(rollout.get('lastCompletionTime'), now)}{soak}"))
    for cond in status.get("conditions") or []:
        reason = f" ({cond.get('reason')})" if cond.get("reason") else ""
        message = f": {cond.get('message')}" if cond.get("message") else ""
        fields.append(("Condition", f"{cond.get('type')}={cond.get('status')}{reason}{message}"))
    generation = int(meta.get("generation") or 0)
    observed = status.get("observedGeneration")
    if observed is not None and int(observed) < generation:
        fields.append(
            ("Note", f"the status is of generation {observed}, the spec is at {generation}: not seen yet")
        )
    width = max(len(label) for label, _ in fields) + 2
    lines = [f"{(label + ':') if label else '':<{width}}{value}" for label, value in fields]
    gates = [g for g in status.get("gates") or [] if isinstance(g, Mapping)]
    if gates:
        lines += ["", "Gates:", *format_table(GATE_HEADER, [gate_row(g, now) for g in gates], indent="  ")]
    elif how and spec.get("gates"):
        lines += ["", "Gates: none evaluated yet"]
    rows = node_rows(nm)
    lines += ["", *(format_table(NODE_HEADER, rows) if rows else ["No node selected yet."])]
    return lines


# -- the commands ----------------------------------------------------------------------------------


async def _get_maintenance(client: KubeClient, name: str) -> dict[str, Any]:
    nm = await client.get_or_none(NODEMAINTENANCES, name)
    if nm is None:
        raise CliError(f'nodemaintenance "{name}" not found')
    return nm


def _require_rolling(nm: Obj, verb: str) -> None:
    if not completion(nm):
        name = nm["metadata"]["name"]
        raise CliError(
            f"nodemaintenance/{name} is not a rolling maintenance (no spec.completion), so there is "
            f"nothing to {verb}; nothing was written"
        )


async def status(args: argparse.Namespace, client: KubeClient, *, out: TextIO, clock: Clock) -> int:
    nm = await _get_maintenance(client, args.name)
    if args.output == "json":
        out.write(orjson.dumps(_status(nm), option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS).decode())
        out.write("\n")
    else:
        out.write("\n".join(describe(nm, clock())) + "\n")
    return EXIT_OK


async def pause(args: argparse.Namespace, client: KubeClient, *, out: TextIO) -> int:
    name: str = args.name
    nm = await _get_maintenance(client, name)
    _require_rolling(nm, "pause")
    if _spec(nm).get("paused") is True:
        print(f"nodemaintenance/{name} already paused (spec.paused: true)", file=out)
        return EXIT_OK
    written = await client.patch(NODEMAINTENANCES, name, {"spec": {"paused": True}})
    if _spec(written).get("paused") is not True:
        raise CliError(
            "the API server dropped spec.paused: this cluster's NodeMaintenance CRD predates rolling "
            "maintenance (apply deploy/crds/nodemaintenance.yaml)"
        )
    aborted = "; it is aborted as well, which only deleting it ends" if is_aborted(nm) else ""
    print(
        f"nodemaintenance/{name} paused (spec.paused: true): no node starts and no gate runs "
        f"until `aiokcm maintenance resume {name}`{aborted}",
        file=out,
    )
    return EXIT_OK


def resume_time(nm: Obj, now: datetime) -> str:
    """Now, but never before the pause the status records: the controller honours a request made
    after the pause, and the client's clock may be behind the cluster's."""
    paused = parse_time(_rollout(nm).get("pausedTime"))
    return format_time(max(now, paused) if paused is not None else now)


async def resume(args: argparse.Namespace, client: KubeClient, *, out: TextIO, clock: Clock) -> int:
    name: str = args.name
    nm = await _get_maintenance(client, name)
    _require_rolling(nm, "resume")
    rollout = _rollout(nm)
    if is_aborted(nm):
        reason = _text(rollout.get("abortedReason")) or PHASE_ABORTED
        message = f": {rollout.get('abortedMessage')}" if rollout.get("abortedMessage") else ""
        raise CliError(
            f"nodemaintenance/{name} was aborted ({reason}{message}) and stays aborted; nothing was "
            "written (delete it to end the maintenance)"
        )
    requested = resume_time(nm, clock())
    await client.patch(
        NODEMAINTENANCES,
        name,
        {"metadata": {"annotations": {RESUME_ANNOTATION: requested}}, "spec": {"paused": False}},
    )
    reason = _text(rollout.get("pausedReason"))
    if reason in GATE_PAUSES:
        what = f"it was paused by a gate ({reason}): the gates that did not pass run again"
    elif reason == PAUSED_ALERT_FIRING:
        what = (
            "it waits for a firing alert (AlertFiring) and starts by itself once it is resolved or silenced"
        )
    elif reason == PAUSED_BY_SPEC or _spec(nm).get("paused") is True:
        what = "it was paused by spec.paused"
    else:
        what = "it was not paused"
    print(
        f"nodemaintenance/{name} resumed (spec.paused: false, {RESUME_ANNOTATION}: {requested}); {what}",
        file=out,
    )
    return EXIT_OK


def _listed(node: Obj) -> list[str]:
    raw = _annotations(node).get(api.MAINTENANCES_ANNOTATION) or ""
    return [n.strip() for n in raw.split(",") if n.strip()]


async def _pick_maintenance(client: KubeClient, node_name: str, listed: Sequence[str]) -> str:
    """The node's one maintenance that completes by annotation, or BadInput."""
    candidates = []
    for name in listed:
        nm = await client.get_or_none(NODEMAINTENANCES, name)
        if nm is not None and completion(nm) == COMPLETION_ANNOTATION:
            candidates.append(name)
    if len(candidates) == 1:
        return candidates[0]
    if candidates:
        raise BadInput(
            f"node {node_name} is under {len(candidates)} maintenances that complete by annotation "
            f"({', '.join(candidates)}): pass --maintenance NAME"
        )
    under = f"its maintenances: {', '.join(listed)}" if listed else "it is under no maintenance"
    raise BadInput(
        f"node {node_name} is under no maintenance that completes by annotation ({under}): "
        "pass --maintenance NAME"
    )


async def complete(args: argparse.Namespace, client: KubeClient, *, out: TextIO) -> int:
    node_name: str = args.node
    node = await client.get_or_none(NODES, node_name)
    if node is None:
        raise CliError(f'node "{node_name}" not found; nothing was written')
    listed = _listed(node)
    name: str | None = args.maintenance
    if name is None:
        name = await _pick_maintenance(client, node_name, listed)
    else:
        nm = await _get_maintenance(client, name)
        how = completion(nm)
        if how != COMPLETION_ANNOTATION:
            by = f"on completion {how}" if how else "never (it is not a rolling maintenance)"
            raise CliError(
                f"nodemaintenance/{name} completes its nodes {by}, not by annotation; nothing was written"
            )
        if name not in listed:
            under = f"its maintenances: {', '.join(listed)}" if listed else "it is under no maintenance"
            raise CliError(
                f"node {node_name} is not under nodemaintenance/{name} ({under}); nothing was written "
                "(a mark on a node not started yet would end its maintenance as soon as it drained)"
            )
    before = _annotations(node).get(COMPLETE_ANNOTATION)
    if before == name:
        print(f"node/{node_name} already marked complete for nodemaintenance/{name}", file=out)
        return EXIT_OK
    await client.patch(NODES, node_name, {"metadata": {"annotations": {COMPLETE_ANNOTATION: name}}})
    replaced = f" (it said {before} before)" if before else ""
    print(
        f"node/{node_name} annotated {COMPLETE_ANNOTATION}={name}{replaced}: "
        f"nodemaintenance/{name} releases it and runs its gates",
        file=out,
    )
    return EXIT_OK


async def run(
    args: argparse.Namespace, client: KubeClient, *, out: TextIO, err: TextIO, clock: Clock = utcnow
) -> int:
    """The command on an existing client (what tests call)."""
    try:
        if args.action == "status":
            return await status(args, client, out=out, clock=clock)
        if args.action == "pause":
            return await pause(args, client, out=out)
        if args.action == "resume":
            return await resume(args, client, out=out, clock=clock)
        return await complete(args, client, out=out)
    except BadInput as exc:
        print(f"error: {exc}", file=err, flush=True)
        return EXIT_USAGE
    except CliError as exc:
        print(f"error: {exc}", file=err, flush=True)
        return EXIT_FAILED


async def main(argv: list[str]) -> int:
    """Entry point: `argv` starts with `maintenance`."""
    return await main_with_client(
        argv, build_parser(), lambda args, client: run(args, client, out=sys.stdout, err=sys.stderr)
    )


__all__ = ["build_parser", "describe", "main", "run"]
