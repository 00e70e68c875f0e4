"""Posting an AdmissionReview to a webhook: HTTPS verified against its caBundle, within its timeout.

What goes wrong is reported in the words of Go's HTTP client (`Post "<url>?timeout=10s": context
deadline exceeded`, `dial tcp 127.0.0.1:1: connect: connection refused`, `x509: certificate
signed by unknown authority`), since that text reaches the client inside kube-apiserver's
`failed calling webhook` error.

A `clientConfig.service` is resolved the way this cluster can: the Service in the local cluster
whose port is the one named, reached on the loopback at that port's targetPort (no pod network
here), with the certificate verified for `<name>.<namespace>.svc` as kube-apiserver verifies it.
"""

from __future__ import annotations

import ssl
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import aiohttp
import orjson

from localcluster.admission.matching import Webhook
from localcluster.registry import Obj

USER_AGENT = "kube-apiserver-admission"
#: (namespace, name, port) -> (host, port) to connect to, or raise `CallError` saying why not.
ServiceResolver = Callable[[str, str, int], tuple[str, int]]


class CallError(Exception):
    """The call failed before a usable answer (the `Reason` of `ErrCallingWebhook`)."""


@dataclass(frozen=True, slots=True)
class Endpoint:
    url: str  # as errors show it (the service's DNS name for a service)
    connect: str  # where the request goes
    server_hostname: str | None
    host_header: str | None


def _generic_response_error(code: int, body: bytes) -> str:
    """`errors.NewGenericServerResponse`'s wording for a non-2xx answer that is not a Status."""
    known = {
        400: "the server rejected our request for an unknown reason",
        401: "Unauthorized",
        403: "forbidden",
        404: "the server could not find the requested resource",
        405: "the server does not allow this method on the requested resource",
        409: "the server reported a conflict",
        429: "the server has received too many requests and has asked us to try again later",
    }
    if code in known:
        return known[code]
    text = body.decode("utf-8", "replace").strip()
    if text:
        return f'an error on the server ("{text[:1024]}") has prevented the request from succeeding'
    return f"the server responded with the status code {code} but did not return more information"


def _certificate_problem(exc: aiohttp.ClientConnectorCertificateError, host: str) -> str:
    cert_error = exc.certificate_error
    code = getattr(cert_error, "verify_code", None)
    if code in (18, 19, 20, 21):  # self-signed, self-signed in chain, unknown issuer, unable to verify leaf
        return "x509: certificate signed by unknown authority"
    if code == 62:  # hostname mismatch
        return f"x509: certificate is not valid for {host}"
    if code in (9, 10):
        return "x509: certificate has expired or is not yet valid"
    return f"x509: {getattr(cert_error, 'verify_message', None) or cert_error}"


class Caller:
    """One HTTP client for every webhook; TLS contexts cached per caBundle."""

    def __init__(self, resolve_service: ServiceResolver) -> None:
        self.resolve_service = resolve_service
        self._session: aiohttp.ClientSession | None = None
        self._contexts: dict[bytes, ssl.SSLContext] = {}

    def _context(self, ca_bundle: bytes) -> ssl.SSLContext:
        context = self._contexts.get(ca_bundle)
        if context is None:
            if ca_bundle:
                context = ssl.create_default_context(cadata=ca_bundle.decode("ascii", "replace"))
            else:
                context = ssl.create_default_context()
            self._contexts[ca_bundle] = context
        return context

    def endpoint(self, hook: Webhook, timeout: int) -> Endpoint:
        query = f"?timeout={timeout}s"
        if hook.url is not None:
            url = hook.url + query
            return Endpoint(url, url, None, None)
        service = hook.service or {}
        namespace, name = str(service.get("namespace", "")), str(service.get("name", ""))
        port = int(service.get("port") or 443)
        path = str(service.get("path") or "")
        dns = f"{name}.{namespace}.svc"
        url = f"https://{dns}:{port}{path}{query}"
        try:
            host, target = self.resolve_service(namespace, name, port)
        except CallError as exc:
            raise CallError(f'Post "{url}": {exc}') from None
        return Endpoint(url, f"https://{host}:{target}{path}{query}", dns, f"{dns}:{port}")

    async def post(self, hook: Webhook, review: Obj) -> Any:
        """The decoded answer, or `CallError` with Go's description of what failed."""
        timeout = hook.timeout
        endpoint = self.endpoint(hook, timeout)
        try:
            context = self._context(hook.ca_bundle)
        except (ssl.SSLError, ValueError) as exc:
            raise CallError(f"could not get REST client: unable to load root certificates: {exc}") from None
        if self._session is None:
            self._session = aiohttp.ClientSession(
                headers={"User-Agent": USER_AGENT, "Accept": "application/json, */*"}
            )
        headers = {"Content-Type": "application/json"}
        if endpoint.host_header:
            headers["Host"] = endpoint.host_header
        target_host = endpoint.connect.split("://", 1)[-1].split("/", 1)[0]
        try:
            async with self._session.post(
                endpoint.connect,
                data=orjson.dumps(review),
                headers=headers,
                ssl=context,
                server_hostname=endpoint.server_hostname,
                timeout=aiohttp.ClientTimeout(total=timeout),
            ) as response:
                body = await response.read()
                status = response.status
        except TimeoutError:
            raise CallError(f'Post "{endpoint.url}": context deadline exceeded') from None
        except aiohttp.ClientConnectorCertificateError as exc:
            raise CallError(
                f'Post "{endpoint.url}": {_certificate_problem(exc, endpoint.server_hostname or exc.host)}'
            ) from None
        except aiohttp.ClientConnectorError as exc:
            if isinstance(exc.os_error, ConnectionRefusedError):
                raise CallError(
                    f'Post "{endpoint.url}": dial tcp {target_host}: connect: connection refused'
                ) from None
            raise CallError(
                f'Post "{endpoint.url}": dial tcp {target_host}: {exc.os_error.strerror or exc}'
            ) from None
        except aiohttp.ClientError as exc:
            raise CallError(f'Post "{endpoint.url}": {exc}') from None
        if not 200 <= status < 300:
            raise CallError(_generic_response_error(status, body))
        try:
            return orjson.loads(body)
        except orjson.JSONDecodeError as exc:
            raise CallError(f"couldn't get version/kind; json parse error: {exc}") from None

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
