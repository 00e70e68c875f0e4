"""Bearer-token authentication for the local cluster: off unless a test turns it on.

With it on, every API request must carry `Authorization: Bearer <token>` with a token that is
allowed and not expired, or it gets the API server's 401 `Status` (reason `Unauthorized`), as
kube-apiserver answers a token it cannot authenticate. Tokens are allowed one by one (with an
optional expiry, wall-clock seconds as an ExecCredential's `expirationTimestamp`) or by a check
(a test's token issuer). Health endpoints stay open, as kube-apiserver's are to anyone.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

import orjson
from aiohttp import web

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
_OPEN_PATHS = ("/healthz", "/livez", "/readyz")

UNAUTHORIZED = orjson.dumps({
    "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
    "message": "Unauthorized", "reason": "Unauthorized", "code": 401,
})


class BearerTokens:
    def __init__(self) -> None:
        self.enabled = False
        self._tokens: dict[str, float | None] = {}
        self._checks: list[Callable[[str], bool]] = []
        self.rejected = 0

    def allow(self, token: str, *, expires_at: float | None = None) -> None:
        self._tokens[token] = expires_at

    def allow_if(self, check: Callable[[str], bool]) -> None:
        """Accept any token for which `check` is true (it decides expiry itself)."""
        self._checks.append(check)

    def authenticate(self, header: str | None) -> bool:
        scheme, _, token = (header or "").partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            return False
        if token in self._tokens:
            expires = self._tokens[token]
            return expires is None or time.time() < expires
        return any(check(token) for check in self._checks)

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        if not self.enabled or request.path.startswith(_OPEN_PATHS):
            return await handler(request)
        if not self.authenticate(request.headers.get("Authorization")):
            self.rejected += 1
            return web.Response(status=401, body=UNAUTHORIZED, content_type="application/json")
        return await handler(request)
