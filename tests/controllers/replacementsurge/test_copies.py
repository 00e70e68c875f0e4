"""The objects of a surge: which labels a copy holds back, its body, its adoption, the deletion-cost mark.

Patches are applied as the API server applies them (`localcluster.patch`: a merge patch, and the
hand-over's strategic merge with the pod's schema), so what is checked is the pod they leave, not
only their shape.
"""

from __future__ import annotations

import copy as deepcopy
import json
from typing import Any

import pytest

from controllers.common.controller_ref import get_controller_of, new_controller_ref
from controllers.replacementsurge.copies import (
    DEPARTING_COST,
    HELD_LABELS_ANNOTATION,
    LOWEST_COST,
    POD_DELETION_COST,
    PREVIOUS_COST_ANNOTATION,
    RANKS,
    REPLACES_LABEL,
    adopt_patch,
    copy_body,
    cost_rank,
    held_labels,
    held_of,
    is_marked,
    mark_patch,
    marked_cost,
    marked_rank,
    matched_by_any,
    rank_cost,
    replaced,
    replaces,
    restore_patch,
)
from kubeutil.selectors import from_label_selector
from localcluster.builtin import schemas
from localcluster.patch import merge_patch, strategic_merge
from tests.controllers.replacementsurge.helpers import HASH, NOW, NS, deployment_rs, pod
from tests.support.objects import Obj, deployment, replicaset

POD_SCHEMA = schemas.kind_schema("", "v1", "Pod")


def rs_selecting(selector: dict[str, Any], template_labels: dict[str, str]) -> Obj:
    """A bare ReplicaSet with this selector and these template labels."""
    rs = replicaset("web", 2, namespace=NS, metadata={"uid": "rs"})
    rs["spec"]["selector"] = selector
    rs["spec"]["template"]["metadata"]["labels"] = template_labels
    return rs


def applied(obj: Obj, patch: dict[str, Any] | None) -> Obj:
    """`obj` after the merge patch (the `uid` in a patch is a precondition, the same value)."""
    assert patch is not None
    return merge_patch(deepcopy.deepcopy(obj), patch)  # type: ignore[no-any-return]


def annotations_of(obj: Obj) -> dict[str, str]:
    return dict(obj["metadata"].get("annotations") or {})


# -- held_labels --------------------------------------------------------------------------------


def test_a_deployments_replicaset_holds_back_pod_template_hash_only() -> None:
    rs = deployment_rs()
    held = held_labels(rs)
    assert held == {"pod-template-hash": HASH}
    body = copy_body(rs, pod("a"), held)
    labels = body["metadata"]["labels"]
    # Outside every ReplicaSet of the Deployment, inside the Deployment's own selector (its
    # Service and PodDisruptionBudget see it from the start).
    assert not matched_by_any(labels, [rs, deployment_rs("web-old", uid="rs-old")])
    assert from_label_selector(deployment("web")["spec"]["selector"]).matches(labels)


@pytest.mark.parametrize(
    ("selector", "template_labels", "held"),
    [
        pytest.param(
            {"matchLabels": {"tier": "fe", "app": "web"}},
            {"app": "web", "tier": "fe", "extra": "x"},
            {"app": "web"},
            id="matchLabels: the first selector label (sorted)",
        ),
        pytest.param(
            {"matchExpressions": [{"key": "app", "operator": "In", "values": ["web", "api"]}]},
            {"app": "web"},
            {"app": "web"},
            id="In",
        ),
        pytest.param(
            {"matchExpressions": [{"key": "app", "operator": "Exists"}]},
            {"app": "web"},
            {"app": "web"},
            id="Exists",
        ),
        pytest.param(
            {
                "matchExpressions": [
                    {"key": "app", "operator": "NotIn", "values": ["db"]},
                    {"key": "canary", "operator": "DoesNotExist"},
                ]
            },
            {"app": "web"},
            None,
            id="only NotIn/DoesNotExist: nothing to hold back",
        ),
        pytest.param(
            {"matchLabels": {"app": "web"}, "matchExpressions": [{"key": "app", "operator": "Bogus"}]},
            {"app": "web"},
            None,
            id="invalid selector",
        ),
        pytest.param(
            {"matchLabels": {"app": "web"}},
            {"other": "x"},
            None,
            id="template without the selector's label",
        ),
    ],
)
def test_a_bare_replicaset_holds_back_a_selector_label(
    selector: dict[str, Any], template_labels: dict[str, str], held: dict[str, str] | None
) -> None:
    rs = rs_selecting(selector, template_labels)
    assert held_labels(rs) == held
    if held is not None:
        kept = {k: v for k, v in template_labels.items() if k not in held}
        assert not matched_by_any(kept, [rs])
        assert matched_by_any(template_labels, [rs])


# -- copy_body ----------------------------------------------------------------------------------


def test_copy_body_is_the_template_outside_the_selector_owned_but_not_controlled() -> None:
    rs = deployment_rs()
    rs["spec"]["template"]["metadata"]["annotations"] = {"prometheus.io/scrape": "true"}
    departing = pod("a")
    body = copy_body(rs, departing, {"pod-template-hash": HASH})
    meta = body["metadata"]
    assert meta["generateName"] == "web-abc-"
    assert "name" not in meta
    assert meta["namespace"] == NS
    assert meta["ownerReferences"] == [
        {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-abc", "uid": "rs"}
    ]
    assert get_controller_of(body) is None  # a controlled pod the selector misses would be released
    assert meta["labels"] == {"app": "web", REPLACES_LABEL: "uid-a"}
    assert replaces(body) == "uid-a"
    assert json.loads(meta["annotations"][HELD_LABELS_ANNOTATION]) == {"pod-template-hash": HASH}
    assert meta["annotations"]["prometheus.io/scrape"] == "true"  # the template's own stay
    assert held_of(body) == {"pod-template-hash": HASH}
    # The spec is the template's, copied: shaping the body leaves the cached ReplicaSet alone.
    assert body["spec"] == rs["spec"]["template"]["spec"]
    body["spec"]["containers"][0]["image"] = "changed"
    assert rs["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:1.27"
    assert rs["spec"]["template"]["metadata"]["labels"]["pod-template-hash"] == HASH


@pytest.mark.parametrize("raw", ["not json", "[1, 2]"])
def test_held_of_a_damaged_annotation_is_nothing(raw: str) -> None:
    body = copy_body(deployment_rs(), pod("a"), {"pod-template-hash": HASH})
    body["metadata"]["annotations"][HELD_LABELS_ANNOTATION] = raw
    assert held_of(body) == {}


# -- adopt_patch --------------------------------------------------------------------------------


def handed_over(obj: Obj, patch: dict[str, Any]) -> Obj:
    """`obj` after the hand-over patch, merged as the API server merges a pod's strategic patch
    (owner references by `uid`)."""
    return strategic_merge(deepcopy.deepcopy(obj), patch, POD_SCHEMA)  # type: ignore[no-any-return]


def test_adopt_patch_gives_the_labels_back_and_remembers_whom_it_replaced() -> None:
    rs = deployment_rs()
    body = copy_body(rs, pod("a"), {"pod-template-hash": HASH})
    body["metadata"]["uid"] = "uid-copy"
    patch = adopt_patch(body, rs, NOW)
    assert patch["metadata"]["uid"] == "uid-copy"  # the precondition: this copy, not a namesake
    adopted = handed_over(body, patch)
    assert adopted["metadata"]["labels"] == rs["spec"]["template"]["metadata"]["labels"]
    assert matched_by_any(adopted["metadata"]["labels"], [rs])  # the ReplicaSet claims it now
    assert replaces(adopted) == ""  # an ordinary pod of the ReplicaSet from now on
    assert replaced(adopted) == ("uid-a", NOW)


def test_adopt_patch_makes_the_replicaset_the_controller_as_kcms_adoption_would() -> None:
    """KCM's `ClaimPods` claims a matching pod it already controls without a request; an orphan
    costs it a fresh GET of the ReplicaSet and an adoption patch. The hand-over leaves the copy
    with the reference KCM's adoption writes (`NewControllerRef`), merged into the copy's own."""
    rs = deployment_rs()
    body = copy_body(rs, pod("a"), {"pod-template-hash": HASH})
    body["metadata"]["uid"] = "uid-copy"
    other = {"apiVersion": "v1", "kind": "ConfigMap", "name": "keeper", "uid": "cm"}
    body["metadata"]["ownerReferences"].append(other)
    adopted = handed_over(body, adopt_patch(body, rs, NOW))
    assert adopted["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "name": "web-abc",
            "uid": "rs",
            "controller": True,
            "blockOwnerDeletion": True,
        },
        other,  # someone else's reference stays
    ]
    assert get_controller_of(adopted) == new_controller_ref(rs, api_version="apps/v1", kind="ReplicaSet")


def test_replaced_of_a_pod_never_handed_over() -> None:
    assert replaced(pod("a")) == ("", None)


# -- mark_patch / restore_patch -----------------------------------------------------------------


@pytest.mark.parametrize("own", [None, "5", "-3"])
def test_mark_then_restore_gives_the_pod_its_own_cost_back(own: str | None) -> None:
    original = pod("a", cost=own)
    assert not is_marked(original)
    assert restore_patch(original) is None  # never marked: nothing to put back

    marked = applied(original, mark_patch(original))
    assert annotations_of(marked)[POD_DELETION_COST] == DEPARTING_COST
    assert annotations_of(marked)[PREVIOUS_COST_ANNOTATION] == (own if own is not None else "")
    assert marked_cost(marked) == DEPARTING_COST
    assert mark_patch(marked) is None  # marked already

    lowest = applied(marked, mark_patch(marked, LOWEST_COST))
    assert marked_cost(lowest) == LOWEST_COST
    # Re-marked: the remembered cost is still the pod's own, not our DEPARTING_COST.
    assert annotations_of(lowest)[PREVIOUS_COST_ANNOTATION] == (own if own is not None else "")

    restore = restore_patch(lowest)
    assert restore == {
        "metadata": {
            "uid": "uid-a",
            "annotations": {POD_DELETION_COST: own, PREVIOUS_COST_ANNOTATION: None},
        }
    }
    assert annotations_of(applied(lowest, restore)) == annotations_of(original)


@pytest.mark.parametrize(
    ("cost", "rank"),
    [
        (str(-(2**31)), 0),
        (str(-(2**31) + 1), 1),
        (str(-(2**31) + RANKS - 1), RANKS - 1),
        (str(-(2**31) + RANKS), None),  # far below any cost people set, but not one of ours
        ("0", None),
        ("-5", None),
        ("not a number", None),
    ],
)
def test_a_departing_pods_cost_is_a_rank_up_from_the_lowest_int32(cost: str, rank: int | None) -> None:
    marked = pod("a", cost=cost, previous_cost="")
    assert cost_rank(cost) == rank
    assert marked_rank(marked) == rank
    assert is_marked(marked) is (rank is not None)
    if rank is not None:
        assert rank_cost(rank) == cost


def test_ranks_past_the_last_share_it() -> None:
    assert rank_cost(RANKS + 10) == rank_cost(RANKS - 1)
    assert rank_cost(-1) == LOWEST_COST


def test_a_cost_someone_else_set_to_our_value_is_not_our_mark() -> None:
    theirs = pod("a", cost=LOWEST_COST)
    assert marked_cost(theirs) is None and not is_marked(theirs)
    patch = mark_patch(theirs, LOWEST_COST)
    assert patch is not None
    assert patch["metadata"]["annotations"][PREVIOUS_COST_ANNOTATION] == LOWEST_COST
    # A remembered cost with a cost that is no longer ours (someone changed it): not marked.
    assert marked_cost(pod("a", cost="7", previous_cost="")) is None


def test_a_cost_someone_set_while_the_pod_was_marked_is_the_one_kept() -> None:
    """Someone (a person, an operator) set their own cost on a pod we had marked: marking it again
    remembers theirs, and a withdrawal leaves theirs in place instead of restoring the older one."""
    changed = pod("a", cost="7", previous_cost="3")
    remark = mark_patch(changed)
    assert remark is not None
    assert remark["metadata"]["annotations"][PREVIOUS_COST_ANNOTATION] == "7"
    restore = restore_patch(changed)
    assert restore is not None
    assert annotations_of(applied(changed, restore)) == {POD_DELETION_COST: "7"}


def test_the_cost_writes_are_guarded_by_the_version_they_were_read_at() -> None:
    """A mark planned from a stale cache must fail (409) rather than remember a cost that was
    already replaced: the patch carries the pod's resourceVersion as a precondition."""
    read = pod("a", cost="5")
    read["metadata"]["resourceVersion"] = "41"
    for patch in (mark_patch(read), restore_patch(applied(read, mark_patch(read)))):
        assert patch is not None
        assert patch["metadata"]["resourceVersion"] == "41"
        assert patch["metadata"]["uid"] == "uid-a"


# -- matched_by_any -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("labels", "matched"),
    [
        ({"app": "web", "pod-template-hash": "abc"}, True),
        ({"app": "web", "pod-template-hash": "def"}, True),  # the other ReplicaSet
        ({"app": "web", "pod-template-hash": "zzz"}, False),
        ({"app": "web"}, False),
        ({}, False),
    ],
)
def test_matched_by_any_replicaset(labels: dict[str, str], matched: bool) -> None:
    broken = rs_selecting({"matchExpressions": [{"key": "app", "operator": "Bogus"}]}, {"app": "web"})
    unset = replicaset("none", 1, namespace=NS)
    del unset["spec"]["selector"]  # no selector matches nothing
    new = deployment_rs()
    old = deployment_rs("web-def", uid="rs-old")
    old["spec"]["selector"]["matchLabels"]["pod-template-hash"] = "def"
    assert matched_by_any(labels, [broken, unset, new, old]) is matched
    assert not matched_by_any(labels, [])
