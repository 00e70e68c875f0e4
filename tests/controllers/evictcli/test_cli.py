"""`aiokcm evict` against an API server, with the evictionrequest controller and the imperative evictor.

The test plays a responder of its own (`hold.example.com/migrate`, above the evictor) to show the
command following a responder's progress, then lets the evictor evict the pod. The API is aiokcm's
CRDs; the command discovers that itself.
"""

from __future__ import annotations

import io
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest

from apiclient import KubeClient
from apiclient.resources import PODS
from controller_manager.evict_cli import DEFAULT_REQUESTER, build_parser, run
from controllers import features
from controllers.evictionrequest import EvictionRequestController
from controllers.imperativeeviction import ImperativeEvictionResponderController
from evictionapi import names, requests
from evictionapi.requester import request_name
from tests.controllers.harness import running_controllers
from tests.support.evictionrequests import (
    IMPERATIVE,
    REQUESTS,
    install_eviction_api,
    pod_with_responders,
    report,
    running_pod,
    wait_for_states,
)
from tests.support.waiting import eventually

pytestmark = pytest.mark.backends("local", "real")

NS = "default"
HOLD = "hold.example.com/migrate"
GATES = {features.EVICTION_REQUEST_API: True}
ACTIVE, INACTIVE = names.STATE_ACTIVE, names.STATE_INACTIVE


@pytest.fixture(autouse=True)
async def api(kube: KubeClient) -> None:
    await install_eviction_api(kube, namespace=NS)


async def evict(kube: KubeClient, *argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = await run(build_parser().parse_args(["evict", *argv]), kube, out=out, err=err)
    return code, out.getvalue(), err.getvalue()


class Background:
    """A command running in a task, with its output readable while it runs."""

    def __init__(self) -> None:
        self.out, self.err = io.StringIO(), io.StringIO()
        self.code: int | None = None
        self.done = anyio.Event()

    def said(self, text: str) -> Callable[[], bool]:
        return lambda: text in self.out.getvalue()


@asynccontextmanager
async def in_background(kube: KubeClient, *argv: str) -> AsyncIterator[Background]:
    bg = Background()
    async with anyio.create_task_group() as tg:

        async def command() -> None:
            bg.code = await run(build_parser().parse_args(["evict", *argv]), kube, out=bg.out, err=bg.err)
            bg.done.set()

        tg.start_soon(command)
        try:
            yield bg
        finally:
            with anyio.move_on_after(30):
                await bg.done.wait()
            tg.cancel_scope.cancel()


async def ours(kube: KubeClient, pod: str) -> list[dict[str, Any]]:
    return [
        r
        for r in await kube.list_all(REQUESTS, namespace=NS)
        if requests.requester_of(r) == DEFAULT_REQUESTER and (requests.target_pod_of(r) or ("",))[0] == pod
    ]


async def test_evicts_through_the_responders_following_each_one(kube: KubeClient) -> None:
    pod = await running_pod(kube, NS, pod_with_responders("web", [(HOLD, 20000)]))
    name = request_name("web", pod["metadata"]["uid"], DEFAULT_REQUESTER)
    async with running_controllers(
        kube, EvictionRequestController, ImperativeEvictionResponderController, gates=GATES
    ):
        async with in_background(kube, "web", "-n", NS, "--timeout", "60s") as bg:
            await eventually(bg.said(f"evictionrequest/{name} created for pod {NS}/web"), "the request made")
            eviction = await wait_for_states(
                kube, NS, "web", [(HOLD, 20000, ACTIVE), (IMPERATIVE, 100, INACTIVE)]
            )
            await report(kube, eviction, HOLD, message="copying 1/2")
            await eventually(bg.said(f"{NS}/web: Evicting, {HOLD} Active"), "the active responder shown")
            await eventually(bg.said("copying 1/2"), "the responder's message shown")

            # Run again meanwhile: the same request is found, nothing new is made.
            code, out, err = await evict(kube, "web", "-n", NS, "--timeout", "0.3s")
            assert code == 1, (out, err)
            assert f"evictionrequest/{name} already requests pod {NS}/web" in out
            assert "timed out" in err and "aiokcm evict --withdraw -n default web" in err
            assert [r["metadata"]["name"] for r in await ours(kube, "web")] == [name]

            await report(kube, eviction, HOLD, message="copied", completed=True)
            await eventually(lambda: bg.code is not None, "the command to finish", timeout=60)
        assert bg.code == 0, (bg.out.getvalue(), bg.err.getvalue())
        lines = bg.out.getvalue().splitlines()
        assert any(line.startswith(f"{NS}/web: Evicted") for line in lines), lines
        assert lines[-1] == f"evicted: {NS}/web"
        assert await kube.get_or_none(PODS, "web", namespace=NS) is None

        # The pod is gone: a new command on it is bad input.
        code, _out, err = await evict(kube, "web", "-n", NS)
        assert code == 2
        assert err.strip() == f'error: pods "web" not found in namespace "{NS}"; nothing was requested'


async def test_withdrawing_cancels_the_eviction_and_the_follower_reports_it_failed(kube: KubeClient) -> None:
    await running_pod(kube, NS, pod_with_responders("db", [(HOLD, 20000)]))
    async with running_controllers(
        kube, EvictionRequestController, ImperativeEvictionResponderController, gates=GATES
    ):
        async with in_background(kube, "db", "-n", NS, "--timeout", "60s") as bg:
            await wait_for_states(kube, NS, "db", [(HOLD, 20000, ACTIVE), (IMPERATIVE, 100, INACTIVE)])
            await eventually(bg.said(f"{HOLD} Active"), "the active responder shown")

            code, out, err = await evict(kube, "db", "-n", NS, "--withdraw")
            assert code == 0, err
            assert "withdrawn (pod default/db)" in out
            await eventually(lambda: bg.code is not None, "the follower to stop", timeout=60)
        assert bg.code == 1
        assert f"error: {NS}/db: Failed" in bg.err.getvalue()
        assert (
            names.REASON_CANCELED_DUE_TO_NO_REQUESTERS in bg.err.getvalue()
            or "requester" in bg.err.getvalue()
        )
        (request,) = await ours(kube, "db")
        assert requests.intent_of(request) == names.INTENT_WITHDRAWN
        assert await kube.get_or_none(PODS, "db", namespace=NS) is not None  # nobody evicted it

        # Withdrawing again changes nothing and says so.
        code, out, _err = await evict(kube, "db", "-n", NS, "--withdraw")
        assert code == 0 and "already withdrawn" in out


async def test_unknown_pods_are_bad_input_and_nothing_is_requested(kube: KubeClient) -> None:
    await running_pod(kube, NS, pod_with_responders("real-one"))
    code, out, err = await evict(kube, "real-one", "ghost", "-n", NS)
    assert code == 2
    assert err.strip() == f'error: pods "ghost" not found in namespace "{NS}"; nothing was requested'
    assert out == ""
    assert await ours(kube, "real-one") == []
    code, _out, err = await evict(kube, "ghost", "-n", NS, "--withdraw")
    assert code == 2 and "nothing was withdrawn" in err


async def test_without_the_controllers_the_timeout_says_what_is_missing(kube: KubeClient) -> None:
    await running_pod(kube, NS, pod_with_responders("lonely"))
    code, out, err = await evict(
        kube, "lonely", "-n", NS, "--timeout", "0.5s", "--requester", "ops.example.com/me"
    )
    assert code == 1
    assert f"{NS}/lonely: Requested" in out
    assert "no Eviction was made for its request" in err
    assert "aiokcm evict --withdraw -n default --requester ops.example.com/me lonely" in err
    (request,) = [
        r
        for r in await kube.list_all(REQUESTS, namespace=NS)
        if requests.requester_of(r) == "ops.example.com/me"
    ]
    assert requests.wants_eviction(request)  # left in place
