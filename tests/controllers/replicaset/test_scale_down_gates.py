"""The scale-down order follows `--feature-gates` as KCM's does: `PodDeletionCost` (the
`controller.kubernetes.io/pod-deletion-cost` annotation goes first) and `LogarithmicScaleDown`
(ready times compared in log2 buckets), both on unless set to false."""

from __future__ import annotations

from datetime import timedelta

import pytest

from controllers.features import LOGARITHMIC_SCALE_DOWN, POD_DELETION_COST
from informers import meta_key
from kubeutil.timestamps import utcnow
from tests.controllers.replicaset.fakes import Rig, new_pod, new_replica_set

COST = "controller.kubernetes.io/pod-deletion-cost"


@pytest.mark.parametrize(("gates", "deleted"), [({}, "cheap"), ({POD_DELETION_COST: False}, "young")])
async def test_the_deletion_cost_decides_only_while_its_gate_is_on(
    gates: dict[str, bool], deleted: str
) -> None:
    rig = Rig(gates=gates)
    rs = new_replica_set(1, {"app": "web"})
    rig.add_rs(rs)
    now = utcnow()
    cheap = new_pod("cheap", rs, "Running", owned=True, ready_since=now - timedelta(hours=2))
    cheap["metadata"]["annotations"] = {COST: "-10"}
    young = new_pod("young", rs, "Running", owned=True, ready_since=now - timedelta(seconds=5))
    young["metadata"]["annotations"] = {COST: "100"}
    for pod in (cheap, young):
        rig.add_pod(pod)

    await rig.sync(meta_key(rs))

    assert rig.client.deleted == [deleted]


@pytest.mark.parametrize(("gates", "deleted"), [({}, "older"), ({LOGARITHMIC_SCALE_DOWN: False}, "newer")])
async def test_ready_times_in_one_log_bucket_tie_only_while_logarithmic_scale_down_is_on(
    gates: dict[str, bool], deleted: str
) -> None:
    # Ready 100 s and 70 s ago fall in one power-of-two bucket (64-128 s): with the gate on they
    # tie and the lower UID goes first; without it the pod ready more recently goes first.
    rig = Rig(gates=gates)
    rs = new_replica_set(1, {"app": "web"})
    rig.add_rs(rs)
    now = utcnow()
    older = new_pod("older", rs, "Running", owned=True, ready_since=now - timedelta(seconds=100))
    older["metadata"]["uid"] = "a"
    newer = new_pod("newer", rs, "Running", owned=True, ready_since=now - timedelta(seconds=70))
    newer["metadata"]["uid"] = "b"
    for pod in (older, newer):
        rig.add_pod(pod)

    await rig.sync(meta_key(rs))

    assert rig.client.deleted == [deleted]
