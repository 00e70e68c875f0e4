"""Authentication and RBAC through kubectl, the same cases on the enforcing local cluster and the real one.

Roles and bindings are made with `kubectl create role|clusterrole|rolebinding|clusterrolebinding`,
a ServiceAccount token with `kubectl create token` (the TokenRequest API), and every question is
asked with `kubectl auth can-i` (a SelfSubjectAccessReview, or with `--as` an impersonated
one) and by doing the request: the answers, the 403 wording and the exit codes must be the real
kube-apiserver's.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
import yaml

from tests.backends import cluster_on_backend
from tests.support.waiting import eventually, holds

NS = "can-i"
ROBOT = f"system:serviceaccount:{NS}:robot"


@pytest.fixture
async def cluster(request: pytest.FixtureRequest) -> AsyncIterator[Any]:
    async with cluster_on_backend(
        request, nodes=0, authz=True, scheduler=False, gc=False, kubelets=False
    ) as c:
        yield c


async def kubectl(kubeconfig: str | Path, *args: str) -> tuple[int, str]:
    done = await anyio.run_process(["kubectl", "--kubeconfig", str(kubeconfig), *args], check=False)
    return done.returncode, (done.stdout + done.stderr).decode().strip()


async def can_i(kubeconfig: str | Path, *args: str) -> str:
    """The answer alone (kubectl warns on stderr, e.g. that a cluster-scoped resource has no namespace)."""
    done = await anyio.run_process(
        ["kubectl", "--kubeconfig", str(kubeconfig), "auth", "can-i", *args], check=False
    )
    return done.stdout.decode().strip()


async def _setup(admin: str) -> None:
    for args in (
        ("create", "namespace", NS),
        ("create", "serviceaccount", "robot", "-n", NS),
        ("create", "role", "evictor", "--verb=create", "--resource=pods/eviction", "-n", NS),
        (
            "create",
            "role",
            "lock",
            "--verb=get,update",
            "--resource=leases.coordination.k8s.io",
            "--resource-name=lock",
            "-n",
            NS,
        ),
        (
            "create",
            "rolebinding",
            "robot-evictor",
            "--role=evictor",
            f"--serviceaccount={NS}:robot",
            "-n",
            NS,
        ),
        ("create", "rolebinding", "robot-lock", "--role=lock", f"--serviceaccount={NS}:robot", "-n", NS),
        (
            "create",
            "clusterrole",
            "can-i-metrics",
            "--verb=get",
            "--non-resource-url=/metrics",
            "--non-resource-url=/logs/*",
        ),
        (
            "create",
            "clusterrolebinding",
            "can-i-metrics",
            "--clusterrole=can-i-metrics",
            f"--serviceaccount={NS}:robot",
        ),
        ("create", "clusterrole", "can-i-nodes", "--verb=get,list", "--resource=nodes"),
        ("create", "clusterrolebinding", "can-i-nodes", "--clusterrole=can-i-nodes", "--group=node-readers"),
    ):
        code, out = await kubectl(admin, *args)
        assert code == 0, f"kubectl {' '.join(args)}: {out}"


async def _teardown(admin: str) -> None:
    for kind, name in (
        ("clusterrolebinding", "can-i-metrics"),
        ("clusterrolebinding", "can-i-nodes"),
        ("clusterrole", "can-i-metrics"),
        ("clusterrole", "can-i-nodes"),
        ("namespace", NS),
    ):
        await kubectl(admin, "delete", kind, name, "--ignore-not-found", "--wait=false")


def _kubeconfig_with_token(admin: str, token: str, path: Path) -> Path:
    config = yaml.safe_load(Path(admin).read_text())
    for user in config["users"]:
        user["user"] = {"token": token}
    path.write_text(yaml.safe_dump(config))
    return path


# (kubectl auth can-i arguments, the answer); asked as the robot ServiceAccount, with its own token.
AS_ROBOT = [
    (("create", "pods", "--subresource=eviction", "-n", NS), "yes"),
    (("create", "pods/eviction", "-n", NS), "no"),  # TYPE/NAME: a pod named eviction
    (("create", "pods", "-n", NS), "no"),
    (("create", "pods", "--subresource=eviction", "-n", "default"), "no"),
    (("update", "leases/lock", "-n", NS), "yes"),
    (("update", "leases/other", "-n", NS), "no"),
    (("list", "leases", "-n", NS), "no"),
    (("get", "/metrics"), "yes"),
    (("get", "/logs/kube-apiserver.log"), "yes"),
    (("get", "/debug/pprof"), "no"),
    (("get", "/healthz"), "yes"),  # system:public-info-viewer
    (("list", "nodes"), "no"),
    (("create", "selfsubjectaccessreviews.authorization.k8s.io"), "yes"),  # system:basic-user
]
# Asked by the admin for someone else (Impersonate-User / Impersonate-Group).
IMPERSONATED = [
    (("list", "nodes", "--as=jane", "--as-group=node-readers"), "yes"),
    (("delete", "nodes", "--as=jane", "--as-group=node-readers"), "no"),
    (("list", "nodes", "--as=jane"), "no"),
    (("create", "pods", "--subresource=eviction", "-n", NS, f"--as={ROBOT}"), "yes"),
    (("delete", "nodes"), "yes"),  # the admin, system:masters
]


@pytest.mark.backends("local", "real")
@pytest.mark.timeout(120)
async def test_kubectl_auth_can_i_answers_as_rbac_says(cluster: Any, tmp_path: Path) -> None:
    admin = str(cluster.kubeconfig_path)
    await _setup(admin)
    try:
        code, token = await kubectl(admin, "create", "token", "robot", "-n", NS)
        assert code == 0 and token.count(".") == 2, token
        robot = _kubeconfig_with_token(admin, token, tmp_path / "robot.kubeconfig")

        answers = {args: await can_i(robot, *args) for args, _ in AS_ROBOT}
        assert answers == {args: want for args, want in AS_ROBOT}
        answers = {args: await can_i(admin, *args) for args, _ in IMPERSONATED}
        assert answers == {args: want for args, want in IMPERSONATED}

        code, out = await kubectl(robot, "get", "pods", "-n", "default")
        assert code == 1
        assert out == (
            f'Error from server (Forbidden): pods is forbidden: User "{ROBOT}" cannot list resource '
            f'"pods" in API group "" in the namespace "default"'
        )
        code, out = await kubectl(robot, "get", "lease", "lock", "-n", NS)
        assert code == 1 and 'leases.coordination.k8s.io "lock" not found' in out  # allowed, then not found
        code, out = await kubectl(robot, "delete", "pod", "web", "-n", NS)
        assert out == (
            f'Error from server (Forbidden): pods "web" is forbidden: User "{ROBOT}" cannot delete '
            f'resource "pods" in API group "" in the namespace "{NS}"'
        )

        code, _ = await kubectl(admin, "delete", "serviceaccount", "robot", "-n", NS)
        assert code == 0
        # A bound token dies with its ServiceAccount (at once here; the real server within seconds).
        await eventually(
            lambda: holds(
                kubectl(robot, "auth", "can-i", "get", "/metrics"), lambda r: "Unauthorized" in r[1]
            ),
            "the token refused",
            interval=0.2,
        )
    finally:
        await _teardown(admin)


@pytest.mark.backends("local", "real")
@pytest.mark.timeout(60)
async def test_token_and_access_reviews(cluster: Any) -> None:
    """The APIs KCM's delegated authentication and authorization call, answered as the real server."""
    kube = await cluster.client()
    try:
        await kube.request("POST", "/api/v1/namespaces", body={"metadata": {"name": "reviews"}})
        await kube.request(
            "POST", "/api/v1/namespaces/reviews/serviceaccounts", body={"metadata": {"name": "sa"}}
        )
        issued = await kube.request(
            "POST",
            "/api/v1/namespaces/reviews/serviceaccounts/sa/token",
            body={"spec": {"expirationSeconds": 600}},
        )
        assert issued["kind"] == "TokenRequest" and issued["status"]["expirationTimestamp"]
        review = await kube.request(
            "POST",
            "/apis/authentication.k8s.io/v1/tokenreviews",
            body={
                "apiVersion": "authentication.k8s.io/v1",
                "kind": "TokenReview",
                "spec": {"token": issued["status"]["token"]},
            },
        )
        status = review["status"]
        assert status["authenticated"] is True
        assert status["user"]["username"] == "system:serviceaccount:reviews:sa"
        assert set(status["user"]["groups"]) == {
            "system:serviceaccounts",
            "system:serviceaccounts:reviews",
            "system:authenticated",
        }
        bad = await kube.request(
            "POST",
            "/apis/authentication.k8s.io/v1/tokenreviews",
            body={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": "nope"}},
        )
        assert not bad["status"].get("authenticated") and bad["status"].get("error")
        sar: dict[str, Any] = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": {
                "user": "system:serviceaccount:reviews:sa",
                "groups": ["system:authenticated"],
                "nonResourceAttributes": {"path": "/metrics", "verb": "get"},
            },
        }
        assert (await kube.request("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", body=sar))[
            "status"
        ]["allowed"] is False
        sar["spec"]["nonResourceAttributes"] = {"path": "/healthz", "verb": "get"}
        assert (await kube.request("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", body=sar))[
            "status"
        ]["allowed"] is True
        with pytest.raises(Exception, match="10 minutes"):
            await kube.request(
                "POST",
                "/api/v1/namespaces/reviews/serviceaccounts/sa/token",
                body={"spec": {"expirationSeconds": 60}},
            )
    finally:
        try:
            await kube.request("DELETE", "/api/v1/namespaces/reviews")
        finally:
            await kube.close()
