"""Delegated authentication and authorization of the secure port, as k8s.io/apiserver's.

Who is asking: a client certificate verified against the cluster's client CA (user = CN,
groups = O), else a bearer token the API server vouches for through a TokenReview, else the
anonymous user (`system:anonymous`, group `system:unauthenticated`). A bearer token the API
server rejects, or cannot review, is a 401; no credential at all is anonymous, as KCM
(`DelegatingAuthenticatorConfig{Anonymous: true}` behind `unionauth.NewFailOnError`).

May they: `--authorization-always-allow-paths` first (exact paths, or prefixes written with a
trailing `*`, for any user, no API call, so probes need no credential). Any other path asked
without a credential is a 401 `Unauthorized`: here aiokcm parts from KCM, which would review
`system:anonymous` and answer 403. A scrape that forgot its token is told to authenticate, not
that it is forbidden, as controller-runtime's metrics filter and kube-rbac-proxy answer (both
disable the anonymous authenticator), and no access review is spent on a caller who named no
one. A caller who is authenticated is reviewed with a SubjectAccessReview on the non-resource
URL (verb from the HTTP method, the path): denied is a 403 naming the user, as KCM's
`forbidden: User "system:serviceaccount:ns:name" cannot get path "/metrics"`; a review that
fails is a 500.

Both answers are cached as KCM's defaults: token reviews 10 s (`--authentication-token-webhook-
cache-ttl`, successes and failures alike), access reviews 10 s allowed and 10 s denied
(`--authorization-webhook-cache-{authorized,unauthorized}-ttl`). Tokens are cached under a keyed
hash, so the cache holds no token. Reviews that fail with a connection error, 429 or 5xx are
retried with the webhook backoff (500 ms, x1.5, 5 tries), as `DefaultAuthWebhookRetryBackoff`.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import aiohttp
import anyio
import orjson
import structlog

from apiclient import KubeClient
from apiclient.errors import ApiError
from apiclient.resources import SUBJECTACCESSREVIEWS, TOKENREVIEWS

log = structlog.get_logger()

ANONYMOUS = "system:anonymous"
UNAUTHENTICATED = "system:unauthenticated"
AUTHENTICATED = "system:authenticated"
DEFAULT_ALWAYS_ALLOW_PATHS = ("/healthz", "/readyz", "/livez")
_CACHE_ENTRIES = 4096
_RETRY_DELAYS = (0.5, 0.75, 1.125, 1.6875)  # between the 5 tries of DefaultAuthWebhookRetryBackoff

T = TypeVar("T")


@dataclass(frozen=True)
class UserInfo:
    name: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


ANONYMOUS_USER = UserInfo(ANONYMOUS, groups=(UNAUTHENTICATED,))


class AuthenticationError(Exception):
    """The credential presented cannot be accepted: answered with 401."""


class AuthorizationError(Exception):
    """The access review could not be made: answered with 500."""


class _TTLCache:
    """A bounded map whose entries expire; the oldest entry goes first when full."""

    def __init__(
        self, max_entries: int = _CACHE_ENTRIES, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._entries: dict[Any, tuple[float, Any]] = {}
        self._max = max_entries
        self._clock = clock

    def get(self, key: Any) -> Any | None:
        hit = self._entries.get(key)
        if hit is None:
            return None
        if hit[0] <= self._clock():
            del self._entries[key]
            return None
        return hit[1]

    def put(self, key: Any, value: Any, ttl: float) -> None:
        if ttl <= 0:
            return
        self._entries.pop(key, None)
        while len(self._entries) >= self._max:
            del self._entries[next(iter(self._entries))]
        self._entries[key] = (self._clock() + ttl, value)


def _retriable(exc: BaseException) -> bool:
    if isinstance(exc, ApiError):
        return exc.status == 429 or exc.status >= 500
    return isinstance(exc, aiohttp.ClientError | TimeoutError | OSError)


async def _with_retries(call: Callable[[], Awaitable[T]]) -> T:
    for delay in _RETRY_DELAYS:
        try:
            return await call()
        except Exception as exc:
            if not _retriable(exc):
                raise
            await anyio.sleep(delay)
    return await call()


class TokenReviewAuthenticator:
    """Bearer tokens, reviewed by the API server (`authentication.k8s.io/v1` TokenReview)."""

    def __init__(self, client: KubeClient, *, cache_ttl: float = 10.0, audiences: Sequence[str] = ()) -> None:
        self.client = client
        self.cache_ttl = cache_ttl
        self.audiences = list(audiences)
        self._cache = _TTLCache()
        self._key = secrets.token_bytes(32)

    async def authenticate(self, token: str) -> UserInfo | None:
        """The token's user, or None when the API server says it is not valid."""
        digest = hmac.new(self._key, token.encode(), hashlib.sha256).digest()
        cached = self._cache.get(digest)
        if cached is not None:
            return cached[0]  # type: ignore[no-any-return]
        spec: dict[str, Any] = {"token": token}
        if self.audiences:
            spec["audiences"] = self.audiences
        body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": spec}
        try:
            review = await _with_retries(lambda: self.client.create(TOKENREVIEWS, body))
        except Exception as exc:
            log.warning("token review failed", error=str(exc))
            raise AuthenticationError("token review failed") from None
        status = review.get("status") or {}
        user: UserInfo | None = None
        if status.get("authenticated"):
            raw = status.get("user") or {}
            extra = {k: tuple(v or ()) for k, v in (raw.get("extra") or {}).items()}
            user = UserInfo(
                str(raw.get("username", "")), str(raw.get("uid", "")), tuple(raw.get("groups") or ()), extra
            )
        self._cache.put(digest, (user,), self.cache_ttl)
        return user


def x509_user(peercert: Mapping[str, Any] | None) -> UserInfo | None:
    """The user a verified client certificate names: CN the user, each O a group (x509.CommonNameUserConversion)."""
    if not peercert:
        return None
    name, groups = "", []
    for rdn in peercert.get("subject", ()):
        for attr, value in rdn:
            if attr == "commonName":
                name = value
            elif attr == "organizationName":
                groups.append(value)
    return UserInfo(name, groups=tuple(groups)) if name else None


class PathAuthorizer:
    """`--authorization-always-allow-paths`: exact paths, or prefixes given with a trailing `*`."""

    def __init__(self, paths: Sequence[str]) -> None:
        self.exact: set[str] = set()
        self.prefixes: list[str] = []
        for path in paths:
            trimmed = path.strip().removeprefix("/")
            if "*" in trimmed[:-1]:
                raise ValueError(f"only a trailing * is allowed in {path!r}")
            if trimmed.endswith("*"):
                self.prefixes.append(trimmed[:-1])
            else:
                self.exact.add(trimmed)

    def allows(self, path: str) -> bool:
        trimmed = path.removeprefix("/")
        return trimmed in self.exact or any(trimmed.startswith(p) for p in self.prefixes)


class SubjectAccessReviewAuthorizer:
    """Non-resource requests, reviewed by the API server (`authorization.k8s.io/v1` SubjectAccessReview)."""

    def __init__(self, client: KubeClient, *, allow_ttl: float = 10.0, deny_ttl: float = 10.0) -> None:
        self.client = client
        self.allow_ttl = allow_ttl
        self.deny_ttl = deny_ttl
        self._cache = _TTLCache()

    async def authorize(self, user: UserInfo, verb: str, path: str) -> tuple[bool, str]:
        """(allowed, reason) for `user` doing `verb` on the non-resource URL `path`."""
        spec: dict[str, Any] = {
            "user": user.name,
            "groups": list(user.groups),
            "nonResourceAttributes": {"path": path, "verb": verb},
        }
        if user.uid:
            spec["uid"] = user.uid
        if user.extra:
            spec["extra"] = {k: list(v) for k, v in user.extra.items()}
        key = orjson.dumps(spec, option=orjson.OPT_SORT_KEYS)
        cached = self._cache.get(key)
        if cached is not None:
            return cached  # type: ignore[no-any-return]
        body = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec}
        try:
            review = await _with_retries(lambda: self.client.create(SUBJECTACCESSREVIEWS, body))
        except Exception as exc:
            log.warning("subject access review failed", error=str(exc))
            raise AuthorizationError(str(exc)) from None
        status = review.get("status") or {}
        decision = (bool(status.get("allowed")) and not status.get("denied"), str(status.get("reason") or ""))
        self._cache.put(key, decision, self.allow_ttl if decision[0] else self.deny_ttl)
        return decision


def method_verb(method: str) -> str:
    """The verb of a non-resource request: the HTTP method, lower-cased (k8s.io/apiserver's
    RequestInfoFactory maps methods to create/update/... for resource requests only)."""
    return method.lower()


def bearer_token(authorization: str | None) -> str | None:
    """The token of an `Authorization: Bearer <token>` header; None when there is none."""
    if not authorization:
        return None
    scheme, _, token = authorization.strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        return None
    return token


@dataclass
class Delegation:
    """Who may use the secure port. Without an authenticator only client certificates and the
    anonymous user are known; without an authorizer only the always-allowed paths are served
    (what KCM does when it has no `--authentication-kubeconfig` and is not in a cluster: a bearer
    token is then ignored, its request anonymous, so any other path is a 401)."""

    always_allow: PathAuthorizer = field(default_factory=lambda: PathAuthorizer(DEFAULT_ALWAYS_ALLOW_PATHS))
    authenticator: TokenReviewAuthenticator | None = None
    authorizer: SubjectAccessReviewAuthorizer | None = None

    async def authenticate(self, authorization: str | None, peercert: Mapping[str, Any] | None) -> UserInfo:
        """The requesting user; raises `AuthenticationError` for a credential that is not valid."""
        user = x509_user(peercert)
        if user is None:
            token = bearer_token(authorization)
            if token is None or self.authenticator is None:  # no token authenticator: tokens mean nothing
                return ANONYMOUS_USER
            user = await self.authenticator.authenticate(token)
            if user is None:
                raise AuthenticationError("invalid bearer token")
        if AUTHENTICATED not in user.groups:
            user = UserInfo(user.name, user.uid, (*user.groups, AUTHENTICATED), user.extra)
        return user

    def needs_credential(self, user: UserInfo, path: str) -> bool:
        """True when an anonymous caller asks for a path that is not always allowed: a 401."""
        return user.name == ANONYMOUS and not self.always_allow.allows(path)

    async def authorize(self, user: UserInfo, verb: str, path: str) -> tuple[bool, str]:
        if self.always_allow.allows(path):
            return True, ""
        if self.authorizer is None:
            return False, ""
        return await self.authorizer.authorize(user, verb, path)
