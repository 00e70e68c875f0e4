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
from localcluster.registry import DEFAULT_VERBS, Registry, ResourceType, ScaleSubresource, Strategy

_SCALE = ScaleSubresource(".spec.replicas", ".status.replicas", ".spec.selector")
_NAMESPACED, _CLUSTER = True, False
#: A namespace is deleted one at a time: its API has no deletecollection.
_NAMESPACE_VERBS = ("create", "delete", "get", "list", "patch", "update", "watch")

# One row a type, registered in this order: apiVersion, plural, kind, scope, short name,
# whether `kubectl get all` lists it, subresources, strategy, and where /scale reads and writes.
_Row = tuple[str, str, str, bool, str, bool, str, type[Strategy], ScaleSubresource | None]
# fmt: off
_TYPES: tuple[_Row, ...] = (
    ("v1",                     "namespaces",               "Namespace",               _CLUSTER,    "ns",     False, "status finalize", NamespaceStrategy, None),
    ("v1",                     "nodes",                    "Node",                    _CLUSTER,    "no",     False, "status", NodeStrategy, None),
    ("v1",                     "pods",                     "Pod",                     _NAMESPACED, "po",     True,  "status binding eviction log exec attach portforward", PodStrategy, None),
    ("v1",                     "events",                   "Event",                   _NAMESPACED, "ev",     False, "", EventStrategy, None),
    ("v1",                     "configmaps",               "ConfigMap",               _NAMESPACED, "cm",     False, "", ConfigMapStrategy, None),
    ("v1",                     "secrets",                  "Secret",                  _NAMESPACED, "",       False, "", SecretStrategy, None),
    ("v1",                     "serviceaccounts",          "ServiceAccount",          _NAMESPACED, "sa",     False, "", ServiceAccountStrategy, None),
    ("v1",                     "services",                 "Service",                 _NAMESPACED, "svc",    True,  "status", ServiceStrategy, None),
    ("v1",                     "replicationcontrollers",   "ReplicationController",   _NAMESPACED, "rc",     True,  "status scale", ReplicationControllerStrategy, RC_SCALE),
    ("apps/v1",                "deployments",              "Deployment",              _NAMESPACED, "deploy", True,  "status scale", DeploymentStrategy, _SCALE),
    ("apps/v1",                "replicasets",              "ReplicaSet",              _NAMESPACED, "rs",     True,  "status scale", ReplicaSetStrategy, _SCALE),
    ("apps/v1",                "statefulsets",             "StatefulSet",             _NAMESPACED, "sts",    True,  "status scale", StatefulSetStrategy, _SCALE),
    ("apps/v1",                "daemonsets",               "DaemonSet",               _NAMESPACED, "ds",     True,  "status", DaemonSetStrategy, None),
    ("apps/v1",                "controllerrevisions",      "ControllerRevision",      _NAMESPACED, "",       False, "", ControllerRevisionStrategy, None),
    ("policy/v1",              "poddisruptionbudgets",     "PodDisruptionBudget",     _NAMESPACED, "pdb",    False, "status", PodDisruptionBudgetStrategy, None),
    ("coordination.k8s.io/v1", "leases",                   "Lease",                   _NAMESPACED, "",       False, "", LeaseStrategy, None),
    ("events.k8s.io/v1",       "events",                   "Event",                   _NAMESPACED, "ev",     False, "", EventsV1Strategy, None),
    ("v1",                     "endpoints",                "Endpoints",               _NAMESPACED, "ep",     False, "", EndpointsStrategy, None),
    ("v1",                     "resourcequotas",           "ResourceQuota",           _NAMESPACED, "quota",  False, "status", ResourceQuotaStrategy, None),
    ("v1",                     "limitranges",              "LimitRange",              _NAMESPACED, "limits", False, "", LimitRangeStrategy, None),
    ("v1",                     "persistentvolumes",        "PersistentVolume",        _CLUSTER,    "pv",     False, "status", PersistentVolumeStrategy, None),
    ("v1",                     "persistentvolumeclaims",   "PersistentVolumeClaim",   _NAMESPACED, "pvc",    False, "status", PersistentVolumeClaimStrategy, None),
    ("batch/v1",               "jobs",                     "Job",                     _NAMESPACED, "",       True,  "status", JobStrategy, None),
    ("batch/v1",               "cronjobs",                 "CronJob",                 _NAMESPACED, "cj",     True,  "status", CronJobStrategy, None),
    ("discovery.k8s.io/v1",    "endpointslices",           "EndpointSlice",           _NAMESPACED, "",       False, "", EndpointSliceStrategy, None),
    ("autoscaling/v2",         "horizontalpodautoscalers", "HorizontalPodAutoscaler", _NAMESPACED, "hpa",    True,  "status", HorizontalPodAutoscalerStrategy, None),
    ("scheduling.k8s.io/v1",   "priorityclasses",          "PriorityClass",           _CLUSTER,    "pc",     False, "", PriorityClassStrategy, None),
    ("networking.k8s.io/v1",   "networkpolicies",          "NetworkPolicy",           _NAMESPACED, "netpol", False, "", NetworkPolicyStrategy, None),
)
# fmt: on


def builtin_types() -> list[ResourceType]:
    """Kinds, scopes, short names and subresources as `kubectl api-resources` shows them; each call
    makes new types with new strategies, so two clusters never share one."""
    out = []
    for api_version, plural, kind, namespaced, short, in_all, subresources, strategy, scale in _TYPES:
        group, _, version = api_version.rpartition("/")
        out.append(
            ResourceType(
                group,
                version,
                plural,
                kind,
                namespaced,
                short_names=(short,) if short else (),
                categories=("all",) if in_all else (),
                subresources=frozenset(subresources.split()),
                verbs=_NAMESPACE_VERBS if plural == "namespaces" else DEFAULT_VERBS,
                strategy=strategy(),
                scale=scale,
            )
        )
    return out


def register_builtins(registry: Registry) -> None:
    for rt in builtin_types():
        registry.register(rt)


__all__ = ["BuiltinStrategy", "builtin_types", "register_builtins"]
