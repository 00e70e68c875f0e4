"""The local cluster's RBAC evaluation against Kubernetes' own cases.

Ported from plugin/pkg/auth/authorizer/rbac/rbac_test.go (`TestAuthorizer`, `TestRuleMatches`):
the same roles, bindings and requests, the same expected answers. Plus the cases those tests
leave to other files: resourceNames, `*/subresource`, ServiceAccount subjects defaulting to the
binding's namespace, a RoleBinding to a Role, and system:masters.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import pytest

from localcluster.auth.rbac import Attributes, PolicySource, RBACAuthorizer, User, rule_allows

Obj = dict[str, Any]


def new_rule(verbs: str, groups: str, resources: str, urls: str) -> Obj:
    # strings.Split("", ",") is [""]: an empty field is a list with one empty string, as in Go.
    return {
        "verbs": verbs.split(","),
        "apiGroups": groups.split(","),
        "resources": resources.split(","),
        "nonResourceURLs": urls.split(","),
    }


def cluster_role(name: str, *rules: Obj) -> Obj:
    return {"metadata": {"name": name}, "rules": list(rules)}


def role(name: str, namespace: str, *rules: Obj) -> Obj:
    return {"metadata": {"name": name, "namespace": namespace}, "rules": list(rules)}


def _subjects(subjects: Iterable[str]) -> list[Obj]:
    out = []
    for s in subjects:
        kind, _, rest = s.partition(":")
        if kind == "ServiceAccount":
            namespace, _, name = rest.rpartition(":")
            out.append({"kind": kind, "name": name, **({"namespace": namespace} if namespace else {})})
        else:
            out.append({"kind": kind, "name": rest, "apiGroup": "rbac.authorization.k8s.io"})
    return out


def cluster_role_binding(role_name: str, *subjects: str) -> Obj:
    return {
        "metadata": {"name": f"crb-{role_name}"},
        "subjects": _subjects(subjects),
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role_name},
    }


def role_binding(namespace: str, role_name: str, kind: str, *subjects: str) -> Obj:
    return {
        "metadata": {"name": f"rb-{role_name}", "namespace": namespace},
        "subjects": _subjects(subjects),
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": role_name},
    }


def authorizer(
    *,
    roles: Sequence[Obj] = (),
    role_bindings: Sequence[Obj] = (),
    cluster_roles: Sequence[Obj] = (),
    cluster_role_bindings: Sequence[Obj] = (),
) -> RBACAuthorizer:
    return RBACAuthorizer(
        PolicySource(
            cluster_role_bindings=lambda: cluster_role_bindings,
            role_bindings=lambda ns: [b for b in role_bindings if b["metadata"]["namespace"] == ns],
            cluster_role=lambda name: next((r for r in cluster_roles if r["metadata"]["name"] == name), None),
            role=lambda ns, name: next(
                (r for r in roles if r["metadata"] == {"name": name, "namespace": ns}), None
            ),
        )
    )


def attrs(
    user: str,
    groups: str,
    verb: str,
    resource: str,
    subresource: str,
    namespace: str,
    group: str,
    name: str = "",
) -> Attributes:
    """rbac_test.go's defaultAttributes."""
    return Attributes(
        User(user, tuple(groups.split(","))),
        verb,
        namespace=namespace,
        api_group=group,
        resource=resource,
        subresource=subresource,
        name=name,
    )


def url(user: str = "", groups: tuple[str, ...] = (), *, verb: str, path: str) -> Attributes:
    return Attributes(User(user, groups), verb, resource_request=False, path=path)


# TestAuthorizer: (policy, should pass, should fail)
AUTHORIZER_CASES: list[tuple[dict[str, list[Obj]], list[Attributes], list[Attributes]]] = [
    (
        {
            "cluster_roles": [cluster_role("admin", new_rule("*", "*", "*", "*"))],
            "role_bindings": [role_binding("ns1", "admin", "ClusterRole", "User:admin", "Group:admins")],
        },
        [
            attrs("admin", "", "get", "Pods", "", "ns1", ""),
            attrs("admin", "", "watch", "Pods", "", "ns1", ""),
            attrs("admin", "group1", "watch", "Foobar", "", "ns1", ""),
            attrs("joe", "admins", "watch", "Foobar", "", "ns1", ""),
            attrs("joe", "group1,admins", "watch", "Foobar", "", "ns1", ""),
        ],
        [
            attrs("admin", "", "GET", "Pods", "", "ns2", ""),
            attrs("admin", "", "GET", "Nodes", "", "", ""),
            attrs("admin", "admins", "GET", "Pods", "", "ns2", ""),
            attrs("admin", "admins", "GET", "Nodes", "", "", ""),
        ],
    ),
    (
        {
            "cluster_roles": [
                cluster_role("non-resource-url-getter", new_rule("get", "", "", "/apis")),
                cluster_role("non-resource-url", new_rule("*", "", "", "/apis")),
                cluster_role("non-resource-url-prefix", new_rule("get", "", "", "/apis/*")),
            ],
            "cluster_role_bindings": [
                cluster_role_binding("non-resource-url-getter", "User:foo", "Group:bar"),
                cluster_role_binding("non-resource-url", "User:admin", "Group:admin"),
                cluster_role_binding("non-resource-url-prefix", "User:prefixed", "Group:prefixed"),
            ],
        },
        [
            url("foo", verb="get", path="/apis"),
            url(groups=("bar",), verb="get", path="/apis"),
            url("admin", verb="get", path="/apis"),
            url(groups=("admin",), verb="get", path="/apis"),
            url("admin", verb="watch", path="/apis"),
            url(groups=("admin",), verb="watch", path="/apis"),
            url("prefixed", verb="get", path="/apis/v1"),
            url(groups=("prefixed",), verb="get", path="/apis/v1"),
            url("prefixed", verb="get", path="/apis/v1/foobar"),
            url(groups=("prefixed",), verb="get", path="/apis/v1/foorbar"),
        ],
        [
            url("foo", verb="watch", path="/apis"),
            url(groups=("bar",), verb="watch", path="/apis"),
            url("foo", verb="get", path="/api/v1"),
            url(groups=("bar",), verb="get", path="/api/v1"),
            url("admin", verb="get", path="/api/v1"),
            url(groups=("admin",), verb="get", path="/api/v1"),
            url("prefixed", verb="get", path="/api/v1"),
            url(groups=("prefixed",), verb="get", path="/api/v1"),
        ],
    ),
    (
        {
            "cluster_roles": [cluster_role("admin", new_rule("*", "*", "pods", "*"))],
            "role_bindings": [role_binding("ns1", "admin", "ClusterRole", "User:admin", "Group:admins")],
        },
        [attrs("admin", "", "get", "pods", "", "ns1", "")],
        [attrs("admin", "", "get", "pods", "status", "ns1", "")],
    ),
    (
        {
            "cluster_roles": [cluster_role("admin", new_rule("*", "*", "pods/status", "*"))],
            "role_bindings": [role_binding("ns1", "admin", "ClusterRole", "User:admin", "Group:admins")],
        },
        [attrs("admin", "", "get", "pods", "status", "ns1", "")],
        [attrs("admin", "", "get", "pods", "", "ns1", "")],
    ),
    # Beyond rbac_test.go: a Role through a RoleBinding; ServiceAccount subjects (the namespace
    # defaults to the binding's); `*/subresource`; resourceNames; system:masters.
    (
        {
            "roles": [
                role(
                    "evictor",
                    "ns1",
                    {"verbs": ["create"], "apiGroups": [""], "resources": ["pods/eviction"]},
                    {
                        "verbs": ["get", "update"],
                        "apiGroups": ["coordination.k8s.io"],
                        "resources": ["leases"],
                        "resourceNames": ["lock"],
                    },
                )
            ],
            "role_bindings": [
                role_binding("ns1", "evictor", "Role", "ServiceAccount:robot"),
                role_binding("ns2", "evictor", "Role", "ServiceAccount:ns1:robot"),
            ],
            "cluster_roles": [
                cluster_role("scaler", {"verbs": ["get"], "apiGroups": ["*"], "resources": ["*/scale"]})
            ],
            "cluster_role_bindings": [cluster_role_binding("scaler", "ServiceAccount:kube-system:hpa")],
        },
        [
            attrs("system:serviceaccount:ns1:robot", "", "create", "pods", "eviction", "ns1", ""),
            attrs(
                "system:serviceaccount:ns1:robot",
                "",
                "update",
                "leases",
                "",
                "ns1",
                "coordination.k8s.io",
                name="lock",
            ),
            attrs("system:serviceaccount:kube-system:hpa", "", "get", "deployments", "scale", "ns9", "apps"),
            attrs("anyone", "system:masters", "delete", "nodes", "", "", ""),
        ],
        [
            attrs("system:serviceaccount:ns1:robot", "", "create", "pods", "", "ns1", ""),
            attrs(
                "system:serviceaccount:ns1:robot",
                "",
                "update",
                "leases",
                "",
                "ns1",
                "coordination.k8s.io",
                name="other",
            ),
            attrs("system:serviceaccount:ns1:robot", "", "list", "leases", "", "ns1", "coordination.k8s.io"),
            attrs(
                "system:serviceaccount:ns1:robot", "", "create", "pods", "eviction", "ns2", ""
            ),  # role lives in ns1
            attrs("system:serviceaccount:ns2:robot", "", "create", "pods", "eviction", "ns1", ""),
            attrs("system:serviceaccount:kube-system:hpa", "", "get", "deployments", "", "ns9", "apps"),
            attrs(
                "system:serviceaccount:kube-system:hpa", "", "update", "deployments", "scale", "ns9", "apps"
            ),
        ],
    ),
]


@pytest.mark.parametrize(("policy", "should_pass", "should_fail"), AUTHORIZER_CASES)
def test_authorizer(
    policy: dict[str, list[Obj]], should_pass: list[Attributes], should_fail: list[Attributes]
) -> None:
    a = authorizer(**policy)
    assert [x for x in should_pass if not a.authorize(x)[0]] == [], "incorrectly restricted"
    assert [x for x in should_fail if a.authorize(x)[0]] == [], "incorrectly passed"


def req(verb: str, group: str = "", resource: str = "", subresource: str = "") -> Attributes:
    return Attributes(User("u"), verb, api_group=group, resource=resource, subresource=subresource)


def nonres(verb: str, path: str) -> Attributes:
    return Attributes(User("u"), verb, resource_request=False, path=path)


def _rule(
    verbs: list[str],
    groups: list[str] | None = None,
    resources: list[str] | None = None,
    urls: list[str] | None = None,
) -> Obj:
    return {
        "verbs": verbs,
        "apiGroups": groups or [],
        "resources": resources or [],
        "nonResourceURLs": urls or [],
    }


def _grid(allowed: set[tuple[str, str, str]], sub: str = "") -> dict[Attributes, bool]:
    return {
        req(v, g, r, sub): (v, g, r) in allowed
        for v in ("verb1", "verb2")
        for g in ("group1", "group2")
        for r in ("resource1", "resource2")
    }


# TestRuleMatches
RULE_CASES: list[tuple[str, Obj, dict[Attributes, bool]]] = [
    (
        "star verb, exact match other",
        _rule(["*"], ["group1"], ["resource1"]),
        _grid({("verb1", "group1", "resource1"), ("verb2", "group1", "resource1")}),
    ),
    (
        "star group, exact match other",
        _rule(["verb1"], ["*"], ["resource1"]),
        _grid({("verb1", "group1", "resource1"), ("verb1", "group2", "resource1")}),
    ),
    (
        "star resource, exact match other",
        _rule(["verb1"], ["group1"], ["*"]),
        _grid({("verb1", "group1", "resource1"), ("verb1", "group1", "resource2")}),
    ),
    (
        "tuple expansion",
        _rule(["verb1", "verb2"], ["group1", "group2"], ["resource1", "resource2"]),
        _grid(
            {
                (v, g, r)
                for v in ("verb1", "verb2")
                for g in ("group1", "group2")
                for r in ("resource1", "resource2")
            }
        ),
    ),
    (
        "subresource expansion",
        _rule(["*"], ["*"], ["resource1/subresource1"]),
        {
            req("verb1", "group1", "resource1", "subresource1"): True,
            req("verb1", "group2", "resource1", "subresource2"): False,
            req("verb1", "group1", "resource2", "subresource1"): False,
            req("verb1", "group2", "resource2", "subresource1"): False,
            req("verb2", "group1", "resource1", "subresource1"): True,
            req("verb2", "group2", "resource1", "subresource2"): False,
            req("verb2", "group1", "resource2", "subresource1"): False,
            req("verb2", "group2", "resource2", "subresource1"): False,
        },
    ),
    (
        "star nonresource, exact match other",
        _rule(["verb1"], urls=["*"]),
        {
            **{
                nonres("verb1", p): True
                for p in ("/foo", "/foo/bar", "/foo/baz", "/foo/bar/one", "/foo/baz/one")
            },
            **{
                nonres("verb2", p): False
                for p in ("/foo", "/foo/bar", "/foo/baz", "/foo/bar/one", "/foo/baz/one")
            },
        },
    ),
    (
        "star nonresource subpath",
        _rule(["verb1"], urls=["/foo/*"]),
        {
            nonres("verb1", "/foo"): False,
            nonres("verb1", "/foo/bar"): True,
            nonres("verb1", "/foo/baz"): True,
            nonres("verb1", "/foo/bar/one"): True,
            nonres("verb1", "/foo/baz/one"): True,
            nonres("verb1", "/notfoo"): False,
            nonres("verb1", "/notfoo/bar"): False,
            nonres("verb1", "/notfoo/baz"): False,
            nonres("verb1", "/notfoo/bar/one"): False,
            nonres("verb1", "/notfoo/baz/one"): False,
        },
    ),
    (
        "star verb, exact nonresource",
        _rule(["*"], urls=["/foo", "/foo/bar/one"]),
        {
            **{
                nonres(v, p): p in ("/foo", "/foo/bar/one")
                for v in ("verb1", "verb2")
                for p in ("/foo", "/foo/bar", "/foo/baz", "/foo/bar/one", "/foo/baz/one")
            },
        },
    ),
    (
        "star subresource",
        _rule(["get"], ["*"], ["*/scale"]),
        {
            req("get", "apps", "deployments", "scale"): True,
            req("get", "apps", "deployments"): False,
            req("get", "apps", "deployments", "status"): False,
            req("update", "apps", "deployments", "scale"): False,
        },
    ),
]


@pytest.mark.parametrize(("name", "rule", "expected"), RULE_CASES, ids=[c[0] for c in RULE_CASES])
def test_rule_matches(name: str, rule: Obj, expected: dict[Attributes, bool]) -> None:
    wrong = {
        f"{a.verb} {a.api_group}/{a.resource}/{a.subresource}{a.path}": want
        for a, want in expected.items()
        if rule_allows(a, rule) != want
    }
    assert wrong == {}


def test_the_reason_names_the_binding_that_allowed() -> None:
    a = authorizer(
        cluster_roles=[cluster_role("reader", new_rule("get", "", "pods", ""))],
        role_bindings=[role_binding("ns1", "reader", "ClusterRole", "User:alice")],
    )
    allowed, reason = a.authorize(attrs("alice", "", "get", "pods", "", "ns1", ""))
    assert (
        allowed
        and reason == 'RBAC: allowed by RoleBinding "rb-reader/ns1" of ClusterRole "reader" to User "alice"'
    )
