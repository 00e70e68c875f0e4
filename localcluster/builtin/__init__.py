"""The built-in kinds a default cluster serves, registered into a `Registry`."""

from __future__ import annotations

from localcluster.builtin.apps import (
    ControllerRevisionStrategy,
    DaemonSetStrategy,
    DeploymentStrategy,
    ReplicaSetStrategy,
    StatefulSetStrategy,
)
from localcluster.builtin.autoscaling import HorizontalPodAutoscalerStrategy
from localcluster.builtin.base import BuiltinStrategy
from localcluster.builtin.batch import CronJobStrategy, JobStrategy
from localcluster.builtin.core import (
    ConfigMapStrategy,
    EventStrategy,
    NamespaceStrategy,
    NodeStrategy,
    SecretStrategy,
    ServiceAccountStrategy,
    ServiceStrategy,
)
from localcluster.builtin.endpoints import EndpointSliceStrategy, EndpointsStrategy
from localcluster.builtin.others import (
    EventsV1Strategy,
    LeaseStrategy,
    NetworkPolicyStrategy,
    PodDisruptionBudgetStrategy,
)
from localcluster.builtin.pods import PodStrategy
from localcluster.builtin.quota import LimitRangeStrategy, ResourceQuotaStrategy
from localcluster.builtin.replicationcontrollers import RC_SCALE, ReplicationControllerStrategy
from localcluster.builtin.scheduling import PriorityClassStrategy
from localcluster.builtin.volumes import PersistentVolumeClaimStrategy, PersistentVolumeStrategy
from localcluster.registry import Registry, ResourceType, ScaleSubresource

_SCALE = ScaleSubresource(".spec.replicas", ".status.replicas", ".spec.selector")


def builtin_types() -> list[ResourceType]:
    """Kinds, scopes, short names and subresources as `kubectl api-resources` shows them."""
    return [
        ResourceType(
            "",
            "v1",
            "namespaces",
            "Namespace",
            False,
            short_names=("ns",),
            subresources=frozenset({"status", "finalize"}),
            verbs=("create", "delete", "get", "list", "patch", "update", "watch"),
            strategy=NamespaceStrategy(),
        ),
        ResourceType(
            "",
            "v1",
            "nodes",
            "Node",
            False,
            short_names=("no",),
            subresources=frozenset({"status"}),
            strategy=NodeStrategy(),
        ),
        ResourceType(
            "",
            "v1",
            "pods",
            "Pod",
            True,
            short_names=("po",),
            categories=("all",),
            subresources=frozenset({"status", "binding", "eviction", "log", "exec", "attach", "portforward"}),
            strategy=PodStrategy(),
        ),
        ResourceType("", "v1", "events", "Event", True, short_names=("ev",), strategy=EventStrategy()),
        ResourceType(
            "", "v1", "configmaps", "ConfigMap", True, short_names=("cm",), strategy=ConfigMapStrategy()
        ),
        ResourceType("", "v1", "secrets", "Secret", True, strategy=SecretStrategy()),
        ResourceType(
            "",
            "v1",
            "serviceaccounts",
            "ServiceAccount",
            True,
            short_names=("sa",),
            strategy=ServiceAccountStrategy(),
        ),
        ResourceType(
            "",
            "v1",
            "services",
            "Service",
            True,
            short_names=("svc",),
            categories=("all",),
            subresources=frozenset({"status"}),
            verbs=("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"),
            strategy=ServiceStrategy(),
        ),
        ResourceType(
            "",
            "v1",
            "replicationcontrollers",
            "ReplicationController",
            True,
            short_names=("rc",),
            categories=("all",),
            subresources=frozenset({"status", "scale"}),
            strategy=ReplicationControllerStrategy(),
            scale=RC_SCALE,
        ),
        ResourceType(
            "apps",
            "v1",
            "deployments",
            "Deployment",
            True,
            short_names=("deploy",),
            categories=("all",),
            subresources=frozenset({"status", "scale"}),
            strategy=DeploymentStrategy(),
            scale=_SCALE,
        ),
        ResourceType(
            "apps",
            "v1",
            "replicasets",
            "ReplicaSet",
            True,
            short_names=("rs",),
            categories=("all",),
            subresources=frozenset({"status", "scale"}),
            strategy=ReplicaSetStrategy(),
            scale=_SCALE,
        ),
        ResourceType(
            "apps",
            "v1",
            "statefulsets",
            "StatefulSet",
            True,
            short_names=("sts",),
            categories=("all",),
            subresources=frozenset({"status", "scale"}),
            strategy=StatefulSetStrategy(),
            scale=_SCALE,
        ),
        ResourceType(
            "apps",
            "v1",
            "daemonsets",
            "DaemonSet",
            True,
            short_names=("ds",),
            categories=("all",),
            subresources=frozenset({"status"}),
            strategy=DaemonSetStrategy(),
        ),
        ResourceType(
            "apps",
            "v1",
            "controllerrevisions",
            "ControllerRevision",
            True,
            strategy=ControllerRevisionStrategy(),
        ),
        ResourceType(
            "policy",
            "v1",
            "poddisruptionbudgets",
            "PodDisruptionBudget",
            True,
            short_names=("pdb",),
            subresources=frozenset({"status"}),
            strategy=PodDisruptionBudgetStrategy(),
        ),
        ResourceType("coordination.k8s.io", "v1", "leases", "Lease", True, strategy=LeaseStrategy()),
        ResourceType(
            "events.k8s.io", "v1", "events", "Event", True, short_names=("ev",), strategy=EventsV1Strategy()
        ),
        ResourceType(
            "",
            "v1",
            "endpoints",
            "Endpoints",
            True,
            singular="endpoints",
            short_names=("ep",),
            strategy=EndpointsStrategy(),
        ),
        ResourceType(
            "",
            "v1",
            "resourcequotas",
            "ResourceQuota",
            True,
            short_names=("quota",),
            subresources=frozenset({"status"}),
            strategy=ResourceQuotaStrategy(),
        ),
        ResourceType(
            "",
            "v1",
            "limitranges",
            "LimitRange",
            True,
            short_names=("limits",),
            strategy=LimitRangeStrategy(),
        ),
        ResourceType(
            "",
            "v1",
            "persistentvolumes",
            "PersistentVolume",
            False,
            short_names=("pv",),
            subresources=frozenset({"status"}),
            strategy=PersistentVolumeStrategy(),
        ),
        ResourceType(
            "",
            "v1",
            "persistentvolumeclaims",
            "PersistentVolumeClaim",
            True,
            short_names=("pvc",),
            subresources=frozenset({"status"}),
            strategy=PersistentVolumeClaimStrategy(),
        ),
        ResourceType(
            "batch",
            "v1",
            "jobs",
            "Job",
            True,
            categories=("all",),
            subresources=frozenset({"status"}),
            strategy=JobStrategy(),
        ),
        ResourceType(
            "batch",
            "v1",
            "cronjobs",
            "CronJob",
            True,
            short_names=("cj",),
            categories=("all",),
            subresources=frozenset({"status"}),
            strategy=CronJobStrategy(),
        ),
        ResourceType(
            "discovery.k8s.io",
            "v1",
            "endpointslices",
            "EndpointSlice",
            True,
            strategy=EndpointSliceStrategy(),
        ),
        ResourceType(
            "autoscaling",
            "v2",
            "horizontalpodautoscalers",
            "HorizontalPodAutoscaler",
            True,
            short_names=("hpa",),
            categories=("all",),
            subresources=frozenset({"status"}),
            strategy=HorizontalPodAutoscalerStrategy(),
        ),
        ResourceType(
            "scheduling.k8s.io",
            "v1",
            "priorityclasses",
            "PriorityClass",
            False,
            short_names=("pc",),
            strategy=PriorityClassStrategy(),
        ),
        ResourceType(
            "networking.k8s.io",
            "v1",
            "networkpolicies",
            "NetworkPolicy",
            True,
            short_names=("netpol",),
            strategy=NetworkPolicyStrategy(),
        ),
    ]


def register_builtins(registry: Registry) -> None:
    for rt in builtin_types():
        registry.register(rt)


__all__ = ["BuiltinStrategy", "builtin_types", "register_builtins"]
