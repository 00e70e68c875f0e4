"""Bearer tokens of the local cluster: static users, tokens a webhook vouches for, and service-account tokens it issues.

Static tokens map to a user and groups, as kube-apiserver's `--token-auth-file`; the kubeconfig
the cluster writes carries the `admin` token (group `system:masters`). A static token can be
revoked, as an operator edits the token file. Webhooks stand for kube-apiserver's
`--authentication-token-webhook-config-file`: a test's own token issuer (a credential plugin's
short-lived tokens) decides, token by token, who it is, and refuses it once it expires. Service-account tokens
come from the TokenRequest API (`serviceaccounts/<name>/token`), as JWTs with the claims the real
issuer writes (`sub`, `aud`, `exp`, `kubernetes.io.serviceaccount`), signed HS256 with a key
that lives as long as the cluster. A token is valid until it expires and while its
ServiceAccount exists with the same uid: deleting the account revokes its tokens, as bound
tokens are. Its user is `system:serviceaccount:<ns>:<name>` in the groups
`system:serviceaccounts` and `system:serviceaccounts:<ns>`.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import orjson

from localcluster.auth.rbac import SA_PREFIX, User

AUTHENTICATED = "system:authenticated"
ANONYMOUS = User("system:anonymous", ("system:unauthenticated",))
ISSUER = "https://kubernetes.default.svc"
DEFAULT_AUDIENCES = (ISSUER,)
ADMIN_TOKEN = "localcluster"
ADMIN = User("admin", ("system:masters",))

ServiceAccountUID = Callable[[str, str], str | None]
TokenWebhook = Callable[[str], User | None]


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class TokenAuthenticator:
    """Token -> user; `service_account_uid(ns, name)` says whether an account still exists."""

    def __init__(
        self, service_account_uid: ServiceAccountUID, *, clock: Callable[[], float] = time.time
    ) -> None:
        self.static: dict[str, User] = {ADMIN_TOKEN: ADMIN}
        self.webhooks: list[TokenWebhook] = []
        self._service_account_uid = service_account_uid
        self._key = secrets.token_bytes(32)
        self._clock = clock

    def add_static(self, token: str, name: str, groups: Sequence[str] = ()) -> None:
        self.static[token] = User(name, tuple(groups))

    def revoke(self, token: str) -> None:
        self.static.pop(token, None)

    def add_webhook(self, review: TokenWebhook) -> None:
        """Ask `review` about tokens no static entry knows; it answers the user, or None to refuse."""
        self.webhooks.append(review)

    def issue(
        self,
        namespace: str,
        name: str,
        uid: str,
        *,
        expiration_seconds: int,
        audiences: Sequence[str] = DEFAULT_AUDIENCES,
    ) -> tuple[str, int]:
        """A signed service-account token and its expiry (unix seconds)."""
        now = int(self._clock())
        claims = {
            "aud": list(audiences),
            "exp": now + expiration_seconds,
            "iat": now,
            "nbf": now,
            "iss": ISSUER,
            "sub": f"{SA_PREFIX}{namespace}:{name}",
            "kubernetes.io": {"namespace": namespace, "serviceaccount": {"name": name, "uid": uid}},
        }
        signing_input = _b64(orjson.dumps({"alg": "HS256", "typ": "JWT"})) + "." + _b64(orjson.dumps(claims))
        signature = hmac.new(self._key, signing_input.encode(), hashlib.sha256).digest()
        return f"{signing_input}.{_b64(signature)}", claims["exp"]  # type: ignore[return-value]

    def authenticate(self, token: str, audiences: Sequence[str] = ()) -> tuple[User | None, tuple[str, ...]]:
        """(user with `system:authenticated` added, audiences) or (None, ()) for a token not valid."""
        user = self.static.get(token)
        if user is not None:
            return _authenticated(user), tuple(audiences) or DEFAULT_AUDIENCES
        for review in self.webhooks:
            user = review(token)
            if user is not None:
                return _authenticated(user), tuple(audiences) or DEFAULT_AUDIENCES
        claims = self._verified_claims(token)
        if claims is None:
            return None, ()
        wanted = tuple(audiences) or DEFAULT_AUDIENCES
        matched = tuple(a for a in wanted if a in (claims.get("aud") or ()))
        if not matched:
            return None, ()
        ref = claims.get("kubernetes.io") or {}
        namespace, account = str(ref.get("namespace", "")), ref.get("serviceaccount") or {}
        if self._service_account_uid(namespace, str(account.get("name", ""))) != account.get("uid"):
            return None, ()
        sa = User(
            str(claims["sub"]),
            ("system:serviceaccounts", f"system:serviceaccounts:{namespace}"),
            uid=str(account.get("uid", "")),
        )
        return _authenticated(sa), matched

    def _verified_claims(self, token: str) -> Mapping[str, Any] | None:
        parts = token.split(".")
        if len(parts) != 3:
            return None
        expected = hmac.new(self._key, f"{parts[0]}.{parts[1]}".encode(), hashlib.sha256).digest()
        try:
            if not hmac.compare_digest(expected, _unb64(parts[2])):
                return None
            claims = orjson.loads(_unb64(parts[1]))
        except (ValueError, orjson.JSONDecodeError):
            return None
        if not isinstance(claims, dict) or float(claims.get("exp", 0)) <= self._clock():
            return None
        return claims


def _authenticated(user: User) -> User:
    if AUTHENTICATED in user.groups:
        return user
    return User(user.name, (*user.groups, AUTHENTICATED), user.uid, user.extra)
