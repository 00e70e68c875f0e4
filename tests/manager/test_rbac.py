"""Each install's RBAC against the code: every API call its controllers make is granted, nothing else is.

deploy/rbac.yaml is the default install's (the controllers of deploy/deployment.yaml's
`--controllers`); overlays/replace-kcm adds rbac-extra.yaml for the controllers it runs beyond those.

The code is scanned (AST) for `KubeClient` calls and informers on `apiclient.resources`
constants: `client.patch(PODS, ..., subresource="status")` needs `patch` on `pods/status`,
`informer(NODES)` needs `list` + `watch` on `nodes`, `evict(...)` needs `create` on
`pods/eviction`. Calls on a resource held in a variable (the shared controller-ref helper)
cannot be resolved statically and are declared by hand in controller_manager/rbac.py.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from apiclient import resources
from controller_manager import rbac
from evictionapi import served

ROOT = Path(__file__).resolve().parents[2]
VERBS = {
    "get": ("get",), "get_or_none": ("get",), "list": ("list",), "list_all": ("list",), "watch": ("watch",), "create": ("create",),
    "replace": ("update",), "patch": ("patch",), "delete": ("delete",), "informer": ("list", "watch"),
}  # fmt: skip
PACKAGES = {
    "replicaset": "replicaset", "deployment": "deployment", "disruption": "disruption",
    "nodemaintenance": "nodemaintenance", "tainteviction": "taint-eviction-controller",
    "nodelifecycle": "node-lifecycle-controller", "maintenancelease": "maintenance-lease",
    "evictionsurge": "eviction-surge", "replacementsurge": "replacement-surge",
    "evictionrequest": "evictionrequest-controller",
    "imperativeeviction": "imperative-eviction-responder-controller",
    "evictionresponder": "eviction-responder",
}  # fmt: skip
CONSTANTS = {name: value for name, value in vars(resources).items() if isinstance(value, resources.Resource)}
# The EvictionRequest API's resources live in `evictionapi.served.EvictionAPI` (`api.evictions`,
# `api.requests`), in whichever group the cluster serves: such a call needs both groups.
EVICTION_API_ATTRIBUTES = {
    "evictions": (served.AIOKCM.evictions, served.BUILTIN.evictions),
    "requests": (served.AIOKCM.requests, served.BUILTIN.requests),
}

Grant = tuple[str, str, str]


def calls_in(path: Path) -> list[tuple[int, Grant]]:
    """The (group, resource[/sub], verb) each resolvable API call in `path` needs."""
    out: list[tuple[int, Grant]] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        method = node.func.attr
        if method == "evict":
            out.append((node.lineno, ("", "pods/eviction", "create")))
            continue
        if method not in VERBS or not node.args:
            continue
        first = node.args[0]
        name = (
            first.id
            if isinstance(first, ast.Name)
            else first.attr
            if isinstance(first, ast.Attribute)
            else ""
        )
        found = CONSTANTS.get(name)
        candidates = (
            (found,)
            if found is not None
            else EVICTION_API_ATTRIBUTES.get(name, ())
            if isinstance(first, ast.Attribute)
            else ()
        )
        for res in candidates:
            resource = res.plural
            for kw in node.keywords:
                if (
                    kw.arg == "subresource"
                    and isinstance(kw.value, ast.Constant)
                    and isinstance(kw.value.value, str)
                    and kw.value.value
                ):
                    resource = f"{res.plural}/{kw.value.value}"
            out.extend((node.lineno, (res.group, resource, verb)) for verb in VERBS[method])
    return out


# Each install: the manifests it applies, and where its controller list comes from.
INSTALLS: dict[str, tuple[tuple[Path, ...], Callable[[], list[str]]]] = {
    "deploy": ((rbac.MANIFEST,), rbac.default_controllers),
    "replace-kcm": ((rbac.MANIFEST, rbac.OVERLAY_MANIFEST), rbac.overlay_controllers),
    "deploy+webhook": ((rbac.MANIFEST, rbac.WEBHOOK_MANIFEST), rbac.webhook_controllers),
    "deploy+eviction-api": ((rbac.MANIFEST, rbac.EVICTION_API_MANIFEST), rbac.eviction_api_controllers),
}
SERVICE_ACCOUNT = {"kind": "ServiceAccount", "name": rbac.NAME, "namespace": rbac.NAMESPACE}
REGENERATE = "regenerate: python -m controller_manager.rbac --write"


def _docs(*paths: Path) -> list[dict[str, Any]]:
    """The manifests of `paths` (deploy/rbac.yaml when none)."""
    return [d for path in paths or (rbac.MANIFEST,) for d in yaml.safe_load_all(path.read_text()) if d]


def _grants(docs: list[dict[str, Any]]) -> set[rbac.Scoped]:
    """What the manifests grant aiokcm's ServiceAccount, scoped as the API server reads them: through
    each binding naming it, a Role's rules in the binding's namespace, a ClusterRole's cluster-wide."""
    roles = {
        (d["kind"], d["metadata"].get("namespace", ""), d["metadata"]["name"]): d
        for d in docs
        if d["kind"] in ("Role", "ClusterRole")
    }
    out: set[rbac.Scoped] = set()
    for binding in docs:
        if binding["kind"] not in ("RoleBinding", "ClusterRoleBinding"):
            continue
        if SERVICE_ACCOUNT not in binding["subjects"]:
            continue
        namespace = binding["metadata"].get("namespace", "")
        ref = binding["roleRef"]
        role = roles.get((ref["kind"], namespace if ref["kind"] == "Role" else "", ref["name"]))
        if role is None:
            assert ref["name"] == rbac.AUTH_READER_ROLE, f"{binding['metadata']} binds a role no manifest has"
            continue  # the API server bootstraps it
        for rule in role["rules"]:
            names = tuple(rule.get("resourceNames") or ())
            out |= {
                (namespace, g, r, names, v)
                for g in rule["apiGroups"]
                for r in rule["resources"]
                for v in rule["verbs"]
            }
    return out


def _leader_election_namespace() -> str:
    deployment = yaml.safe_load(rbac.DEPLOYMENT.read_text())
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    flag = "--leader-elect-resource-namespace="
    (arg,) = [a for a in container["args"] if a.startswith(flag)]
    return str(arg).removeprefix(flag)


def _declared(controllers: list[str]) -> set[rbac.Scoped]:
    """What an install running `controllers` must grant: their rules, the manager's, leader election."""
    leader = {(_leader_election_namespace(), *grant[1:]) for grant in rbac.scoped(rbac.LEADER_ELECTION_RULES)}
    return rbac.scoped(rbac.rules_for(controllers)) | leader


@pytest.mark.parametrize("install", sorted(INSTALLS))
def test_each_install_grants_exactly_what_its_controllers_need(install: str) -> None:
    """deploy/ grants the rules of the controllers deploy/deployment.yaml's `--controllers` runs; the
    overlay, under deploy/rbac.yaml plus its extra, those of its own `--controllers`: nothing more."""
    files, controllers = INSTALLS[install]
    assert _grants(_docs(*files)) == _declared(controllers())


def test_the_overlay_runs_every_controller_and_adds_only_what_deploy_lacks() -> None:
    from controller_manager.registry import default_registry

    assert set(rbac.overlay_controllers()) == set(default_registry().names())
    extra = _docs(rbac.OVERLAY_MANIFEST)
    assert _grants(extra).isdisjoint(_grants(_docs(rbac.MANIFEST)))
    bindings = [d for d in extra if d["kind"] in ("RoleBinding", "ClusterRoleBinding")]
    assert bindings and all(d["subjects"] == [SERVICE_ACCOUNT] for d in bindings)
    assert {d["metadata"]["name"] for d in extra} == {rbac.OVERLAY_ROLE}
    kustomization = yaml.safe_load((rbac.OVERLAY / "kustomization.yaml").read_text())
    assert rbac.OVERLAY_MANIFEST.name in kustomization["resources"]


def test_the_webhook_adds_only_the_eviction_webhooks_grants() -> None:
    """deploy/webhook-rbac.yaml, applied with deploy/webhook.yaml, grants what eviction-surge needs
    and the default install lacks: its certificate Secret, the leader's Endpoints, the configuration."""
    extra = _docs(rbac.WEBHOOK_MANIFEST)
    assert set(rbac.webhook_controllers()) == {*rbac.default_controllers(), "eviction-surge"}
    assert _grants(extra).isdisjoint(_grants(_docs(rbac.MANIFEST)))
    assert {(g[2], g[4]) for g in _grants(extra)} >= {("validatingwebhookconfigurations", "patch")}
    assert {d["metadata"]["name"] for d in extra} == {rbac.WEBHOOK_ROLE}


def test_the_eviction_api_adds_only_what_its_three_controllers_need() -> None:
    """deploy/eviction-api-rbac.yaml grants the EvictionRequest API's controllers what the default
    install lacks: Evictions made and their status written; no pod write the default lacks."""
    extra = _docs(rbac.EVICTION_API_MANIFEST)
    assert set(rbac.eviction_api_controllers()) == {
        *rbac.default_controllers(),
        *rbac.EVICTION_API_CONTROLLERS,
    }
    assert _grants(extra).isdisjoint(_grants(_docs(rbac.MANIFEST)))
    assert {(g[2], g[4]) for g in _grants(extra)} >= {("evictions", "create"), ("evictions/status", "patch")}
    assert all(g[1] in ("lifecycle.aiokcm.io", "lifecycle.k8s.io") for g in _grants(extra))
    assert {d["metadata"]["name"] for d in extra} == {rbac.EVICTION_API_ROLE}


def test_the_checked_in_manifests_are_what_the_code_generates() -> None:
    assert rbac.MANIFEST.read_text() == rbac.render(), REGENERATE
    assert rbac.OVERLAY_MANIFEST.read_text() == rbac.render_overlay(), REGENERATE
    assert rbac.WEBHOOK_MANIFEST.read_text() == rbac.render_webhook(), REGENERATE
    assert rbac.EVICTION_API_MANIFEST.read_text() == rbac.render_eviction_api(), REGENERATE


def test_the_command_prints_each_install(capsys: pytest.CaptureFixture[str]) -> None:
    assert rbac.main([]) == 0
    assert capsys.readouterr().out == rbac.render()
    assert rbac.main(["--overlay"]) == 0
    assert capsys.readouterr().out == rbac.render_overlay()
    assert rbac.main(["--webhook"]) == 0
    assert capsys.readouterr().out == rbac.render_webhook()
    assert rbac.main(["--eviction-api"]) == 0
    assert capsys.readouterr().out == rbac.render_eviction_api()


def test_the_secure_port_can_review_callers_and_read_the_client_ca() -> None:
    """Delegated authentication and authorization, as `system:auth-delegator` and the API server's
    `extension-apiserver-authentication-reader` grant them; a scraper's ClusterRole for /metrics."""
    docs = _docs()
    reader = next(
        d for d in docs if d["kind"] == "RoleBinding" and d["roleRef"]["name"] == rbac.AUTH_READER_ROLE
    )
    assert reader["metadata"]["namespace"] == "kube-system"
    assert reader["subjects"] == [SERVICE_ACCOUNT]
    metrics = next(d for d in docs if d["metadata"]["name"] == rbac.METRICS_READER)
    assert metrics["rules"] == [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]
    assert {
        ("", "authentication.k8s.io", "tokenreviews", (), "create"),
        ("", "authorization.k8s.io", "subjectaccessreviews", (), "create"),
    } <= _grants(docs)


@pytest.mark.parametrize("install", sorted(INSTALLS))
def test_leases_are_written_in_the_maintenance_namespace_only(install: str) -> None:
    """Cluster-wide Lease writes would let aiokcm take KCM's leader lock or fake a kubelet's heartbeat;
    the kubelets' heartbeats are read by node lifecycle only, which the default install leaves to KCM."""
    from controllers.nodelifecycle.healthsync import NODE_LEASE_NAMESPACE
    from nodemaintenancelease.lease import NAMESPACE as MAINTENANCE

    files, _ = INSTALLS[install]
    lease_rules: dict[tuple[str, str], set[str]] = {}
    for doc in _docs(*files):
        for rule in doc.get("rules") or []:
            if "leases" in rule.get("resources", []):
                where = (str(doc["kind"]), str(doc["metadata"].get("namespace", "")))
                lease_rules.setdefault(where, set()).update(rule["verbs"])
    expected = {
        ("Role", MAINTENANCE): {"get", "list", "watch", "create", "update", "patch"},
        ("Role", "kube-system"): {"get", "create", "update", "watch"},  # leader election (a standby watches)
    }
    if install == "replace-kcm":
        expected[("Role", NODE_LEASE_NAMESPACE)] = {"list", "watch"}
    assert lease_rules == expected
    namespaces = [
        d["metadata"]["name"] for d in yaml.safe_load_all((ROOT / "deploy" / "namespace.yaml").read_text())
    ]
    assert MAINTENANCE in namespaces  # the Role needs its namespace to exist


# Grants whose call sites name the resource through a variable, so the scanner cannot resolve them.
THROUGH_SHARED_HELPERS: dict[Grant, str] = {
    ("", "pods", "patch"): "controllers/common/controller_ref.py: a ReplicaSet adopts and releases its pods",
    ("apps", "deployments", "get"): "controllers/common/controller_ref.py: a fresh read of the Deployment "
    "before it adopts a ReplicaSet",
    ("*", "*/scale", "get"): "controllers/disruption/finders.py: the /scale of any controller a PDB covers",
}
# Grants no request uses: an admission plugin checks them on a write the scanner sees under another grant.
CHECKED_BY_ADMISSION: dict[Grant, str] = {
    ("apps", "replicasets/finalizers", "update"): "controllers/replacementsurge/copies.py: the hand-over's "
    "controller reference sets blockOwnerDeletion (OwnerReferencesPermissionEnforcement)",
}


def test_every_granted_verb_has_a_call_site() -> None:
    """No grant the code does not use: what the scanner finds plus the helpers above, nothing more."""
    paths = [
        *(ROOT / "controllers").rglob("*.py"),
        *(ROOT / "nodemaintenancelease").rglob("*.py"),
        ROOT / "apiclient" / "events.py",
        *[
            p
            for p in (ROOT / "controller_manager").glob("*.py")
            if p.name not in {"maintenance_cli.py", "lease_cli.py", "evict_cli.py", "rollout_cli.py"}
        ],
    ]  # user tools, the user's credentials
    seen = {g for p in paths for _, g in calls_in(p)}
    declared = rbac.union(r for rules in rbac.CONTROLLER_RULES.values() for r in rules)
    declared |= rbac.union(rbac.MANAGER_RULES) | rbac.union(rbac.LEADER_ELECTION_RULES)
    declared |= rbac.union(rbac.SERVING_RULES) | rbac.union(rbac.WEBHOOK_RULES)
    # A helper's grant may have a call site the scanner sees too (pods patch: replacement-surge's own).
    assert declared - seen <= set(THROUGH_SHARED_HELPERS) | set(CHECKED_BY_ADMISSION) <= declared


def test_every_controller_in_the_registry_declares_rules() -> None:
    from controller_manager.registry import default_registry

    assert set(rbac.CONTROLLER_RULES) == set(default_registry().names())


@pytest.mark.parametrize(("package", "controller"), sorted(PACKAGES.items()))
def test_controller_calls_are_covered_by_its_rules(package: str, controller: str) -> None:
    root = ROOT / "controllers" / package
    assert root.is_dir(), f"controllers/{package} is missing"
    allowed = rbac.union(rbac.CONTROLLER_RULES[controller]) | rbac.union(rbac.MANAGER_RULES)
    missing = [
        f"{path.relative_to(ROOT)}:{line}: {grant}"
        for path in sorted(root.rglob("*.py"))
        for line, grant in calls_in(path)
        if grant not in allowed
    ]
    assert not missing, "add these to controller_manager/rbac.py:\n" + "\n".join(missing)


def test_shared_and_manager_code_is_covered() -> None:
    everything = rbac.union(r for rules in rbac.CONTROLLER_RULES.values() for r in rules)
    everything |= rbac.union(rbac.MANAGER_RULES) | rbac.union(rbac.LEADER_ELECTION_RULES)
    everything |= (
        rbac.union(rbac.SERVING_RULES) | rbac.union(rbac.AUTH_READER_RULES) | rbac.union(rbac.WEBHOOK_RULES)
    )
    paths = [
        *sorted((ROOT / "controllers" / "common").rglob("*.py")),
        ROOT / "controllers" / "base.py",
        # The lease library writes on behalf of the NodeMaintenance and maintenance-lease controllers.
        *sorted((ROOT / "nodemaintenancelease").rglob("*.py")),
        *[
            p
            for p in sorted((ROOT / "controller_manager").glob("*.py"))
            if p.name not in {"maintenance_cli.py", "lease_cli.py", "evict_cli.py", "rollout_cli.py"}
        ],  # user tools, the user's credentials
        ROOT / "apiclient" / "events.py",
    ]
    missing = [
        f"{p.relative_to(ROOT)}:{line}: {g}" for p in paths for line, g in calls_in(p) if g not in everything
    ]
    assert not missing, "\n".join(missing)


def test_scanner_sees_the_calls_it_must(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        "async def f(self, client):\n"
        "    await self.client.patch(PODS, 'p', {}, subresource='status')\n"
        "    await client.replace(resources.NODES, {})\n"
        "    ctx.informers.informer(REPLICASETS)\n"
        "    await client.evict('ns', 'p')\n"
        "    await client.patch(self.resource, 'x', {})\n"
    )
    assert {g for _, g in calls_in(sample)} == {
        ("", "pods/status", "patch"),
        ("", "nodes", "update"),
        ("apps", "replicasets", "list"),
        ("apps", "replicasets", "watch"),
        ("", "pods/eviction", "create"),
    }
