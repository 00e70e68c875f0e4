"""The resources aiokcm reads and writes, as group/version/plural triples.

Paths are built from these rather than from the generated per-kind API classes so that
one code path (raw JSON, throttled, instrumented) serves built-in kinds and custom
resources alike.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Resource:
    """A REST resource: enough to build its URL and name it in logs and metrics."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def group_resource(self) -> str:
        """`plural.group` as Kubernetes prints it (`pods`, `replicasets.apps`)."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    def path(
        self, namespace: str | None = None, name: str | None = None, subresource: str | None = None
    ) -> str:
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace:
            base += f"/namespaces/{namespace}"
        base += f"/{self.plural}"
        if name is not None:
            base += f"/{name}"
            if subresource:
                base += f"/{subresource}"
        return base


PODS = Resource("", "v1", "pods", "Pod", True)
NODES = Resource("", "v1", "nodes", "Node", False)
NAMESPACES = Resource("", "v1", "namespaces", "Namespace", False)
EVENTS = Resource("", "v1", "events", "Event", True)
CONFIGMAPS = Resource("", "v1", "configmaps", "ConfigMap", True)
SERVICES = Resource("", "v1", "services", "Service", True)
SECRETS = Resource("", "v1", "secrets", "Secret", True)
ENDPOINTS = Resource("", "v1", "endpoints", "Endpoints", True)
REPLICATIONCONTROLLERS = Resource("", "v1", "replicationcontrollers", "ReplicationController", True)
DEPLOYMENTS = Resource("apps", "v1", "deployments", "Deployment", True)
REPLICASETS = Resource("apps", "v1", "replicasets", "ReplicaSet", True)
STATEFULSETS = Resource("apps", "v1", "statefulsets", "StatefulSet", True)
DAEMONSETS = Resource("apps", "v1", "daemonsets", "DaemonSet", True)
PODDISRUPTIONBUDGETS = Resource("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", True)
LEASES = Resource("coordination.k8s.io", "v1", "leases", "Lease", True)
EVENTS_V1 = Resource("events.k8s.io", "v1", "events", "Event", True)
CUSTOMRESOURCEDEFINITIONS = Resource(
    "apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", False
)
# The delegated authentication and authorization of the secure port.
TOKENREVIEWS = Resource("authentication.k8s.io", "v1", "tokenreviews", "TokenReview", False)
SUBJECTACCESSREVIEWS = Resource(
    "authorization.k8s.io", "v1", "subjectaccessreviews", "SubjectAccessReview", False
)
VALIDATINGWEBHOOKCONFIGURATIONS = Resource(
    "admissionregistration.k8s.io",
    "v1",
    "validatingwebhookconfigurations",
    "ValidatingWebhookConfiguration",
    False,
)
NODEMAINTENANCES = Resource("maintenance.aiokcm.io", "v1alpha1", "nodemaintenances", "NodeMaintenance", False)

BUILTIN: tuple[Resource, ...] = (
    PODS,
    NODES,
    NAMESPACES,
    EVENTS,
    CONFIGMAPS,
    SERVICES,
    REPLICATIONCONTROLLERS,
    DEPLOYMENTS,
    REPLICASETS,
    STATEFULSETS,
    DAEMONSETS,
    PODDISRUPTIONBUDGETS,
    LEASES,
    EVENTS_V1,
    CUSTOMRESOURCEDEFINITIONS,
)


def by_kind(api_version: str, kind: str) -> Resource | None:
    """Find a known resource from an ownerReference's apiVersion and kind."""
    for res in (*BUILTIN, NODEMAINTENANCES):
        if res.kind == kind and res.api_version == api_version:
            return res
    return None
