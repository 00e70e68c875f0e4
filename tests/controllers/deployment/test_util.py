"""Deployment arithmetic against the cases Kubernetes' own unit tests pin down."""

from __future__ import annotations

import pytest

from controllers.common import deploymentstrategy
from controllers.common.intstr import IntOrStringError
from controllers.deployment import util
from tests.controllers.deployment.builders import TEMPLATE, deployment, replica_set


# `TestResolveFenceposts` (pkg/controller/deployment/util/deployment_util_test.go), case for case:
# unset counts as 0, both 0 means one may be unavailable, a bare number string is an error.
@pytest.mark.parametrize(
    ("surge", "unavailable", "desired", "want"),
    [
        ("0%", "0%", 0, (0, 1)),
        ("39%", "39%", 10, (4, 3)),
        ("oops", "39%", 10, None),
        ("55%", "urg", 10, None),
        ("5", "1", 7, None),
        (None, "39%", 10, (0, 3)),
        ("39%", None, 10, (4, 0)),
        (None, None, 10, (0, 1)),
        # and the ints the other tests of the file use
        (2, "50%", 3, (2, 1)),
        ("25%", "25%", 1, (1, 0)),
    ],
)
def test_resolve_fenceposts(
    surge: int | str | None, unavailable: int | str | None, desired: int, want: tuple[int, int] | None
) -> None:
    if want is None:
        with pytest.raises(IntOrStringError):
            deploymentstrategy.resolve_fenceposts(surge, unavailable, desired)
    else:
        assert deploymentstrategy.resolve_fenceposts(surge, unavailable, desired) == want


# `TestGetNonNegativeInt32FromAnnotation`: what Go's parser refuses counts as no annotation.
@pytest.mark.parametrize(
    ("value", "want"),
    [
        (None, None),  # invalid empty
        ("invalid", None),
        ("-1", None),  # invalid negative
        ("0", 0),
        ("13", 13),
        (str(2**31 - 1), 2**31 - 1),  # valid max
        (str(2**31), None),  # out of range
        ("+3", None),  # ParseUint takes no sign
        (" 3", None),
        ("1_000", None),
    ],
)
def test_replicas_annotations_parse_as_go_does(value: str | None, want: int | None) -> None:
    rs = replica_set("web-1", 1)
    annotations = rs["metadata"].setdefault("annotations", {})
    annotations.pop(util.MAX_REPLICAS_ANNOTATION, None)
    annotations.pop(util.DESIRED_REPLICAS_ANNOTATION, None)
    if value is not None:
        annotations[util.MAX_REPLICAS_ANNOTATION] = value
        annotations[util.DESIRED_REPLICAS_ANNOTATION] = value
    assert util.max_replicas_annotation(rs) == want
    assert util.desired_replicas_annotation(rs) == want


def test_a_negative_max_replicas_annotation_falls_back_to_the_current_size() -> None:
    """A hand-edited negative annotation must not steer proportional scaling (Go ignores it)."""
    d = deployment(10, max_surge=0, max_unavailable=1, status={"replicas": 5})
    rs = replica_set("web-1", 5)
    rs["metadata"].setdefault("annotations", {})[util.MAX_REPLICAS_ANNOTATION] = "-5"
    # As if the annotation were absent: scale from the Deployment's 5 to its 10.
    assert util.replica_set_fraction(rs, d) == 5


# `MinAvailable`: replicas - maxUnavailable for RollingUpdate, 0 for Recreate.
@pytest.mark.parametrize(
    ("d", "want"),
    [
        (deployment(10, max_surge=1, max_unavailable=5), 5),
        (deployment(10, max_surge=1, max_unavailable="50%"), 5),
        (deployment(5, max_surge=1, max_unavailable=10), 0),
        (deployment(3, strategy="Recreate"), 0),
    ],
)
def test_min_available(d: dict[str, object], want: int) -> None:
    assert util.min_available(d) == want


def test_max_unavailable_never_exceeds_replicas_and_recreate_has_no_budget() -> None:
    assert deploymentstrategy.max_unavailable(deployment(2, max_surge=0, max_unavailable=5)) == 2
    assert deploymentstrategy.max_unavailable(deployment(0, max_unavailable=5)) == 0
    recreate = deployment(3, strategy="Recreate")
    assert (deploymentstrategy.max_surge(recreate), deploymentstrategy.max_unavailable(recreate)) == (0, 0)


def test_hash_is_stable_ignores_dict_order_and_moves_with_collision_count() -> None:
    t1 = {"metadata": {"labels": {"a": "1", "b": "2"}}, "spec": {"containers": [{"name": "c", "image": "x"}]}}
    t2 = {"spec": {"containers": [{"image": "x", "name": "c"}]}, "metadata": {"labels": {"b": "2", "a": "1"}}}
    h = util.compute_hash(t1, None)
    assert h == util.compute_hash(t2, None)
    assert set(h) <= set("bcdfghjklmnpqrstvwxz2456789")
    assert util.compute_hash(t1, 1) != h
    assert util.compute_hash(t1, 1) != util.compute_hash(t1, 2)
    t3 = {**t1, "spec": {"containers": [{"name": "c", "image": "y"}]}}
    assert util.compute_hash(t3, None) != h


def test_fnv32a_matches_reference_vectors() -> None:
    assert util.fnv32a(b"") == 0x811C9DC5
    assert util.fnv32a(b"a") == 0xE40C292C
    assert util.fnv32a(b"foobar") == 0xBF9CF968


def test_equal_ignore_hash_ignores_only_the_hash_label() -> None:
    with_hash = {"metadata": {"labels": {"app": "web", "pod-template-hash": "abc"}}, "spec": TEMPLATE["spec"]}
    assert util.equal_ignore_hash(with_hash, TEMPLATE)
    other = {"metadata": {"labels": {"app": "web2"}}, "spec": TEMPLATE["spec"]}
    assert not util.equal_ignore_hash(other, TEMPLATE)
    assert (
        with_hash["metadata"]["labels"]["pod-template-hash"] == "abc"
    )  # the cached object is left as it was
    # Go: labels {hash} and no labels at all are both an empty map once the hash is dropped.
    only_hash = {"metadata": {"labels": {"pod-template-hash": "abc"}}, "spec": TEMPLATE["spec"]}
    assert util.equal_ignore_hash(only_hash, {"spec": TEMPLATE["spec"]})


def test_the_new_replica_set_is_the_oldest_with_the_deployments_template() -> None:
    d = {"spec": {"template": TEMPLATE}}

    def rs(name: str, created: str, app: str) -> dict[str, object]:
        labels = {"app": app, "pod-template-hash": name}
        template = {"metadata": {"labels": labels}, "spec": TEMPLATE["spec"]}
        return {"metadata": {"name": name, "creationTimestamp": created}, "spec": {"template": template}}

    older, newer = rs("b", "2024-01-01T00:00:00Z", "web"), rs("a", "2024-01-02T00:00:00Z", "web")
    found = util.find_new_replica_set(d, [newer, rs("c", "2023-01-01T00:00:00Z", "other"), older])
    assert found is older
    assert util.find_new_replica_set(d, [rs("c", "2023-01-01T00:00:00Z", "other")]) is None


def test_equal_ignore_hash_is_semantic_equality() -> None:
    """As Go's typed comparison: null, absent, `{}` and `[]` alike (what `kubectl rollout undo` sends back)."""
    stored = {
        "metadata": {"labels": {"app": "web", "pod-template-hash": "abc"}},
        "spec": {"containers": [{"name": "c", "image": "nginx:1.26"}]},
    }
    from_kubectl = {
        "metadata": {"creationTimestamp": None, "labels": {"app": "web"}, "annotations": {}},
        "spec": {
            "containers": [{"name": "c", "image": "nginx:1.26", "resources": {}, "env": []}],
            "securityContext": {},
            "volumes": None,
        },
    }
    assert util.equal_ignore_hash(stored, from_kubectl)
    changed = {
        **from_kubectl,
        "spec": {"containers": [{"name": "c", "image": "nginx:1.27", "resources": {}}]},
    }
    assert not util.equal_ignore_hash(stored, changed)
    assert not util.equal_ignore_hash({"spec": {"hostNetwork": False}}, {"spec": {"hostNetwork": True}})


def test_new_rs_new_replicas_respects_surge_budget() -> None:
    d = deployment(10, max_surge=3, max_unavailable=2)
    old = replica_set("old", 10)
    new = replica_set("new", 0)
    assert util.new_rs_new_replicas(d, [old, new], new) == 3
    new2 = replica_set("new", 3)
    assert util.new_rs_new_replicas(d, [old, new2], new2) == 3  # at max total already
    old2 = replica_set("old", 8)
    assert util.new_rs_new_replicas(d, [old2, new2], new2) == 5
    assert util.new_rs_new_replicas(deployment(4, strategy="Recreate"), [new], new) == 4


def test_proportional_scaling_up_mid_rollout() -> None:
    # KCM's "proportional scaling: 10 -> 20 with 2 surge": sizes grow in proportion.
    d = deployment(20, max_surge=2, max_unavailable=0)
    old = replica_set("old", 8, desired=10, max_replicas=12, created="2024-01-01T00:00:00Z")
    new = replica_set("new", 4, desired=10, max_replicas=12, created="2024-01-02T00:00:00Z")
    sizes = util.proportional_sizes(d, [old, new])
    assert sum(sizes.values()) == 22
    assert sizes == {"old": 15, "new": 7}


def test_proportional_scaling_down_mid_rollout_gives_leftover_to_largest() -> None:
    d = deployment(5, max_surge=1, max_unavailable=0)
    old = replica_set("old", 7, max_replicas=11, created="2024-01-01T00:00:00Z")
    new = replica_set("new", 4, max_replicas=11, created="2024-01-02T00:00:00Z")
    sizes = util.proportional_sizes(d, [old, new])
    assert sum(sizes.values()) == 6
    assert all(v >= 0 for v in sizes.values())
    assert sizes["old"] > sizes["new"]


def test_proportional_scaling_to_zero_empties_everything() -> None:
    d = deployment(0)
    sizes = util.proportional_sizes(
        d, [replica_set("a", 3, max_replicas=5), replica_set("b", 2, max_replicas=5)]
    )
    assert sizes == {"a": 0, "b": 0}


def test_revision_annotations_and_history() -> None:
    d = deployment(3)
    d["metadata"]["annotations"] = {"team": "x", util.LAST_APPLIED_ANNOTATION: "{}"}
    ann: dict[str, str] = {}
    assert util.set_new_replica_set_annotations(d, ann, 1, exists=False)
    assert ann[util.REVISION_ANNOTATION] == "1"
    assert ann["team"] == "x"
    assert util.LAST_APPLIED_ANNOTATION not in ann
    assert ann[util.DESIRED_REPLICAS_ANNOTATION] == "3"
    assert ann[util.MAX_REPLICAS_ANNOTATION] == "4"
    # Rolled back to: revision moves up, the old one goes into history.
    assert util.set_new_replica_set_annotations(d, ann, 4, exists=True)
    assert ann[util.REVISION_ANNOTATION] == "4"
    assert ann[util.REVISION_HISTORY_ANNOTATION] == "1"
    util.set_new_replica_set_annotations(d, ann, 6, exists=True)
    assert ann[util.REVISION_HISTORY_ANNOTATION] == "1,4"
    # Never lowered.
    assert not util.set_new_replica_set_annotations(d, ann, 2, exists=True)
    assert ann[util.REVISION_ANNOTATION] == "6"


def test_evacuation_annotations_never_copied_to_replica_sets() -> None:
    d = deployment(3)
    d["metadata"]["annotations"] = {"maintenance.aiokcm.io/replicas-to-evacuate": "2"}
    ann: dict[str, str] = {}
    util.copy_deployment_annotations_to_replica_set(d, ann)
    assert ann == {}


def test_last_revision_is_second_highest() -> None:
    rss = [replica_set(f"r{i}", 0, revision=i) for i in (3, 1, 5, 4)]
    assert util.max_revision(rss) == 5
    assert util.last_revision(rss) == 4


def test_find_active_or_latest() -> None:
    new = replica_set("new", 0, created="2024-01-03T00:00:00Z")
    old1 = replica_set("old1", 0, created="2024-01-01T00:00:00Z")
    old2 = replica_set("old2", 0, created="2024-01-02T00:00:00Z")
    assert util.find_active_or_latest(new, [old1, old2]) is new
    assert util.find_active_or_latest(None, [old1, old2]) is old2
    active = replica_set("old1", 2)
    assert util.find_active_or_latest(new, [active, old2]) is active
    assert util.find_active_or_latest(replica_set("n", 1), [active]) is None
