"""The authentication and authorization layer of the local cluster, wired into its server.

Every API request is authenticated from its bearer token (an invalid one is a 401 when enforcing;
none is `system:anonymous`), and, when enforcing, authorized by RBAC on the attributes
`requestinfo` derives, a refusal being the real server's 403 Status
(`pods is forbidden: User "x" cannot list resource "pods" in API group "" in the namespace "y"`).
The user is kept on the request for SelfSubjectAccessReview. While enforcing, each decision is
counted by who asked what where (`decisions`), and each 401 (`rejected`), so a test can tell which
grants a client used and whether any request was refused. Reviews always answer what the
policy says, enforcing or not: KCM's delegated authentication/authorization work against the
local cluster either way. `/healthz`, `/livez`, `/readyz` and `/version` answer anyone, as the
`system:public-info-viewer` binding makes them on a real server.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
from aiohttp import web

from kubeutil.timestamps import format_time
from localcluster import errors
from localcluster.auth import policy
from localcluster.auth.rbac import SA_PREFIX, Attributes, RBACAuthorizer, User
from localcluster.auth.requestinfo import attributes
from localcluster.auth.tokens import ANONYMOUS, AUTHENTICATED, DEFAULT_AUDIENCES, TokenAuthenticator
from localcluster.objects import ObjectAPI
from localcluster.registry import FieldError, Registry
from localcluster.rest import JSON, RestHandlers, Target, _body, status_response

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
USER_KEY = web.RequestKey("localcluster.user", User)
MIN_EXPIRATION_SECONDS = 600
# (user, verb, API group, resource[/subresource] or non-resource path, namespace, allowed)
Decision = tuple[str, str, str, str, str, bool]
DEFAULT_EXPIRATION_SECONDS = 3600


def forbidden(attrs: Attributes, reason: str = "") -> errors.StatusError:
    """`responsewriters.Forbidden` + `apierrors.NewForbidden`, word for word."""
    who = f'User "{attrs.user.name}"'
    if not attrs.resource_request:
        message = f'{who} cannot {attrs.verb} path "{attrs.path}"'
    else:
        resource = f"{attrs.resource}/{attrs.subresource}" if attrs.subresource else attrs.resource
        where = f'in the namespace "{attrs.namespace}"' if attrs.namespace else "at the cluster scope"
        message = f'{who} cannot {attrs.verb} resource "{resource}" in API group "{attrs.api_group}" {where}'
    if reason:
        message += f": {reason}"
    if not attrs.resource_request:
        return errors.StatusError(403, "Forbidden", f"forbidden: {message}", {})
    qualified = f"{attrs.resource}.{attrs.api_group}" if attrs.api_group else attrs.resource
    details: dict[str, Any] = {"kind": attrs.resource}
    if attrs.name:
        details["name"] = attrs.name
    if attrs.api_group:
        details["group"] = attrs.api_group
    head = f'{qualified} "{attrs.name}" is forbidden' if attrs.name else f"{qualified} is forbidden"
    return errors.StatusError(403, "Forbidden", f"{head}: {message}", details)


def _decision(attrs: Attributes, allowed: bool) -> Decision:
    if not attrs.resource_request:
        return attrs.user.name, attrs.verb, "", attrs.path, "", allowed
    resource = f"{attrs.resource}/{attrs.subresource}" if attrs.subresource else attrs.resource
    return attrs.user.name, attrs.verb, attrs.api_group, resource, attrs.namespace, allowed


def _user_json(user: User) -> dict[str, Any]:
    out: dict[str, Any] = {"username": user.name, "groups": list(user.groups)}
    if user.uid:
        out["uid"] = user.uid
    if user.extra:
        out["extra"] = {k: list(v) for k, v in user.extra.items()}
    return out


class AuthLayer:
    def __init__(self, registry: Registry, objects: ObjectAPI, *, enforce: bool = False) -> None:
        self.objects = objects
        self.enforce = enforce
        policy.register(registry)
        self.registry = registry
        self.tokens = TokenAuthenticator(self._service_account_uid)
        self.rbac = RBACAuthorizer(policy.storage_source(objects.storage))
        self.decisions: Counter[Decision] = Counter()
        self.rejected = 0

    def bootstrap(self) -> None:
        for plural, namespace, obj in policy.bootstrap_objects():
            self.objects.create(self.registry.require(policy.RBAC_GROUP, "v1", plural), namespace, obj)

    def install(self, app: web.Application, rest: RestHandlers) -> None:
        app.middlewares.insert(0, self.middleware)
        for plural in (
            "tokenreviews",
            "subjectaccessreviews",
            "selfsubjectaccessreviews",
            "localsubjectaccessreviews",
        ):
            group = "authentication.k8s.io" if plural == "tokenreviews" else "authorization.k8s.io"
            rest.subresource_handlers[(f"{plural}.{group}", "")] = self._review
        sa = self.registry.require("", "v1", "serviceaccounts")
        sa.subresources = sa.subresources | {"token"}
        rest.subresource_handlers[("serviceaccounts", "token")] = self._token_request

    def _service_account_uid(self, namespace: str, name: str) -> str | None:
        entry = self.objects.storage.get("serviceaccounts", namespace, name)
        return None if entry is None else str(entry.load()["metadata"].get("uid", ""))

    def authorize(self, attrs: Attributes) -> tuple[bool, str]:
        return self.rbac.authorize(attrs)

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        header = request.headers.get("Authorization", "")
        scheme, _, token = header.strip().partition(" ")
        user: User | None = ANONYMOUS
        if scheme.lower() == "bearer" and token.strip():
            user, _ = self.tokens.authenticate(token.strip())
        if user is None:
            if self.enforce:
                self.rejected += 1
                return status_response(errors.StatusError(401, "Unauthorized", "Unauthorized"))
            user = ANONYMOUS
        if "Impersonate-User" in request.headers or "Impersonate-Group" in request.headers:
            try:
                user = self._impersonate(user, request)
            except errors.StatusError as exc:
                return status_response(exc)
        request[USER_KEY] = user
        if self.enforce:
            attrs = attributes(user, request.method, request.path, request.query)
            allowed, _ = self.authorize(attrs)
            self.decisions[_decision(attrs, allowed)] += 1
            if not allowed:
                return status_response(forbidden(attrs))
        return await handler(request)

    def _impersonate(self, user: User, request: web.Request) -> User:
        """The Impersonate-* headers (`filters.WithImpersonation`): each one asked must be granted
        (`impersonate` on users, groups or serviceaccounts) when enforcing."""
        name = request.headers.get("Impersonate-User", "")
        groups = request.headers.getall("Impersonate-Group", [])
        if not name:
            raise errors.bad_request("requested impersonation of groups without a user")
        asked: list[Attributes] = []
        sa_namespace = ""
        if name.startswith(SA_PREFIX) and name.count(":") == 3:
            sa_namespace, sa_name = name.removeprefix(SA_PREFIX).split(":")
            asked.append(
                Attributes(
                    user, "impersonate", namespace=sa_namespace, resource="serviceaccounts", name=sa_name
                )
            )
        else:
            asked.append(Attributes(user, "impersonate", resource="users", name=name))
        asked += [Attributes(user, "impersonate", resource="groups", name=g) for g in groups]
        if self.enforce:
            for attrs in asked:
                if not self.authorize(attrs)[0]:
                    raise forbidden(attrs)
        if sa_namespace and not groups:
            groups = ["system:serviceaccounts", f"system:serviceaccounts:{sa_namespace}"]
        if name == ANONYMOUS.name:
            groups = [*groups, *(g for g in ANONYMOUS.groups if g not in groups)]
        elif AUTHENTICATED not in groups:
            groups = [*groups, AUTHENTICATED]
        return User(name, tuple(groups))

    # -- the review APIs -------------------------------------------------------------------

    async def _review(self, request: web.Request, t: Target) -> web.StreamResponse:
        if request.method != "POST" or t.name is not None:
            raise errors.StatusError(
                405, "MethodNotAllowed", "the server does not allow this method on the requested resource"
            )
        body = await _body(request)
        if not isinstance(body, dict):
            raise errors.bad_request("the object provided is unrecognized")
        spec = body.get("spec") or {}
        kind = t.rt.kind
        if kind == "TokenReview":
            status = self._token_review(spec)
        else:
            if kind == "SelfSubjectAccessReview":
                user: User = request.get(USER_KEY, ANONYMOUS)
            else:
                user = User(
                    str(spec.get("user", "")),
                    tuple(spec.get("groups") or ()),
                    str(spec.get("uid", "")),
                    {k: tuple(v or ()) for k, v in (spec.get("extra") or {}).items()},
                )
                if not user.name and not user.groups:
                    raise errors.invalid(
                        t.rt.kind,
                        "",
                        [
                            FieldError.invalid(
                                "spec.user", "", "at least one of user or group must be specified"
                            )
                        ],
                    )
            status = self._access_review(user, spec, t)
        meta = dict(body.get("metadata") or {})
        meta.setdefault("creationTimestamp", None)
        if t.namespace:
            meta["namespace"] = t.namespace
        out = {"kind": kind, "apiVersion": t.rt.api_version, "metadata": meta, "spec": spec, "status": status}
        return web.Response(status=201, body=orjson.dumps(out), content_type=JSON)

    def _token_review(self, spec: dict[str, Any]) -> dict[str, Any]:
        user, audiences = self.tokens.authenticate(str(spec.get("token", "")), spec.get("audiences") or ())
        if user is None:
            return {"user": {}, "error": "[invalid bearer token, token lookup failed]"}
        return {"authenticated": True, "user": _user_json(user), "audiences": list(audiences)}

    def _access_review(self, user: User, spec: dict[str, Any], t: Target) -> dict[str, Any]:
        res, non = spec.get("resourceAttributes"), spec.get("nonResourceAttributes")
        if res is not None:
            namespace = str(res.get("namespace", ""))
            if t.rt.kind == "LocalSubjectAccessReview":
                if namespace and namespace != t.namespace:
                    raise errors.bad_request(
                        "spec.resourceAttributes.namespace must match the namespace of the request"
                    )
                namespace = t.namespace or ""
            attrs = Attributes(
                user,
                str(res.get("verb", "")),
                namespace=namespace,
                api_group=str(res.get("group", "")),
                api_version=str(res.get("version", "")),
                resource=str(res.get("resource", "")),
                subresource=str(res.get("subresource", "")),
                name=str(res.get("name", "")),
            )
        elif non is not None:
            attrs = Attributes(
                user, str(non.get("verb", "")), resource_request=False, path=str(non.get("path", ""))
            )
        else:
            raise errors.invalid(
                t.rt.kind,
                "",
                [
                    FieldError.required(
                        "spec.resourceAttributes",
                        "exactly one of nonResourceAttributes or resourceAttributes must be specified",
                    )
                ],
            )
        allowed, reason = self.authorize(attrs)
        status: dict[str, Any] = {"allowed": allowed}
        if reason:
            status["reason"] = reason
        return status

    async def _token_request(self, request: web.Request, t: Target) -> web.StreamResponse:
        if request.method != "POST":
            raise errors.StatusError(
                405, "MethodNotAllowed", "the server does not allow this method on the requested resource"
            )
        body = await _body(request)
        spec = dict((body or {}).get("spec") or {})
        seconds = spec.get("expirationSeconds")
        seconds = DEFAULT_EXPIRATION_SECONDS if seconds is None else int(seconds)
        if seconds < MIN_EXPIRATION_SECONDS:
            raise errors.invalid(
                "TokenRequest",
                t.name or "",
                [
                    FieldError.invalid(
                        "spec.expirationSeconds", seconds, "may not specify a duration less than 10 minutes"
                    )
                ],
            )
        account = self.objects.get_entry(t.rt, t.namespace, t.name or "").load()
        audiences = spec.get("audiences") or list(DEFAULT_AUDIENCES)
        token, expires = self.tokens.issue(
            t.namespace or "",
            t.name or "",
            str(account["metadata"]["uid"]),
            expiration_seconds=seconds,
            audiences=audiences,
        )
        spec.update(
            {
                "audiences": audiences,
                "expirationSeconds": seconds,
                "boundObjectRef": spec.get("boundObjectRef"),
            }
        )
        stamp = format_time(dt.datetime.fromtimestamp(expires, dt.UTC))
        out = {
            "kind": "TokenRequest",
            "apiVersion": "authentication.k8s.io/v1",
            "metadata": {"name": t.name, "namespace": t.namespace, "creationTimestamp": None},
            "spec": spec,
            "status": {"token": token, "expirationTimestamp": stamp},
        }
        return web.Response(status=201, body=orjson.dumps(out), content_type=JSON)
