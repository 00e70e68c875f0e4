"""Object builders shared by the tests: API bodies in the shape a user writes them.

    pod("web-0", node="node-1", terminationGracePeriodSeconds=0)
    replicaset("web", 3, namespace=NS)                    # app=web selects a template of one container
    deployment("web", strategy={"type": "Recreate"})      # no `replicas`: the server defaults it
    node_maintenance("m1", ["node-1"], drain=True)       # a NodeMaintenance selecting node-1 by name

Keyword arguments cover what callers vary: the selector's labels, the container's name and
image, template annotations, extra object metadata, extra pod spec (`pod_spec`) and extra
workload spec (`**spec`). Builders of one test's peculiar objects (a fake kubelet's status, a
controller unit test's cached objects) stay beside that test.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from controllers.nodemaintenance.nodeselector import names_selector

Obj = dict[str, Any]


def pod(
    name: str | None = None,
    *,
    namespace: str | None = None,
    labels: Mapping[str, str] | None = None,
    node: str | None = None,
    metadata: Mapping[str, Any] | None = None,
    container: str = "c",
    image: str = "nginx:1.27",
    **spec: Any,
) -> Obj:
    """A v1 Pod of one container; without `name` the server generates one (prefix p-)."""
    meta: Obj = {"name": name} if name else {"generateName": "p-"}
    if namespace is not None:
        meta["namespace"] = namespace
    if labels:
        meta["labels"] = dict(labels)
    meta.update(metadata or {})
    body: Obj = {"containers": [{"name": container, "image": image}], **spec}
    if node:
        body["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": body}


def node(name: str = "", **labels: str) -> Obj:
    """A Node as a selector sees it: a name and labels."""
    return {"metadata": {"name": name, "labels": labels}}


def workload(
    kind: str,
    name: str,
    replicas: int | None,
    *,
    labels: Mapping[str, str] | None = None,
    namespace: str | None = None,
    metadata: Mapping[str, Any] | None = None,
    container: str = "c",
    image: str = "nginx:1.27",
    template_annotations: Mapping[str, str] | None = None,
    pod_spec: Mapping[str, Any] | None = None,
    **spec: Any,
) -> Obj:
    """An apps/v1 `kind` whose selector is `labels` (default app=`name`); `replicas` None leaves it unset."""
    selected = dict(labels or {"app": name})
    meta: Obj = {"name": name, **(metadata or {})}
    if namespace is not None:
        meta["namespace"] = namespace
    template_meta: Obj = {"labels": selected}
    if template_annotations:
        template_meta["annotations"] = dict(template_annotations)
    body: Obj = {"selector": {"matchLabels": selected}}
    if replicas is not None:
        body["replicas"] = replicas
    body["template"] = {
        "metadata": template_meta,
        "spec": {"containers": [{"name": container, "image": image}], **(pod_spec or {})},
    }
    body.update(spec)
    return {"apiVersion": "apps/v1", "kind": kind, "metadata": meta, "spec": body}


def replicaset(name: str, replicas: int | None = 1, **options: Any) -> Obj:
    """A ReplicaSet (see `workload` for the options)."""
    return workload("ReplicaSet", name, replicas, **options)


def deployment(name: str, replicas: int | None = None, **options: Any) -> Obj:
    """A Deployment (see `workload` for the options); `replicas` unset unless given."""
    return workload("Deployment", name, replicas, **options)


def node_maintenance(
    name: str,
    nodes: Sequence[str],
    *,
    cordon: bool = True,
    drain: bool = False,
    timeout: int | None = 180,
    reason: str = "kernel upgrade",
    **spec: Any,
) -> Obj:
    """A NodeMaintenance of the named `nodes`; `timeout` (evacuationTimeoutSeconds) None leaves it unset."""
    body: Obj = {"nodeSelector": names_selector(nodes), "cordon": cordon, "drain": drain, "reason": reason}
    if timeout is not None:
        body["evacuationTimeoutSeconds"] = timeout
    body.update(spec)
    return {
        "apiVersion": "maintenance.aiokcm.io/v1alpha1",
        "kind": "NodeMaintenance",
        "metadata": {"name": name},
        "spec": body,
    }
