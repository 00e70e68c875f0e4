"""The objects KCM's Deployment controller tests build, as plain dicts.

`new_deployment`, `rs`, `new_rs_with_status` and `new_replica_set` are
`pkg/controller/deployment/deployment_controller_test.go`'s helpers of the same names: what the
Go fixtures leave unset stays unset here (no progressDeadlineSeconds or revisionHistoryLimit, a
zero status, maxSurge and maxUnavailable 0 unless given), so a ported case sees the object the
Go case saw. `generate_deployment` and `generate_rs` are `deployment_util_test.go`'s.
"""

from __future__ import annotations

import copy
import itertools
from typing import Any

Obj = dict[str, Any]

_uids = itertools.count(1)


def new_deployment(
    name: str,
    replicas: int,
    revision_history_limit: int | None = None,
    max_surge: int | str | None = None,
    max_unavailable: int | str | None = None,
    selector: dict[str, str] | None = None,
) -> Obj:
    spec: Obj = {
        "strategy": {
            "type": "RollingUpdate",
            "rollingUpdate": {
                "maxUnavailable": 0 if max_unavailable is None else max_unavailable,
                "maxSurge": 0 if max_surge is None else max_surge,
            },
        },
        "replicas": replicas,
        "selector": {"matchLabels": selector},
        "template": {
            "metadata": {"labels": copy.deepcopy(selector)},
            "spec": {"containers": [{"image": "foo/bar"}]},
        },
    }
    if revision_history_limit is not None:
        spec["revisionHistoryLimit"] = revision_history_limit
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"uid": f"d-{next(_uids)}", "name": name, "namespace": "default", "annotations": {}},
        "spec": spec,
        "status": {},
    }


def rs(name: str, replicas: int, selector: dict[str, str] | None = None, timestamp: str | None = None) -> Obj:
    meta: Obj = {"name": name, "namespace": "default"}
    if timestamp is not None:
        meta["creationTimestamp"] = timestamp
    return {
        "metadata": meta,
        "spec": {"replicas": replicas, "selector": {"matchLabels": selector}, "template": {}},
        "status": {},
    }


def new_rs_with_status(
    name: str, spec_replicas: int, status_replicas: int, selector: dict[str, str] | None = None
) -> Obj:
    out = rs(name, spec_replicas, selector)
    out["status"] = {"replicas": status_replicas}
    return out


def new_replica_set(d: Obj, name: str, replicas: int) -> Obj:
    return {
        "metadata": {
            "name": name,
            "uid": f"rs-{next(_uids)}",
            "namespace": "default",
            "labels": copy.deepcopy(d["spec"]["selector"]["matchLabels"]),
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "Deployment",
                    "name": d["metadata"]["name"],
                    "uid": d["metadata"]["uid"],
                    "controller": True,
                }
            ],
        },
        "spec": {
            "selector": copy.deepcopy(d["spec"]["selector"]),
            "replicas": replicas,
            "template": copy.deepcopy(d["spec"]["template"]),
        },
        "status": {},
    }


def generate_deployment(image: str) -> Obj:
    """`generateDeployment`: one replica of `image`, labelled `name: <image>`."""
    labels = {"name": image}
    return {
        "metadata": {"name": image, "annotations": {}},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": dict(labels)},
            "template": {
                "metadata": {"labels": dict(labels)},
                "spec": {
                    "containers": [
                        {
                            "name": image,
                            "image": image,
                            "imagePullPolicy": "Always",
                            "terminationMessagePath": "/dev/termination-log",
                        }
                    ],
                    "dnsPolicy": "ClusterFirst",
                    "terminationGracePeriodSeconds": 30,
                    "restartPolicy": "Always",
                    "securityContext": {},
                    "enableServiceLinks": True,
                },
            },
        },
        "status": {},
    }


def generate_rs(d: Obj, *, hash_label: str | None = None, created: str | None = None) -> Obj:
    """`generateRS`: zero replicas of the Deployment's template (its labels are the RS's too)."""
    template = copy.deepcopy(d["spec"]["template"])
    if hash_label is not None:
        template["metadata"]["labels"]["pod-template-hash"] = hash_label
    uid = f"rs-{next(_uids)}"
    meta: Obj = {
        "uid": uid,
        "name": f"{d['metadata']['name']}-{uid}",
        "labels": template["metadata"]["labels"],
    }
    if created is not None:
        meta["creationTimestamp"] = created
    return {
        "metadata": meta,
        "spec": {
            "replicas": 0,
            "template": template,
            "selector": {"matchLabels": template["metadata"]["labels"]},
        },
        "status": {},
    }
