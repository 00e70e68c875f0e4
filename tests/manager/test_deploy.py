"""The shipped manifests agree with the binary: flags parse, probes and ports hit real endpoints."""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any

import pytest
import yaml

from controller_manager import crds
from controller_manager.options import parse_run_args
from controller_manager.registry import default_registry
from controller_manager.server import HealthState, build_app

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"


def _doc(name: str) -> dict[str, Any]:
    """The first document of a manifest (namespace.yaml: aiokcm's own namespace)."""
    loaded: dict[str, Any] = next(d for d in yaml.safe_load_all((DEPLOY / name).read_text()) if d)
    return loaded


def test_deployment_runs_two_leader_electing_replicas_with_valid_flags() -> None:
    deployment = _doc("deployment.yaml")
    assert deployment["spec"]["replicas"] == 2
    pod = deployment["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == _doc("serviceaccount.yaml")["metadata"]["name"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    (container,) = pod["containers"]
    assert container["args"][0] == "run"
    # The kubelet expands $(POD_IP) from the downward API.
    assert {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}} in container["env"]
    args = [a.replace("$(POD_IP)", "10.244.1.7") for a in container["args"][1:]]
    opts = parse_run_args(args, default_registry())  # raises on a stale flag
    assert opts.webhook.advertise_address == "10.244.1.7"
    assert opts.leader_election.enabled
    assert [p["containerPort"] for p in container["ports"]] == [opts.secure_port, opts.webhook.port]
    routes = {
        r.resource.canonical for r in build_app(HealthState()).router.routes() if r.resource is not None
    }
    for probe in (container["livenessProbe"]["httpGet"], container["readinessProbe"]["httpGet"]):
        assert probe["path"] in routes
        assert probe["path"] in opts.serving.authorization_always_allow_paths  # kubelets send no token
        assert probe["scheme"] == "HTTPS"


def test_service_and_monitor_select_the_pods_and_scrape_metrics() -> None:
    labels = _doc("deployment.yaml")["spec"]["template"]["metadata"]["labels"]
    service = _doc("service.yaml")
    assert service["spec"]["selector"].items() <= labels.items()
    monitor = _doc("monitoring/servicemonitor.yaml")
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["port"] == service["spec"]["ports"][0]["name"] and endpoint["path"] == "/metrics"
    # As kube-prometheus scrapes KCM: HTTPS, Prometheus' token, the self-signed certificate accepted.
    assert endpoint["scheme"] == "https"
    assert endpoint["bearerTokenFile"] == "/var/run/secrets/kubernetes.io/serviceaccount/token"
    assert endpoint["tlsConfig"] == {"insecureSkipVerify": True}
    namespace = _doc("namespace.yaml")["metadata"]["name"]
    assert {service["metadata"]["namespace"], monitor["metadata"]["namespace"]} == {namespace}


def test_network_policy_admits_only_the_scraper_to_the_secure_port() -> None:
    policy = _doc("networkpolicy.yaml")
    deployment = _doc("deployment.yaml")
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert policy["metadata"]["namespace"] == _doc("namespace.yaml")["metadata"]["name"]
    assert policy["spec"]["podSelector"]["matchLabels"].items() <= labels.items()
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    (rule,) = policy["spec"]["ingress"]
    assert [p["port"] for p in rule["ports"]] == [container["ports"][0]["name"]]
    assert rule["from"] and all(peer.get("podSelector") for peer in rule["from"])  # not the whole cluster


def test_eviction_webhook_reaches_the_served_path_and_can_never_block() -> None:
    """deploy/webhook.yaml: the Service reaches the container's webhook port, the configuration names
    the path the controller serves and the certificate's names, and fails open, fast."""
    from controller_manager import rbac
    from controller_manager.options import WebhookOptions
    from controllers.evictionsurge.controller import WEBHOOK_PATH

    docs = {d["kind"]: d for d in yaml.safe_load_all((DEPLOY / "webhook.yaml").read_text()) if d}
    (container,) = _doc("deployment.yaml")["spec"]["template"]["spec"]["containers"]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    defaults = WebhookOptions()
    service = docs["Service"]
    assert (service["metadata"]["name"], service["metadata"]["namespace"]) == (
        defaults.service,
        defaults.namespace,
    )
    # No selector: the leader writes the Endpoints (only it has caches to answer from).
    assert "selector" not in service["spec"] and service["spec"]["ports"][0]["targetPort"] == defaults.port
    assert ports[service["spec"]["ports"][0]["name"]] == defaults.port
    assert service["metadata"]["name"] == rbac.WEBHOOK_SERVICE
    config = docs["ValidatingWebhookConfiguration"]
    assert config["metadata"]["name"] == defaults.configuration == rbac.WEBHOOK_CONFIGURATION
    (hook,) = config["webhooks"]
    ref = hook["clientConfig"]["service"]
    assert (ref["name"], ref["namespace"], ref["path"]) == (
        defaults.service,
        defaults.namespace,
        WEBHOOK_PATH,
    )
    assert ref["port"] == service["spec"]["ports"][0]["port"]
    assert hook["failurePolicy"] == "Ignore" and hook["timeoutSeconds"] <= 5
    assert hook["sideEffects"] == "NoneOnDryRun" and hook["admissionReviewVersions"] == ["v1"]
    assert hook["rules"] == [
        {
            "operations": ["CREATE"],
            "apiGroups": [""],
            "apiVersions": ["v1"],
            "resources": ["pods/eviction"],
            "scope": "Namespaced",
        }
    ]
    policy = docs["NetworkPolicy"]
    assert [p["port"] for r in policy["spec"]["ingress"] for p in r["ports"]] == ["webhook"]


@pytest.mark.parametrize("name", [crds.NODEMAINTENANCE, crds.EVICTIONREQUEST, crds.EVICTION])
def test_packaged_crd_is_the_one_users_apply(name: str) -> None:
    """The image and wheels install the CRDs from package data; `kubectl apply -k deploy/` from deploy/crds.

    Two copies so each works without the other's tree; byte equality so they never drift (copy
    deploy/crds/<name>.yaml over controller_manager/crds/ after editing it).
    """
    applied = (DEPLOY / "crds" / name).read_bytes()
    packaged = resources.files(crds).joinpath(name).read_bytes()
    assert packaged == applied, (
        f"controller_manager/crds/{name} differs from deploy/crds/{name}: cp deploy/crds/{name} controller_manager/crds/"
    )
    assert f"crds/{name}" in yaml.safe_load((DEPLOY / "kustomization.yaml").read_text())["resources"]


def test_packaged_crds_load() -> None:
    crd = crds.nodemaintenance_crd()
    assert crd["metadata"]["name"] == "nodemaintenances.maintenance.aiokcm.io"
    assert crd["spec"]["names"]["kind"] == "NodeMaintenance"
    request, eviction = crds.eviction_api_crds()
    assert request == crds.evictionrequest_crd()
    assert request["metadata"]["name"] == "evictionrequests.lifecycle.aiokcm.io"
    assert eviction == crds.eviction_crd()
    assert eviction["metadata"]["name"] == "evictions.lifecycle.aiokcm.io"
    stripped = crds.eviction_api_crds(transition_rules=False)
    assert "oldSelf" in str(request) and "oldSelf" not in str(stripped)
