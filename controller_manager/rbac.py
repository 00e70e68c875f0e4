"""What each controller may do in the API, as data: the source of each install's RBAC manifests.

KCM ships one ServiceAccount per controller with its own role (bootstrap policy
`controller_policy.go`); aiokcm runs as one ServiceAccount, so its ClusterRole is the union of
the enabled controllers' rules plus the manager's own (events; token and access reviews for the
secure port; the leader-election Lease, granted by a Role in the lease's namespace only; the
client CA ConfigMap through the API server's own `extension-apiserver-authentication-reader`
Role). `aiokcm-metrics-reader` is for the scraper (bind it to Prometheus' ServiceAccount).

Each install grants what its own `--controllers` selects, nothing more, so the default install
(`deploy/`, beside a stock KCM) holds none of the writes of the controllers it leaves to KCM:
`deploy/rbac.yaml` is made from the `--controllers` argument of `deploy/deployment.yaml`, and
`overlays/replace-kcm/rbac-extra.yaml` from the overlay's own `--controllers` holds what its
controllers need beyond that, as a second ClusterRole (and Roles) bound to the same ServiceAccount;
`deploy/webhook-rbac.yaml`, applied with `deploy/webhook.yaml`, holds in the same way what the
eviction webhook (`eviction-surge`, added to the default install's `--controllers`) needs beyond
`deploy/rbac.yaml`, and `deploy/eviction-api-rbac.yaml` what the EvictionRequest API's three
controllers need (their CRDs are in `deploy/`; the gate and the `--controllers` entries are the
user's to add).
`tests/manager/test_rbac.py` checks both ways: every API call in a controller's package is covered
by that controller's rules here, and each install grants exactly the union for its controllers,
nothing more; `tests/e2e/test_deploy_rbac_local.py` runs the controllers under the manifests on a
cluster that enforces them and fails on any refusal and on any grant no request used.
`python -m controller_manager.rbac` prints `deploy/rbac.yaml` (`--overlay`: the overlay's file;
`--webhook`: the webhook's; `--eviction-api`: the EvictionRequest API controllers'; `--write`:
writes all four).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import yaml

from controller_manager.registry import default_registry
from controllers.nodelifecycle.healthsync import NODE_LEASE_NAMESPACE
from evictionapi.names import AIOKCM_GROUP as EVICTION_API_GROUP
from evictionapi.names import BUILTIN_GROUP as BUILTIN_EVICTION_API_GROUP
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
        # A rolling maintenance's workloads gate waits for the DaemonSets that had pods on the node.
        Rule("apps", "daemonsets", ("list", "watch")),
        # With the NodeMaintenanceLease gate: the node's maintenance Lease is taken before a
        # cordon or drain (nodemaintenancelease/gate.py), and its namespace made if missing.
        Rule("coordination.k8s.io", "leases", ("get", "create", "update"), MAINTENANCE_LEASES),
        Rule("", "namespaces", ("create",)),
        # With spec.evictionAPI: EvictionRequest (and the EvictionRequestAPI gate): one request per
        # pod, asked, joined, and withdrawn by patch, in whichever group the cluster serves
        # (controllers/nodemaintenance/evictionrequests.py; the resource is a variable there).
        Rule(EVICTION_API_GROUP, "evictionrequests", ("list", "watch", "create", "patch")),
        Rule(BUILTIN_EVICTION_API_GROUP, "evictionrequests", ("list", "watch", "create", "patch")),
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
    # Beside a stock KCM: a copy of the pod asked to evacuate is made outside its ReplicaSet's
    # selector, handed to it once ready (a label patch; KCM's controller adopts it), and the
    # departing pod marked with the lowest deletion cost (a patch) so KCM removes that one.
    "replacement-surge": (
        Rule("", "pods", ("list", "watch", "create", "patch", "delete")),  # delete: a copy not needed
        Rule("", "pods/status", ("patch",)),  # EvacuationInitiated, or the request given up
        Rule("apps", "replicasets", ("list", "watch")),
        # The hand-over's controller reference blocks owner deletion, as KCM's adoption's does;
        # where OwnerReferencesPermissionEnforcement is on, that needs the owner's finalizers.
        Rule("apps", "replicasets/finalizers", ("update",)),
        Rule("apps", "deployments", ("list", "watch")),
    ),
    # KEP-4563's evictionrequest controller (left to KCM where the server serves the built-in API,
    # so its rules cover both groups): creates one Eviction per pod, keeps its labels and owners
    # (patch), writes its status and the requests' conditions.
    "evictionrequest-controller": (
        Rule(EVICTION_API_GROUP, "evictions", ("list", "watch", "create", "patch")),
        Rule(EVICTION_API_GROUP, "evictions/status", ("patch",)),
        Rule(EVICTION_API_GROUP, "evictionrequests", ("list", "watch")),
        Rule(EVICTION_API_GROUP, "evictionrequests/status", ("patch",)),
        Rule(BUILTIN_EVICTION_API_GROUP, "evictions", ("list", "watch", "create", "patch")),
        Rule(BUILTIN_EVICTION_API_GROUP, "evictions/status", ("patch",)),
        Rule(BUILTIN_EVICTION_API_GROUP, "evictionrequests", ("list", "watch")),
        Rule(BUILTIN_EVICTION_API_GROUP, "evictionrequests/status", ("patch",)),
        Rule("", "pods", ("list", "watch")),
    ),
    # The surge-first eviction responder: reads Evictions in the group this cluster serves them
    # from (aiokcm's CRDs, or Kubernetes' own: evictionapi.served), reports on its own entry of
    # their status, and sets and withdraws its EvacuationRequest (reason EvictionRequest) on pods.
    "eviction-responder": (
        Rule(EVICTION_API_GROUP, "evictions", ("list", "watch")),
        Rule(EVICTION_API_GROUP, "evictions/status", ("patch",)),  # its own responder status
        Rule(BUILTIN_EVICTION_API_GROUP, "evictions", ("list", "watch")),
        Rule(BUILTIN_EVICTION_API_GROUP, "evictions/status", ("patch",)),
        Rule("", "pods", ("list", "watch")),
        Rule("", "pods/status", ("patch",)),  # its EvacuationRequest, set and withdrawn
        Rule("apps", "replicasets", ("list", "watch")),
        Rule("apps", "deployments", ("list", "watch")),
    ),
    # The default last responder of every pod's Eviction (left to KCM where the server serves the
    # built-in API, so its rules cover both groups): reads Evictions and pods, calls the pod's
    # /eviction subresource, and writes its own entry of the Eviction's status (a JSON patch).
    "imperative-eviction-responder-controller": (
        Rule(EVICTION_API_GROUP, "evictions", ("list", "watch")),
        Rule(EVICTION_API_GROUP, "evictions/status", ("patch",)),
        Rule(BUILTIN_EVICTION_API_GROUP, "evictions", ("list", "watch")),
        Rule(BUILTIN_EVICTION_API_GROUP, "evictions/status", ("patch",)),
        Rule("", "pods", ("list", "watch")),
        Rule("", "pods/eviction", ("create",)),
    ),
    "eviction-surge": (
        Rule("", "pods", ("list", "watch")),
        Rule(
            "", "pods/status", ("patch",)
        ),  # its EvacuationRequest (reason EvictionSurge), set and withdrawn
        Rule("apps", "replicasets", ("list", "watch")),
        Rule("apps", "deployments", ("list", "watch")),
        # With --eviction-surge-requests=EvictionRequest (and the EvictionRequestAPI gate): its
        # EvictionRequest per held-back pod, created and withdrawn by patch, and the pods'
        # Evictions read, in whichever group the cluster serves (controllers/evictionsurge/evictionrequests.py).
        Rule(EVICTION_API_GROUP, "evictionrequests", ("list", "watch", "create", "patch")),
        Rule(EVICTION_API_GROUP, "evictions", ("list", "watch")),
        Rule(BUILTIN_EVICTION_API_GROUP, "evictionrequests", ("list", "watch", "create", "patch")),
        Rule(BUILTIN_EVICTION_API_GROUP, "evictions", ("list", "watch")),
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


def rules_for(controllers: Iterable[str]) -> list[Rule]:
    """What a manager running `controllers` needs, leader election aside (a Role of its own)."""
    names = list(controllers)
    rules = [r for n in names for r in CONTROLLER_RULES[n]] + list(MANAGER_RULES) + list(SERVING_RULES)
    if "eviction-surge" in names:
        rules += WEBHOOK_RULES
    return rules


_SUBJECTS = [{"kind": "ServiceAccount", "name": NAME, "namespace": NAMESPACE}]


def _cluster_role(name: str, rules: Iterable[Rule]) -> list[dict[str, object]]:
    """A ClusterRole of the cluster-wide `rules` and its binding to aiokcm's ServiceAccount."""
    return [
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
         "metadata": {"name": name}, "rules": _merged(r for r in rules if not r.namespace)},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": name},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
         "subjects": _SUBJECTS},
    ]  # fmt: skip


def _namespaced_roles(name: str, rules: Iterable[Rule]) -> list[dict[str, object]]:
    """A Role and its binding in each namespace some of `rules` are limited to."""
    rules = list(rules)
    out: list[dict[str, object]] = []
    for namespace in sorted({r.namespace for r in rules if r.namespace}):
        out += [
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
             "metadata": {"name": name, "namespace": namespace},
             "rules": _merged(r for r in rules if r.namespace == namespace)},
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
             "metadata": {"name": name, "namespace": namespace},
             "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
             "subjects": _SUBJECTS},
        ]  # fmt: skip
    return out


def manifests(
    controllers: Iterable[str] | None = None, *, lease_namespace: str = "kube-system"
) -> list[dict[str, object]]:
    """A whole install's RBAC for `controllers` (every one when None): its roles, the manager's own
    (leader election, the client CA reader, the metrics reader) and their bindings."""
    names = list(CONTROLLER_RULES) if controllers is None else list(controllers)
    rules = rules_for(names)
    return [
        *_cluster_role(NAME, rules),
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
         "metadata": {"name": f"{NAME}-leader-election", "namespace": lease_namespace},
         "rules": _merged(LEADER_ELECTION_RULES)},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
         "metadata": {"name": f"{NAME}-leader-election", "namespace": lease_namespace},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": f"{NAME}-leader-election"},
         "subjects": _SUBJECTS},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
         "metadata": {"name": f"{NAME}-authentication-reader", "namespace": "kube-system"},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": AUTH_READER_ROLE},
         "subjects": _SUBJECTS},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": METRICS_READER},
         "rules": [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]},
        *_namespaced_roles(NAME, rules),
    ]  # fmt: skip


# One grant as RBAC scopes it: (namespace or "" for cluster-wide, group, resource, resourceNames, verb).
Scoped = tuple[str, str, str, tuple[str, ...], str]


def scoped(rules: Iterable[Rule]) -> set[Scoped]:
    """Each verb of `rules` with the scope it is granted in, so two installs compare as RBAC does."""
    return {
        (rule.namespace, rule.group, rule.resource, rule.names, verb) for rule in rules for verb in rule.verbs
    }


def extra_manifests(controllers: Iterable[str], *, base: Iterable[str], name: str) -> list[dict[str, object]]:
    """What running `controllers` needs beyond an install of `base` (whose manifests stay applied):
    a ClusterRole named `name`, and a Role of that name where a grant is namespaced, each bound to
    the same ServiceAccount. A grant is left out only when the base grants it in the same scope
    (namespace and resourceNames), so that the two together are exactly the install of `controllers`."""
    missing = scoped(rules_for(controllers)) - scoped(rules_for(base))
    rules = [
        Rule(group, resource, (verb,), namespace, names)
        for namespace, group, resource, names, verb in missing
    ]
    cluster = _cluster_role(name, rules) if any(not r.namespace for r in rules) else []
    return [*cluster, *_namespaced_roles(name, rules)]


# Where each install's controller list is written, and where its generated RBAC goes. These are
# files of the source tree: the generator runs from a checkout, never in the image.
ROOT = Path(__file__).resolve().parents[1]
DEPLOYMENT = ROOT / "deploy" / "deployment.yaml"
MANIFEST = ROOT / "deploy" / "rbac.yaml"
OVERLAY = ROOT / "overlays" / "replace-kcm"
OVERLAY_MANIFEST = OVERLAY / "rbac-extra.yaml"
OVERLAY_ROLE = f"{NAME}-replace-kcm"
# The eviction webhook on the default install: deploy/webhook.yaml, this file beside it, and
# `eviction-surge` added to deploy/deployment.yaml's `--controllers` (with the EvictionSurge gate).
WEBHOOK_CONTROLLER = "eviction-surge"
WEBHOOK_MANIFEST = ROOT / "deploy" / "webhook-rbac.yaml"
WEBHOOK_ROLE = f"{NAME}-eviction-surge"
# The EvictionRequest API on the default install: its CRDs (in deploy/), this file, and the three
# controllers added to deploy/deployment.yaml's `--controllers` (with the EvictionRequestAPI gate).
EVICTION_API_CONTROLLERS = (
    "evictionrequest-controller",
    "imperative-eviction-responder-controller",
    "eviction-responder",
)
EVICTION_API_MANIFEST = ROOT / "deploy" / "eviction-api-rbac.yaml"
EVICTION_API_ROLE = f"{NAME}-eviction-api"
CONTROLLERS_FLAG = "--controllers="


def deployment_controllers_flag(path: Path = DEPLOYMENT) -> list[str]:
    """The entries of the `--controllers=` argument of the aiokcm container in `deploy/deployment.yaml`."""
    deployment = yaml.safe_load(path.read_text())
    (container,) = [c for c in deployment["spec"]["template"]["spec"]["containers"] if c["name"] == NAME]
    (arg,) = [a for a in container["args"] if a.startswith(CONTROLLERS_FLAG)]
    return str(arg).removeprefix(CONTROLLERS_FLAG).split(",")


def overlay_controllers_flag(overlay: Path = OVERLAY) -> list[str]:
    """The entries of the `--controllers=` value the overlay's JSON patch puts on the container."""
    kustomization = yaml.safe_load((overlay / "kustomization.yaml").read_text())
    (value,) = [
        op["value"]
        for patch in kustomization.get("patches") or []
        for op in yaml.safe_load(patch.get("patch") or "[]") or []
        if op.get("op") in ("add", "replace") and str(op.get("value", "")).startswith(CONTROLLERS_FLAG)
    ]
    return str(value).removeprefix(CONTROLLERS_FLAG).split(",")


def selected(entries: Iterable[str]) -> list[str]:
    """The controllers `--controllers` entries select, by the manager's own rules (aliases, `*`,
    `-name`). Feature gates are not applied: a role covers every controller the flag names, so
    turning a gate on for a controller the flag already names needs no other RBAC (the default
    install does not name `eviction-surge`: deploy/webhook-rbac.yaml adds it)."""
    registry = default_registry()
    return [d.name for d in registry.enabled(registry.resolve_controllers_flag(list(entries)))]


def default_controllers() -> list[str]:
    """The controllers deploy/ runs: what deploy/rbac.yaml is made for."""
    return selected(deployment_controllers_flag())


def webhook_controllers() -> list[str]:
    """The controllers of the default install with the eviction webhook added."""
    return selected([*deployment_controllers_flag(), WEBHOOK_CONTROLLER])


def eviction_api_controllers() -> list[str]:
    """The controllers of the default install with the EvictionRequest API's three added."""
    return selected([*deployment_controllers_flag(), *EVICTION_API_CONTROLLERS])


def overlay_controllers() -> list[str]:
    """The controllers overlays/replace-kcm runs: what deploy/rbac.yaml and its extra are made for."""
    return selected(overlay_controllers_flag())


HEADER = (
    "# Generated by `python -m controller_manager.rbac --write` from controller_manager/rbac.py and the\n"
    "# --controllers of {source}; do not edit.\n"
)


def render() -> str:
    """deploy/rbac.yaml: the default install's controllers and the manager's own grants."""
    header = HEADER.format(source="deploy/deployment.yaml")
    return header + yaml.safe_dump_all(manifests(default_controllers()), sort_keys=False)


def render_overlay() -> str:
    """overlays/replace-kcm/rbac-extra.yaml: what the overlay's controllers need beyond deploy/rbac.yaml."""
    header = HEADER.format(source="overlays/replace-kcm/kustomization.yaml (beyond deploy/rbac.yaml)")
    extra = extra_manifests(overlay_controllers(), base=default_controllers(), name=OVERLAY_ROLE)
    return header + yaml.safe_dump_all(extra, sort_keys=False)


def render_webhook() -> str:
    """deploy/webhook-rbac.yaml: what the eviction webhook needs beyond deploy/rbac.yaml."""
    header = HEADER.format(source="deploy/deployment.yaml plus eviction-surge (beyond deploy/rbac.yaml)")
    extra = extra_manifests(webhook_controllers(), base=default_controllers(), name=WEBHOOK_ROLE)
    return header + yaml.safe_dump_all(extra, sort_keys=False)


def render_eviction_api() -> str:
    """deploy/eviction-api-rbac.yaml: what the EvictionRequest API's controllers need beyond deploy/rbac.yaml."""
    header = HEADER.format(
        source="deploy/deployment.yaml plus the EvictionRequest API's controllers (beyond deploy/rbac.yaml)"
    )
    extra = extra_manifests(eviction_api_controllers(), base=default_controllers(), name=EVICTION_API_ROLE)
    return header + yaml.safe_dump_all(extra, sort_keys=False)


def main(argv: list[str] | None = None) -> int:
    """Print deploy/rbac.yaml (as `> deploy/rbac.yaml` has always taken it), or the overlay's, or write both."""
    parser = argparse.ArgumentParser(
        prog="python -m controller_manager.rbac",
        description="Print deploy/rbac.yaml as controller_manager/rbac.py makes it.",
    )
    which = parser.add_mutually_exclusive_group()
    which.add_argument(
        "--overlay", action="store_true", help=f"print {OVERLAY_MANIFEST.relative_to(ROOT)} instead"
    )
    which.add_argument(
        "--webhook", action="store_true", help=f"print {WEBHOOK_MANIFEST.relative_to(ROOT)} instead"
    )
    which.add_argument(
        "--eviction-api",
        action="store_true",
        help=f"print {EVICTION_API_MANIFEST.relative_to(ROOT)} instead",
    )
    which.add_argument("--write", action="store_true", help="write the four files in place")
    args = parser.parse_args(argv)
    if args.write:
        MANIFEST.write_text(render())
        OVERLAY_MANIFEST.write_text(render_overlay())
        WEBHOOK_MANIFEST.write_text(render_webhook())
        EVICTION_API_MANIFEST.write_text(render_eviction_api())
    elif args.overlay:
        sys.stdout.write(render_overlay())
    elif args.eviction_api:
        sys.stdout.write(render_eviction_api())
    else:
        sys.stdout.write(render_webhook() if args.webhook else render())
    return 0


if __name__ == "__main__":
    sys.exit(main())
