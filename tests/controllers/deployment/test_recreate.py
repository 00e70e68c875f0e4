"""The Recreate strategy's steps, case for case with KCM's `recreate_test.go`."""

from __future__ import annotations

from typing import Any

import pytest

from apiclient.resources import REPLICASETS
from controllers.deployment import recreate
from tests.controllers.deployment.fakeclient import FakeClient, harness
from tests.controllers.deployment.kcm_objects import new_deployment, new_replica_set, new_rs_with_status

Obj = dict[str, Any]


@pytest.mark.parametrize("old_sizes", [[3], [3, 0, 2]])
async def test_scale_down_old_replica_sets(old_sizes: list[int]) -> None:
    """`TestScaleDownOldReplicaSets`: every old ReplicaSet ends at zero, and the list the caller
    passed holds the ReplicaSets as written."""
    d = new_deployment("foo", 3, None, None, None, {"foo": "bar"})
    old_rss = [new_replica_set(d, f"foo-{n}", size) for n, size in enumerate(old_sizes)]
    client = FakeClient()
    for r in old_rss:
        client.add(REPLICASETS, r)
    h = harness(client=client)
    assert await recreate.scale_down_old_replica_sets_for_recreate(h.sync, old_rss, d)
    assert [r["spec"]["replicas"] for r in old_rss] == [0] * len(old_sizes)
    assert sorted(a.name for a in h.client.writes()) == [f"foo-{n}" for n, s in enumerate(old_sizes) if s]
    assert not await recreate.scale_down_old_replica_sets_for_recreate(harness().sync, old_rss, d)


def _with_uid(uid: str) -> Obj:
    """`rsWithUID`."""
    d = new_deployment("foo", 1, None, None, None, {"foo": "bar"})
    out = new_replica_set(d, f"foo-{uid}", 0)
    out["metadata"]["uid"] = uid
    return out


def _pods(*phases: str) -> list[Obj]:
    return [{"status": {"phase": phase}} if phase else {} for phase in phases]


# `TestOldPodsRunning`.
@pytest.mark.parametrize(
    ("new_rs", "old_rss", "pod_map", "expected"),
    [
        pytest.param(None, [], {}, False, id="no old RSs"),
        pytest.param(
            None,
            [_with_uid("some-uid"), _with_uid("other-uid")],
            {"some-uid": _pods("", ""), "other-uid": _pods("", "")},
            True,
            id="old RSs with running pods",
        ),
        pytest.param(
            None,
            [new_rs_with_status("rs-1", 0, 1)],
            {},
            True,
            id="without pods but with non-zero status replicas",
        ),
        pytest.param(
            None, [new_rs_with_status("rs-1", 0, 0)], {}, False, id="without pods or status replicas"
        ),
        pytest.param(
            None,
            [new_rs_with_status("rs-1", 0, 0)],
            {"uid-1": _pods("Failed", "Succeeded")},
            False,
            id="zero status replicas but pods in terminal state",
        ),
        pytest.param(
            None,
            [new_rs_with_status("rs-1", 0, 0)],
            {"uid-1": _pods("Unknown")},
            True,
            id="zero status replicas but pod in unknown phase",
        ),
        pytest.param(
            None,
            [new_rs_with_status("rs-1", 0, 0)],
            {"uid-1": _pods("Pending")},
            True,
            id="pending pod present",
        ),
        pytest.param(
            None,
            [new_rs_with_status("rs-1", 0, 0)],
            {"uid-1": _pods("Running")},
            True,
            id="running pod present",
        ),
        pytest.param(
            None,
            [new_rs_with_status("rs-1", 0, 0)],
            {"uid-1": _pods("Failed", "Succeeded"), "uid-2": [], "uid-3": _pods("Pending")},
            True,
            id="pods in terminal state and pending",
        ),
        pytest.param(
            _with_uid("new-uid"),
            [new_rs_with_status("rs-1", 0, 0)],
            {"new-uid": _pods("Running")},
            False,
            id="the new ReplicaSet's pods do not count",
        ),
    ],
)
def test_old_pods_running(
    new_rs: Obj | None, old_rss: list[Obj], pod_map: dict[str, list[Obj]], expected: bool
) -> None:
    assert recreate.old_pods_running(new_rs, old_rss, pod_map) is expected
