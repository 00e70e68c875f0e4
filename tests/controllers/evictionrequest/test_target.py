"""Upstream's target_info_test.go tables (TestTargetInfo, TestIsPartOfPodGroup, TestIsTerminal,
TestEvictionResponders, TestToEvictionTargetApply).

Responder names carry a domain here ("a.example.com/responder-a"): aiokcm's reader validates a
pod's list (upstream's API server does), and a bare name is not a valid responder.
"""

from __future__ import annotations

import pytest

from controllers.evictionrequest.target import NO_TARGET, POD_TARGET, TargetInfo
from tests.controllers.evictionrequest.helpers import EVICTOR, eviction_responders, pod, pod_phase, target

A, B = "a.example.com/responder-a", "b.example.com/responder-b"


@pytest.mark.parametrize(
    ("t", "name", "target_uid", "target_type", "pod_uid", "gone"),
    [
        pytest.param(target("my-pod", "uid-1", pod("my-pod", "uid-1")), "my-pod", "uid-1", POD_TARGET, "uid-1", False,
                     id="TestTargetInfo/pod found"),
        pytest.param(target("my-pod", "uid-1", pod("my-pod", "uid-2")), "my-pod", "uid-1", POD_TARGET, "uid-2", True,
                     id="TestTargetInfo/pod found with different UID"),
        pytest.param(target("my-pod", "uid-1", None), "my-pod", "uid-1", POD_TARGET, "", True,
                     id="TestTargetInfo/pod not found"),
        pytest.param(target(None, "", None), "", "", NO_TARGET, "", False, id="TestTargetInfo/empty target"),
    ],
)  # fmt: skip
def test_target_info(
    t: TargetInfo, name: str, target_uid: str, target_type: str, pod_uid: str, gone: bool
) -> None:
    assert t.target_type() == target_type
    assert t.target_name() == name
    assert t.target_uid() == target_uid
    assert t.target_found_by_name() == (bool(pod_uid) and bool(target_uid))
    meta = t.object_meta()
    assert (meta is not None) == bool(pod_uid)
    assert meta is None or meta["uid"] == pod_uid
    assert t.is_gone() == gone


def _grouped() -> dict[str, object]:
    obj = pod("my-pod", "uid-1")
    obj["spec"]["schedulingGroup"] = {"podGroupName": "my-podgroup"}
    return obj


@pytest.mark.parametrize(
    ("t", "expected"),
    [
        pytest.param(target("my-pod", "uid-1", pod("my-pod", "uid-1")), False,
                     id="TestIsPartOfPodGroup/pod without PodGroup"),
        pytest.param(target("my-pod", "uid-1", _grouped()), True, id="TestIsPartOfPodGroup/pod with PodGroup"),
        pytest.param(target("my-pod", "uid-1", None), False, id="TestIsPartOfPodGroup/pod not found"),
    ],
)  # fmt: skip
def test_has_scheduling_group(t: TargetInfo, expected: bool) -> None:
    assert t.has_scheduling_group() == expected


@pytest.mark.parametrize(
    ("t", "expected"),
    [
        pytest.param(target("my-pod", "uid-1", pod("my-pod", "uid-1")), False, id="TestIsTerminal/running pod"),
        pytest.param(target("my-pod", "uid-1", pod("my-pod", "uid-1", pod_phase("Succeeded"))), True,
                     id="TestIsTerminal/succeeded pod"),
        pytest.param(target("my-pod", "uid-1", pod("my-pod", "uid-1", pod_phase("Failed"))), True,
                     id="TestIsTerminal/failed pod"),
        pytest.param(target("my-pod", "uid-1", None), False, id="TestIsTerminal/pod not found"),
    ],
)  # fmt: skip
def test_is_terminal(t: TargetInfo, expected: bool) -> None:
    assert t.is_terminal() == expected


WITH_RESPONDERS = pod("my-pod", "uid-1", eviction_responders((A, 1000), (B, 15000)))


@pytest.mark.parametrize(
    ("t", "include_default", "want"),
    [
        # Upstream returns the pod's order; aiokcm's reader returns the activation order.
        pytest.param(target("my-pod", "uid-1", WITH_RESPONDERS), False, [(B, 15000), (A, 1000)],
                     id="TestEvictionResponders/pod with responders"),
        pytest.param(target("my-pod", "uid-1", WITH_RESPONDERS), True, [(B, 15000), (A, 1000), (EVICTOR, 100)],
                     id="TestEvictionResponders/pod with responders + default ones"),
        pytest.param(target("my-pod", "uid-1", pod("my-pod", "uid-1")), False, [],
                     id="TestEvictionResponders/pod without responders"),
        pytest.param(target("my-pod", "uid-1", pod("my-pod", "uid-1")), True, [(EVICTOR, 100)],
                     id="TestEvictionResponders/pod with just default responders"),
        pytest.param(target("my-pod", "uid-1", None), False, [], id="TestEvictionResponders/pod not found"),
        pytest.param(target("my-pod", "uid-1", None), True, [],
                     id="TestEvictionResponders/pod not found with no default responders"),
        pytest.param(target(None, "", None), True, [],
                     id="TestEvictionResponders/no target; pod not found with no default responders"),
    ],
)  # fmt: skip
def test_eviction_responders(t: TargetInfo, include_default: bool, want: list[tuple[str, int]]) -> None:
    assert t.eviction_responders(include_default) == want


@pytest.mark.parametrize(
    ("t", "expected"),
    [
        pytest.param(target("my-pod", "uid-1", None), {"pod": {"name": "my-pod", "uid": "uid-1"}},
                     id="TestToEvictionTargetApply/target for Eviction"),
        pytest.param(TargetInfo({"pod": {"name": "my-pod", "uid": "uid-2"}}, None),
                     {"pod": {"name": "my-pod", "uid": "uid-2"}},
                     id="TestToEvictionTargetApply/target for EvictionRequest"),
    ],
)  # fmt: skip
def test_to_eviction_target(t: TargetInfo, expected: dict[str, object]) -> None:
    assert t.to_eviction_target() == expected
