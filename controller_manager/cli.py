"""`aiokcm` and `kubectl-maintenance` entry points: parse, dispatch, map outcomes to exit codes.

Exit codes: 0 clean stop; 1 runtime failure (lost leadership, a controller crashed);
2 bad usage (flags, gates, controller names, a missing plugin), always as one line on stderr.

Subcommands: `run` (the default when the first argument is a flag, so KCM-style command lines
work), `cluster up` (the embedded local cluster, through the `aiokcm.embedded` plugin),
`drain` / `cordon` / `uncordon` (dispatched to `controller_manager.maintenance_cli`), and
`lease acquire|renew|release|status` (dispatched to `controller_manager.lease_cli`), `evict`
(EvictionRequests, dispatched to `controller_manager.evict_cli`) and `maintenance
status|pause|resume|complete` (rolling maintenances, dispatched to `controller_manager.rollout_cli`).
Those modules expose `async def main(argv: list[str]) -> int`; they are looked up when invoked so
this file does not depend on them being present.
"""

from __future__ import annotations

import importlib
import logging as stdlib_logging
import signal
import sys
from collections.abc import Awaitable, Callable, Sequence

import anyio

from controller_manager import logging
from controller_manager.embedded import PluginMissing, load_plugin
from controller_manager.eventloop import backend_options
from controller_manager.options import OneLineParser, UsageError, parse_run_args
from controller_manager.registry import default_registry

USAGE = """usage: aiokcm <command> [flags]

commands:
  run                       run the controller manager (see aiokcm run --help)
  cluster up                start a local cluster and serve it until interrupted
  drain|cordon|uncordon     node maintenance (also as `kubectl maintenance ...`)
  lease acquire|renew|release|status
                            inspect and drive maintenance leases
  evict POD...              request pods' eviction (EvictionRequests) and follow it
  maintenance status|pause|resume NAME
                            a rolling NodeMaintenance: its progress and gates, pause, resume
                            (also `kubectl maintenance status|pause|resume|complete ...`)
  maintenance complete NODE [--maintenance NAME]
                            mark a node's maintenance done (spec.completion: Annotation)
"""

EXIT_USAGE = 2

_DELEGATES = {
    "drain": "controller_manager.maintenance_cli",
    "cordon": "controller_manager.maintenance_cli",
    "uncordon": "controller_manager.maintenance_cli",
    "lease": "controller_manager.lease_cli",
    "evict": "controller_manager.evict_cli",
    "maintenance": "controller_manager.rollout_cli",
}
# `kubectl maintenance status NAME` is `aiokcm maintenance status NAME`.
_PLUGIN_ROLLOUT = ("status", "pause", "resume", "complete")


def _fail(message: str) -> int:
    print(f"error: {message}" if not message.startswith("aiokcm") else message, file=sys.stderr)
    return EXIT_USAGE


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    code = dispatch(args)
    if argv is None:
        sys.exit(code)
    return code


def dispatch(args: list[str]) -> int:
    if not args or args[0] in {"-h", "--help", "help"}:
        print(USAGE, end="")
        return 0 if args else EXIT_USAGE
    command = args[0]
    if command.startswith("-"):
        return _run(args)
    if command == "run":
        return _run(args[1:])
    if command == "cluster":
        return _cluster(args[1:])
    if command in _DELEGATES:
        return _delegate(_DELEGATES[command], args)
    return _fail(
        f"aiokcm: unknown command {command!r} (commands: run, cluster up, drain, cordon, uncordon, lease, evict, maintenance)"
    )


def _run(args: list[str]) -> int:
    try:
        opts = parse_run_args(args, default_registry())
    except UsageError as exc:
        return _fail(str(exc))
    # The demo narrates on stdout; the manager's info lines would drown it unless -v asks for them.
    quiet = opts.demo and opts.verbosity == 0
    logging.configure(
        log_format=opts.log_format,
        verbosity=opts.verbosity,
        min_level=stdlib_logging.WARNING if quiet else None,
    )
    # The manager (and the API client under it) is imported only once the flags are valid, so a
    # mistyped command line is answered at once rather than after a second of imports.
    from controller_manager import app

    try:
        return anyio.run(app.run, opts, backend_options=backend_options())
    except UsageError as exc:
        return _fail(str(exc))
    except PluginMissing as exc:
        return _fail(f"aiokcm run --embedded: {exc}")
    except KeyboardInterrupt:
        return 130


def _cluster(args: list[str]) -> int:
    parser = OneLineParser(
        prog="aiokcm cluster",
        allow_abbrev=False,
        description="Serve a local cluster (the aiokcm.embedded plugin).",
    )
    sub = parser.add_subparsers(dest="action", required=True)
    up = sub.add_parser("up", help="start a local cluster and serve it until interrupted", allow_abbrev=False)
    up.add_argument("--nodes", type=int, default=3, help="simulated nodes to register")
    up.add_argument("--pods-per-node", type=int, default=0, help="pods to create per node at start")
    up.add_argument("--kubeconfig", required=True, help="where to write a kubeconfig for the cluster")
    try:
        ns = parser.parse_args(args)
    except UsageError as exc:
        return _fail(str(exc))
    try:
        plugin = load_plugin()
    except PluginMissing as exc:
        return _fail(f"aiokcm cluster up: {exc}")
    logging.configure()

    async def serve() -> int:
        return await plugin.cluster_up(
            nodes=ns.nodes, pods_per_node=ns.pods_per_node, kubeconfig=ns.kubeconfig
        )

    return anyio.run(_until_signal, serve)


async def _until_signal(work: Callable[[], Awaitable[int]]) -> int:
    """Run `work` until it returns or SIGINT/SIGTERM arrives (then cancel it and return 0)."""
    code = 0
    async with anyio.create_task_group() as tg:

        async def watch() -> None:
            with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
                async for _ in signals:
                    tg.cancel_scope.cancel()
                    return

        async def body() -> None:
            nonlocal code
            code = await work()
            tg.cancel_scope.cancel()

        tg.start_soon(watch)
        tg.start_soon(body)
    return code


def _delegate(module_name: str, args: list[str]) -> int:
    """Hand `args` (the subcommand included) to another module's `async def main(argv) -> int`."""
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name != module_name:
            raise
        return _fail(f"aiokcm {args[0]}: this build has no {module_name} module")
    entry: Callable[[list[str]], Awaitable[int]] = module.main
    logging.configure()

    async def call() -> int:
        return await entry(args)

    try:
        return anyio.run(call)
    except UsageError as exc:
        return _fail(str(exc))


def kubectl_plugin_main(argv: Sequence[str] | None = None) -> int:
    """`kubectl maintenance drain|cordon|uncordon|evict|status|pause|resume|complete ...`: kubectl runs
    `kubectl-maintenance <args>`."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in {"-h", "--help"}:
        print("usage: kubectl maintenance drain|cordon|uncordon NODE [flags]")
        print("       kubectl maintenance evict POD... [-n NAMESPACE] [flags]")
        print("       kubectl maintenance status|pause|resume NAME [flags]")
        print("       kubectl maintenance complete NODE [--maintenance NAME] [flags]")
        code = 0 if args else EXIT_USAGE
    elif args[0] in _PLUGIN_ROLLOUT:
        code = _delegate(_DELEGATES["maintenance"], ["maintenance", *args])
    elif args[0] not in {"drain", "cordon", "uncordon", "evict"}:
        code = _fail(
            f"kubectl maintenance: unknown command {args[0]!r} "
            "(drain, cordon, uncordon, evict, status, pause, resume, complete)"
        )
    else:
        code = _delegate(_DELEGATES[args[0]], args)
    if argv is None:
        sys.exit(code)
    return code


__all__ = ["kubectl_plugin_main", "main"]
