"""The taint manager's per-pod decisions on a virtual clock: when a deletion is due, and what cancels it.

The controller is built on a client that is never called (deletions are not run here, only
scheduled): `process_pod_on_node` and the update handlers work from the informer caches.
"""

from __future__ import annotations

from typing import Any, cast

import anyio
import pytest

from apiclient import KubeClient
from controllers.context import ControllerContext
from controllers.tainteviction import TaintEvictionController
from informers import SharedInformerFactory
from tests.controllers.harness import RecordingEvents, build

pytestmark = pytest.mark.looptime

TAINT = {"key": "example.com/evict", "effect": "NoExecute"}
OTHER = {"key": "example.com/other", "effect": "NoExecute"}


def tol(key: str, seconds: int | None) -> dict[str, Any]:
    t: dict[str, Any] = {"key": key, "operator": "Exists", "effect": "NoExecute"}
    if seconds is not None:
        t["tolerationSeconds"] = seconds
    return t


def pod(name: str, *tolerations: dict[str, Any], node: str = "node-1") -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "ns", "uid": name},
        "spec": {"nodeName": node, "tolerations": list(tolerations)},
    }


def make() -> tuple[TaintEvictionController, RecordingEvents]:
    events = RecordingEvents()
    client = cast(KubeClient, object())
    ctx = ControllerContext(client=client, informers=SharedInformerFactory(client), events=events)
    return build(TaintEvictionController, ctx), events


async def test_due_times_follow_the_matching_tolerations() -> None:
    c, _ = make()
    now = anyio.current_time()
    c.schedule_sync.process_pod_on_node(pod("none"), [TAINT], now)
    c.schedule_sync.process_pod_on_node(pod("other-key", tol("unrelated", 10)), [TAINT], now)
    c.schedule_sync.process_pod_on_node(pod("zero", tol(TAINT["key"], 0)), [TAINT], now)
    c.schedule_sync.process_pod_on_node(
        pod("ten", tol(TAINT["key"], 10), tol(TAINT["key"], 30)), [TAINT], now
    )
    c.schedule_sync.process_pod_on_node(
        pod("smallest", tol(TAINT["key"], 30), tol(OTHER["key"], 5)), [TAINT, OTHER], now
    )
    c.schedule_sync.process_pod_on_node(pod("forever", tol(TAINT["key"], None)), [TAINT], now)
    c.schedule_sync.process_pod_on_node(pod("half", tol(TAINT["key"], None)), [TAINT, OTHER], now)
    assert c.schedule.scheduled("ns/none") == now
    assert c.schedule.scheduled("ns/other-key") == now
    assert c.schedule.scheduled("ns/zero") == now
    assert c.schedule.scheduled("ns/ten") == now + 10  # the first matching toleration per taint counts
    assert c.schedule.scheduled("ns/smallest") == now + 5
    assert c.schedule.scheduled("ns/forever") is None
    assert c.schedule.scheduled("ns/half") == now  # the second taint is not tolerated at all


async def test_a_later_look_never_postpones_but_an_untolerated_taint_brings_it_forward() -> None:
    c, _ = make()
    start = anyio.current_time()
    p = pod("p", tol(TAINT["key"], 10), tol(OTHER["key"], 60))
    c.schedule_sync.process_pod_on_node(p, [TAINT], start)
    await anyio.sleep(4)
    c.schedule_sync.process_pod_on_node(p, [TAINT, OTHER], anyio.current_time())
    assert c.schedule.scheduled("ns/p") == start + 10  # the original start stands
    untolerated = {"key": "example.com/third", "effect": "NoExecute"}
    c.schedule_sync.process_pod_on_node(p, [TAINT, untolerated], anyio.current_time())
    assert c.schedule.scheduled("ns/p") == anyio.current_time()


async def test_infinite_tolerations_and_vanishing_taints_cancel_with_an_event() -> None:
    c, events = make()
    now = anyio.current_time()
    c.schedule_sync.process_pod_on_node(pod("p", tol(TAINT["key"], 10)), [TAINT], now)
    assert c.schedule.scheduled("ns/p") is not None
    c.schedule_sync.process_pod_on_node(
        pod("p", tol(TAINT["key"], 10), tol(TAINT["key"], None)), [TAINT], now
    )
    assert c.schedule.scheduled("ns/p") == now + 10  # the first matching toleration still has seconds
    c.schedule_sync.process_pod_on_node(pod("p", tol(TAINT["key"], None)), [TAINT], now)
    assert c.schedule.scheduled("ns/p") is None
    assert events.reasons("p") == ["TaintManagerEviction"]
    assert len(c.evictions) == 0


async def test_node_items_are_handled_before_pod_items_of_the_same_shard() -> None:
    c, _ = make()
    c.updates.add((1, "node-1", "ns", "a"))
    c.updates.add((0, "node-1", "", ""))
    shard = c.updates.shard_for((0, "node-1", "", ""))
    assert shard == c.updates.shard_for((1, "node-1", "ns", "a"))
    first = await c.updates.get(shard)
    assert first[0] == 0
    c.updates.shutdown()


async def test_a_pod_recreated_under_the_same_name_is_judged_afresh() -> None:
    c, _ = make()
    start = anyio.current_time()
    first = pod("sts-0", tol(TAINT["key"], 10))
    c.schedule_sync.process_pod_on_node(first, [TAINT], start)
    await anyio.sleep(8)
    again = {**first, "metadata": {**first["metadata"], "uid": "another"}}
    c.schedule_sync.process_pod_on_node(again, [TAINT], anyio.current_time())
    assert c.schedule.scheduled("ns/sts-0") == anyio.current_time() + 10  # its own start, not the old pod's
