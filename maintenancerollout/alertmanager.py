"""The Alertmanager gate's client: which active alerts match the gate's matchers right now.

Alertmanager does the matching (`GET /api/v2/alerts?active=true&silenced=false&inhibited=false`
with one `filter` per matcher, all of which must match), so its own regex engine and label
semantics decide, and silences and inhibitions count exactly as they do for its notifications.
The flags are checked again on the answer, which costs nothing and keeps a proxy that drops query
parameters from turning silenced alerts into a stalled rollout.

The matchers are also parsed here, with Alertmanager's classic syntax (`pkg/labels/parse.go`:
`name="value"`, `!=`, `=~`, `!~`, the value quoted or bare, OpenMetrics escapes), so that a spec
can be refused when it is written rather than at the first check; a regex is compiled (anchored,
as Alertmanager anchors it) to catch the obvious mistakes, though Alertmanager's RE2 remains the
judge of what it accepts.

Errors are values (`Check.error`), never exceptions, and carry the address without credentials.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import aiohttp
import orjson
from yarl import URL

from maintenancerollout.prometheus import MAX_RESPONSE_BYTES, read_body, redact, scrub

DEFAULT_TIMEOUT_SECONDS = 10.0
_QUOTE_LIMIT = 300

Op = Literal["=", "!=", "=~", "!~"]
_OPS: dict[str, Op] = {"=": "=", "!=": "!=", "=~": "=~", "!~": "!~"}
_MATCHER = re.compile(r"^\s*([a-zA-Z_:][a-zA-Z0-9_:]*)\s*(=~|=|!=|!~)\s*(.*?)\s*$", re.DOTALL)


class MatcherError(ValueError):
    """A matcher Alertmanager would refuse."""


@dataclass(frozen=True, slots=True)
class Matcher:
    name: str
    op: Op
    value: str

    def __str__(self) -> str:
        """The matcher in the form both of Alertmanager's parsers read: `name="value"`, escaped."""
        escaped = self.value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
        return f'{self.name}{self.op}"{escaped}"'


@dataclass(frozen=True)
class Alert:
    name: str
    labels: dict[str, str]
    starts_at: str


@dataclass(frozen=True)
class Check:
    """The alerts that match, or why Alertmanager could not be asked."""

    firing: tuple[Alert, ...]
    error: str = ""

    @property
    def clear(self) -> bool:
        """Nothing fires and Alertmanager answered: the gate passes."""
        return not self.firing and not self.error


def parse_matcher(text: str) -> Matcher:
    """One matcher in Alertmanager's syntax (labels.ParseMatcher)."""
    found = _MATCHER.match(text) if isinstance(text, str) else None
    if found is None:
        raise MatcherError(f'bad matcher format: {text!r} (expected like severity="critical")')
    name, op, raw = found.group(1), found.group(2), found.group(3)
    value = _unescape(raw)
    if op in ("=~", "!~"):
        try:
            re.compile(f"^(?:{value})$")
        except re.error as exc:
            raise MatcherError(f"invalid regular expression in {text!r}: {exc}") from None
    return Matcher(name, _OPS[op], value)


def _unescape(raw: str) -> str:
    """The value with OpenMetrics escapes undone; a quoted value must end with its quote."""
    quoted = raw.startswith('"')
    if quoted:
        raw = raw[1:]
    out: list[str] = []
    escaped = False
    for i, c in enumerate(raw):
        if escaped:
            escaped = False
            out.append({"n": "\n", '"': '"', "\\": "\\"}.get(c, "\\" + c))
        elif c == "\\":
            if i < len(raw) - 1:
                escaped = True
            else:
                out.append("\\")
        elif c == '"':
            if not quoted or i < len(raw) - 1:
                raise MatcherError(f"matcher value contains unescaped double quote: {raw!r}")
            quoted = False
        else:
            out.append(c)
    if quoted:
        raise MatcherError("matcher value contains unescaped double quote (the closing quote is missing)")
    return "".join(out)


async def check(address: str, matchers: Sequence[str], *, timeout: float = DEFAULT_TIMEOUT_SECONDS) -> Check:
    """The active, unsilenced, uninhibited alerts at `address` that match every matcher."""
    where = redact(address)
    try:
        parsed = [parse_matcher(m) for m in matchers]
    except MatcherError as exc:
        return Check((), f"invalid matcher: {exc}")
    try:
        url = URL(address.rstrip("/") + "/api/v2/alerts")
    except (ValueError, TypeError) as exc:
        return Check((), f"invalid Alertmanager address {where}: {exc}")
    if url.scheme not in ("http", "https") or not url.host:
        return Check((), f"invalid Alertmanager address {where}: an http:// or https:// URL is needed")
    params = [("active", "true"), ("silenced", "false"), ("inhibited", "false")]
    params += [("filter", str(m)) for m in parsed]
    try:
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout)) as session,
            session.get(url, params=params, headers={"Accept": "application/json"}) as resp,
        ):
            body = await read_body(resp)
            status, reason = resp.status, resp.reason or ""
    except TimeoutError:
        return Check((), f"Alertmanager at {where} did not answer within {timeout:g}s")
    except aiohttp.ClientError as exc:
        return Check(
            (),
            scrub(f"Alertmanager at {where} unreachable: {_short(str(exc) or type(exc).__name__)}", address),
        )
    if body is None:
        return Check((), f"Alertmanager's answer is larger than {MAX_RESPONSE_BYTES} bytes")
    if status >= 400:
        text = _short(_error_text(body) or reason)
        return Check((), scrub(f"Alertmanager at {where} answered HTTP {status}: {text}", address))
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError:
        doc = None
    if not isinstance(doc, list):
        text = _short(body.decode("utf-8", "replace").strip() or "(empty)")
        return Check((), f"Alertmanager at {where} answered something that is not its API's JSON: {text}")
    firing = [a for a in (_alert(raw) for raw in doc) if a is not None]
    firing.sort(key=lambda a: (a.name, sorted(a.labels.items()), a.starts_at))
    return Check(tuple(firing))


def _alert(raw: object) -> Alert | None:
    """An alert of the answer, or None for one that is not active (or not an alert at all)."""
    if not isinstance(raw, Mapping):
        return None
    status = raw.get("status")
    if isinstance(status, Mapping):
        if status.get("state", "active") != "active" or status.get("silencedBy") or status.get("inhibitedBy"):
            return None
    labels_raw = raw.get("labels")
    labels = {str(k): str(v) for k, v in labels_raw.items()} if isinstance(labels_raw, Mapping) else {}
    return Alert(name=labels.get("alertname", ""), labels=labels, starts_at=str(raw.get("startsAt") or ""))


def _error_text(body: bytes) -> str:
    """Alertmanager's error body: a JSON string (a bad filter), an object, or plain text."""
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError:
        return body.decode("utf-8", "replace").strip()
    if isinstance(doc, Mapping) and doc.get("message"):
        return str(doc["message"])
    return doc if isinstance(doc, str) else body.decode("utf-8", "replace").strip()


def _short(text: str) -> str:
    return text if len(text) <= _QUOTE_LIMIT else text[:_QUOTE_LIMIT] + "..."
