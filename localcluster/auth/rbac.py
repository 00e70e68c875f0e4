"""RBAC evaluation as kube-apiserver's RBAC authorizer (`plugin/pkg/auth/authorizer/rbac/rbac.go`,
`pkg/apis/rbac/v1/evaluation_helpers.go`, `pkg/registry/rbac/validation/rule.go`).

A request is allowed when any rule reachable from a binding that applies to the user allows it:
ClusterRoleBindings first (cluster-wide), then the RoleBindings of the request's namespace,
whose `roleRef` names a Role of that namespace or a ClusterRole. Rules match by verb, API group,
`resource` or `resource/subresource` (`*/subresource` too), resourceNames, and non-resource URLs
(exact, `*`, or a prefix written with a trailing `*`). Members of `system:masters` are allowed
everything before RBAC is asked, as the API server's privileged-group authorizer.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

Obj = Mapping[str, Any]

PRIVILEGED_GROUP = "system:masters"
SA_PREFIX = "system:serviceaccount:"


@dataclass(frozen=True)
class User:
    name: str
    groups: tuple[str, ...] = ()
    uid: str = ""
    extra: Mapping[str, tuple[str, ...]] = field(default_factory=dict, hash=False)


@dataclass(frozen=True)
class Attributes:
    """What a request does (`authorizer.AttributesRecord`)."""

    user: User
    verb: str
    resource_request: bool = True
    namespace: str = ""
    api_group: str = ""
    api_version: str = ""
    resource: str = ""
    subresource: str = ""
    name: str = ""
    path: str = ""


def verb_matches(rule: Obj, verb: str) -> bool:
    return any(v in ("*", verb) for v in rule.get("verbs") or ())


def api_group_matches(rule: Obj, group: str) -> bool:
    return any(g in ("*", group) for g in rule.get("apiGroups") or ())


def resource_matches(rule: Obj, combined: str, subresource: str) -> bool:
    for resource in rule.get("resources") or ():
        if resource in ("*", combined):
            return True
        if (
            subresource
            and len(resource) == len(subresource) + 2
            and resource.startswith("*/")
            and resource.endswith(subresource)
        ):
            return True
    return False


def resource_name_matches(rule: Obj, name: str) -> bool:
    names = rule.get("resourceNames") or ()
    return not names or name in names


def non_resource_url_matches(rule: Obj, path: str) -> bool:
    for url in rule.get("nonResourceURLs") or ():
        if url in ("*", path):
            return True
        if url.endswith("*") and path.startswith(url.rstrip("*")):
            return True
    return False


def rule_allows(attrs: Attributes, rule: Obj) -> bool:
    if attrs.resource_request:
        combined = f"{attrs.resource}/{attrs.subresource}" if attrs.subresource else attrs.resource
        return (
            verb_matches(rule, attrs.verb)
            and api_group_matches(rule, attrs.api_group)
            and resource_matches(rule, combined, attrs.subresource)
            and resource_name_matches(rule, attrs.name)
        )
    return verb_matches(rule, attrs.verb) and non_resource_url_matches(rule, attrs.path)


def applies_to(user: User, subject: Obj, namespace: str) -> bool:
    kind, name = subject.get("kind"), str(subject.get("name", ""))
    if kind == "User":
        return user.name == name
    if kind == "Group":
        return name in user.groups
    if kind == "ServiceAccount":
        sa_namespace = str(subject.get("namespace") or namespace)
        return bool(sa_namespace) and user.name == f"{SA_PREFIX}{sa_namespace}:{name}"
    return False


@dataclass
class PolicySource:
    """Where the authorizer reads roles and bindings (the cluster's storage, or a test's lists)."""

    cluster_role_bindings: Callable[[], Iterable[Obj]]
    role_bindings: Callable[[str], Iterable[Obj]]
    cluster_role: Callable[[str], Obj | None]
    role: Callable[[str, str], Obj | None]


class RBACAuthorizer:
    def __init__(self, source: PolicySource) -> None:
        self.source = source

    def _rules(self, ref: Obj, namespace: str) -> Sequence[Obj]:
        kind, name = ref.get("kind"), ref.get("name", "")
        role = (
            self.source.cluster_role(name)
            if kind == "ClusterRole"
            else (self.source.role(namespace, name) if kind == "Role" and namespace else None)
        )
        return (role or {}).get("rules") or ()

    def authorize(self, attrs: Attributes) -> tuple[bool, str]:
        """(allowed, reason): the reason names the binding that allowed it, as the real authorizer."""
        if PRIVILEGED_GROUP in attrs.user.groups:
            return True, ""
        for binding in self.source.cluster_role_bindings():
            if self._allowed_by(binding, "", attrs):
                return True, self._reason("ClusterRoleBinding", binding, attrs)
        if attrs.namespace:
            for binding in self.source.role_bindings(attrs.namespace):
                if self._allowed_by(binding, attrs.namespace, attrs):
                    return True, self._reason("RoleBinding", binding, attrs)
        return False, ""

    def _allowed_by(self, binding: Obj, namespace: str, attrs: Attributes) -> bool:
        if not any(applies_to(attrs.user, s, namespace) for s in binding.get("subjects") or ()):
            return False
        return any(rule_allows(attrs, rule) for rule in self._rules(binding.get("roleRef") or {}, namespace))

    @staticmethod
    def _reason(kind: str, binding: Obj, attrs: Attributes) -> str:
        meta, ref = binding.get("metadata") or {}, binding.get("roleRef") or {}
        where = (
            f'"{meta.get("name", "")}"'
            if kind == "ClusterRoleBinding"
            else f'"{meta.get("name", "")}/{meta.get("namespace", "")}"'
        )
        return f'RBAC: allowed by {kind} {where} of {ref.get("kind")} "{ref.get("name")}" to User "{attrs.user.name}"'
