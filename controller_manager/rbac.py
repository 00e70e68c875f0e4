"""What each controller may do in the API, as data: the source of `deploy/rbac.yaml`.

KCM ships one ServiceAccount per controller with its own role (bootstrap policy
`controller_policy.go`); aiokcm runs as one ServiceAccount, so its ClusterRole is the union of
the enabled controllers' rules plus the manager's own (events; token and access reviews for the
secure port; the leader-election Lease, granted by a Role in the lease's namespace only; the
client CA ConfigMap through the API server's own `extension-apiserver-authentication-reader`
Role). `aiokcm-metrics-reader` is for the scraper (bind it to Prometheus' ServiceAccount). `tests/manager/test_rbac.py` checks both ways: every
API call in a controller's package is covered by that controller's rules here, and the manifest
grants exactly the union, nothing more; `tests/e2e/test_deploy_rbac_local.py` runs every controller
under the manifest on a cluster that enforces it and fails on any refusal and on any grant no
request used. `python -m controller_manager.rbac` prints the manifest.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import yaml

from controllers.nodelifecycle.healthsync import NODE_LEASE_NAMESPACE
from nodemaintenancelease.lease import NAMESPACE as MAINTENANCE_LEASE_NAMESPACE

READ = ("get", "list", "watch")
# Leases are written in one namespace only (never cluster-wide: that would let aiokcm take KCM's or
# the scheduler's leader lock, or fake a kubelet's heartbeat), and read in the kubelets' one.
MAINTENANCE_LEASES = MAINTENANCE_LEASE_NAMESPACE
NODE_LEASES = NODE_LEASE_NAMESPACE


@dataclass(frozen=True, slots=True)
class Rule:
    group: str
    resource: str  # "pods" or "pods/status"
    verbs: tuple[str, ...]
    namespace: str = ""  # granted by a Role in this namespace only; "" is cluster-wide
    names: tuple[str, ...] = ()  # resourceNames: these objects only; () is any

    def grants(self) -> set[tuple[str, str, str]]:
        return {(self.group, self.resource, verb) for verb in self.verbs}


# Each verb is one the controller's code sends (tests/manager/test_rbac.py finds the call sites;
# `get` on the owning kind is the shared ControllerRefManager's re-check before adopting, in
# controllers/common/controller_ref.py). Writes are patches, except the PDB status (a PUT, as KCM's).
CONTROLLER_RULES: Mapping[str, tuple[Rule, ...]] = {
    "replicaset": (
        Rule("apps", "replicasets", (*READ, "patch")),
        Rule("apps", "replicasets/status", ("patch",)),
        Rule("", "pods", ("list", "watch", "create", "delete", "patch")),  # patch: adopt and release
        Rule("", "pods/status", ("patch",)),  # EvacuationInitiated on pods it evacuates
    ),
    "deployment": (
        Rule("apps", "deployments", (*READ, "patch")),
        Rule("apps", "deployments/status", ("patch",)),
        Rule("apps", "replicasets", (*READ, "create", "patch", "delete")),
        Rule("", "pods", ("list", "watch")),
    ),
    "disruption": (
        Rule("policy", "poddisruptionbudgets", ("list", "watch", "patch")),  # the evacuating-pods annotation
        Rule("policy", "poddisruptionbudgets/status", ("update",)),
        Rule("", "pods", ("list", "watch")),
        Rule("", "pods/status", ("patch",)),  # a stale DisruptionTarget reset
        Rule("apps", "replicasets", ("list", "watch")),
        Rule("apps", "deployments", ("list", "watch")),
        Rule("apps", "statefulsets", ("list", "watch")),
        Rule("", "replicationcontrollers", ("list", "watch")),
        Rule("*", "*/scale", ("get",)),  # any controller's /scale, as KCM's bootstrap policy grants
    ),
    "nodemaintenance": (
        Rule("maintenance.aiokcm.io", "nodemaintenances", ("list", "watch", "patch")),
        Rule("maintenance.aiokcm.io", "nodemaintenances/status", ("patch",)),
        Rule("", "nodes", (*READ, "patch")),  # get: the node's uid for its maintenance Lease
        Rule("", "pods", ("list", "watch")),
        Rule("", "pods/status", ("patch",)),
        Rule("", "pods/eviction", ("create",)),
        Rule("policy", "poddisruptionbudgets", ("list", "watch")),
        # The pods' owners (informers), to tell who answers an EvacuationRequest and read their annotations.
        Rule("apps", "replicasets", ("list", "watch")),
        Rule("apps", "deployments", ("list", "watch")),
        Rule("apps", "statefulsets", ("list", "watch")),
        # With the NodeMaintenanceLease gate: the node's maintenance Lease is taken before a
        # cordon or drain (nodemaintenancelease/gate.py), and its namespace made if missing.
        Rule("coordination.k8s.io", "leases", ("get", "create", "update"), MAINTENANCE_LEASES),
        Rule("", "namespaces", ("create",)),
    ),
    "taint-eviction-controller": (
        Rule("", "nodes", ("list", "watch")),
        Rule("", "pods", ("list", "watch", "delete")),
        Rule("", "pods/status", ("patch",)),
    ),
    "node-lifecycle-controller": (
        Rule("", "nodes", (*READ, "patch")),
        Rule("", "nodes/status", ("patch",)),
        Rule("", "pods", ("list", "watch")),
        Rule("", "pods/status", ("patch",)),  # Ready=False on the pods of an unreachable node
        Rule("coordination.k8s.io", "leases", ("list", "watch"), NODE_LEASES),  # the kubelets' heartbeats
    ),
    "maintenance-lease": (
        Rule("coordination.k8s.io", "leases", (*READ, "create", "update", "patch"), MAINTENANCE_LEASES),
        Rule("", "nodes", READ),
        Rule("", "namespaces", ("get", "create")),  # creates its lease namespace when missing
    ),
    "eviction-surge": (
        Rule("", "pods", ("list", "watch")),
        Rule(
            "", "pods/status", ("patch",)
        ),  # its EvacuationRequest (reason EvictionSurge), set and withdrawn
        Rule("apps", "replicasets", ("list", "watch")),
        Rule("apps", "deployments", ("list", "watch")),
    ),
}

# The manager itself: the events recorder, cluster-wide.
MANAGER_RULES: tuple[Rule, ...] = (Rule("", "events", ("create", "patch")),)

# The secure port's delegated authentication and authorization (controller_manager/delegation.py):
# what the built-in ClusterRole `system:auth-delegator` grants, cluster-wide.
SERVING_RULES: tuple[Rule, ...] = (
    Rule("authentication.k8s.io", "tokenreviews", ("create",)),
    Rule("authorization.k8s.io", "subjectaccessreviews", ("create",)),
)

# The client CA lookup of the secure port (controller_manager/secureserving.py) reads one ConfigMap in
# kube-system: bound to the Role the API server bootstraps for exactly that, as KCM and every
# aggregated API server are. What that Role grants, for the test that checks calls against grants:
AUTH_READER_ROLE = "extension-apiserver-authentication-reader"
AUTH_READER_RULES: tuple[Rule, ...] = (Rule("", "configmaps", ("get", "list", "watch")),)

# What a scraper needs on the secure port; bind it to Prometheus' ServiceAccount.
METRICS_READER = "aiokcm-metrics-reader"

# Leader election, granted by a Role in --leader-elect-resource-namespace only.
LEADER_ELECTION_RULES: tuple[Rule, ...] = (
    Rule("coordination.k8s.io", "leases", ("get", "create", "update", "watch")),
)

NAME = "aiokcm"
NAMESPACE = "aiokcm-system"

# The admission webhook's self-managed certificate (controller_manager/webhookcert.py): its Secret in
# aiokcm's namespace (create cannot be limited by name), and the caBundle of its own
# ValidatingWebhookConfiguration, by name: aiokcm may not touch any other webhook. The leader points
# the webhook Service's Endpoints at itself (controller_manager/webhookendpoints.py).
WEBHOOK_SECRET = "aiokcm-webhook-cert"
WEBHOOK_SERVICE = "aiokcm-webhook"
WEBHOOK_CONFIGURATION = "aiokcm-eviction-surge"
WEBHOOK_RULES: tuple[Rule, ...] = (
    Rule("", "secrets", ("create",), NAMESPACE),
    Rule("", "secrets", ("get", "update"), NAMESPACE, names=(WEBHOOK_SECRET,)),
    Rule("", "endpoints", ("create",), NAMESPACE),
    Rule("", "endpoints", ("get", "update"), NAMESPACE, names=(WEBHOOK_SERVICE,)),
    Rule(
        "admissionregistration.k8s.io",
        "validatingwebhookconfigurations",
        ("get", "patch"),
        names=(WEBHOOK_CONFIGURATION,),
    ),
)


def union(rules: Iterable[Rule]) -> set[tuple[str, str, str]]:
    out: set[tuple[str, str, str]] = set()
    for rule in rules:
        out |= rule.grants()
    return out


def _merged(rules: Iterable[Rule]) -> list[dict[str, object]]:
    """Group grants into PolicyRules, one per (group, verb set, resourceNames), sorted for a stable manifest."""
    rules = list(rules)
    by_resource: dict[tuple[str, str, tuple[str, ...]], set[str]] = {}
    for rule in rules:
        for group, resource, verb in rule.grants():
            by_resource.setdefault((group, resource, rule.names), set()).add(verb)
    by_verbs: dict[tuple[str, tuple[str, ...], tuple[str, ...]], list[str]] = {}
    for (group, resource, names), verbs in sorted(by_resource.items()):
        by_verbs.setdefault((group, tuple(sorted(verbs)), names), []).append(resource)
    return [
        {
            "apiGroups": [group],
            "resources": resources,
            **({"resourceNames": list(names)} if names else {}),
            "verbs": list(verbs),
        }
        for (group, verbs, names), resources in sorted(by_verbs.items())
    ]


def manifests(
    controllers: Iterable[str] | None = None, *, lease_namespace: str = "kube-system"
) -> list[dict[str, object]]:
    names = list(CONTROLLER_RULES) if controllers is None else list(controllers)
    rules = [r for n in names for r in CONTROLLER_RULES[n]] + list(MANAGER_RULES) + list(SERVING_RULES)
    if "eviction-surge" in names:
        rules += WEBHOOK_RULES
    cluster_rules = [r for r in rules if not r.namespace]
    subject = [{"kind": "ServiceAccount", "name": NAME, "namespace": NAMESPACE}]
    namespaced: list[dict[str, object]] = []
    for namespace in sorted({r.namespace for r in rules if r.namespace}):
        namespaced += [
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
             "metadata": {"name": NAME, "namespace": namespace},
             "rules": _merged(r for r in rules if r.namespace == namespace)},
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
             "metadata": {"name": NAME, "namespace": namespace},
             "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": NAME},
             "subjects": subject},
        ]  # fmt: skip
    return [
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
         "metadata": {"name": NAME}, "rules": _merged(cluster_rules)},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": NAME},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": NAME},
         "subjects": subject},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
         "metadata": {"name": f"{NAME}-leader-election", "namespace": lease_namespace},
         "rules": _merged(LEADER_ELECTION_RULES)},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
         "metadata": {"name": f"{NAME}-leader-election", "namespace": lease_namespace},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": f"{NAME}-leader-election"},
         "subjects": subject},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
         "metadata": {"name": f"{NAME}-authentication-reader", "namespace": "kube-system"},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": AUTH_READER_ROLE},
         "subjects": subject},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": METRICS_READER},
         "rules": [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]},
        *namespaced,
    ]  # fmt: skip


def render() -> str:
    header = (
        "# Generated by `python -m controller_manager.rbac` from controller_manager/rbac.py; do not edit.\n"
    )
    return header + yaml.safe_dump_all(manifests(), sort_keys=False)


if __name__ == "__main__":
    sys.stdout.write(render())
