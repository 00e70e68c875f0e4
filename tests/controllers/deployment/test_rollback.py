"""Rolling back through `deprecated.deployment.rollback.to`, as KCM's `rollback.go` does it."""

from __future__ import annotations

import copy
from typing import Any

from apiclient.resources import DEPLOYMENTS, REPLICASETS
from controllers.deployment import util
from controllers.deployment.rollback import rollback
from tests.controllers.deployment.fakeclient import FakeClient, harness
from tests.controllers.deployment.kcm_objects import new_deployment, new_replica_set

Obj = dict[str, Any]


def _fixture() -> tuple[Obj, list[Obj], FakeClient]:
    d = new_deployment("foo", 1, None, None, None, {"foo": "bar"})
    old_template = copy.deepcopy(d["spec"]["template"])
    old_template["spec"]["containers"][0]["image"] = "foo/old"
    rs1 = new_replica_set(d, "foo-1", 0)
    rs1["spec"]["template"] = old_template
    rs1["spec"]["template"]["metadata"]["labels"][util.POD_TEMPLATE_HASH_LABEL] = "h1"
    rs1["metadata"]["annotations"] = {util.REVISION_ANNOTATION: "1", "kubernetes.io/change-cause": "create"}
    rs2 = new_replica_set(d, "foo-2", 1)
    rs2["metadata"]["annotations"] = {
        util.REVISION_ANNOTATION: "2",
        "kubernetes.io/change-cause": "edit",
        "team": "x",
    }
    d["metadata"]["annotations"] = {
        util.REVISION_ANNOTATION: "2",
        util.ROLLBACK_TO_ANNOTATION: "0",
        "kubernetes.io/change-cause": "edit",
        "team": "x",
    }
    client = FakeClient()
    for obj, res in ((d, DEPLOYMENTS), (rs1, REPLICASETS), (rs2, REPLICASETS)):
        client.add(res, obj)
    return d, [rs1, rs2], client


async def test_rolling_back_takes_the_replica_sets_template_and_annotations() -> None:
    """`rollbackToTemplate` + `SetDeploymentAnnotationsTo`: the Deployment's annotations become
    the old ReplicaSet's (those it lacks go), all but the skipped ones, which stay."""
    d, rss, client = _fixture()
    h = harness(client=client)
    await rollback(h.sync, d, rss)
    annotations = d["metadata"]["annotations"]
    assert annotations == {util.REVISION_ANNOTATION: "2", "kubernetes.io/change-cause": "create"}
    assert d["spec"]["template"]["spec"]["containers"][0]["image"] == "foo/old"
    assert util.POD_TEMPLATE_HASH_LABEL not in d["spec"]["template"]["metadata"]["labels"]
    assert [(e.reason, e.message) for e in h.recorder.events] == [
        ("DeploymentRollback", 'Rolled back deployment "foo" to revision 1')
    ]


async def test_rolling_back_to_the_current_template_only_clears_the_request() -> None:
    d, rss, client = _fixture()
    d["metadata"]["annotations"][util.ROLLBACK_TO_ANNOTATION] = "2"
    h = harness(client=client)
    await rollback(h.sync, d, rss)
    assert util.ROLLBACK_TO_ANNOTATION not in d["metadata"]["annotations"]
    assert d["metadata"]["annotations"]["team"] == "x"
    assert [e.reason for e in h.recorder.events] == ["DeploymentRollbackTemplateUnchanged"]


async def test_rolling_back_to_a_missing_revision_gives_up() -> None:
    d, rss, client = _fixture()
    d["metadata"]["annotations"][util.ROLLBACK_TO_ANNOTATION] = "7"
    h = harness(client=client)
    await rollback(h.sync, d, rss)
    assert util.ROLLBACK_TO_ANNOTATION not in d["metadata"]["annotations"]
    assert [(e.reason, e.message) for e in h.recorder.events] == [
        ("DeploymentRollbackRevisionNotFound", "Unable to find the revision to rollback to.")
    ]
