"""What kube-apiserver refuses, refused the same way here (issue 20, "Strictness").

One table: each row is a write the real server rejects, with its HTTP code and message. Both
backends run it, so the real kube-apiserver confirms every expectation; a row that passed only
locally would be a test that passes here and fails on a real cluster.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from apiclient import KubeClient
from tests.localcluster.test_api_shapes import raw
from tests.support import objects

pytestmark = pytest.mark.backends("local", "real")

NS = "/api/v1/namespaces/default"
APPS = "/apis/apps/v1/namespaces/default"
POLICY = "/apis/policy/v1/namespaces/default"

PORT_RANGE = "must be between 1 and 65535, inclusive"
PERCENT = (
    "a valid percent string must be a numeric string followed by an ending '%' "
    "(e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')"
)
CONFIG_KEY = (
    "a valid config key must consist of alphanumeric characters, '-', '_' or '.' "
    "(e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')"
)


def container(**extra: Any) -> dict[str, Any]:
    return {"name": "c", "image": "nginx", **extra}


def pod(name: str, **spec: Any) -> dict[str, Any]:
    spec.setdefault("containers", [container()])
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


def deployment(name: str, rolling: dict[str, Any]) -> dict[str, Any]:
    return objects.deployment(
        name, image="nginx", strategy={"type": "RollingUpdate", "rollingUpdate": rolling}
    )


def pdb(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name},
        "spec": {"selector": {"matchLabels": {"app": name}}, **spec},
    }


def service(name: str, port: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name}, "spec": {"ports": [port]}}


def configmap(name: str, data: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data}


def intstr(value: str) -> str:
    """How `field.Invalid` prints an IntOrString (a struct without a value-receiver `String`)."""
    return f'intstr.IntOrString{{Type:1, IntVal:0, StrVal:"{value}"}}'


@dataclass(frozen=True)
class Case:
    name: str
    path: str
    body: dict[str, Any]
    code: int
    message: str
    #: the Status reason; a 500 passed through from storage has none
    reason: str | None = None


CASES = [
    Case(
        "deployment maxSurge abc",
        f"{APPS}/deployments",
        deployment("surge-abc", {"maxSurge": "abc"}),
        422,
        'Deployment.apps "surge-abc" is invalid: spec.strategy.rollingUpdate.maxSurge: '
        f"Invalid value: {intstr('abc')}: {PERCENT}",
    ),
    Case(
        "deployment maxUnavailable -1",
        f"{APPS}/deployments",
        deployment("unavail-neg", {"maxUnavailable": -1}),
        422,
        'Deployment.apps "unavail-neg" is invalid: spec.strategy.rollingUpdate.maxUnavailable: '
        "Invalid value: -1: must be greater than or equal to 0",
    ),
    Case(
        "deployment maxUnavailable 150%",
        f"{APPS}/deployments",
        deployment("unavail-pct", {"maxUnavailable": "150%"}),
        422,
        'Deployment.apps "unavail-pct" is invalid: spec.strategy.rollingUpdate.maxUnavailable: '
        f"Invalid value: {intstr('150%')}: must not be greater than 100%",
    ),
    Case(
        "pdb minAvailable 150%",
        f"{POLICY}/poddisruptionbudgets",
        pdb("pdb-min", minAvailable="150%"),
        422,
        f'PodDisruptionBudget.policy "pdb-min" is invalid: spec.minAvailable: Invalid value: {intstr("150%")}: '
        "must not be greater than 100%",
    ),
    Case(
        "pdb maxUnavailable 101%",
        f"{POLICY}/poddisruptionbudgets",
        pdb("pdb-max", maxUnavailable="101%"),
        422,
        f'PodDisruptionBudget.policy "pdb-max" is invalid: spec.maxUnavailable: Invalid value: {intstr("101%")}: '
        "must not be greater than 100%",
    ),
    Case(
        "containerPort 70000",
        f"{NS}/pods",
        pod("port-big", containers=[container(ports=[{"containerPort": 70000}])]),
        422,
        f'Pod "port-big" is invalid: spec.containers[0].ports[0].containerPort: Invalid value: 70000: {PORT_RANGE}',
    ),
    Case(
        "hostPort 70000",
        f"{NS}/pods",
        pod("hostport-big", containers=[container(ports=[{"containerPort": 80, "hostPort": 70000}])]),
        422,
        f'Pod "hostport-big" is invalid: spec.containers[0].ports[0].hostPort: Invalid value: 70000: {PORT_RANGE}',
    ),
    Case(
        "service port 0",
        f"{NS}/services",
        service("port-zero", {"port": 0}),
        422,
        f'Service "port-zero" is invalid: [spec.ports[0].port: Invalid value: 0: {PORT_RANGE}, '
        f"spec.ports[0].targetPort: Invalid value: 0: {PORT_RANGE}]",
    ),
    Case(
        "service targetPort 70000",
        f"{NS}/services",
        service("target-big", {"port": 80, "targetPort": 70000}),
        422,
        f'Service "target-big" is invalid: spec.ports[0].targetPort: Invalid value: 70000: {PORT_RANGE}',
    ),
    Case(
        "requests above limits",
        f"{NS}/pods",
        pod(
            "over-limit", containers=[container(resources={"requests": {"cpu": "2"}, "limits": {"cpu": "1"}})]
        ),
        422,
        'Pod "over-limit" is invalid: spec.containers[0].resources.requests: Invalid value: "2": must be less than or equal to cpu limit',
    ),
    Case(
        "memory requests above limits",
        f"{NS}/pods",
        pod(
            "over-mem",
            containers=[container(resources={"requests": {"memory": "2Gi"}, "limits": {"memory": "1Gi"}})],
        ),
        422,
        'Pod "over-mem" is invalid: spec.containers[0].resources.requests: Invalid value: "2Gi": must be less than or equal to memory limit',
    ),
    Case(
        "negative cpu limit",
        f"{NS}/pods",
        pod("neg-cpu", containers=[container(resources={"limits": {"cpu": "-1"}})]),
        422,
        # the request defaults to the limit (`SetDefaults_Pod`), so it is refused too
        'Pod "neg-cpu" is invalid: [spec.containers[0].resources.limits[cpu]: Invalid value: "-1": must be greater than or equal to 0, '
        'spec.containers[0].resources.requests[cpu]: Invalid value: "-1": must be greater than or equal to 0]',
    ),
    Case(
        "extended resource without limit",
        f"{NS}/pods",
        pod("ext-res", containers=[container(resources={"requests": {"example.com/dongle": "1"}})]),
        422,
        'Pod "ext-res" is invalid: spec.containers[0].resources.limits: Required value: Limit must be set for non overcommitable resources',
    ),
    Case(
        "quantity lots",
        f"{NS}/pods",
        pod("lots", containers=[container(resources={"requests": {"cpu": "lots"}})]),
        400,
        'Pod in version "v1" cannot be handled as a Pod: quantities must match the regular expression '
        "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
    ),
    Case(
        "configmap key",
        f"{NS}/configmaps",
        configmap("bad-key", {"a/b": "x"}),
        422,
        f'ConfigMap "bad-key" is invalid: data[a/b]: Invalid value: "a/b": {CONFIG_KEY}',
    ),
    Case(
        "secret key",
        f"{NS}/secrets",
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "bad-secret"},
            "stringData": {"..x": "y"},
        },
        422,
        'Secret "bad-secret" is invalid: data[..x]: Invalid value: "..x": must not start with \'..\'',
    ),
    Case(
        "configmap over 1 MiB",
        f"{NS}/configmaps",
        configmap("too-big", {"a": "x" * 600_000, "b": "y" * 600_000}),
        422,
        'ConfigMap "too-big" is invalid: []: Too long: must have at most 1048576 bytes',
    ),
    Case(
        "create with resourceVersion",
        f"{NS}/configmaps",
        {**configmap("with-rv", {"a": "b"}), "metadata": {"name": "with-rv", "resourceVersion": "12"}},
        500,
        "resourceVersion should not be set on objects to be created",
        "",
    ),
    Case(
        "missing service account",
        f"{NS}/pods",
        pod("no-sa", serviceAccountName="nobody"),
        403,
        'pods "no-sa" is forbidden: error looking up service account default/nobody: serviceaccount "nobody" not found',
    ),
    Case(
        "string tolerationSeconds",
        f"{NS}/pods",
        pod(
            "tol-str",
            tolerations=[
                {"key": "k", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": "300"}
            ],
        ),
        400,
        'Pod in version "v1" cannot be handled as a Pod: json: cannot unmarshal string into Go struct field '
        "Toleration.spec.tolerations.tolerationSeconds of type int64",
    ),
]


_REASONS = {400: "BadRequest", 403: "Forbidden", 422: "Invalid"}


async def test_kube_apiserver_rejections(kube: KubeClient) -> None:
    """Every row at once (one cluster per backend): the mismatches are reported together."""
    wrong = []
    for case in CASES:
        code, status = await raw(kube, "POST", case.path, case.body)
        reason = case.reason if case.reason is not None else _REASONS[case.code]
        got = (code, status.get("reason", ""), status.get("message"))
        if got != (case.code, reason, case.message):
            wrong.append(
                f"{case.name}: expected {(case.code, reason, case.message)!r}\n{' ' * len(case.name)}       got {got!r}"
            )
    assert not wrong, "\n".join(wrong)


async def test_valid_neighbours_still_pass(kube: KubeClient) -> None:
    """The edges of each rule are accepted: 100%, port 65535, requests equal to limits, a
    1 MiB ConfigMap exactly, and a pod with the namespace's `default` ServiceAccount."""
    accepted = [
        (f"{APPS}/deployments", deployment("edge-deploy", {"maxSurge": "100%", "maxUnavailable": 0})),
        (f"{POLICY}/poddisruptionbudgets", pdb("edge-pdb", minAvailable="100%")),
        (
            f"{NS}/pods",
            pod(
                "edge-pod",
                containers=[
                    container(
                        ports=[{"containerPort": 65535, "hostPort": 1}],
                        resources={"requests": {"cpu": "1"}, "limits": {"cpu": "1000m"}},
                    )
                ],
            ),
        ),
        (f"{NS}/services", service("edge-svc", {"port": 65535, "targetPort": "http"})),
        (f"{NS}/configmaps", configmap("edge-cm", {"k.E_y-1": "x" * (1048576 - len("k.E_y-1"))})),
    ]
    for path, body in accepted:
        code, status = await raw(kube, "POST", path, body)
        assert code == 201, (path, status.get("message"))


async def test_pod_right_after_its_namespace_gets_the_default_service_account(kube: KubeClient) -> None:
    """ServiceAccount admission waits for the `default` account of a namespace just made (the
    controller makes it within a moment), so a pod sent at once is not refused."""
    code, status = await raw(
        kube,
        "POST",
        "/api/v1/namespaces",
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "fresh-sa"}},
    )
    assert code == 201, status.get("message")
    code, status = await raw(kube, "POST", "/api/v1/namespaces/fresh-sa/pods", pod("first"))
    assert code == 201, status.get("message")
    assert status["spec"]["serviceAccountName"] == "default"
