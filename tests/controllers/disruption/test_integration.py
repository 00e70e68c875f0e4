"""`disruption_test.go`'s cases on the local API server: objects in through HTTP, status out.

The controller runs with real informers against `localcluster`; the test plays the workload
controllers and the kubelet (it creates pods with controller references and writes their
readiness through the status subresource), then waits for the budget's status. Waits are for a
state, never for a duration.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import anyio
import pytest

from apiclient import ApiError, KubeClient
from apiclient.resources import (
    CUSTOMRESOURCEDEFINITIONS,
    DEPLOYMENTS,
    PODDISRUPTIONBUDGETS,
    PODS,
    REPLICASETS,
    REPLICATIONCONTROLLERS,
    STATEFULSETS,
    Resource,
)
from controllers import features
from controllers.context import ControllerContext
from controllers.disruption import DisruptionController
from informers import SharedInformerFactory
from kubeutil.timestamps import format_time, utcnow
from tests.controllers.harness import HeldWatches, RecordingEvents, build, running_controllers
from tests.support.waiting import eventually

pytestmark = pytest.mark.backends("local", "real")

NS = "default"
FOO_BAR = {"foo": "bar"}
GATES = {features.DECLARATIVE_NODE_MAINTENANCE: True}
SCALERS = Resource("test.aiokcm.io", "v1", "scalers", "Scaler", True)

Obj = dict[str, Any]
Status = tuple[int, int, int, int, dict[str, str]]


# -- objects ----------------------------------------------------------------------------------


async def create_pdb(
    kube: KubeClient,
    *,
    min_available: int | str | None = None,
    max_unavailable: int | str | None = None,
    selector: Any = None,
    name: str = "foobar",
) -> Obj:
    spec: Obj = {"selector": {"matchLabels": dict(FOO_BAR)} if selector is None else selector}
    if min_available is not None:
        spec["minAvailable"] = min_available
    if max_unavailable is not None:
        spec["maxUnavailable"] = max_unavailable
    body = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": NS},
        "spec": spec,
    }
    return await kube.create(PODDISRUPTIONBUDGETS, body, namespace=NS)


async def create_workload(
    kube: KubeClient, res: Resource, size: int, *, labels: dict[str, str] | None = None, name: str = "foobar"
) -> Obj:
    labels = dict(labels or FOO_BAR)
    selector: Any = labels if res is REPLICATIONCONTROLLERS else {"matchLabels": labels}
    spec: Obj = {
        "replicas": size,
        "selector": selector,
        "template": {
            "metadata": {"labels": labels},
            "spec": {"containers": [{"name": "app", "image": "nginx"}]},
        },
    }
    if res is STATEFULSETS:
        spec["serviceName"] = name
    body = {
        "apiVersion": res.api_version,
        "kind": res.kind,
        "metadata": {"name": name, "namespace": NS},
        "spec": spec,
    }
    return await kube.create(res, body, namespace=NS)


def controller_ref(owner: Obj) -> Obj:
    return {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"],
        "controller": True,
    }


async def create_pod(
    kube: KubeClient,
    name: str,
    *,
    labels: dict[str, str] | None = None,
    owner: Obj | None = None,
    ready: bool = True,
    conditions: list[Obj] | None = None,
    finalizers: list[str] | None = None,
) -> Obj:
    """A pod as a kubelet would report it: bound, Running, Ready unless told otherwise."""
    meta: Obj = {"name": name, "namespace": NS, "labels": dict(labels or FOO_BAR)}
    if owner is not None:
        meta["ownerReferences"] = [controller_ref(owner)]
    if finalizers:
        meta["finalizers"] = finalizers
    spec = {"nodeName": "node-1", "containers": [{"name": "app", "image": "nginx"}]}
    await kube.create(PODS, {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}, namespace=NS)
    stamp = format_time(utcnow())
    conds = [
        {"type": "Ready", "status": "True" if ready else "False", "lastTransitionTime": stamp},
        *(conditions or []),
    ]
    return await kube.patch(
        PODS,
        name,
        {"status": {"phase": "Running", "conditions": conds}},
        namespace=NS,
        subresource="status",
        patch_type="strategic",
    )


async def set_ready(kube: KubeClient, name: str, ready: bool) -> None:
    cond = {
        "type": "Ready",
        "status": "True" if ready else "False",
        "lastTransitionTime": format_time(utcnow()),
    }
    await kube.patch(
        PODS,
        name,
        {"status": {"conditions": [cond]}},
        namespace=NS,
        subresource="status",
        patch_type="strategic",
    )


async def get_pdb(kube: KubeClient, name: str = "foobar") -> Obj:
    return await kube.get(PODDISRUPTIONBUDGETS, name, namespace=NS)


def status_of(pdb: Obj) -> Status:
    st = pdb.get("status") or {}
    return (
        st.get("disruptionsAllowed", 0),
        st.get("currentHealthy", 0),
        st.get("desiredHealthy", 0),
        st.get("expectedPods", 0),
        dict(st.get("disruptedPods") or {}),
    )


def condition_of(pdb: Obj) -> Obj:
    for cond in (pdb.get("status") or {}).get("conditions") or ():
        if cond.get("type") == "DisruptionAllowed":
            return dict(cond)
    return {}


async def wait_status(
    kube: KubeClient, expected: Status, *, name: str = "foobar", reason: str | None = None
) -> Obj:
    """The budget's status reaches `expected` (with an up-to-date condition, so it was computed)."""

    async def check() -> Obj | None:
        pdb = await get_pdb(kube, name)
        cond = condition_of(pdb)
        if status_of(pdb) != expected or not cond:
            return None
        if pdb["status"].get("observedGeneration") != pdb["metadata"].get("generation"):
            return None
        if reason is not None and cond.get("reason") != reason:
            return None
        return pdb

    got: Obj = await eventually(check, f"PDB status {expected}")
    return got


# -- cases ---------------------------------------------------------------------------------------


async def test_no_selector(kube: KubeClient) -> None:
    """TestNoSelector: an empty selector selects every pod in the namespace."""
    async with running_controllers(kube, DisruptionController):
        await create_pdb(kube, min_available=3, selector={})
        await wait_status(kube, (0, 0, 3, 0, {}), reason="InsufficientPods")
        await create_pod(kube, "yo-yo-yo", labels={"any": "thing"})
        await wait_status(kube, (0, 1, 3, 1, {}))


async def test_unavailable(kube: KubeClient) -> None:
    """TestUnavailable: counts rise pod by pod; one pod turning unready takes the disruption away."""
    async with running_controllers(kube, DisruptionController):
        await create_pdb(kube, min_available=3)
        for i in range(4):
            await wait_status(kube, (0, i, 3, i, {}))
            await create_pod(kube, f"yo-yo-yo-{i}")
        pdb = await wait_status(kube, (1, 4, 3, 4, {}), reason="SufficientPods")
        assert condition_of(pdb)["status"] == "True"
        await set_ready(kube, "yo-yo-yo-0", False)
        await wait_status(kube, (0, 3, 3, 4, {}), reason="InsufficientPods")


@pytest.mark.parametrize(
    ("max_unavailable", "scaled_to", "first", "second"),
    [(2, 5, (0, 1, 5, 7, {}), (0, 1, 3, 5, {})), ("30%", 3, (0, 1, 4, 7, {}), (0, 1, 2, 3, {}))],
    ids=["TestIntegerMaxUnavailableWithScaling", "TestPercentageMaxUnavailableWithScaling"],
)
async def test_max_unavailable_with_scaling(
    kube: KubeClient, max_unavailable: int | str, scaled_to: int, first: Status, second: Status
) -> None:
    """maxUnavailable against the ReplicaSet's scale; scaling the ReplicaSet alone re-counts the budget."""
    async with running_controllers(kube, DisruptionController):
        await create_pdb(kube, max_unavailable=max_unavailable)
        rs = await create_workload(kube, REPLICASETS, 7)
        await create_pod(kube, "pod", owner=rs)
        await wait_status(kube, first)
        await kube.patch(REPLICASETS, "foobar", {"spec": {"replicas": scaled_to}}, namespace=NS)
        await wait_status(kube, second)


async def test_naked_pod_unmanaged_event(kube: KubeClient) -> None:
    """TestNakedPod / TestIntegerMaxUnavailable: an unmanaged pod never allows a disruption, and says so."""
    async with running_controllers(kube, DisruptionController) as h:
        await create_pdb(kube, min_available="28%")
        await wait_status(kube, (0, 0, 0, 0, {}), reason="InsufficientPods")
        await create_pod(kube, "naked")
        await eventually(lambda: "UnmanagedPods" in h.events.reasons("foobar"), "an UnmanagedPods event")
        pdb = await wait_status(kube, (0, 1, 0, 0, {}), reason="InsufficientPods")
        assert next(e.type_ for e in h.events.events if e.reason == "UnmanagedPods") == "Warning"
        assert condition_of(pdb)["status"] == "False"


async def test_unsupported_controller_fails_safe(kube: KubeClient) -> None:
    """TestUnsupportedControllerPod: an unresolvable controller is SyncFailed with allowed 0, counts kept."""
    async with running_controllers(kube, DisruptionController) as h:
        await create_pdb(kube, min_available=1)
        await create_pod(kube, "a")
        await create_pod(kube, "b")
        await wait_status(kube, (1, 2, 1, 2, {}))
        # The budget switches to a percentage, which needs the pods' controllers; one cannot be found.
        fake = {
            "apiVersion": "apps.test.io/v1",
            "kind": "TestWorkload",
            "metadata": {"name": "fake-controller", "uid": "b7329742-8daa-493a-8881-6ca07139172b"},
        }
        await kube.patch(PODS, "b", {"metadata": {"ownerReferences": [controller_ref(fake)]}}, namespace=NS)
        await kube.patch(PODDISRUPTIONBUDGETS, "foobar", {"spec": {"minAvailable": "28%"}}, namespace=NS)

        async def failed() -> Obj | None:
            pdb = await get_pdb(kube)
            return pdb if condition_of(pdb).get("reason") == "SyncFailed" else None

        pdb = await eventually(failed, "a SyncFailed condition")
        # disruptionsAllowed 0; the other fields are what they were.
        assert status_of(pdb) == (0, 2, 1, 2, {})
        assert condition_of(pdb)["status"] == "False"
        assert (
            condition_of(pdb)["message"] == 'no matches for kind "TestWorkload" in version "apps.test.io/v1"'
        )
        assert "CalculateExpectedPodCountFailed" in h.events.reasons("foobar")


async def test_replicaset_and_deployment(kube: KubeClient) -> None:
    """TestReplicaSet, then the Deployment finder: a Deployment's scale replaces its ReplicaSet's."""
    async with running_controllers(kube, DisruptionController):
        await create_pdb(kube, min_available="20%")
        rs = await create_workload(kube, REPLICASETS, 10)
        await create_pod(kube, "pod", owner=rs)
        await wait_status(kube, (0, 1, 2, 10, {}))
        dep = await create_workload(kube, DEPLOYMENTS, 4, name="dep")
        await kube.patch(
            REPLICASETS, "foobar", {"metadata": {"ownerReferences": [controller_ref(dep)]}}, namespace=NS
        )
        await create_pod(kube, "pod-2", owner=rs)  # a pod event re-counts with the new owner chain
        await wait_status(kube, (1, 2, 1, 4, {}))


@pytest.mark.parametrize(
    "res",
    [REPLICATIONCONTROLLERS, STATEFULSETS],
    ids=["TestReplicationController", "TestStatefulSetController"],
)
async def test_controller_34_percent(kube: KubeClient, res: Resource) -> None:
    """34% of 3 rounds up to 2; a rogue unmanaged pod still counts when healthy."""
    labels = {"foo": "bar", "baz": "quux"}
    async with running_controllers(kube, DisruptionController):
        await create_pdb(kube, min_available="34%")
        owner = await create_workload(kube, res, 3, labels=labels)
        await wait_status(kube, (0, 0, 0, 0, {}))
        for i in range(3):
            await create_pod(kube, f"foobar-{i}", labels=labels, owner=owner)
            await wait_status(kube, (0, i + 1, 2, 3, {}) if i < 2 else (1, 3, 2, 3, {}))
        await create_pod(kube, "rogue")
        await wait_status(kube, (2, 4, 2, 3, {}))


async def create_crd(kube: KubeClient, plural: str, kind: str, *, scale: bool) -> Resource:
    """A namespaced custom resource in `test.aiokcm.io/v1`, with or without a `/scale` subresource."""
    version: Obj = {
        "name": "v1",
        "served": True,
        "storage": True,
        "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
    }
    if scale:
        version["subresources"] = {
            "scale": {"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas"}
        }
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.test.aiokcm.io"},
        "spec": {
            "group": "test.aiokcm.io",
            "scope": "Namespaced",
            "names": {"plural": plural, "singular": kind.lower(), "kind": kind},
            "versions": [version],
        },
    }
    await kube.create(CUSTOMRESOURCEDEFINITIONS, crd)
    res = Resource("test.aiokcm.io", "v1", plural, kind, True)

    async def served() -> bool:
        try:
            await kube.list(res, namespace=NS, limit=1)
        except ApiError:
            return False
        return True

    await eventually(served, f"the {kind} API")
    return res


async def test_scale_subresource(kube: KubeClient) -> None:
    """TestScaleResource: a custom resource's `/scale` gives the expected count."""
    await create_crd(kube, "scalers", "Scaler", scale=True)
    scaler = await kube.create(
        SCALERS,
        {
            "apiVersion": "test.aiokcm.io/v1",
            "kind": "Scaler",
            "metadata": {"name": "big", "namespace": NS},
            "spec": {"replicas": 10},
        },
        namespace=NS,
    )
    async with running_controllers(kube, DisruptionController):
        await create_pdb(kube, max_unavailable=5)
        for i in range(4):
            await create_pod(kube, f"pod-{i}", owner=scaler)
        await wait_status(kube, (0, 4, 5, 10, {}))
        await kube.patch(SCALERS, "big", {"spec": {"replicas": 6}}, namespace=NS)
        await create_pod(
            kube, "pod-4", owner=scaler
        )  # the custom kind has no informer: a pod event re-counts
        await wait_status(kube, (4, 5, 1, 6, {}))


async def test_update_disrupted_pods(kube: KubeClient) -> None:
    """TestUpdateDisruptedPods: terminating, expired and vanished entries are dropped; a fresh one kept."""
    for name in ("p1", "p2", "p3"):
        await create_pod(kube, name, finalizers=["test.aiokcm.io/hold"] if name == "p1" else None)
    await kube.delete(PODS, "p1", namespace=NS)  # terminating, held by its finalizer
    pdb = await create_pdb(kube, min_available=1)
    now = utcnow()
    p3_time = format_time(now - timedelta(minutes=1))
    pdb["status"] = {
        "disruptedPods": {
            "p1": format_time(now),
            "p2": format_time(now - timedelta(minutes=3)),
            "p3": p3_time,
            "notthere": format_time(now),
        }
    }
    await kube.replace(PODDISRUPTIONBUDGETS, pdb, namespace=NS, subresource="status")
    async with running_controllers(kube, DisruptionController) as h:
        await wait_status(kube, (0, 1, 1, 3, {"p3": p3_time}))
        assert "NotDeleted" in h.events.reasons("p2")
    await kube.patch(PODS, "p1", {"metadata": {"finalizers": None}}, namespace=NS)


async def test_disrupted_pod_entry_rechecked_at_expiry(kube: KubeClient) -> None:
    """An entry about to expire is dropped at its expiry without any further event."""
    await create_pod(kube, "p1")
    await create_pod(kube, "p2")
    pdb = await create_pdb(kube, min_available=1)
    almost = format_time(utcnow() - timedelta(minutes=2) + timedelta(seconds=2))
    pdb["status"] = {"disruptedPods": {"p1": almost}}
    await kube.replace(PODDISRUPTIONBUDGETS, pdb, namespace=NS, subresource="status")
    async with running_controllers(kube, DisruptionController):
        # While the entry holds, p1 does not count as healthy ...
        await wait_status(kube, (0, 1, 1, 2, {"p1": almost}))
        # ... and once it expires the budget is recomputed with no pod or budget event at all.
        await wait_status(kube, (1, 2, 1, 2, {}))


async def test_pdb_not_exist(kube: KubeClient) -> None:
    """TestPDBNotExist: syncing a budget that is not there is not an error."""
    factory = SharedInformerFactory(kube)
    controller = build(DisruptionController, ControllerContext(client=kube, informers=factory))
    await controller.sync("default/notExist")


async def test_conflicting_eviction_is_never_overwritten(kube: KubeClient) -> None:
    """TestUpdatePDBStatusRetries: a status computed from a stale budget is refused (409) and requeued.

    The budget's watch is held back, so the controller's cache keeps the budget it first saw while
    the "eviction API" spends both disruptions. The controller's next write must not resurrect them.
    """
    pdb = await create_pdb(kube, min_available=1)
    for name in ("moe", "larry", "curly"):
        await create_pod(kube, name)
    held = HeldWatches(kube, [PODDISRUPTIONBUDGETS])
    factory = SharedInformerFactory(held)  # type: ignore[arg-type]
    controller = build(
        DisruptionController, ControllerContext(client=kube, informers=factory, events=RecordingEvents())
    )
    async with anyio.create_task_group() as tg:
        factory.start(tg)
        assert await factory.wait_for_cache_sync()
        key = f"{NS}/foobar"
        await controller.sync(key)
        pdb = await wait_status(kube, (2, 3, 1, 3, {}))
        # The eviction API spends both disruptions on larry and curly, and they go.
        stamp = format_time(utcnow())
        pdb["status"] = {
            **pdb["status"],
            "disruptionsAllowed": 0,
            "disruptedPods": {"larry": stamp, "curly": stamp},
        }
        await kube.replace(PODDISRUPTIONBUDGETS, pdb, namespace=NS, subresource="status")
        for name in ("moe", "larry", "curly"):
            await kube.delete(PODS, name, namespace=NS, grace_period_seconds=0)
        await eventually(lambda: not controller.pod_lister.list(NS), "the pod cache to empty")
        with pytest.raises(ApiError) as err:
            await controller.sync(key)
        assert err.value.conflict
        assert status_of(await get_pdb(kube))[0] == 0
        held.release()
        await eventually(
            lambda: (controller.pdb_lister.get("foobar", NS) or {}).get("status", {}).get("disruptedPods"),
            "the budget cache to catch up",
        )
        await controller.sync(key)
        await wait_status(kube, (0, 0, 1, 0, {}))
        tg.cancel_scope.cancel()


async def test_stale_disruption_target_reset(kube: KubeClient) -> None:
    """TestStalePodDisruption: a DisruptionTarget older than 2 min on a running pod is reset to False."""
    old = format_time(utcnow() - timedelta(minutes=3))
    fresh = format_time(utcnow())
    target = {
        "type": "DisruptionTarget",
        "status": "True",
        "reason": "EvictionByEvictionAPI",
        "lastTransitionTime": old,
    }
    await create_pod(kube, "stale", conditions=[target])
    await create_pod(kube, "fresh", conditions=[{**target, "lastTransitionTime": fresh}])
    await create_pod(kube, "kubelet", conditions=[{**target, "reason": "TerminationByKubelet"}])

    def cond(pod: Obj) -> Obj:
        return next(c for c in pod["status"]["conditions"] if c["type"] == "DisruptionTarget")

    async with running_controllers(kube, DisruptionController):

        async def reset() -> Obj | None:
            pod = await kube.get(PODS, "stale", namespace=NS)
            return pod if cond(pod)["status"] == "False" else None

        pod = await eventually(reset, "the stale condition to be reset")
        assert "reason" not in cond(pod) and cond(pod)["lastTransitionTime"] != old
        # Ready is untouched; the fresh and the kubelet's conditions stay True.
        assert any(c["type"] == "Ready" and c["status"] == "True" for c in pod["status"]["conditions"])
        assert cond(await kube.get(PODS, "fresh", namespace=NS))["status"] == "True"
        assert cond(await kube.get(PODS, "kubelet", namespace=NS))["status"] == "True"


async def test_evacuating_pods_protect_the_migration(kube: KubeClient) -> None:
    """KEP-4212: evacuating pods are disrupted for the budget; their number is on the PDB as an annotation."""
    evacuating = {
        "type": "EvacuationInitiated",
        "status": "True",
        "reason": "NodeMaintenance",
        "lastTransitionTime": format_time(utcnow()),
    }
    dep = await create_workload(kube, DEPLOYMENTS, 2, name="web")
    rs = await create_workload(kube, REPLICASETS, 3, name="web-1")
    await kube.patch(
        REPLICASETS, "web-1", {"metadata": {"ownerReferences": [controller_ref(dep)]}}, namespace=NS
    )
    await create_pod(kube, "old", owner=rs, conditions=[evacuating])
    await create_pod(kube, "other", owner=rs)
    await create_pod(kube, "surge", owner=rs)
    async with running_controllers(kube, DisruptionController, gates=GATES):
        await create_pdb(kube, max_unavailable=1)
        # Without the rule the surge pod would be a spare disruption (3 healthy of 2 desired 1).
        pdb = await wait_status(kube, (1, 2, 1, 2, {}))

        async def annotated() -> Obj | None:
            got = await get_pdb(kube)
            return (
                got
                if (got["metadata"].get("annotations") or {}).get("maintenance.aiokcm.io/evacuating-pods")
                == "1"
                else None
            )

        await eventually(annotated, "the evacuating-pods annotation")
        # The migration ends: the old pod goes; the annotation goes with it.
        await kube.delete(PODS, "old", namespace=NS, grace_period_seconds=0)

        async def cleared() -> Obj | None:
            got = await get_pdb(kube)
            return (
                got
                if "maintenance.aiokcm.io/evacuating-pods" not in (got["metadata"].get("annotations") or {})
                else None
            )

        pdb = await eventually(cleared, "the annotation to go")
        assert status_of(pdb) == (1, 2, 1, 2, {})


async def test_evacuation_rule_off_without_gate(kube: KubeClient) -> None:
    """Without `DeclarativeNodeMaintenance` the numbers are exactly KCM's: evacuating pods are healthy."""
    evacuating = {
        "type": "EvacuationInitiated",
        "status": "True",
        "lastTransitionTime": format_time(utcnow()),
    }
    await create_pod(kube, "old", conditions=[evacuating])
    await create_pod(kube, "surge")
    async with running_controllers(kube, DisruptionController):
        await create_pdb(kube, min_available=1)
        pdb = await wait_status(kube, (1, 2, 1, 2, {}))
        assert "maintenance.aiokcm.io/evacuating-pods" not in (pdb["metadata"].get("annotations") or {})


async def test_scale_finder_no_resource(kube: KubeClient) -> None:
    """TestScaleFinderNoResource: a kind without `/scale` is an error; a missing object with `/scale` finds nothing.

    Either way the budget cannot be computed and fails safe with the reason in the condition.
    """
    plain_res = await create_crd(kube, "plains", "Plain", scale=False)
    await create_crd(kube, "scalers", "Scaler", scale=True)
    plain = await kube.create(
        plain_res,
        {"apiVersion": "test.aiokcm.io/v1", "kind": "Plain", "metadata": {"name": "p", "namespace": NS}},
        namespace=NS,
    )
    gone = {
        "apiVersion": "test.aiokcm.io/v1",
        "kind": "Scaler",
        "metadata": {"name": "gone", "uid": "0000-gone"},
    }
    await create_pod(kube, "of-plain", labels={"app": "plain"}, owner=plain)
    await create_pod(kube, "of-gone", labels={"app": "gone"}, owner=gone)
    async with running_controllers(kube, DisruptionController):
        await create_pdb(kube, max_unavailable=1, selector={"matchLabels": {"app": "plain"}}, name="plain")
        await create_pdb(kube, max_unavailable=1, selector={"matchLabels": {"app": "gone"}}, name="gone")
        messages = {
            "plain": "plains.test.aiokcm.io does not implement the scale subresource",
            "gone": 'found no controllers for pod "of-gone"',  # Go's %q
        }
        for name, message in messages.items():

            async def failed(name: str = name) -> Obj | None:
                pdb = await get_pdb(kube, name)
                return pdb if condition_of(pdb).get("reason") == "SyncFailed" else None

            pdb = await eventually(failed, f"{name}: SyncFailed")
            assert condition_of(pdb)["message"] == message
            assert pdb["status"]["disruptionsAllowed"] == 0
