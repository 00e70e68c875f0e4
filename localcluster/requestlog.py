"""The API server's request log (`cluster.requests`): who wrote what, as an audit log would say.

A quiet cluster must get no writes, a chaos run must create no pod beyond the minimum, and two
controller managers must never write at once. All three are questions about the writes the
server received, whoever sent them, so the server answers them: every create, update, patch and
delete of the API is recorded with the client's User-Agent, a fingerprint of its credential
(never the credential itself) and the answer's status code. Reads and watches are only counted.
The cluster's own actors (scheduler, kubelets, garbage collector) write in process and are not
clients, so they never appear here.
"""

from __future__ import annotations

import hashlib
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass

from aiohttp import web

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
_API_PREFIXES = ("/api/", "/apis/")


@dataclass(frozen=True)
class Write:
    at: float  #: `time.monotonic()` when the request arrived
    method: str
    path: str
    user_agent: str
    credential: str  #: a short digest of the bearer token, enough to tell clients apart
    status: int  #: 0 when the connection was cut before an answer
    content_type: str = ""  #: of the body: Go clients send built-in kinds as protobuf

    @property
    def succeeded(self) -> bool:
        return 200 <= self.status <= 299

    @property
    def resource(self) -> str:
        """The resource (and subresource) written: `pods`, `deployments/status`, `pods/eviction`."""
        parts = self.path.strip("/").split("/")
        if "namespaces" in parts[:-1]:
            i = parts.index("namespaces")
            if i + 2 < len(parts):
                parts = parts[i + 2 :]
            else:
                return "namespaces"
        else:
            parts = parts[2:] if parts[0] == "api" else parts[3:]
        if not parts:
            return ""
        return "/".join([parts[0], *parts[2:3]])


def fingerprint(authorization: str) -> str:
    token = authorization.removeprefix("Bearer ").strip()
    return hashlib.sha256(token.encode()).hexdigest()[:12] if token else ""


class RequestLog:
    def __init__(self) -> None:
        self.writes: list[Write] = []
        self.reads = 0
        #: reads (GET, LIST, WATCH) per User-Agent, so a benchmark can count one actor's requests
        self.reads_by_agent: Counter[str] = Counter()

    def since(self, start: float) -> list[Write]:
        return [w for w in self.writes if w.at >= start]

    @staticmethod
    def created(writes: Iterable[Write], resource: str) -> int:
        """Objects of `resource` the server really created among `writes`."""
        return sum(1 for w in writes if w.method == "POST" and w.succeeded and w.resource == resource)

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        if not request.path.startswith(_API_PREFIXES) or request.method not in WRITE_METHODS:
            if request.path.startswith(_API_PREFIXES):
                self.reads += 1
                self.reads_by_agent[request.headers.get("User-Agent", "")] += 1
            return await handler(request)
        at = time.monotonic()
        status = 0
        try:
            response = await handler(request)
            status = response.status
            return response
        except web.HTTPException as exc:
            status = exc.status
            raise
        finally:
            self.writes.append(
                Write(
                    at,
                    request.method,
                    request.path,
                    request.headers.get("User-Agent", ""),
                    fingerprint(request.headers.get("Authorization", "")),
                    status,
                    request.headers.get("Content-Type", "").split(";", 1)[0].strip(),
                )
            )
