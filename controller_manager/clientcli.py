"""What every client subcommand (`aiokcm drain|cordon|uncordon`, `aiokcm lease ...`) does around its work.

Connect from `--kubeconfig`/`--context`/`--server`, run, close the client, and turn the failures a
user can meet into one line on stderr: bad connection settings exit 2 (like a bad flag), an API
refusal or an unreachable server exit 1. Anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Awaitable, Callable
from typing import TextIO

import aiohttp

from apiclient import ApiError, KubeClient
from apiclient.config import build_api_client, describe_config_error
from controller_manager.options import UsageError

EXIT_FAILED = 1
EXIT_USAGE = 2


class CliError(Exception):
    """A failure worth exactly one line to the user (exit 1)."""


async def run_with_client(
    work: Callable[[KubeClient], Awaitable[int]],
    *,
    kubeconfig: str | None,
    context: str | None,
    server: str | None,
    err: TextIO | None = None,
) -> int:
    stderr = err or sys.stderr
    try:
        api_client = await build_api_client(kubeconfig=kubeconfig, master=server, context=context)
    except Exception as exc:
        reason = describe_config_error(exc)
        if reason is None:
            raise
        print(f"error: cannot load the client configuration: {reason}", file=stderr)
        return EXIT_USAGE
    client = KubeClient(api_client)
    try:
        return await work(client)
    except CliError as exc:
        print(f"error: {exc}", file=stderr)
    except ApiError as exc:
        print(f"error: {exc.reason}: {exc.message}", file=stderr)
    except (aiohttp.ClientError, OSError) as exc:
        print(f"error: cannot reach the API server at {client.host}: {exc}", file=stderr)
    finally:
        await client.close()
    return EXIT_FAILED


async def main_with_client(
    argv: list[str],
    parser: argparse.ArgumentParser,
    run: Callable[[argparse.Namespace, KubeClient], Awaitable[int]],
) -> int:
    """A client subcommand's entry point: parse (a bad flag is one line and exit 2, `--help` exits
    0), then `run` with a client from the parsed `--kubeconfig`/`--context`/`--server`."""
    try:
        args = parser.parse_args(argv)
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except SystemExit as exc:  # --help
        return int(exc.code or 0) if isinstance(exc.code, int) else EXIT_USAGE

    async def work(client: KubeClient) -> int:
        return await run(args, client)

    return await run_with_client(work, kubeconfig=args.kubeconfig, context=args.context, server=args.server)
