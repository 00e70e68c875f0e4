"""Who answers an EvacuationRequest, judged from the pod's owners and their annotations."""

from __future__ import annotations

from typing import Any

from controllers.nodemaintenance.workload import TIMEOUT_ANNOTATION, WAIT_ANNOTATION, Answer, workload_of


def obj(
    kind: str,
    name: str,
    *,
    owner: tuple[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    spec: dict[str, Any] | None = None,
) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name,
        "namespace": "ns",
        "uid": f"{name}-uid",
        "annotations": annotations or {},
    }
    if owner:
        meta["ownerReferences"] = [
            {"kind": owner[0], "name": owner[1], "uid": f"{owner[1]}-uid", "controller": True}
        ]
    return {"kind": kind, "metadata": meta, "spec": spec or {}}


def deployment(name: str, *, strategy: dict[str, Any], replicas: int = 3) -> dict[str, Any]:
    return obj("Deployment", name, spec={"replicas": replicas, "strategy": strategy})


def judge(pod: dict[str, Any], *owners: dict[str, Any]) -> Any:
    known = {(o["kind"], "ns", o["metadata"]["name"]): o for o in owners}
    return workload_of(pod, lambda kind, ns, name: known.get((kind, ns, name)))


ROLLING = {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}}


def test_a_surging_deployment_answers() -> None:
    rs = obj(
        "ReplicaSet",
        "web-1",
        owner=("Deployment", "web"),
        annotations={"deployment.kubernetes.io/evacuation-ready": "true"},
    )
    assert judge(obj("Pod", "p", owner=("ReplicaSet", "web-1")), rs).answer is Answer.WILL
    unmarked = obj("ReplicaSet", "web-1", owner=("Deployment", "web"))
    # Not marked yet, but its Deployment surges: wait for the answer rather than evict.
    assert (
        judge(
            obj("Pod", "p", owner=("ReplicaSet", "web-1")), unmarked, deployment("web", strategy=ROLLING)
        ).answer
        is Answer.WILL
    )


def test_owners_that_cannot_answer() -> None:
    pod = obj("Pod", "p", owner=("ReplicaSet", "web-1"))
    rs = obj("ReplicaSet", "web-1", owner=("Deployment", "web"))
    assert judge(pod, rs, deployment("web", strategy={"type": "Recreate"})).answer is Answer.CANNOT
    no_surge = {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}}
    assert judge(pod, rs, deployment("web", strategy=no_surge)).answer is Answer.CANNOT
    assert judge(pod, obj("ReplicaSet", "web-1")).answer is Answer.CANNOT  # a bare ReplicaSet
    sts = judge(obj("Pod", "db-0", owner=("StatefulSet", "db")), obj("StatefulSet", "db"))
    assert sts.answer is Answer.CANNOT and sts.evict_promptly and sts.owner == "StatefulSet db"
    assert judge(obj("Pod", "bare")).answer is Answer.NONE
    # Kinds whose objects are not looked up are judged by kind alone.
    assert judge(obj("Pod", "job-x", owner=("Job", "job"))).answer is Answer.CANNOT
    assert judge(obj("Pod", "rc-x", owner=("ReplicationController", "rc"))).answer is Answer.CANNOT


def test_unknown_or_missing_owners_are_waited_for() -> None:
    assert judge(obj("Pod", "p", owner=("Widget", "w"))).answer is Answer.MAY
    assert judge(obj("Pod", "db-0", owner=("StatefulSet", "db"))).answer is Answer.MAY  # not in the cache yet
    assert judge(obj("Pod", "p", owner=("ReplicaSet", "web-1"))).answer is Answer.MAY


def test_annotations_on_the_pod_win_over_the_owners() -> None:
    sts = obj("StatefulSet", "db", annotations={WAIT_ANNOTATION: "true", TIMEOUT_ANNOTATION: "600"})
    work = judge(obj("Pod", "db-0", owner=("StatefulSet", "db")), sts)
    assert (work.wait, work.timeout, work.evict_promptly) == (True, 600.0, False)
    pod = obj(
        "Pod",
        "db-0",
        owner=("StatefulSet", "db"),
        annotations={WAIT_ANNOTATION: "false", TIMEOUT_ANNOTATION: "nonsense"},
    )
    work = judge(pod, obj("StatefulSet", "db", annotations={WAIT_ANNOTATION: "true"}))
    assert (work.wait, work.timeout, work.evict_promptly) == (False, None, True)
    huge = judge(obj("Pod", "p", annotations={TIMEOUT_ANNOTATION: str(2**70)}))
    assert huge.timeout == 2**31 - 1
