"""Ports of Go's `pkg/controller/controller_ref_manager_test.go`: what `ClaimPods` claims, adopts and
releases, and the release patch's exact bytes."""

from __future__ import annotations

import json
from typing import Any, cast

import pytest

from apiclient import KubeClient
from apiclient.resources import Resource
from controllers.common.controller_ref import ControllerRefManager, delete_owner_refs_patch
from kubeutil.selectors import from_label_selector

Obj = dict[str, Any]

PRODUCTION = {"type": "production"}
TESTING = {"type": "testing"}
CONTROLLER_UID = "123"


class PatchRecorder:
    """`FakePodControl`'s patches: every patch is recorded and succeeds."""

    def __init__(self) -> None:
        self.patches: list[Obj] = []

    async def patch(self, res: Resource, name: str, patch: Obj, **_: Any) -> Obj:
        self.patches.append(patch)
        return patch


def controller(*, uid: str = "", namespace: str = "default", deleting: bool = False) -> Obj:
    meta: Obj = {"name": "rc", "namespace": namespace, "uid": uid}
    if deleting:
        meta["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    return {"metadata": meta}


def new_pod(name: str, labels: dict[str, str], owner: Obj | None, *, namespace: str = "default") -> Obj:
    meta: Obj = {"name": name, "namespace": namespace, "uid": f"uid-{name}", "labels": dict(labels)}
    if owner is not None:
        meta["ownerReferences"] = [
            {
                "apiVersion": "apps/v1",
                "kind": "Fake",
                "name": owner["metadata"]["name"],
                "uid": owner["metadata"]["uid"],
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]
    return {"metadata": meta, "spec": {"containers": [{"image": "foo/bar"}]}}


def _cases() -> list[tuple[str, Obj, list[Obj], list[str], int, tuple[str, ...]]]:
    """(name, controller, pods, claimed names, patches, finalizers)."""
    plain = controller()
    deleting = controller(uid=CONTROLLER_UID, deleting=True)
    owner = controller(uid=CONTROLLER_UID)
    other = controller(uid="AAAAA")
    cluster_scoped = controller(uid=CONTROLLER_UID, namespace="")
    deleting_owned = new_pod("pod1", PRODUCTION, owner)
    deleting_owned["metadata"]["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    deleting_orphan = new_pod("pod2", PRODUCTION, None)
    deleting_orphan["metadata"]["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    return [
        (
            "Claim pods with correct label",
            plain,
            [new_pod("pod1", PRODUCTION, None), new_pod("pod2", TESTING, None)],
            ["pod1"],
            1,
            (),
        ),
        (
            "Controller marked for deletion can not claim pods",
            deleting,
            [new_pod("pod1", PRODUCTION, None), new_pod("pod2", PRODUCTION, None)],
            [],
            0,
            (),
        ),
        (
            "Controller marked for deletion can not claim new pods",
            deleting,
            [new_pod("pod1", PRODUCTION, deleting), new_pod("pod2", PRODUCTION, None)],
            ["pod1"],
            0,
            (),
        ),
        (
            "Controller can not claim pods owned by another controller",
            owner,
            [new_pod("pod1", PRODUCTION, owner), new_pod("pod2", PRODUCTION, other)],
            ["pod1"],
            0,
            (),
        ),
        (
            "Controller releases claimed pods when selector doesn't match",
            owner,
            [new_pod("pod1", PRODUCTION, owner), new_pod("pod2", TESTING, owner)],
            ["pod1"],
            1,
            (),
        ),
        (
            "Controller does not claim orphaned pods marked for deletion",
            owner,
            [deleting_owned, deleting_orphan],
            ["pod1"],
            0,
            (),
        ),
        (
            "Controller claims or release pods according to selector with finalizers",
            owner,
            [
                new_pod("pod1", PRODUCTION, owner),
                new_pod("pod2", TESTING, owner),
                new_pod("pod3", PRODUCTION, None),
            ],
            ["pod1", "pod3"],
            2,
            ("foo-finalizer", "bar-finalizer"),
        ),
        (
            "Controller does not claim pods of different namespace",
            owner,
            [new_pod("pod1", PRODUCTION, None), new_pod("pod2", PRODUCTION, None, namespace="fakens")],
            ["pod1"],
            1,
            (),
        ),
        (
            "Cluster scoped controller claims pods of specified namespace",
            cluster_scoped,
            [new_pod("pod1", PRODUCTION, None), new_pod("pod2", PRODUCTION, None, namespace="fakens")],
            ["pod1", "pod2"],
            2,
            (),
        ),
    ]


@pytest.mark.parametrize(
    ("name", "owner", "pods", "claimed", "patches", "finalizers"), _cases(), ids=[c[0] for c in _cases()]
)
async def test_claim_pods(
    name: str, owner: Obj, pods: list[Obj], claimed: list[str], patches: int, finalizers: tuple[str, ...]
) -> None:
    """TestClaimPods."""
    recorder = PatchRecorder()

    async def can_adopt() -> None:
        return None

    manager = ControllerRefManager(
        cast(KubeClient, recorder),
        owner,
        from_label_selector({"matchLabels": PRODUCTION}),
        api_version="apps/v1",
        kind="Fake",
        can_adopt=can_adopt,
        finalizers=finalizers,
    )
    got = await manager.claim(pods)
    assert [p["metadata"]["name"] for p in got] == claimed
    assert len(recorder.patches) == patches
    for patch in recorder.patches:
        text = json.dumps(patch)
        assert owner["metadata"]["uid"] in text
        for finalizer in finalizers:
            assert finalizer in text


@pytest.mark.parametrize(
    ("name", "owner_uids", "dependent_uid", "finalizers", "want"),
    [
        (
            "check the structure of patch bytes",
            ["ss1"],
            "ss2",
            [],
            '{"metadata":{"uid":"ss2","ownerReferences":[{"$patch":"delete","uid":"ss1"}]}}',
        ),
        (
            "check if parent uid is escaped",
            ['ss1"hello'],
            "ss2",
            [],
            '{"metadata":{"uid":"ss2","ownerReferences":[{"$patch":"delete","uid":"ss1\\"hello"}]}}',
        ),
        (
            "check if revision uid uid is escaped",
            ["ss1"],
            'ss2"hello',
            [],
            '{"metadata":{"uid":"ss2\\"hello","ownerReferences":[{"$patch":"delete","uid":"ss1"}]}}',
        ),
        (
            "check the structure of patch bytes with multiple owners",
            ["ss1", "ss2"],
            "ss2",
            [],
            '{"metadata":{"uid":"ss2","ownerReferences":[{"$patch":"delete","uid":"ss1"},{"$patch":"delete","uid":"ss2"}]}}',
        ),
        (
            "check the structure of patch bytes with a finalizer and multiple owners",
            ["ss1", "ss2"],
            "ss2",
            ["f1"],
            '{"metadata":{"uid":"ss2","ownerReferences":[{"$patch":"delete","uid":"ss1"},{"$patch":"delete","uid":"ss2"}],'
            '"$deleteFromPrimitiveList/finalizers":["f1"]}}',
        ),
    ],
)
def test_generate_patch_bytes_for_delete(
    name: str, owner_uids: list[str], dependent_uid: str, finalizers: list[str], want: str
) -> None:
    """TestGeneratePatchBytesForDelete."""
    got = json.dumps(delete_owner_refs_patch(dependent_uid, owner_uids, finalizers), separators=(",", ":"))
    assert got == want
