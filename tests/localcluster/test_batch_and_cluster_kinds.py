"""Jobs, CronJobs, EndpointSlices and Endpoints, PriorityClasses, quotas and limit ranges,
PersistentVolumes and claims: served with kube-apiserver's shapes and run by the controllers a
cluster has, through the real kubectl and kubernetes_asyncio.

Tests marked for both backends compare the embedded cluster with the real kube-apiserver (and
its kube-controller-manager); the rest need what only the local kubelets do (a Job's pods exit)
or a clock moved forward (CronJob schedules).
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
from collections.abc import AsyncIterator
from typing import Any

import pytest

from apiclient import ApiError, KubeClient
from apiclient.resources import PODS, Resource
from localcluster.cluster import LocalCluster
from tests.backends import cluster_on_backend
from tests.localcluster.test_workload_controllers import kubectl
from tests.support import objects
from tests.support.waiting import eventually

pytestmark = [
    pytest.mark.kubectl,
    pytest.mark.skipif(shutil.which("kubectl") is None, reason="needs the kubectl binary"),
]

NS = "default"
JOBS = Resource("batch", "v1", "jobs", "Job", True)
CRONJOBS = Resource("batch", "v1", "cronjobs", "CronJob", True)
ENDPOINTS = Resource("", "v1", "endpoints", "Endpoints", True)
ENDPOINTSLICES = Resource("discovery.k8s.io", "v1", "endpointslices", "EndpointSlice", True)
PRIORITYCLASSES = Resource("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", False)
QUOTAS = Resource("", "v1", "resourcequotas", "ResourceQuota", True)
LIMITRANGES = Resource("", "v1", "limitranges", "LimitRange", True)
PVS = Resource("", "v1", "persistentvolumes", "PersistentVolume", False)
PVCS = Resource("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", True)


@pytest.fixture
async def cluster(request: pytest.FixtureRequest) -> AsyncIterator[Any]:
    async with cluster_on_backend(request, nodes=2, pod_start_delay=0.1, termination_cap=0.3) as started:
        yield started


@pytest.fixture
async def local() -> AsyncIterator[LocalCluster]:
    async with LocalCluster(nodes=2, pod_start_delay=0.1, termination_cap=0.3, run_seconds=0.2) as started:
        yield started


@pytest.fixture
async def local_kube(local: LocalCluster) -> AsyncIterator[KubeClient]:
    client = await local.client()
    try:
        yield client
    finally:
        await client.close()


def condition(obj: dict[str, Any], type_: str) -> dict[str, Any] | None:
    return next(
        (c for c in (obj.get("status") or {}).get("conditions") or [] if c.get("type") == type_), None
    )


def pod(name: str, **spec: Any) -> dict[str, Any]:
    return objects.pod(name, image="busybox:1.36", **spec)


# -- kubectl create, both backends --------------------------------------------------------------


@pytest.mark.backends("local", "real")
async def test_kubectl_create_job_cronjob_priorityclass_quota(cluster: Any, kube: KubeClient) -> None:
    await kubectl(cluster, "create", "job", "once", "--image=busybox:1.36", "--", "true")
    await kubectl(cluster, "create", "cronjob", "tick", "--image=busybox:1.36", "--schedule=*/5 * * * *")
    await kubectl(cluster, "create", "priorityclass", "high", "--value=1000", "--description=important")
    await kubectl(cluster, "create", "quota", "small", "--hard=pods=10,configmaps=5")

    job = await kube.get(JOBS, "once", namespace=NS)
    spec = job["spec"]
    uid = job["metadata"]["uid"]
    assert spec["selector"] == {"matchLabels": {"controller-uid": uid}}
    assert spec["template"]["metadata"]["labels"] == {"controller-uid": uid, "job-name": "once"}
    assert (spec["completions"], spec["parallelism"], spec["backoffLimit"]) == (1, 1, 6)
    assert (spec["completionMode"], spec["suspend"]) == ("NonIndexed", False)
    assert spec["template"]["spec"]["restartPolicy"] == "Never"

    cronjob = await kube.get(CRONJOBS, "tick", namespace=NS)
    assert {
        k: cronjob["spec"][k]
        for k in ("concurrencyPolicy", "suspend", "successfulJobsHistoryLimit", "failedJobsHistoryLimit")
    } == {
        "concurrencyPolicy": "Allow",
        "suspend": False,
        "successfulJobsHistoryLimit": 3,
        "failedJobsHistoryLimit": 1,
    }
    assert "completions" not in cronjob["spec"]["jobTemplate"]["spec"]

    high = await kube.get(PRIORITYCLASSES, "high")
    assert (high["value"], high["preemptionPolicy"], high["description"]) == (
        1000,
        "PreemptLowerPriority",
        "important",
    )
    system = await kube.get(PRIORITYCLASSES, "system-node-critical")
    assert system["value"] == 2000001000

    quota = await eventually(lambda: _quota_synced(kube, "small"), "the quota's status")
    assert quota["status"]["hard"] == {"pods": "10", "configmaps": "5"}

    table = await kubectl(cluster, "get", "jobs,cronjobs,quota,pc", "-o", "wide")
    assert "COMPLETIONS" in table and "SCHEDULE" in table and "*/5 * * * *" in table
    assert "GLOBAL-DEFAULT" in table and "system-cluster-critical" in table
    assert "REQUEST" in table
    short = await kubectl(cluster, "get", "cj,pc,quota,limits,pv,pvc,ep,hpa", "-o", "name")
    assert "cronjob.batch/tick" in short and "priorityclass.scheduling.k8s.io/high" in short


async def _quota_synced(kube: KubeClient, name: str) -> dict[str, Any] | None:
    quota = await kube.get(QUOTAS, name, namespace=NS)
    return quota if (quota.get("status") or {}).get("hard") else None


@pytest.mark.backends("local", "real")
async def test_invalid_job_and_priorityclass_are_refused(cluster: Any, kube: KubeClient) -> None:
    bad_job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "always"},
        "spec": {
            "template": {
                "spec": {"restartPolicy": "Always", "containers": [{"name": "c", "image": "busybox"}]}
            }
        },
    }
    proc = await _kubectl_fails(cluster, "create", "-f", "-", stdin=json.dumps(bad_job))
    assert 'spec.template.spec.restartPolicy: Required value: valid values: "OnFailure", "Never"' in proc
    bad_cron = {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {"name": "never"},
        "spec": {
            "schedule": "not a schedule",
            "jobTemplate": {
                "spec": {
                    "template": {
                        "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}
                    }
                }
            },
        },
    }
    assert "spec.schedule" in await _kubectl_fails(cluster, "create", "-f", "-", stdin=json.dumps(bad_cron))
    assert "system-" in await _kubectl_fails(cluster, "create", "priorityclass", "system-mine", "--value=5")


async def _kubectl_fails(cluster: Any, *args: str, stdin: str | None = None) -> str:
    with pytest.raises(AssertionError) as caught:
        await kubectl(cluster, *args, stdin=stdin)
    return str(caught.value)


# -- admission: priority, limit ranges, quota ------------------------------------------------------


@pytest.mark.backends("local", "real")
async def test_priority_limitrange_and_quota_admission(cluster: Any, kube: KubeClient) -> None:
    await kubectl(cluster, "create", "priorityclass", "batch-low", "--value=10")
    created = await kube.create(PODS, pod("prio", priorityClassName="batch-low"), namespace=NS)
    assert created["spec"]["priority"] == 10
    assert "no PriorityClass with name missing was found" in await _kubectl_fails(
        cluster, "create", "-f", "-", stdin=json.dumps(pod("lost", priorityClassName="missing"))
    )

    limits = {
        "apiVersion": "v1",
        "kind": "LimitRange",
        "metadata": {"name": "defaults"},
        "spec": {
            "limits": [
                {
                    "type": "Container",
                    "default": {"cpu": "500m", "memory": "128Mi"},
                    "defaultRequest": {"cpu": "100m", "memory": "64Mi"},
                }
            ]
        },
    }
    await kube.create(LIMITRANGES, limits, namespace=NS)
    defaulted = await kube.create(PODS, pod("defaulted"), namespace=NS)
    resources = defaulted["spec"]["containers"][0]["resources"]
    assert resources == {
        "limits": {"cpu": "500m", "memory": "128Mi"},
        "requests": {"cpu": "100m", "memory": "64Mi"},
    }
    assert (
        defaulted["metadata"]["annotations"]["kubernetes.io/limit-ranger"]
        == "LimitRanger plugin set: cpu, memory request for container c; cpu, memory limit for container c"
    )

    await kubectl(cluster, "create", "quota", "three", "--hard=pods=3,requests.cpu=1")
    await eventually(lambda: _quota_used(kube, "three", "pods", "2"), "the two pods counted")
    await kube.create(PODS, pod("third"), namespace=NS)
    refusal = await _kubectl_fails(cluster, "create", "-f", "-", stdin=json.dumps(pod("fourth")))
    assert (
        'pods "fourth" is forbidden: exceeded quota: three, requested: pods=1, used: pods=3, limited: pods=3'
        in refusal
    ), refusal
    quota = await eventually(lambda: _quota_used(kube, "three", "pods", "3"), "the third pod counted")
    assert quota["status"]["used"]["requests.cpu"] == "200m"  # the first pod predates the limit range


async def _quota_used(kube: KubeClient, name: str, resource: str, value: str) -> dict[str, Any] | None:
    quota = await kube.get(QUOTAS, name, namespace=NS)
    return quota if ((quota.get("status") or {}).get("used") or {}).get(resource) == value else None


# -- volumes ------------------------------------------------------------------------------------


@pytest.mark.backends("local", "real")
async def test_claim_binds_to_the_smallest_matching_volume(cluster: Any, kube: KubeClient) -> None:
    def volume(name: str, size: str) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": name},
            "spec": {
                "capacity": {"storage": size},
                "accessModes": ["ReadWriteOnce"],
                "storageClassName": "manual",
                "hostPath": {"path": f"/tmp/{name}"},
            },
        }

    await kube.create(PVS, volume("big", "10Gi"))
    await kube.create(PVS, volume("small", "2Gi"))
    # The binder picks among the volumes it has seen: once both are Available (its own write on
    # each), a claim has both to choose from, on either backend.
    for name in ("big", "small"):
        await eventually(lambda name=name: _phase_is(kube, name, "Available"), f"volume {name} available")
    claim = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "data"},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": "manual",
            "resources": {"requests": {"storage": "1Gi"}},
        },
    }
    await kube.create(PVCS, claim, namespace=NS)

    async def bound() -> dict[str, Any] | None:
        got = await kube.get(PVCS, "data", namespace=NS)
        return got if (got.get("status") or {}).get("phase") == "Bound" else None

    claimed = await eventually(bound, "the claim bound")
    assert claimed["spec"]["volumeName"] == "small"
    assert claimed["status"]["capacity"] == {"storage": "2Gi"}
    assert claimed["status"]["accessModes"] == ["ReadWriteOnce"]
    small = await eventually(lambda: _phase_is(kube, "small", "Bound"), "the volume bound")
    assert small["spec"]["claimRef"]["name"] == "data"
    assert (await kube.get(PVS, "big"))["status"]["phase"] == "Available"
    table = await kubectl(cluster, "get", "pvc", "data")
    assert "Bound" in table and "small" in table and "RWO" in table


async def _phase_is(kube: KubeClient, name: str, phase: str) -> dict[str, Any] | None:
    got = await kube.get(PVS, name)
    return got if (got.get("status") or {}).get("phase") == phase else None


# -- controllers the local cluster simulates ------------------------------------------------------


async def _job_finished(kube: KubeClient, name: str, type_: str) -> dict[str, Any] | None:
    job = await kube.get(JOBS, name, namespace=NS)
    cond = condition(job, type_)
    return job if cond is not None and cond.get("status") == "True" else None


async def test_job_runs_its_pods_to_completion(local: LocalCluster, local_kube: KubeClient) -> None:
    body = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "work"},
        "spec": {
            "completions": 3,
            "parallelism": 2,
            "template": {
                "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox:1.36"}]}
            },
        },
    }
    await kubectl(local, "create", "-f", "-", stdin=json.dumps(body))
    job = await eventually(lambda: _job_finished(local_kube, "work", "Complete"), "the Job complete")
    assert job["status"]["succeeded"] == 3
    assert "active" not in job["status"] and "failed" not in job["status"]
    assert job["status"]["completionTime"] >= job["status"]["startTime"]
    pods = await local_kube.list_all(PODS, namespace=NS, label_selector="job-name=work")
    assert len(pods) == 3 and all(p["status"]["phase"] == "Succeeded" for p in pods)
    assert all(p["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 0 for p in pods)
    assert "3/3" in await kubectl(local, "get", "job", "work")


async def test_job_fails_past_its_backoff_limit(local: LocalCluster, local_kube: KubeClient) -> None:
    body = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "broken"},
        "spec": {
            "backoffLimit": 1,
            "template": {
                "metadata": {"annotations": {"localcluster.aiokcm.io/exit-code": "3"}},
                "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox:1.36"}]},
            },
        },
    }
    await local_kube.create(JOBS, body, namespace=NS)
    job = await eventually(lambda: _job_finished(local_kube, "broken", "Failed"), "the Job failed")
    assert condition(job, "Failed")["reason"] == "BackoffLimitExceeded"  # type: ignore[index]
    assert job["status"]["failed"] == 2 and "succeeded" not in job["status"]
    pods = await local_kube.list_all(PODS, namespace=NS, label_selector="job-name=broken")
    assert [p["status"]["phase"] for p in pods] == ["Failed", "Failed"]


async def test_cronjob_creates_a_job_at_each_schedule(local: LocalCluster, local_kube: KubeClient) -> None:
    await kubectl(local, "create", "cronjob", "every-minute", "--image=busybox:1.36", "--schedule=* * * * *")
    local.cronjobs.travel(dt.timedelta(minutes=1, seconds=1))

    async def jobs() -> list[dict[str, Any]]:
        return await local_kube.list_all(JOBS, namespace=NS)

    first = await eventually(jobs, "a first Job")
    assert first[0]["metadata"]["name"].startswith("every-minute-")
    assert first[0]["metadata"]["ownerReferences"][0]["kind"] == "CronJob"
    await eventually(
        lambda: _job_finished(local_kube, first[0]["metadata"]["name"], "Complete"), "the first Job complete"
    )
    local.cronjobs.travel(dt.timedelta(minutes=1))
    both = await eventually(lambda: _count(jobs, 2), "a second Job")
    assert len({j["metadata"]["name"] for j in both}) == 2

    async def settled() -> dict[str, Any] | None:
        cj = await local_kube.get(CRONJOBS, "every-minute", namespace=NS)
        return cj if cj["status"].get("lastScheduleTime") and cj["status"].get("lastSuccessfulTime") else None

    cronjob = await eventually(settled, "the CronJob's status")
    assert cronjob["status"]["lastScheduleTime"].endswith(":00Z")


async def _count(probe: Any, n: int) -> Any:
    got = await probe()
    return got if len(got) >= n else None


async def test_endpoints_and_slices_follow_ready_pods(local: LocalCluster, local_kube: KubeClient) -> None:
    await kubectl(local, "create", "service", "clusterip", "web", "--tcp=80:8080")

    async def addresses() -> tuple[list[str], list[str]] | None:
        ep = await local_kube.get(ENDPOINTS, "web", namespace=NS)
        subsets = ep.get("subsets") or [{}]
        ready = [a["ip"] for a in subsets[0].get("addresses") or []]
        not_ready = [a["ip"] for a in subsets[0].get("notReadyAddresses") or []]
        return (ready, not_ready) if len(ready) + len(not_ready) == 2 else None

    for i in range(2):
        await local_kube.create(
            PODS,
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": f"web-{i}", "labels": {"app": "web"}},
                "spec": {
                    "containers": [
                        {"name": "nginx", "image": "nginx:1.27", "ports": [{"containerPort": 8080}]}
                    ]
                },
            },
            namespace=NS,
        )
    ready, _ = await eventually(lambda: _all_ready(addresses), "both pods ready in the Endpoints")
    slices = await local_kube.list_all(
        ENDPOINTSLICES, namespace=NS, label_selector="kubernetes.io/service-name=web"
    )
    assert len(slices) == 1
    slice_ = slices[0]
    assert slice_["addressType"] == "IPv4" and slice_["ports"] == [
        {"name": "80-8080", "protocol": "TCP", "port": 8080}
    ]
    assert sorted(a for e in slice_["endpoints"] for a in e["addresses"]) == sorted(ready)
    assert all(
        e["conditions"] == {"ready": True, "serving": True, "terminating": False} for e in slice_["endpoints"]
    )
    assert slice_["metadata"]["ownerReferences"][0]["kind"] == "Service"

    pod0 = await local_kube.get(PODS, "web-0", namespace=NS)
    local.kubelets[pod0["spec"]["nodeName"]].fail_readiness(NS, "web-0")
    ip0 = pod0["status"]["podIP"]

    async def moved() -> Any:
        got = await addresses()
        return got if got is not None and got[1] == [ip0] else None

    await eventually(moved, "the unready pod under notReadyAddresses")
    slice_ = (
        await local_kube.list_all(
            ENDPOINTSLICES, namespace=NS, label_selector="kubernetes.io/service-name=web"
        )
    )[0]
    unready = next(e for e in slice_["endpoints"] if e["addresses"] == [ip0])
    assert unready["conditions"]["ready"] is False
    assert "8080" in await kubectl(local, "get", "endpointslices")


async def _all_ready(addresses: Any) -> Any:
    got = await addresses()
    return got if got is not None and len(got[0]) == 2 else None


# -- custom resources: selectableFields ------------------------------------------------------------

CRDS = Resource("apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", False)
WIDGETS = Resource("example.com", "v1", "widgets", "Widget", True)


def widget_crd(selectable: list[dict[str, str]]) -> dict[str, Any]:
    schema = {
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "properties": {
                    "color": {"type": "string"},
                    "size": {"type": "integer"},
                    "shiny": {"type": "boolean"},
                    "tags": {"type": "array", "items": {"type": "string"}},
                },
            }
        },
    }
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": schema},
                    "selectableFields": selectable,
                }
            ],
        },
    }


async def test_crd_selectable_fields_work_as_field_selectors(
    local: LocalCluster, local_kube: KubeClient
) -> None:
    refused = await _kubectl_fails(
        local, "create", "-f", "-", stdin=json.dumps(widget_crd([{"jsonPath": ".spec.tags"}]))
    )
    assert "selectable field must have type string, integer or boolean" in refused
    await local_kube.create(
        CRDS,
        widget_crd([{"jsonPath": ".spec.color"}, {"jsonPath": ".spec.size"}, {"jsonPath": ".spec.shiny"}]),
    )

    async def served() -> bool:
        try:
            await local_kube.list(WIDGETS, namespace=NS)
        except Exception:
            return False
        return True

    await eventually(served, "widgets served")
    crd = await local_kube.get(CRDS, "widgets.example.com")
    assert crd["spec"]["versions"][0]["selectableFields"][0] == {"jsonPath": ".spec.color"}
    for name, color, size, shiny in (("a", "red", 1, True), ("b", "blue", 2, False), ("c", "red", 3, False)):
        await local_kube.create(
            WIDGETS,
            {
                "apiVersion": "example.com/v1",
                "kind": "Widget",
                "metadata": {"name": name},
                "spec": {"color": color, "size": size, "shiny": shiny},
            },
            namespace=NS,
        )
    red = await kubectl(local, "get", "widgets", "--field-selector=spec.color=red", "-o", "name")
    assert red.split() == ["widget.example.com/a", "widget.example.com/c"]
    mixed = await local_kube.list(
        WIDGETS, namespace=NS, field_selector="spec.color=red,spec.size!=1,spec.shiny=false"
    )
    assert [w["metadata"]["name"] for w in mixed["items"]] == ["c"]
    assert "field label not supported: spec.tags" in await _kubectl_fails(
        local, "get", "widgets", "--field-selector=spec.tags=x"
    )


# -- smaller shapes, compared with kube-apiserver --------------------------------------------------

NODES_ = Resource("", "v1", "nodes", "Node", False)
DEPLOYMENTS_ = Resource("apps", "v1", "deployments", "Deployment", True)
CONFIGMAPS_ = Resource("", "v1", "configmaps", "ConfigMap", True)


@pytest.mark.backends("local", "real")
async def test_created_node_pod_template_and_null_fields_read_back_as_kube_apiserver_writes_them(
    cluster: Any, kube: KubeClient
) -> None:
    node = await kube.create(NODES_, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "bare"}})
    assert node["spec"]["taints"] == [{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}]
    assert node["status"]["daemonEndpoints"] == {"kubeletEndpoint": {"Port": 0}}
    assert set(node["status"]["nodeInfo"].values()) == {""} and "kubeletVersion" in node["status"]["nodeInfo"]

    template = {
        "metadata": {"labels": {"app": "sa"}},
        "spec": {"serviceAccountName": "builder", "containers": [{"name": "c", "image": "busybox:1.36"}]},
    }
    deployment = await kube.create(
        DEPLOYMENTS_,
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "sa"},
            "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "sa"}}, "template": template},
        },
        namespace=NS,
    )
    assert deployment["spec"]["template"]["spec"]["serviceAccount"] == "builder"

    configmap = await kube.create(
        CONFIGMAPS_,
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "nulls", "labels": None, "annotations": None},
            "data": None,
        },
        namespace=NS,
    )
    assert "data" not in configmap
    assert "labels" not in configmap["metadata"] and "annotations" not in configmap["metadata"]


HPAS = Resource("autoscaling", "v2", "horizontalpodautoscalers", "HorizontalPodAutoscaler", True)


@pytest.mark.backends("local", "real")
async def test_hpa_v2_defaults_validation_and_columns(cluster: Any, kube: KubeClient) -> None:
    hpa: dict[str, Any] = {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "web"},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "maxReplicas": 4,
        },
    }
    created = await kube.create(HPAS, hpa, namespace=NS)
    assert created["spec"]["minReplicas"] == 1
    assert created["spec"]["metrics"] == [
        {
            "type": "Resource",
            "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}},
        }
    ]
    bad = dict(hpa, metadata={"name": "upside-down"}, spec={**hpa["spec"], "minReplicas": 5})
    assert "spec.maxReplicas" in await _kubectl_fails(cluster, "create", "-f", "-", stdin=json.dumps(bad))
    table = await kubectl(cluster, "get", "hpa", "web")
    assert "REFERENCE" in table and "Deployment/web" in table and "MAXPODS" in table


@pytest.mark.backends("local", "real")
async def test_endpoints_and_slice_shapes_match_kcm(cluster: Any, kube: KubeClient) -> None:
    await kubectl(cluster, "create", "service", "clusterip", "api", "--tcp=80:http")
    await kube.create(
        PODS,
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "api-0", "labels": {"app": "api"}},
            "spec": {
                "containers": [
                    {"name": "c", "image": "nginx:1.27", "ports": [{"name": "http", "containerPort": 8080}]}
                ]
            },
        },
        namespace=NS,
    )

    async def published() -> dict[str, Any] | None:
        try:
            ep = await kube.get(ENDPOINTS, "api", namespace=NS)
        except ApiError as exc:
            if exc.not_found:
                return None  # not written yet
            raise
        return ep if (ep.get("subsets") or [{}])[0].get("addresses") else None

    endpoints = await eventually(published, "the ready pod in the Endpoints", timeout=40)
    pod_ = await kube.get(PODS, "api-0", namespace=NS)
    subset = endpoints["subsets"][0]
    assert subset["ports"] == [{"name": "80-http", "port": 8080, "protocol": "TCP"}]
    address = subset["addresses"][0]
    assert address["ip"] == pod_["status"]["podIP"] and address["nodeName"] == pod_["spec"]["nodeName"]
    assert {k: address["targetRef"][k] for k in ("kind", "name", "namespace", "uid")} == {
        "kind": "Pod",
        "name": "api-0",
        "namespace": NS,
        "uid": pod_["metadata"]["uid"],
    }

    async def sliced() -> dict[str, Any] | None:
        slices = await kube.list_all(
            ENDPOINTSLICES, namespace=NS, label_selector="kubernetes.io/service-name=api"
        )
        return slices[0] if slices and slices[0].get("endpoints") else None

    slice_ = await eventually(sliced, "the EndpointSlice", timeout=40)
    assert slice_["metadata"]["generateName"] == "api-"
    assert (
        slice_["metadata"]["labels"]["endpointslice.kubernetes.io/managed-by"]
        == "endpointslice-controller.k8s.io"
    )
    assert slice_["addressType"] == "IPv4" and slice_["ports"] == [
        {"name": "80-http", "protocol": "TCP", "port": 8080}
    ]
    endpoint = slice_["endpoints"][0]
    assert endpoint["addresses"] == [pod_["status"]["podIP"]]
    assert endpoint["conditions"] == {"ready": True, "serving": True, "terminating": False}
    assert endpoint["nodeName"] == pod_["spec"]["nodeName"]


async def test_indexed_job_and_on_failure_restarts(local: LocalCluster, local_kube: KubeClient) -> None:
    indexed = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "shards"},
        "spec": {
            "completions": 3,
            "parallelism": 3,
            "completionMode": "Indexed",
            "template": {
                "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox:1.36"}]}
            },
        },
    }
    await local_kube.create(JOBS, indexed, namespace=NS)
    job = await eventually(
        lambda: _job_finished(local_kube, "shards", "Complete"), "the indexed Job complete"
    )
    assert job["status"]["completedIndexes"] == "0-2"
    pods = await local_kube.list_all(PODS, namespace=NS, label_selector="job-name=shards")
    assert sorted(p["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"] for p in pods) == [
        "0",
        "1",
        "2",
    ]

    crashing = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "crashing"},
        "spec": {
            "backoffLimit": 2,
            "template": {
                "metadata": {"annotations": {"localcluster.aiokcm.io/exit-code": "1"}},
                "spec": {
                    "restartPolicy": "OnFailure",
                    "containers": [{"name": "c", "image": "busybox:1.36"}],
                },
            },
        },
    }
    await local_kube.create(JOBS, crashing, namespace=NS)
    failed = await eventually(
        lambda: _job_finished(local_kube, "crashing", "Failed"), "restarts past the backoff limit"
    )
    assert condition(failed, "Failed")["reason"] == "BackoffLimitExceeded"  # type: ignore[index]

    async def gone() -> bool:
        left = await local_kube.list_all(PODS, namespace=NS, label_selector="job-name=crashing")
        return all(p["metadata"].get("deletionTimestamp") for p in left)

    await eventually(gone, "the restarting pod deleted")


@pytest.mark.backends("local", "real")
async def test_job_from_cronjob_and_object_count_quota(cluster: Any, kube: KubeClient) -> None:
    await kubectl(cluster, "create", "quota", "one-job", "--hard=count/jobs.batch=1")
    await eventually(lambda: _quota_synced(kube, "one-job"), "the quota's status")
    await kubectl(cluster, "create", "cronjob", "nightly", "--image=busybox:1.36", "--schedule=0 3 * * *")
    await kubectl(cluster, "create", "job", "by-hand", "--from=cronjob/nightly")
    job = await kube.get(JOBS, "by-hand", namespace=NS)
    assert job["metadata"]["annotations"]["cronjob.kubernetes.io/instantiate"] == "manual"
    assert job["metadata"]["ownerReferences"][0]["kind"] == "CronJob"
    refusal = await _kubectl_fails(cluster, "create", "job", "second", "--image=busybox:1.36")
    assert (
        'jobs.batch "second" is forbidden: exceeded quota: one-job, requested: count/jobs.batch=1, '
        "used: count/jobs.batch=1, limited: count/jobs.batch=1"
    ) in refusal, refusal
    listed = await kubectl(cluster, "get", "all", "-o", "name")
    assert "cronjob.batch/nightly" in listed and "job.batch/by-hand" in listed
