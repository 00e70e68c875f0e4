"""Which Deployments an orphaned ReplicaSet wakes: `GetDeploymentsForReplicaSet` in Go's
`pkg/controller/deployment/util/deployment_util.go`, where a nil, empty or invalid selector
matches nothing rather than everything."""

from __future__ import annotations

from typing import Any, cast

from apiclient import KubeClient
from controllers.context import ControllerContext, StaticGates
from controllers.deployment.controller import DeploymentController
from informers import SharedInformerFactory, meta_key
from tests.controllers.harness import RecordingEvents, build


def _deployment(name: str, selector: dict[str, Any] | None, namespace: str = "ns") -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if selector is not None:
        spec["selector"] = selector
    return {"metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}"}, "spec": spec}


def _controller() -> DeploymentController:
    kube = cast(KubeClient, object())
    ctx = ControllerContext(
        client=kube, informers=SharedInformerFactory(kube), events=RecordingEvents(), gates=StaticGates({})
    )
    return build(DeploymentController, ctx)


def test_an_orphan_wakes_only_deployments_whose_non_empty_valid_selector_matches() -> None:
    controller = _controller()
    for d in (
        _deployment("matching", {"matchLabels": {"app": "web"}}),
        _deployment("empty", {"matchLabels": {}}),
        _deployment("nil", None),
        _deployment("invalid", {"matchExpressions": [{"key": "app", "operator": "In", "values": []}]}),
        _deployment("other-labels", {"matchLabels": {"app": "db"}}),
        _deployment("other-namespace", {"matchLabels": {"app": "web"}}, namespace="elsewhere"),
    ):
        controller.d_informer.store.update(meta_key(d), d)
    rs = {"metadata": {"name": "web-1", "namespace": "ns", "labels": {"app": "web"}}}

    woken = [d["metadata"]["name"] for d in controller._deployments_for_rs(rs)]

    assert woken == ["matching"]


def test_an_orphan_without_labels_wakes_nothing() -> None:
    controller = _controller()
    d = _deployment("empty", {"matchLabels": {}})
    controller.d_informer.store.update(meta_key(d), d)

    assert controller._deployments_for_rs({"metadata": {"name": "bare", "namespace": "ns"}}) == []
