"""The Prometheus gate's client: one instant query, judged by Argo Rollouts' rules.

`measure` never raises for anything the network or Prometheus does: a refused connection, a
timeout, an HTTP error, a query Prometheus refuses (its `error` is quoted), a body that is not the
API's JSON. Each becomes an Error measurement whose message says which, because an Error is
something Argo's rules count (consecutiveErrorLimit) and a person reads in the status, not a crash
of the maintenance sync.

`result` is what Argo's Prometheus provider hands to the conditions: a vector's sample values as a
list of floats in the order Prometheus returned them (an empty vector is `[]`, so
`len(result) == 0` can be asked), a scalar's value as a float. A string, and a matrix (a range
selector such as `x[5m]` in an instant query), are errors: a gate's condition is written against
numbers taken now.

Addresses may carry basic-auth credentials (`http://user:pass@host:9090`); aiohttp sends them, and
every message carries the address through `redact`, and the password is masked wherever an error
text repeats it.
"""

from __future__ import annotations

import re

import aiohttp
import orjson
from yarl import URL

from maintenancerollout.analysis import Measurement, Result, judge, render

DEFAULT_TIMEOUT_SECONDS = 10.0
#: A response larger than this is refused: a gate's query should return a handful of series.
MAX_RESPONSE_BYTES = 16 * 1024 * 1024
_QUOTE_LIMIT = 300

_USERINFO = re.compile(r"^((?:[A-Za-z][A-Za-z0-9+.-]*:)?//)?[^/?#]*@")


class _QueryError(Exception):
    """Why a query produced no value; only ever turned into an Error measurement."""


def redact(address: str) -> str:
    """The address without its user and password: `http://user:pass@host:9090` is `http://host:9090`."""
    return _USERINFO.sub(lambda m: m.group(1) or "", address, count=1)


async def measure(
    address: str,
    query: str,
    *,
    success: str | None,
    failure: str | None,
    timeout: float = DEFAULT_TIMEOUT_SECONDS,
) -> Measurement:
    """One instant query at `address` and its measurement under the conditions."""
    try:
        value = await _instant_query(address, query, timeout=timeout)
    except _QueryError as exc:
        return Measurement(Result.ERROR, "", scrub(str(exc), address))
    m = judge(value, success=success, failure=failure)
    return Measurement(m.result, m.value or render(value), scrub(m.message, address))


async def _instant_query(
    address: str, query: str, *, timeout: float = DEFAULT_TIMEOUT_SECONDS
) -> float | list[float]:
    """GET /api/v1/query: the vector's values or the scalar's, or _QueryError saying why not."""
    where = redact(address)
    try:
        url = URL(address.rstrip("/") + "/api/v1/query")
    except (ValueError, TypeError) as exc:
        raise _QueryError(f"invalid Prometheus address {where}: {exc}") from None
    if url.scheme not in ("http", "https") or not url.host:
        raise _QueryError(f"invalid Prometheus address {where}: an http:// or https:// URL is needed")
    try:
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout)) as session,
            session.get(url, params={"query": query}, headers={"Accept": "application/json"}) as resp,
        ):
            body = await read_body(resp)
            status, reason = resp.status, resp.reason or ""
    except TimeoutError:
        raise _QueryError(f"Prometheus at {where} did not answer within {timeout:g}s") from None
    except aiohttp.ClientError as exc:
        raise _QueryError(f"Prometheus at {where} unreachable: {_describe(exc)}") from None
    if body is None:
        raise _QueryError(f"Prometheus's answer is larger than {MAX_RESPONSE_BYTES} bytes")
    return _value(body, status=status, reason=reason, where=where)


async def read_body(resp: aiohttp.ClientResponse, *, limit: int = MAX_RESPONSE_BYTES) -> bytes | None:
    """The response's body, or None when it is larger than `limit` (read no further than that)."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in resp.content.iter_chunked(64 * 1024):
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


def _value(body: bytes, *, status: int, reason: str, where: str) -> float | list[float]:
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError:
        doc = None
    if not isinstance(doc, dict):
        if status >= 400:
            raise _QueryError(f"Prometheus at {where} answered HTTP {status} {reason}: {_quote(body)}")
        raise _QueryError(
            f"Prometheus at {where} answered something that is not its API's JSON: {_quote(body)}"
        )
    if doc.get("status") != "success":
        kind = doc.get("errorType") or "error"
        text = doc.get("error") or "no message"
        raise _QueryError(
            f"Prometheus at {where} refused the query (HTTP {status}, {kind}): {str(text)[:_QUOTE_LIMIT]}"
        )
    if status >= 400:
        raise _QueryError(f"Prometheus at {where} answered HTTP {status} {reason}")
    data = doc.get("data")
    kind = data.get("resultType") if isinstance(data, dict) else None
    result = data.get("result") if isinstance(data, dict) else None
    try:
        if kind == "vector" and isinstance(result, list):
            return [_sample(s["value"]) for s in result]
        if kind == "scalar":
            return _sample(result)
    except (KeyError, TypeError, ValueError):
        raise _QueryError(f"Prometheus answered a {kind} that cannot be read: {_quote(body)}") from None
    if kind == "matrix":
        raise _QueryError(
            "the query returned a range vector; a gate needs an instant vector or a scalar "
            "(a range selector like x[5m] belongs inside a function such as rate())"
        )
    if kind == "string":
        raise _QueryError("the query returned a string; a gate needs an instant vector or a scalar")
    raise _QueryError(f"Prometheus answered an unknown result type {kind!r}")


def _sample(pair: object) -> float:
    """A [timestamp, "value"] pair's value: Prometheus writes values as strings ("NaN", "+Inf")."""
    if not isinstance(pair, list) or len(pair) != 2 or not isinstance(pair[1], str):
        raise ValueError(f"not a sample: {pair!r}")
    return float(pair[1])


def _describe(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return text if len(text) <= _QUOTE_LIMIT else text[:_QUOTE_LIMIT] + "..."


def _quote(body: bytes) -> str:
    text = body.decode("utf-8", "replace").strip() or "(empty)"
    return text if len(text) <= _QUOTE_LIMIT else text[:_QUOTE_LIMIT] + "..."


def scrub(message: str, address: str) -> str:
    """The message with the address redacted and the password masked wherever it is repeated."""
    if not message:
        return message
    message = message.replace(address, redact(address))
    try:
        url = URL(address)
    except (ValueError, TypeError):
        return message
    for secret in (url.password, url.raw_password):
        if secret and secret in message:
            message = message.replace(secret, "*****")
    return message
