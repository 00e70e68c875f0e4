"""Deployment arithmetic against the cases Kubernetes' own unit tests pin down."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from controllers.common import deploymentstrategy
from controllers.common.intstr import IntOrStringError
from controllers.deployment import util
from tests.controllers.deployment.builders import TEMPLATE, deployment, replica_set
from tests.controllers.deployment.kcm_objects import generate_deployment, generate_rs


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


# -- more of `deployment_util_test.go`, case for case -------------------------------------

HASH = util.POD_TEMPLATE_HASH_LABEL


def _pod_template(
    name: str, node: str, annotations: dict[str, str], labels: dict[str, str]
) -> dict[str, Any]:
    """`generatePodTemplateSpec`."""
    return {
        "metadata": {"name": name, "annotations": annotations, "labels": labels},
        "spec": {"nodeName": node},
    }


# `TestEqualIgnoreHash`, each case in both orders; neither template's labels are touched.
@pytest.mark.parametrize(
    ("former", "latter", "expected"),
    [
        pytest.param(
            _pod_template("foo", "foo-node", {}, {HASH: "value-1", "something": "else"}),
            _pod_template("foo", "foo-node", {}, {HASH: "value-1", "something": "else"}),
            True,
            id="Same spec, same labels",
        ),
        pytest.param(
            _pod_template("foo", "foo-node", {}, {HASH: "value-1", "something": "else"}),
            _pod_template("foo", "foo-node", {}, {HASH: "value-2", "something": "else"}),
            True,
            id="Same spec, only pod-template-hash label value is different",
        ),
        pytest.param(
            _pod_template("foo", "foo-node", {}, {"something": "else"}),
            _pod_template("foo", "foo-node", {}, {HASH: "value-2", "something": "else"}),
            True,
            id="Same spec, the former doesn't have pod-template-hash label",
        ),
        pytest.param(
            _pod_template("foo", "foo-node", {}, {"something": "else"}),
            _pod_template("foo", "foo-node", {}, {HASH: "value-2"}),
            False,
            id="Same spec, different label, the former has no hash label, same number of labels",
        ),
        pytest.param(
            _pod_template("foo", "foo-node", {}, {HASH: "value-1"}),
            _pod_template("foo", "foo-node", {}, {"something": "else"}),
            False,
            id="Same spec, different label, the latter has no hash label, same number of labels",
        ),
        pytest.param(
            _pod_template("foo", "foo-node", {}, {HASH: "value-1"}),
            _pod_template("foo", "foo-node", {}, {HASH: "value-1", "something": "else"}),
            False,
            id="Same spec, the label is different, and the pod-template-hash label value is the same",
        ),
        pytest.param(
            _pod_template("foo", "foo-node", {"former": "value"}, {HASH: "value-1", "something": "else"}),
            _pod_template("foo", "foo-node", {"latter": "value"}, {HASH: "value-1", "something": "else"}),
            False,
            id="Different spec, same labels",
        ),
        pytest.param(
            _pod_template("foo-1", "foo-node", {}, {HASH: "value-1", "something": "else"}),
            _pod_template("foo-2", "foo-node", {}, {HASH: "value-2", "something": "else"}),
            False,
            id="Different spec, different pod-template-hash label value",
        ),
        pytest.param(
            _pod_template("foo-1", "foo-node-1", {}, {"something": "else"}),
            _pod_template("foo-2", "foo-node-2", {}, {HASH: "value-2", "something": "else"}),
            False,
            id="Different spec, the former doesn't have pod-template-hash label",
        ),
        pytest.param(
            _pod_template("foo", "foo-node-1", {}, {"something": "else"}),
            _pod_template("foo", "foo-node-2", {}, {"nothing": "else"}),
            False,
            id="Different spec, different labels",
        ),
    ],
)
def test_equal_ignore_hash(former: dict[str, Any], latter: dict[str, Any], expected: bool) -> None:
    before = copy.deepcopy((former, latter))
    assert util.equal_ignore_hash(former, latter) is expected
    assert util.equal_ignore_hash(latter, former) is expected
    assert (former, latter) == before


NOW_TS = "2024-01-01T00:00:00Z"
LATER_TS = "2024-01-01T00:01:00Z"
BEFORE_TS = "2023-12-31T23:59:00Z"


def _find_fixtures() -> dict[str, Any]:
    d = generate_deployment("nginx")
    new_rs = generate_rs(d, hash_label="hash", created=LATER_TS)
    new_rs_dup = generate_rs(d, hash_label="different-hash", created=NOW_TS)
    old_d = generate_deployment("nginx")
    old_d["spec"]["template"]["spec"]["containers"][0]["name"] = "nginx-old-1"
    old_rs = generate_rs(old_d, created=BEFORE_TS)
    return {"d": d, "new": new_rs, "dup": new_rs_dup, "old": old_rs}


# `TestFindNewReplicaSet`.
@pytest.mark.parametrize(
    ("rs_names", "expected"),
    [
        pytest.param(["new", "old"], "new", id="same template as the Deployment, different hash value"),
        pytest.param(["new", "old", "dup"], "dup", id="the oldest of several with the same template"),
        pytest.param(["old"], None, id="no new ReplicaSet"),
    ],
)
def test_find_new_replica_set(rs_names: list[str], expected: str | None) -> None:
    f = _find_fixtures()
    found = util.find_new_replica_set(f["d"], [f[n] for n in rs_names])
    assert found is (f[expected] if expected else None)


# `TestFindOldReplicaSets`: all old ones, and the ones with replicas (`requiredRSs`).
@pytest.mark.parametrize(
    ("rs_names", "expected_all", "expected_required"),
    [
        pytest.param(["new", "old"], ["old"], [], id="old ReplicaSets"),
        pytest.param(["old"], ["old"], [], id="old ReplicaSets with no new ReplicaSet"),
        pytest.param(
            ["old", "new", "dup"], ["old", "new"], ["new"], id="two new ones, only the oldest is the new one"
        ),
        pytest.param(["new"], [], [], id="no old ReplicaSets"),
    ],
)
def test_find_old_replica_sets(
    rs_names: list[str], expected_all: list[str], expected_required: list[str]
) -> None:
    f = _find_fixtures()
    f["new"]["spec"]["replicas"] = 1
    rss = [f[n] for n in rs_names]
    old = util.find_old_replica_sets(util.find_new_replica_set(f["d"], rss), rss)
    assert sorted(old, key=util.creation_key) == sorted((f[n] for n in expected_all), key=util.creation_key)
    assert util.filter_active(old) == [f[n] for n in expected_required]


# `TestGetReplicaCountForReplicaSets`.
def test_replica_counts_for_replica_sets() -> None:
    rs1 = replica_set("rs1", 1, actual=2)
    rs2 = replica_set("rs2", 2, actual=3)
    assert (util.replica_count([rs1]), util.actual_replica_count([rs1])) == (1, 2)
    assert (util.replica_count([rs1, rs2]), util.actual_replica_count([rs1, rs2])) == (3, 5)
    assert util.replica_count([rs1, None]) == 1


# `TestNewRSNewReplicas`: the other ReplicaSets hold 5; maxUnavailable 1.
@pytest.mark.parametrize(
    ("strategy", "dep_replicas", "new_rs_replicas", "surge", "expected"),
    [
        pytest.param("RollingUpdate", 1, 5, 1, 5, id="can not scale up - to newRSReplicas"),
        pytest.param("RollingUpdate", 6, 2, 10, 6, id="scale up - to depReplicas"),
        pytest.param("Recreate", 3, 1, 1, 3, id="recreate - to depReplicas"),
    ],
)
def test_new_rs_new_replicas(
    strategy: str, dep_replicas: int, new_rs_replicas: int, surge: int, expected: int
) -> None:
    d = generate_deployment("nginx")
    d["spec"]["replicas"] = dep_replicas
    d["spec"]["strategy"] = {"type": strategy, "rollingUpdate": {"maxUnavailable": 1, "maxSurge": surge}}
    new_rc = generate_rs(d)
    new_rc["spec"]["replicas"] = new_rs_replicas
    rs5 = generate_rs(d)
    rs5["spec"]["replicas"] = 5
    assert util.new_rs_new_replicas(d, [rs5], new_rc) == expected


def _max_unavailable_deployment(replicas: int, max_unavailable: int | str) -> dict[str, Any]:
    return {
        "spec": {
            "replicas": replicas,
            "strategy": {
                "type": "RollingUpdate",
                "rollingUpdate": {"maxSurge": 1, "maxUnavailable": max_unavailable},
            },
        }
    }


# `TestMaxUnavailable`.
@pytest.mark.parametrize(
    ("d", "expected"),
    [
        pytest.param(_max_unavailable_deployment(10, 5), 5, id="less than replicas"),
        pytest.param(_max_unavailable_deployment(10, 10), 10, id="equal replicas"),
        pytest.param(_max_unavailable_deployment(5, 10), 5, id="greater than replicas"),
        pytest.param(_max_unavailable_deployment(0, 10), 0, id="replicas is 0"),
        pytest.param({"spec": {"strategy": {"type": "Recreate"}}}, 0, id="Recreate"),
        pytest.param(_max_unavailable_deployment(10, "50%"), 5, id="less than replicas with percents"),
        pytest.param(_max_unavailable_deployment(10, "100%"), 10, id="equal replicas with percents"),
        pytest.param(_max_unavailable_deployment(5, "100%"), 5, id="greater than replicas with percents"),
    ],
)
def test_max_unavailable(d: dict[str, Any], expected: int) -> None:
    assert deploymentstrategy.max_unavailable(d) == expected


# `TestMinAvailable`.
@pytest.mark.parametrize(
    ("d", "expected"),
    [
        pytest.param(_max_unavailable_deployment(10, 5), 5, id="replicas greater than maxUnavailable"),
        pytest.param(_max_unavailable_deployment(10, 10), 0, id="replicas equal maxUnavailable"),
        pytest.param(_max_unavailable_deployment(5, 10), 0, id="replicas less than maxUnavailable"),
        pytest.param(_max_unavailable_deployment(0, 10), 0, id="replicas is 0"),
        pytest.param({"spec": {"replicas": 10, "strategy": {"type": "Recreate"}}}, 0, id="Recreate"),
        pytest.param(_max_unavailable_deployment(10, "60%"), 4, id="greater with percents"),
        pytest.param(_max_unavailable_deployment(10, "100%"), 0, id="equal with percents"),
        pytest.param(_max_unavailable_deployment(5, "100%"), 0, id="less with percents"),
    ],
)
def test_min_available_cases(d: dict[str, Any], expected: int) -> None:
    assert util.min_available(d) == expected


def test_annotation_utils() -> None:
    """`TestAnnotationUtils`: revisions 11 to 20 in turn, the history kept within 5 characters;
    then the replicas annotations, and saturation read from them."""
    d = generate_deployment("nginx")
    d["metadata"]["annotations"][util.REVISION_ANNOTATION] = "1"
    rs = generate_rs(d)
    ann: dict[str, str] = rs["metadata"].setdefault("annotations", {})
    for i in range(10, 20):
        util.set_new_replica_set_annotations(d, ann, i + 1, exists=True, history_limit_chars=5)
        if i >= 12:
            assert ann[util.REVISION_HISTORY_ANNOTATION] == f"{i - 1},{i}"
        assert ann[util.REVISION_ANNOTATION] == str(i + 1)

    assert util.set_replicas_annotations(ann, 10, 11)
    assert ann[util.DESIRED_REPLICAS_ANNOTATION] == "10"
    assert ann[util.MAX_REPLICAS_ANNOTATION] == "11"

    ann[util.DESIRED_REPLICAS_ANNOTATION] = "1"
    rs["status"]["availableReplicas"] = 1
    rs["spec"]["replicas"] = 1
    assert util.is_saturated(d, rs)


def test_a_replica_set_with_an_unreadable_revision_is_left_alone() -> None:
    """`SetNewReplicaSetAnnotations` gives up (reporting no change, whatever the annotation copy
    did) when the ReplicaSet's revision is not a number."""
    d = generate_deployment("nginx")
    d["metadata"]["annotations"]["team"] = "x"
    ann = {util.REVISION_ANNOTATION: "abc"}
    assert not util.set_new_replica_set_annotations(d, ann, 3, exists=True)
    assert ann[util.REVISION_ANNOTATION] == "abc"
    # An empty one counts as 0, and is still a revision this ReplicaSet had.
    ann = {util.REVISION_ANNOTATION: ""}
    assert util.set_new_replica_set_annotations(d, ann, 3, exists=True)
    assert (ann[util.REVISION_ANNOTATION], ann[util.REVISION_HISTORY_ANNOTATION]) == ("3", "")


def test_saturation_reads_the_desired_replicas_as_atoi_does() -> None:
    """`IsSaturated` parses with `strconv.Atoi`: a sign is fine, spaces are not."""
    d = generate_deployment("nginx")
    rs = generate_rs(d)
    rs["spec"]["replicas"] = 1
    rs["status"]["availableReplicas"] = 1
    for value, saturated in (("1", True), ("+1", True), (" 1", False), ("x", False), ("2", False)):
        rs["metadata"]["annotations"] = {util.DESIRED_REPLICAS_ANNOTATION: value}
        assert util.is_saturated(d, rs) is saturated, value
    assert not util.is_saturated(d, None)


# `TestReplicasAnnotationsNeedUpdate`: sized for 10 with 20 at most.
@pytest.mark.parametrize(
    ("annotations", "expected"),
    [
        pytest.param(None, True, id="annotations nil"),
        pytest.param(
            {util.DESIRED_REPLICAS_ANNOTATION: "8", util.MAX_REPLICAS_ANNOTATION: "20"}, True, id="desired"
        ),
        pytest.param(
            {util.DESIRED_REPLICAS_ANNOTATION: "10", util.MAX_REPLICAS_ANNOTATION: "16"}, True, id="max"
        ),
        pytest.param(
            {util.DESIRED_REPLICAS_ANNOTATION: "10", util.MAX_REPLICAS_ANNOTATION: "20"}, False, id="none"
        ),
    ],
)
def test_replicas_annotations_need_update(annotations: dict[str, str] | None, expected: bool) -> None:
    rs: dict[str, Any] = {"metadata": {"name": "hello", "namespace": "test"}, "spec": {}}
    if annotations is not None:
        rs["metadata"]["annotations"] = annotations
    assert util.replicas_annotations_need_update(rs, 10, 20) is expected


# `TestGetReplicaSetFraction` (maxUnavailable 1 throughout).
@pytest.mark.parametrize(
    ("d_replicas", "d_status_replicas", "d_surge", "rs_replicas", "annotations", "expected"),
    [
        pytest.param(0, 0, 0, 10, None, -10, id="empty deployment always scales to 0"),
        pytest.param(10, 0, 0, 5, None, 0, id="unsynced, max-replicas annotation missing"),
        pytest.param(10, 0, 0, 5, {util.MAX_REPLICAS_ANNOTATION: "0"}, 0, id="unsynced, max-replicas 0"),
        pytest.param(120, 100, 0, 50, None, 10, id="scale up by 1/5, annotation missing"),
        pytest.param(
            120, 100, 0, 50, {util.MAX_REPLICAS_ANNOTATION: "0"}, 10, id="scale up by 1/5, annotation 0"
        ),
        pytest.param(120, 0, 0, 50, {util.MAX_REPLICAS_ANNOTATION: "100"}, 10, id="scale up by 1/5"),
        pytest.param(
            120, 0, 10, 50, {util.MAX_REPLICAS_ANNOTATION: "110"}, 9, id="scale up with maxSurge by 1/5"
        ),
        pytest.param(10, 0, 0, 6, {util.MAX_REPLICAS_ANNOTATION: "12"}, -1, id="scale down by 1/6"),
        pytest.param(
            100, 0, 10, 50, {util.MAX_REPLICAS_ANNOTATION: "130"}, -8, id="scale down with maxSurge"
        ),
    ],
)
def test_replica_set_fraction(
    d_replicas: int,
    d_status_replicas: int,
    d_surge: int,
    rs_replicas: int,
    annotations: dict[str, str] | None,
    expected: int,
) -> None:
    d = generate_deployment("nginx")
    d["status"]["replicas"] = d_status_replicas
    d["spec"]["replicas"] = d_replicas
    d["spec"]["strategy"] = {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxSurge": d_surge, "maxUnavailable": 1},
    }
    rs = generate_rs(d)
    rs["metadata"]["annotations"] = annotations
    rs["spec"]["replicas"] = rs_replicas
    assert util.replica_set_fraction(rs, d) == expected


def test_equal_sizes_scale_up_newest_first_and_down_oldest_first() -> None:
    """`ReplicaSetsBySizeNewer` / `ReplicaSetsBySizeOlder`: among ReplicaSets of one size,
    scaling up takes the newest first and scaling down the oldest first; created in the same
    second, the later name counts as the newer (Go reverses the whole creation order)."""
    d = deployment(4, max_surge=0, max_unavailable=1)
    same = "2024-01-01T00:00:00Z"
    rss = [replica_set(n, 1, created=same, max_replicas=3) for n in ("b", "a", "c")]
    assert list(util.proportional_sizes(d, rss)) == ["c", "b", "a"]
    assert util.proportional_sizes(d, rss) == {"c": 2, "b": 1, "a": 1}
    d = deployment(2, max_surge=0, max_unavailable=1)
    assert list(util.proportional_sizes(d, rss)) == ["a", "b", "c"]
    assert util.proportional_sizes(d, rss) == {"a": 0, "b": 1, "c": 1}


@pytest.mark.parametrize(
    ("value", "expected"),
    [("3", 3), ("+3", 3), ("-2", -2), (" 3", 0), ("3_0", 0), ("x", 0), (None, 0)],
)
def test_revision_parses_as_go_parse_int(value: str | None, expected: int) -> None:
    rs = replica_set("r", 1)
    if value is not None:
        rs["metadata"]["annotations"][util.REVISION_ANNOTATION] = value
    assert util.revision(rs) == expected


@pytest.mark.parametrize(
    ("value", "expected"), [(None, None), ("", None), ("0", 0), ("4", 4), ("x", None), (" 4", None)]
)
def test_rollback_to(value: str | None, expected: int | None) -> None:
    """`getRollbackTo`: empty or unparsable asks for no rollback."""
    d = deployment(1)
    if value is not None:
        d["metadata"]["annotations"] = {util.ROLLBACK_TO_ANNOTATION: value}
    assert util.rollback_to(d) == expected
