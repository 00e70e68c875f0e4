"""`aiokcm lease acquire|renew|release|status`: node maintenance leases from a shell.

    aiokcm lease acquire node-1 --holder reboot-agent/node-1 --duration 10m [--wait [--timeout 5m]]
    aiokcm lease renew   node-1 --holder reboot-agent/node-1 [--duration 10m]
    aiokcm lease release node-1 --holder reboot-agent/node-1
    aiokcm lease status  [node-1 ...]

The rules are `nodemaintenancelease.lease`'s: a claim lasts renewTime + duration + 3 s;
durations above 1 h are refused (renew instead); identities starting with `kubeadm` belong to
administrators (who set them with kubectl), so `acquire` and `renew` refuse them. `release` may
name a `kubeadm...` holder: giving a claim back takes nothing.

`status` prints one row per lease: holder, age (since acquired), expires in (`never` for an
administrator's claim, negative once expired) and whether the lease is abandoned (expired, holder
still set). A lease is created when first acquired, so `status` lists the nodes ever leased; a
node named on the command line that has none is shown free. A script can rely on the exit codes: 0 done, 1 refused (held by someone else, not ours
to renew) or failed, 2 bad usage (including a reserved holder or a duration over 1 h).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from datetime import datetime
from typing import TextIO

import anyio

from apiclient import ApiError, KubeClient
from apiclient.resources import LEASES, NODES
from controller_manager.clientcli import main_with_client
from controller_manager.options import OneLineParser, parse_duration
from kubeutil.timestamps import format_micro_time, utcnow
from nodemaintenancelease import lease

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def _duration_seconds(text: str) -> int:
    seconds = parse_duration(text)
    whole = round(seconds)
    try:
        lease.check_duration(whole)
    except lease.InvalidDurationError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc
    return whole


def build_parser() -> OneLineParser:
    parser = OneLineParser(
        prog="aiokcm lease",
        allow_abbrev=False,
        description="Node maintenance leases (namespace kube-node-maintenance).",
    )
    parser.add_argument("lease", choices=("lease",), help=argparse.SUPPRESS)
    common = OneLineParser(add_help=False)
    common.add_argument("--kubeconfig", default=None, help="path to the kubeconfig file")
    common.add_argument("--context", default=None, help="the kubeconfig context to use")
    common.add_argument("--server", "--master", dest="server", default=None, help="the API server URL")
    sub = parser.add_subparsers(dest="action", required=True, parser_class=OneLineParser)
    acquire = sub.add_parser("acquire", parents=[common], allow_abbrev=False, help="take a node's lease")
    acquire.add_argument("node")
    acquire.add_argument("--holder", required=True, help="who holds it (never starting with kubeadm)")
    acquire.add_argument(
        "--duration",
        type=_duration_seconds,
        default=lease.DEFAULT_DURATION_SECONDS,
        help="how long the claim lasts without renewal (at most 1h; default 10m)",
    )
    acquire.add_argument("--wait", action="store_true", help="wait while someone else holds it")
    acquire.add_argument(
        "--timeout", type=parse_duration, default=0.0, help="with --wait: give up after this long"
    )
    acquire.add_argument("--poll-interval", type=float, default=2.0, help=argparse.SUPPRESS)
    renew = sub.add_parser("renew", parents=[common], allow_abbrev=False, help="push our claim forward")
    renew.add_argument("node")
    renew.add_argument("--holder", required=True)
    renew.add_argument("--duration", type=_duration_seconds, default=None, help="a new duration (at most 1h)")
    release = sub.add_parser("release", parents=[common], allow_abbrev=False, help="give the lease back")
    release.add_argument("node")
    release.add_argument("--holder", required=True)
    status = sub.add_parser("status", parents=[common], allow_abbrev=False, help="who holds which node")
    status.add_argument("nodes", nargs="*", metavar="NODE")
    return parser


def _ago(delta_seconds: float) -> str:
    """kubectl's short human durations: 45s, 3m20s, 2h5m, 3d."""
    s = int(abs(delta_seconds))
    sign = "-" if delta_seconds < 0 else ""
    if s < 120:
        return f"{sign}{s}s"
    if s < 3600:
        return f"{sign}{s // 60}m{s % 60}s" if s % 60 else f"{sign}{s // 60}m"
    if s < 86400:
        return f"{sign}{s // 3600}h{(s % 3600) // 60}m" if (s % 3600) // 60 else f"{sign}{s // 3600}h"
    return f"{sign}{s // 86400}d"


def status_row(state: lease.LeaseState, now: datetime) -> tuple[str, str, str, str, str]:
    """NODE, HOLDER, AGE, EXPIRES IN, ABANDONED for one lease."""
    holder = state.holder or "<none>"
    age = _ago((now - state.acquire_time).total_seconds()) if state.holder and state.acquire_time else "-"
    if state.holder is None:
        expires = "-"
    elif state.admin:
        expires = "never"
    else:
        expiry = state.expires_at()
        expires = (
            _ago((expiry - now).total_seconds()) if expiry is not None and expiry.year > 1 else "expired"
        )
    return state.node, holder, age, expires, "yes" if state.abandoned(now) else "no"


def format_table(rows: Sequence[Sequence[str]]) -> str:
    header = ("NODE", "HOLDER", "AGE", "EXPIRES IN", "ABANDONED")
    table = [header, *rows]
    widths = [max(len(r[i]) for r in table) for i in range(len(header))]
    return (
        "\n".join("   ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in table)
        + "\n"
    )


def _describe(state: lease.LeaseState) -> str:
    expiry = state.expires_at()
    until = f" until {format_micro_time(expiry)}" if expiry is not None else ""
    return f"node {state.node}: lease held by {state.holder}{until}"


async def run(
    args: argparse.Namespace,
    client: KubeClient,
    *,
    out: TextIO,
    err: TextIO,
    clock: lease.Clock = utcnow,
) -> int:
    """The command on an existing client (what tests call)."""
    try:
        if args.action == "acquire":
            return await _acquire(args, client, out=out, err=err, clock=clock)
        if args.action == "renew":
            state = await lease.renew(
                client, args.node, holder=args.holder, duration_seconds=args.duration, clock=clock
            )
            print(_describe(state), file=out)
            return EXIT_OK
        if args.action == "release":
            released = await lease.release(client, args.node, holder=args.holder, clock=clock)
            print(
                f"node {args.node}: lease released"
                if released
                else f"node {args.node}: lease not held by {args.holder}; nothing to release",
                file=out,
            )
            return EXIT_OK
        return await _status(args, client, out=out, err=err, clock=clock)
    except (lease.ReservedHolderError, lease.InvalidDurationError) as exc:
        print(f"error: {exc}", file=err)
        return EXIT_USAGE
    except lease.LeaseError as exc:
        print(f"error: {exc}", file=err)
        return EXIT_FAILED


async def _acquire(
    args: argparse.Namespace, client: KubeClient, *, out: TextIO, err: TextIO, clock: lease.Clock
) -> int:
    lease.check_client_holder(args.holder)  # before any waiting: a reserved holder never becomes valid
    with anyio.move_on_after(args.timeout if args.wait and args.timeout > 0 else float("inf")):
        announced = False
        while True:
            try:
                state = await lease.acquire(
                    client, args.node, holder=args.holder, duration_seconds=args.duration, clock=clock
                )
            except lease.LeaseHeldError as exc:
                if not args.wait:
                    raise
                if not announced:
                    print(f"{exc}; waiting", file=err)
                    announced = True
                await anyio.sleep(args.poll_interval)
                continue
            print(_describe(state).replace("lease held by", "lease acquired by"), file=out)
            return EXIT_OK
    print(f"error: node {args.node}: lease still held by someone else after {args.timeout:g}s", file=err)
    return EXIT_FAILED


async def _status(
    args: argparse.Namespace, client: KubeClient, *, out: TextIO, err: TextIO, clock: lease.Clock
) -> int:
    now = clock()
    code = EXIT_OK
    states: list[lease.LeaseState] = []
    if args.nodes:
        for node in args.nodes:
            state = await lease.status(client, node)
            if state is None:
                state = await _never_leased(client, node)
            if state is None:
                print(f"error: node {node} not found", file=err)
                code = EXIT_FAILED
            else:
                states.append(state)
    else:
        try:
            objs = await client.list_all(LEASES, namespace=lease.NAMESPACE)
        except ApiError as exc:
            if not exc.not_found:
                raise
            objs = []
        states = sorted((lease.LeaseState.from_obj(o) for o in objs), key=lambda s: s.node)
    if states or not args.nodes:
        out.write(format_table([status_row(s, now) for s in states]))
    return code


async def _never_leased(client: KubeClient, node: str) -> lease.LeaseState | None:
    """A node nobody took yet has no lease (the first holder creates it): free. None if no such node."""
    if await client.get_or_none(NODES, node) is None:
        return None
    return lease.LeaseState(
        node=node,
        holder=None,
        duration_seconds=None,
        acquire_time=None,
        renew_time=None,
        transitions=0,
        resource_version="",
    )


async def main(argv: list[str]) -> int:
    """Entry point: `argv` starts with `lease`."""
    return await main_with_client(
        argv, build_parser(), lambda args, client: run(args, client, out=sys.stdout, err=sys.stderr)
    )
