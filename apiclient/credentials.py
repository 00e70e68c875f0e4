"""Where a request's `Authorization` header comes from, and what a 401 does to it.

client-go keeps credentials fresh rather than loading them once: a `tokenFile` (and the
in-cluster service-account token, which the kubelet rotates) is re-read when the cached copy is
older than a minute less ten seconds of leeway (`transport.NewCachedFileTokenSource`), and a 401
drops every token read before the failed request started (`ResetTokenOlderThan`); an exec plugin
runs again at `status.expirationTimestamp` and after a 401 (see `apiclient.execplugin`).

A `Credentials` object is installed as the kubernetes_asyncio `Configuration`'s
`refresh_api_key_hook`, so every request made through that configuration carries a current
token; `KubeClient` also asks it directly, to know which header a request used and to send a
request once more when a 401 has rotated the credentials (client-go only rotates, the failed
request's caller sees the 401; a controller manager would drop a sync or a lease renewal).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import aiohttp
import anyio
import structlog

log = structlog.get_logger()

TOKEN_FILE_PERIOD = 60.0  # fileTokenSource.period
TOKEN_FILE_LEEWAY = 10.0  # NewCachedFileTokenSource's leeway


class CredentialError(aiohttp.ClientError):
    """No credentials could be had for a request (an exec plugin failed, a token file vanished).

    A client error, like a refused connection: the request was never sent, the caller retries.
    """


class Credentials:
    """A source of `Authorization` header values; also the `refresh_api_key_hook` of a Configuration."""

    async def authorization(self) -> str | None:
        """The header value for the next request (refreshing first when due), None for none."""
        raise NotImplementedError

    async def unauthorized(self, used: str | None) -> bool:
        """The server answered 401 to a request sent with `used`; True when fresher credentials
        are now available, so sending the request again may succeed."""
        return False

    async def __call__(self, configuration: Any) -> None:
        value = await self.authorization()
        configuration.api_key_prefix.pop("BearerToken", None)
        if value is None:
            configuration.api_key.pop("BearerToken", None)
        else:
            configuration.api_key["BearerToken"] = value

    def __repr__(self) -> str:  # never the secret, whatever prints it
        return f"<{type(self).__name__}>"


class StaticCredentials(Credentials):
    """A fixed header value: a kubeconfig `token`, or basic auth."""

    def __init__(self, value: str) -> None:
        self._value = value

    async def authorization(self) -> str | None:
        return self._value


class TokenFileCredentials(Credentials):
    """client-go's cachingTokenSource over a fileTokenSource: re-read about every minute and after a 401."""

    def __init__(
        self, path: str, *, initial: str | None = None, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.path = path
        self._clock = clock
        self._lock = anyio.Lock()
        self._token: str | None = initial
        # A token given inline (`token` beside `tokenFile`) counts as fresh; a file read stamps its own time.
        self._read_at = clock() if initial else float("-inf")
        self._expires = self._read_at + TOKEN_FILE_PERIOD if initial else float("-inf")

    def read_now(self) -> None:
        """Read the file once, synchronously, at start-up: a missing file is then a bad configuration."""
        self._token = self._read_file()
        self._read_at = self._clock()
        self._expires = self._read_at + TOKEN_FILE_PERIOD

    def _read_file(self) -> str:
        try:
            with open(self.path, "rb") as f:
                token = f.read().decode("utf-8", "replace").strip()
        except OSError as exc:
            raise CredentialError(f"failed to read token file {self.path!r}: {exc.strerror or exc}") from None
        if not token:
            raise CredentialError(f"read empty token from file {self.path!r}")
        return token

    def _fresh(self, now: float) -> bool:
        return self._token is not None and self._expires - TOKEN_FILE_LEEWAY > now

    async def authorization(self) -> str | None:
        now = self._clock()
        if not self._fresh(now):
            async with self._lock:
                if not self._fresh(self._clock()):
                    try:
                        token = self._read_file()  # a few hundred bytes from a local or tmpfs file
                    except CredentialError as exc:
                        if self._token is None:
                            raise
                        log.error("unable to rotate token", error=str(exc))
                    else:
                        self._token = token
                        self._read_at = self._clock()
                        self._expires = self._read_at + TOKEN_FILE_PERIOD
        return f"Bearer {self._token}"

    async def unauthorized(self, used: str | None) -> bool:
        # As ResetTokenOlderThan: a token read since `used` was sent stands; the one that failed is
        # read again from the file at once (the kubelet may have rotated it a moment ago).
        if self._token is not None and f"Bearer {self._token}" != used:
            return True
        self._expires = float("-inf")
        return await self.authorization() != used
