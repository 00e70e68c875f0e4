"""In-memory stand-ins for the ReplicaSet controller's table tests, shaped after Go's test helpers.

`FakeClient` records what the controller asks of the API server, as `controller.FakePodControl`
does (pod creates, deletes and adoption patches, an injectable error and create limit), plus the
status writes and the fresh reads of `RecheckDeletionTimestamp`. `Rig` is a `ReplicaSetController`
over informer caches filled by hand (the factory never starts), so handlers and syncs run in
microseconds with no server.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, cast

from apiclient import ApiError, KubeClient
from apiclient.resources import PODS, REPLICASETS, Resource
from controllers.context import ControllerContext, StaticGates
from controllers.replicaset import ReplicaSetController
from controllers.replicaset.sync import BURST_REPLICAS
from informers import DeletedFinalStateUnknown, SharedInformerFactory, meta_key
from kubeutil.timestamps import format_time
from tests.controllers.harness import RecordingEvents, build

Obj = dict[str, Any]

NAMESPACE_DEFAULT = "default"


def new_replica_set(replicas: int, selector: dict[str, str], *, name: str = "foobar") -> Obj:
    """Go's `newReplicaSet`: owned by a controller with UID "123", template labels name/type."""
    return {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {
            "uid": str(uuid.uuid4()),
            "name": name,
            "namespace": NAMESPACE_DEFAULT,
            "ownerReferences": [{"uid": "123", "controller": True}],
            "resourceVersion": "18",
        },
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": dict(selector)},
            "template": {
                "metadata": {"labels": {"name": "foo", "type": "production"}},
                "spec": {"containers": [{"image": "foo/bar"}], "nodeSelector": {"baz": "blah"}},
            },
        },
        "status": {},
    }


def controller_ref(rs: Obj) -> Obj:
    return {
        "uid": rs["metadata"]["uid"],
        "apiVersion": "v1beta1",
        "kind": "ReplicaSet",
        "name": rs["metadata"]["name"],
        "controller": True,
    }


def new_pod(
    name: str,
    rs: Obj,
    phase: str,
    *,
    owned: bool,
    ready_since: datetime | None = None,
) -> Obj:
    """Go's `newPod`: the ReplicaSet's selector labels, Ready when Running (no transition time
    unless `ready_since`), and a controller reference to `rs` when `owned`."""
    conditions: list[Obj] = []
    if phase == "Running":
        cond: Obj = {"type": "Ready", "status": "True"}
        if ready_since is not None:
            cond["lastTransitionTime"] = format_time(ready_since)
        conditions.append(cond)
    meta: Obj = {
        "uid": str(uuid.uuid4()),
        "name": name,
        "namespace": rs["metadata"]["namespace"],
        "labels": dict(rs["spec"]["selector"]["matchLabels"]),
    }
    if owned:
        meta["ownerReferences"] = [controller_ref(rs)]
    return {"metadata": meta, "spec": {}, "status": {"phase": phase, "conditions": conditions}}


def new_pod_list(count: int, phase: str, labels: dict[str, str], rs: Obj, name: str) -> list[Obj]:
    """Go's `newPodList` (without the store): `count` pods `<name><i>` controlled by `rs`."""
    pods = []
    for i in range(count):
        pod = new_pod(f"{name}{i}", rs, phase, owned=True)
        pod["metadata"]["labels"] = dict(labels)
        pods.append(pod)
    return pods


class FakeError(Exception):
    """`fmt.Errorf("fake Error")`."""


@dataclass
class FakeClient:
    """The API as the ReplicaSet controller uses it, recorded (see the module docstring)."""

    objects: dict[tuple[str, str, str], Obj] = field(default_factory=dict)  # for fresh GETs
    templates: list[Obj] = field(default_factory=list)  # pod creates attempted (FakePodControl.Templates)
    deleted: list[str] = field(default_factory=list)  # FakePodControl.DeletePodName
    pod_patches: list[Obj] = field(default_factory=list)  # FakePodControl.Patches
    status_patches: list[Obj] = field(default_factory=list)
    err: BaseException | None = None  # FakePodControl.Err: pod creates, deletes and patches fail
    status_err: BaseException | None = None
    create_limit: int = 0  # FakePodControl.CreateLimit: creates past it fail unrecorded
    create_calls: int = 0

    def put(self, res: Resource, obj: Obj) -> None:
        meta = obj["metadata"]
        self.objects[(res.plural, meta.get("namespace") or "", meta["name"])] = obj

    def clear(self) -> None:
        """`FakePodControl.Clear`."""
        self.templates.clear()
        self.deleted.clear()
        self.pod_patches.clear()

    async def get(self, res: Resource, name: str, *, namespace: str | None = None, **_: Any) -> Obj:
        obj = self.objects.get((res.plural, namespace or "", name))
        if obj is None:
            raise ApiError(404, {"reason": "NotFound", "message": f'{res.plural} "{name}" not found'})
        return obj

    async def create(self, res: Resource, body: Obj, *, namespace: str | None = None, **_: Any) -> Obj:
        assert res == PODS
        self.create_calls += 1
        if self.create_limit and self.create_calls > self.create_limit:
            raise FakeError(
                f"not creating pod, limit {self.create_limit} already reached (create call {self.create_calls})"
            )
        self.templates.append(body)
        if self.err is not None:
            raise self.err
        created = {**body, "metadata": {**body["metadata"], "namespace": namespace}}
        created["metadata"]["name"] = f"{body['metadata'].get('generateName', '')}{len(self.templates)}"
        created["metadata"]["uid"] = str(uuid.uuid4())
        return created

    async def delete(self, res: Resource, name: str, *, namespace: str | None = None, **_: Any) -> Obj:
        assert res == PODS
        self.deleted.append(name)
        if self.err is not None:
            raise self.err
        return {}

    async def patch(
        self,
        res: Resource,
        name: str,
        patch: Obj,
        *,
        namespace: str | None = None,
        subresource: str | None = None,
        **_: Any,
    ) -> Obj:
        if res == REPLICASETS and subresource == "status":
            self.status_patches.append(patch)
            if self.status_err is not None:
                raise self.status_err
            return patch
        assert res == PODS
        self.pod_patches.append(patch)
        if self.err is not None:
            raise self.err
        return patch


class Rig:
    """A `ReplicaSetController` on a `FakeClient`, its caches filled by the test."""

    def __init__(
        self,
        client: FakeClient | None = None,
        *,
        burst_replicas: int = BURST_REPLICAS,
        gates: dict[str, bool] | None = None,
    ) -> None:
        self.client = client if client is not None else FakeClient()
        self.events = RecordingEvents()
        kube = cast(KubeClient, self.client)
        ctx = ControllerContext(
            client=kube,
            informers=SharedInformerFactory(kube),
            events=self.events,
            gates=StaticGates(gates or {}),
        )
        self.controller = build(ReplicaSetController, ctx, burst_replicas=burst_replicas)
        self.expectations = self.controller.expectations

    # -- the caches ----------------------------------------------------------------------

    def add_rs(self, rs: Obj) -> None:
        self.controller.rs_informer.store.update(meta_key(rs), rs)

    def delete_rs(self, rs: Obj) -> None:
        self.controller.rs_informer.store.delete(meta_key(rs))

    def add_pod(self, pod: Obj) -> None:
        self.controller.pod_informer.store.update(meta_key(pod), pod)

    def delete_pod(self, pod: Obj) -> None:
        self.controller.pod_informer.store.delete(meta_key(pod))

    def pods_in_cache(self) -> int:
        return len(self.controller.pod_informer.store)

    # -- the controller --------------------------------------------------------------------

    async def sync(self, rs_or_key: Obj | str) -> None:
        key = rs_or_key if isinstance(rs_or_key, str) else meta_key(rs_or_key)
        await self.controller.sync(key)

    async def queued(self) -> list[str]:
        """The keys queued now, taken off the queue (each marked done)."""
        keys: list[str] = []
        while len(self.controller.queue):
            key = await self.controller.queue.get()
            self.controller.queue.done(key)
            keys.append(key)
        return keys

    def validate(self, creates: int, deletes: int, patches: int) -> None:
        """Go's `validateSyncReplicaSet`."""
        assert len(self.client.templates) == creates, f"creates: {len(self.client.templates)} != {creates}"
        assert len(self.client.deleted) == deletes, f"deletes: {len(self.client.deleted)} != {deletes}"
        assert len(self.client.pod_patches) == patches, (
            f"patches: {len(self.client.pod_patches)} != {patches}"
        )


def tombstone(obj: Obj, key: str = "foo") -> DeletedFinalStateUnknown:
    return DeletedFinalStateUnknown(key, obj)
