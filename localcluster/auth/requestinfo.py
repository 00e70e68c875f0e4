"""What a request does, from its method and path (k8s.io/apiserver's `RequestInfoFactory`).

`/api/v1/...` and `/apis/<group>/<version>/...` with at least a resource are resource requests:
verb from the method (`get` without a name is `list`, or `watch` with `?watch=true` or the legacy
`/watch/` prefix; `delete` without a name is `deletecollection`), namespace, resource, name
(also from `fieldSelector=metadata.name=...` on a list or watch) and subresource. Anything else
(`/healthz`, `/api`, `/apis/apps/v1`, `/openapi/v2`) is a non-resource request whose verb is the
method, lower-cased.
"""

from __future__ import annotations

from collections.abc import Mapping

from localcluster.auth.rbac import Attributes, User

_METHOD_VERBS = {
    "POST": "create",
    "GET": "get",
    "HEAD": "get",
    "PUT": "update",
    "PATCH": "patch",
    "DELETE": "delete",
}
_NAMESPACE_SUBRESOURCES = frozenset({"status", "finalize"})


def attributes(user: User, method: str, path: str, query: Mapping[str, str]) -> Attributes:
    parts = [p for p in path.strip("/").split("/") if p]
    plain = Attributes(user, method.lower(), resource_request=False, path=path)
    if len(parts) < 3 or parts[0] not in ("api", "apis"):
        return plain
    rest = parts[1:]
    group = ""
    if parts[0] == "apis":
        if len(rest) < 3:
            return plain
        group, rest = rest[0], rest[1:]
    version, rest = rest[0], rest[1:]
    if rest[0] == "watch":
        if len(rest) < 2:
            return plain
        verb, rest = "watch", rest[1:]
    else:
        verb = _METHOD_VERBS.get(method.upper(), "")
    namespace = ""
    if rest[0] == "namespaces" and len(rest) > 1:
        namespace = rest[1]
        if len(rest) > 2 and rest[2] not in _NAMESPACE_SUBRESOURCES:
            rest = rest[2:]
    resource = rest[0]
    name = rest[1] if len(rest) > 1 else ""
    subresource = rest[2] if len(rest) > 2 else ""
    if not name and verb == "get":
        verb = "watch" if query.get("watch", "").lower() in ("1", "true") else "list"
        selector = query.get("fieldSelector", "")
        if selector.startswith("metadata.name=") and "," not in selector:
            name = selector.removeprefix("metadata.name=").removeprefix("=")
    if not name and verb == "delete":
        verb = "deletecollection"
    return Attributes(
        user,
        verb,
        namespace=namespace,
        api_group=group,
        api_version=version,
        resource=resource,
        subresource=subresource,
        name=name,
        path=path,
    )
