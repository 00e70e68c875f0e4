"""The RBAC kinds and the review APIs as resources, and the default policy the API server bootstraps.

`rbac.authorization.k8s.io/v1` Roles, ClusterRoles, RoleBindings and ClusterRoleBindings are
stored like any object. `authentication.k8s.io/v1` TokenReviews and `authorization.k8s.io/v1`
(Self|Local)SubjectAccessReviews are create-only and never stored (handled by
`localcluster.auth.reviews`). The bootstrap policy is the part of kube-apiserver's
(`plugin/pkg/auth/authorizer/rbac/bootstrappolicy`) that clients rely on: `cluster-admin`,
discovery and self-review for every authenticated user (so `kubectl auth can-i` works for
anyone), health and version for everyone, `system:auth-delegator`, and the
`extension-apiserver-authentication-reader` Role in kube-system.
"""

from __future__ import annotations

from typing import Any

from localcluster.auth.rbac import PolicySource
from localcluster.builtin.base import BuiltinStrategy, columns
from localcluster.registry import FieldError, Obj, Registry, ResourceType, TableColumn
from localcluster.storage import Storage

RBAC_GROUP = "rbac.authorization.k8s.io"
CREATE_ONLY = ("create",)


class _RBACStrategy(BuiltinStrategy):
    group = RBAC_GROUP
    tracks_generation = False
    path_segment_names = True  # ValidateRBACName


class RoleStrategy(_RBACStrategy):
    kind = "Role"

    def validate(self, obj: Obj, old: Obj | None) -> list[FieldError]:
        return _validate_rules(obj, namespaced=True)

    def table(self, obj: Obj) -> tuple[list[TableColumn], list[Any]]:
        return columns(("Created At", "string")), [(obj.get("metadata") or {}).get("creationTimestamp", "")]


class ClusterRoleStrategy(RoleStrategy):
    kind = "ClusterRole"

    def validate(self, obj: Obj, old: Obj | None) -> list[FieldError]:
        return _validate_rules(obj, namespaced=False)


class RoleBindingStrategy(_RBACStrategy):
    kind = "RoleBinding"

    def validate(self, obj: Obj, old: Obj | None) -> list[FieldError]:
        return _validate_binding(obj, old, kinds=("Role", "ClusterRole"))

    def table(self, obj: Obj) -> tuple[list[TableColumn], list[Any]]:
        ref = obj.get("roleRef") or {}
        return columns(("Role", "string")), [f"{ref.get('kind')}/{ref.get('name')}"]


class ClusterRoleBindingStrategy(RoleBindingStrategy):
    kind = "ClusterRoleBinding"

    def validate(self, obj: Obj, old: Obj | None) -> list[FieldError]:
        return _validate_binding(obj, old, kinds=("ClusterRole",))


def _validate_rules(obj: Obj, *, namespaced: bool) -> list[FieldError]:
    """`ValidatePolicyRule`: verbs are required; a rule names resources or (cluster-wide) URLs."""
    errs: list[FieldError] = []
    for i, rule in enumerate(obj.get("rules") or []):
        path = f"rules[{i}]"
        if not rule.get("verbs"):
            errs.append(FieldError.required(f"{path}.verbs", "verbs must contain at least one value"))
        urls = rule.get("nonResourceURLs") or []
        if urls:
            if namespaced:
                errs.append(
                    FieldError.invalid(
                        f"{path}.nonResourceURLs", urls, "namespaced rules cannot apply to non-resource URLs"
                    )
                )
            if rule.get("apiGroups") or rule.get("resources"):
                errs.append(
                    FieldError.invalid(
                        f"{path}.nonResourceURLs",
                        urls,
                        "rules cannot apply to both regular resources and non-resource URLs",
                    )
                )
            continue
        if not rule.get("apiGroups"):
            errs.append(
                FieldError.required(f"{path}.apiGroups", "resource rules must supply at least one api group")
            )
        if not rule.get("resources"):
            errs.append(
                FieldError.required(f"{path}.resources", "resource rules must supply at least one resource")
            )
    return errs


def _validate_binding(obj: Obj, old: Obj | None, *, kinds: tuple[str, ...]) -> list[FieldError]:
    ref = obj.get("roleRef") or {}
    errs: list[FieldError] = []
    if ref.get("apiGroup") != RBAC_GROUP:
        errs.append(FieldError.not_supported("roleRef.apiGroup", ref.get("apiGroup", ""), (RBAC_GROUP,)))
    if ref.get("kind") not in kinds:
        errs.append(FieldError.not_supported("roleRef.kind", ref.get("kind", ""), kinds))
    if not ref.get("name"):
        errs.append(FieldError.required("roleRef.name", "Required value"))
    if old is not None and (old.get("roleRef") or {}) != ref:
        errs.append(FieldError.invalid("roleRef", ref, "cannot change roleRef"))
    for i, subject in enumerate(obj.get("subjects") or []):
        if subject.get("kind") not in ("User", "Group", "ServiceAccount"):
            errs.append(
                FieldError.not_supported(
                    f"subjects[{i}].kind", subject.get("kind", ""), ("Group", "ServiceAccount", "User")
                )
            )
        if not subject.get("name"):
            errs.append(FieldError.required(f"subjects[{i}].name", "Required value"))
        if (
            subject.get("kind") == "ServiceAccount"
            and not subject.get("namespace")
            and obj.get("kind") == "ClusterRoleBinding"
        ):
            errs.append(FieldError.required(f"subjects[{i}].namespace", "Required value"))
    return errs


def resource_types() -> list[ResourceType]:
    return [
        ResourceType(RBAC_GROUP, "v1", "roles", "Role", True, strategy=RoleStrategy()),
        ResourceType(RBAC_GROUP, "v1", "clusterroles", "ClusterRole", False, strategy=ClusterRoleStrategy()),
        ResourceType(RBAC_GROUP, "v1", "rolebindings", "RoleBinding", True, strategy=RoleBindingStrategy()),
        ResourceType(
            RBAC_GROUP,
            "v1",
            "clusterrolebindings",
            "ClusterRoleBinding",
            False,
            strategy=ClusterRoleBindingStrategy(),
        ),
        ResourceType("authentication.k8s.io", "v1", "tokenreviews", "TokenReview", False, verbs=CREATE_ONLY),
        ResourceType(
            "authorization.k8s.io",
            "v1",
            "subjectaccessreviews",
            "SubjectAccessReview",
            False,
            verbs=CREATE_ONLY,
        ),
        ResourceType(
            "authorization.k8s.io",
            "v1",
            "selfsubjectaccessreviews",
            "SelfSubjectAccessReview",
            False,
            verbs=CREATE_ONLY,
        ),
        ResourceType(
            "authorization.k8s.io",
            "v1",
            "localsubjectaccessreviews",
            "LocalSubjectAccessReview",
            True,
            verbs=CREATE_ONLY,
        ),
    ]


def register(registry: Registry) -> None:
    for rt in resource_types():
        registry.register(rt)


def _rule(
    verbs: list[str],
    *,
    groups: list[str] | None = None,
    resources: list[str] | None = None,
    names: list[str] | None = None,
    urls: list[str] | None = None,
) -> dict[str, Any]:
    rule: dict[str, Any] = {"verbs": verbs}
    if urls is not None:
        rule["nonResourceURLs"] = urls
    else:
        rule["apiGroups"], rule["resources"] = groups or [""], resources or []
    if names:
        rule["resourceNames"] = names
    return rule


_HEALTH = ["/healthz", "/livez", "/readyz", "/version", "/version/"]
BOOTSTRAP_CLUSTER_ROLES: dict[str, list[dict[str, Any]]] = {
    "cluster-admin": [_rule(["*"], groups=["*"], resources=["*"]), _rule(["*"], urls=["*"])],
    "system:discovery": [
        _rule(
            ["get"],
            urls=[
                "/api",
                "/api/*",
                "/apis",
                "/apis/*",
                "/healthz",
                "/livez",
                "/openapi",
                "/openapi/*",
                "/readyz",
                "/version",
                "/version/",
            ],
        )
    ],
    "system:basic-user": [
        _rule(
            ["create"],
            groups=["authorization.k8s.io"],
            resources=["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
        ),
        _rule(["create"], groups=["authentication.k8s.io"], resources=["selfsubjectreviews"]),
    ],
    "system:public-info-viewer": [_rule(["get"], urls=_HEALTH)],
    "system:auth-delegator": [
        _rule(["create"], groups=["authentication.k8s.io"], resources=["tokenreviews"]),
        _rule(["create"], groups=["authorization.k8s.io"], resources=["subjectaccessreviews"]),
    ],
}
BOOTSTRAP_CLUSTER_ROLE_BINDINGS: dict[str, tuple[str, list[str]]] = {
    "cluster-admin": ("cluster-admin", ["system:masters"]),
    "system:discovery": ("system:discovery", ["system:authenticated"]),
    "system:basic-user": ("system:basic-user", ["system:authenticated"]),
    "system:public-info-viewer": (
        "system:public-info-viewer",
        ["system:authenticated", "system:unauthenticated"],
    ),
}
BOOTSTRAP_ROLES: dict[tuple[str, str], list[dict[str, Any]]] = {
    ("kube-system", "extension-apiserver-authentication-reader"): [
        _rule(
            ["get", "list", "watch"], resources=["configmaps"], names=["extension-apiserver-authentication"]
        )
    ],
}


def bootstrap_objects() -> list[tuple[str, str | None, dict[str, Any]]]:
    """(plural, namespace, object) of the default policy, annotated as the API server's own."""
    meta_extra = {
        "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"},
        "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"},
    }
    out: list[tuple[str, str | None, dict[str, Any]]] = []
    for name, rules in BOOTSTRAP_CLUSTER_ROLES.items():
        out.append(
            (
                "clusterroles",
                None,
                {
                    "apiVersion": f"{RBAC_GROUP}/v1",
                    "kind": "ClusterRole",
                    "metadata": {"name": name, **meta_extra},
                    "rules": rules,
                },
            )
        )
    for name, (role, groups) in BOOTSTRAP_CLUSTER_ROLE_BINDINGS.items():
        out.append(
            (
                "clusterrolebindings",
                None,
                {
                    "apiVersion": f"{RBAC_GROUP}/v1",
                    "kind": "ClusterRoleBinding",
                    "metadata": {"name": name, **meta_extra},
                    "roleRef": {"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": role},
                    "subjects": [{"apiGroup": RBAC_GROUP, "kind": "Group", "name": g} for g in groups],
                },
            )
        )
    for (namespace, name), rules in BOOTSTRAP_ROLES.items():
        out.append(
            (
                "roles",
                namespace,
                {
                    "apiVersion": f"{RBAC_GROUP}/v1",
                    "kind": "Role",
                    "metadata": {"name": name, "namespace": namespace, **meta_extra},
                    "rules": rules,
                },
            )
        )
    return out


def storage_source(storage: Storage) -> PolicySource:
    """The authorizer's view of the stored policy, read at each decision (no cache to go stale)."""
    crb, rb, cr, r = (
        f"{p}.{RBAC_GROUP}" for p in ("clusterrolebindings", "rolebindings", "clusterroles", "roles")
    )

    def get(key: str, namespace: str, name: str) -> Obj | None:
        entry = storage.get(key, namespace, name)
        return None if entry is None else entry.load()

    return PolicySource(
        cluster_role_bindings=lambda: (e.load() for e in storage.iter_entries(crb)),
        role_bindings=lambda ns: (e.load() for e in storage.iter_entries(rb, ns)),
        cluster_role=lambda name: get(cr, "", name),
        role=lambda ns, name: get(r, ns, name),
    )
