"""`aiokcm evict POD...` (and `kubectl maintenance evict`): ask for pods' eviction through EvictionRequests.

Unlike `kubectl evict`-style tools that call `pods/<name>/eviction` once, this asks: one
EvictionRequest per pod (requester `--requester`, default `cli.aiokcm.io/evict`), so the pod's
responders (its workload controller first, the imperative evictor last) do the eviction their way,
and several requesters of one pod do not step on each other. The request is named from the pod's
name, UID and the requester (`evictionapi.requester.request_name`), so running the command again
finds the requests it made instead of piling up new ones. Every named pod is checked first: a typo
changes nothing.

The command then watches the requests and the pods' Evictions and prints a line per pod whenever
what it says changes: the phase, the responder at work, its state and its message. It exits

- 0 once every pod is evicted (`TargetEvicted=True`);
- 1 when any eviction failed (`Failed=True`), a request was deleted by someone else, or
  `--timeout` passed (then each pod still waiting is listed with what it waits for);
- 2 on bad input (an unknown pod, a requester name the API refuses, bad flags), one line on stderr.

Ctrl-C stops the watch and leaves the requests in place, since the eviction may be under way and
a responder mid-migration is better left to finish: the command says so and how to withdraw them.
`--withdraw` sets the intent of this requester's requests for the named pods to Withdrawn (the
eviction is cancelled when no requester wants it any more).
"""

from __future__ import annotations

import argparse
import signal
import sys
from collections.abc import Mapping, Sequence
from typing import Any, TextIO

import anyio
from anyio import TASK_STATUS_IGNORED
from anyio.abc import TaskStatus

from apiclient import ApiError, KubeClient
from apiclient.resources import PODS, Resource
from controller_manager import evict_view
from controller_manager.clientcli import CliError, main_with_client
from controller_manager.evict_view import Target
from controller_manager.options import OneLineParser
from controller_manager.options import parse_duration as go_duration
from evictionapi import names, requests
from evictionapi.requester import new_request, requester_problem
from evictionapi.served import EvictionAPI, discover

DEFAULT_REQUESTER = "cli.aiokcm.io/evict"
DEFAULT_TIMEOUT_SECONDS = 600.0
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
# Labels on our requests: who made them, so `kubectl get evictionrequests -l` finds them.
MANAGED_BY = {"app.kubernetes.io/managed-by": "aiokcm-cli"}


class BadInput(Exception):
    """Input the cluster shows to be wrong (an unknown pod): one line on stderr, exit 2."""


def _duration(text: str) -> float:
    seconds = go_duration(text)
    if seconds < 0:
        raise argparse.ArgumentTypeError(f"invalid duration {text!r}: must not be negative")
    return seconds


def _requester(text: str) -> str:
    problem = requester_problem(text)
    if problem is not None:
        raise argparse.ArgumentTypeError(problem)
    return text


def _pod_name(text: str) -> str:
    """`web-0`, `pod/web-0` or `pods/web-0`, as kubectl takes them."""
    kind, sep, name = text.partition("/")
    if sep and kind not in ("pod", "pods", "po"):
        raise argparse.ArgumentTypeError(f"{text!r} is not a pod (give NAME or pod/NAME)")
    name = name if sep else text
    if not name:
        raise argparse.ArgumentTypeError(f"{text!r}: empty pod name")
    return name


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="aiokcm evict",
        allow_abbrev=False,
        description="Request pods' eviction through EvictionRequests and follow it until they are gone.",
    )
    parser.add_argument("command", choices=("evict",))
    parser.add_argument("pods", nargs="+", metavar="POD", type=_pod_name)
    parser.add_argument("-n", "--namespace", default="default", help="the pods' namespace")
    parser.add_argument(
        "--requester",
        type=_requester,
        default=DEFAULT_REQUESTER,
        help=f"who asks, a domain-prefixed name outside *.k8s.io (default {DEFAULT_REQUESTER})",
    )
    parser.add_argument(
        "--timeout",
        type=_duration,
        default=DEFAULT_TIMEOUT_SECONDS,
        help="give up waiting after this long (exit 1; the requests stay); 0 = wait forever (default 10m)",
    )
    parser.add_argument(
        "--withdraw",
        action="store_true",
        help="set this requester's requests for the pods to Withdrawn instead",
    )
    parser.add_argument("--kubeconfig", default=None, help="path to the kubeconfig file")
    parser.add_argument("--context", default=None, help="the kubeconfig context to use")
    parser.add_argument("--server", "--master", dest="server", default=None, help="the API server URL")
    parser.add_argument("--retry-interval", type=float, default=1.0, help=argparse.SUPPRESS)
    return parser


class _Watched:
    """The requests and Evictions of one namespace as the watches last saw them."""

    def __init__(self) -> None:
        self.objs: dict[Resource, dict[str, dict[str, Any]]] = {}
        self.seen: set[str] = set()  # request names seen at least once
        self.changed = anyio.Event()

    def replace(self, res: Resource, items: Sequence[dict[str, Any]]) -> None:
        self.objs[res] = {str(o["metadata"]["name"]): o for o in items}
        self.seen.update(self.objs[res])
        self.changed.set()

    def update(self, res: Resource, obj: dict[str, Any], *, deleted: bool) -> None:
        store = self.objs.setdefault(res, {})
        name = str((obj.get("metadata") or {}).get("name") or "")
        if deleted:
            store.pop(name, None)
        else:
            store[name] = obj
            self.seen.add(name)
        self.changed.set()


class Evict:
    """The command over one client; `out` for progress, `err` for errors and the final report."""

    def __init__(self, client: KubeClient, args: argparse.Namespace, *, out: TextIO, err: TextIO) -> None:
        self.client = client
        self.args = args
        self.out = out
        self.err = err
        self.namespace: str = args.namespace
        self.requester: str = args.requester

    def say(self, line: str) -> None:
        print(line, file=self.out, flush=True)

    async def pods(self, pod_names: Sequence[str]) -> dict[str, dict[str, Any] | None]:
        found: dict[str, dict[str, Any] | None] = {}
        for name in pod_names:
            found[name] = await self.client.get_or_none(PODS, name, namespace=self.namespace)
        return found

    async def evict(self, api: EvictionAPI, pod_names: Sequence[str]) -> int:
        found = await self.pods(pod_names)
        missing = [n for n, p in found.items() if p is None]
        if missing:
            listed = ", ".join(f'"{n}"' for n in missing)
            raise BadInput(f'pods {listed} not found in namespace "{self.namespace}"; nothing was requested')
        targets: list[Target] = []
        for pod in found.values():
            assert pod is not None
            targets.append(await self.request(api, pod))
        return await self.follow(api, targets)

    async def request(self, api: EvictionAPI, pod: Mapping[str, Any]) -> Target:
        """Create our request for `pod`, or find it; a withdrawn one asks again."""
        body = new_request(api, pod, self.requester, labels=MANAGED_BY)
        meta = body["metadata"]
        target = Target(
            self.namespace, str(pod["metadata"]["name"]), str(pod["metadata"]["uid"]), meta["name"]
        )
        try:
            await self.client.create(api.requests, body, namespace=self.namespace)
            self.say(f"evictionrequest/{target.request} created for pod {target.key}")
            return target
        except ApiError as exc:
            if exc.not_found:
                raise CliError(_not_served(api)) from exc
            if not exc.already_exists:
                raise
        existing = await self.client.get(api.requests, target.request, namespace=self.namespace)
        if requests.wants_eviction(existing):
            self.say(f"evictionrequest/{target.request} already requests pod {target.key}")
        else:
            await self._set_intent(api, target.request, names.INTENT_EVICTION)
            self.say(f"evictionrequest/{target.request} requests pod {target.key} again")
        return target

    async def _set_intent(self, api: EvictionAPI, name: str, intent: str) -> None:
        await self.client.patch(api.requests, name, {"spec": {"intent": intent}}, namespace=self.namespace)

    async def withdraw(self, api: EvictionAPI, pod_names: Sequence[str]) -> int:
        """Withdraw this requester's requests for the pods: found by target, so a pod already gone
        (whose UID the name hashes) still has its request withdrawn."""
        try:
            listed = await self.client.list_all(api.requests, namespace=self.namespace)
        except ApiError as exc:
            if exc.not_found:
                raise CliError(_not_served(api)) from exc
            raise
        ours: dict[str, list[dict[str, Any]]] = {}
        for er in listed:
            pod = requests.target_pod_of(er)
            if pod is not None and requests.requester_of(er) == self.requester:
                ours.setdefault(pod[0], []).append(er)
        found = await self.pods([n for n in pod_names if n not in ours])
        unknown = [n for n, p in found.items() if p is None]
        if unknown:
            listed_names = ", ".join(f'"{n}"' for n in unknown)
            raise BadInput(
                f'pods {listed_names} not found in namespace "{self.namespace}" and no request of '
                f"{self.requester} targets them; nothing was withdrawn"
            )
        for name in pod_names:
            if name not in ours:
                self.say(f"pod {self.namespace}/{name}: no eviction request of {self.requester}")
                continue
            for er in ours[name]:
                er_name = str(er["metadata"]["name"])
                if requests.wants_eviction(er):
                    await self._set_intent(api, er_name, names.INTENT_WITHDRAWN)
                    self.say(f"evictionrequest/{er_name} withdrawn (pod {self.namespace}/{name})")
                else:
                    self.say(f"evictionrequest/{er_name} already withdrawn (pod {self.namespace}/{name})")
        return 0

    # -- following ------------------------------------------------------------------------------

    async def follow(self, api: EvictionAPI, targets: Sequence[Target]) -> int:
        """Watch the requests and Evictions until every pod is settled or the timeout passes."""
        watched = _Watched()
        async with anyio.create_task_group() as tg:
            await tg.start(self._watch, api.requests, watched)
            await tg.start(self._watch, api.evictions, watched)
            code = await self._follow(api, targets, watched)
            tg.cancel_scope.cancel()
        return code

    def _progress(
        self, api: EvictionAPI, targets: Sequence[Target], watched: _Watched
    ) -> list[evict_view.PodProgress]:
        ers = watched.objs.get(api.requests, {})
        evictions = list(watched.objs.get(api.evictions, {}).values())
        return [
            evict_view.progress(
                t,
                ers.get(t.request),
                evict_view.eviction_for(evictions, t),
                seen=t.request in watched.seen,
            )
            for t in targets
        ]

    async def _follow(self, api: EvictionAPI, targets: Sequence[Target], watched: _Watched) -> int:
        printer = evict_view.Printer()
        timeout: float = self.args.timeout
        deadline = anyio.current_time() + timeout if timeout > 0 else None
        while True:
            changed = watched.changed = anyio.Event()
            progresses = self._progress(api, targets, watched)
            for line in printer.changed(progresses):
                self.say(line)
            if evict_view.all_final(progresses):
                return self._report(progresses)
            if deadline is not None and anyio.current_time() >= deadline:
                print(f"error: timed out after {timeout:g}s waiting for the evictions", file=self.err)
                for p in progresses:
                    if not p.final:
                        print(f"  {evict_view.timeout_hint(p)}", file=self.err)
                print(self._left_in_place(targets), file=self.err, flush=True)
                return evict_view.EXIT_FAILED
            with anyio.move_on_after(
                max(0.0, deadline - anyio.current_time()) if deadline is not None else None
            ):
                await changed.wait()

    def _report(self, progresses: Sequence[evict_view.PodProgress]) -> int:
        code = evict_view.exit_code(progresses)
        evicted = [p.key for p in progresses if p.evicted]
        if evicted:
            self.say(f"evicted: {', '.join(evicted)}")
        for p in progresses:
            if not p.evicted:
                print(f"error: {p.line()}", file=self.err, flush=True)
        return code

    def _left_in_place(self, targets: Sequence[Target]) -> str:
        pods = " ".join(t.name for t in targets)
        requester = "" if self.requester == DEFAULT_REQUESTER else f" --requester {self.requester}"
        return (
            "the eviction requests stay in place and the evictions go on; to cancel them: "
            f"aiokcm evict --withdraw -n {self.namespace}{requester} {pods}"
        )

    async def _watch(
        self, res: Resource, watched: _Watched, *, task_status: TaskStatus[None] = TASK_STATUS_IGNORED
    ) -> None:
        """LIST then WATCH `res` in the namespace, relisting when the watch expires or drops."""
        started = False
        while True:
            try:
                listed = await self.client.list(res, namespace=self.namespace)
                watched.replace(res, listed.get("items") or [])
                if not started:
                    started = True
                    task_status.started()
                rv = str((listed.get("metadata") or {}).get("resourceVersion") or "")
                while True:
                    async with self.client.watch(
                        res, namespace=self.namespace, resource_version=rv, timeout_seconds=300
                    ) as events:
                        async for event in events:
                            if event.type == "ERROR":
                                raise ApiError(
                                    int(event.object.get("code") or 500),
                                    event.object,
                                    method="WATCH",
                                    path="",
                                )
                            rv = str((event.object.get("metadata") or {}).get("resourceVersion") or rv)
                            if event.type != "BOOKMARK":
                                watched.update(res, event.object, deleted=event.type == "DELETED")
            except ApiError as exc:
                if exc.not_found:
                    raise CliError(f"{res.group_resource} is not served by this cluster") from exc
                if not (exc.gone or exc.status >= 500 or exc.status == 429):
                    raise
            except (OSError, TimeoutError):
                pass  # a dropped connection: list again
            await anyio.sleep(self.args.retry_interval)


def _not_served(api: EvictionAPI) -> str:
    return (
        f"{api.requests.group_resource} is not served by this cluster: install aiokcm's "
        "EvictionRequest CRDs, or enable the EvictionRequestAPI feature gate on the API server"
    )


async def run(args: argparse.Namespace, client: KubeClient, *, out: TextIO, err: TextIO) -> int:
    """The command on an existing client (what the tests call)."""
    cmd = Evict(client, args, out=out, err=err)
    pod_names = list(dict.fromkeys(args.pods))
    try:
        api = await discover(client)
        if args.withdraw:
            return await cmd.withdraw(api, pod_names)
        return await cmd.evict(api, pod_names)
    except BadInput as exc:
        print(f"error: {exc}", file=err, flush=True)
        return EXIT_USAGE
    except CliError as exc:
        print(f"error: {exc}", file=err, flush=True)
        return evict_view.EXIT_FAILED


async def run_until_interrupted(
    args: argparse.Namespace, client: KubeClient, *, out: TextIO, err: TextIO
) -> int:
    """`run`, but SIGINT/SIGTERM stop the watch and leave the requests in place (exit 130)."""
    code = EXIT_INTERRUPTED
    async with anyio.create_task_group() as tg:

        async def on_signal() -> None:
            with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
                async for _ in signals:
                    what = "nothing more is done" if args.withdraw else _interrupted(args)
                    print(f"interrupted: {what}", file=err, flush=True)
                    tg.cancel_scope.cancel()
                    return

        async def body() -> None:
            nonlocal code
            code = await run(args, client, out=out, err=err)
            tg.cancel_scope.cancel()

        tg.start_soon(on_signal)
        tg.start_soon(body)
    return code


def _interrupted(args: argparse.Namespace) -> str:
    requester = "" if args.requester == DEFAULT_REQUESTER else f" --requester {args.requester}"
    return (
        "the eviction requests made stay in place and the evictions go on; to cancel them: "
        f"aiokcm evict --withdraw -n {args.namespace}{requester} {' '.join(args.pods)}"
    )


async def main(argv: list[str]) -> int:
    """Entry point: `argv` starts with the subcommand (`evict`)."""
    return await main_with_client(
        argv,
        build_parser(),
        lambda args, client: run_until_interrupted(args, client, out=sys.stdout, err=sys.stderr),
    )


__all__ = ["DEFAULT_REQUESTER", "build_parser", "main", "run"]
