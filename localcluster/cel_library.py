"""The CEL function libraries kube-apiserver v1.24 adds for CRD rules, as celpy functions.

apiextensions-apiserver declares cel-go's `ext.Strings` (charAt, indexOf, lastIndexOf,
lowerAscii, upperAscii, replace, split, substring, trim, join) and Kubernetes' own lists
(isSorted, sum, min, max, indexOf, lastIndexOf), regex (find, findAll) and URL (url, isURL,
getScheme, getHost, getHostname, getPort, getEscapedPath, getQuery) libraries. celpy calls
`x.f(a)` as `f(x, a)`, so each is one Python function; a failure becomes a CEL error value
(`CELEvalError`) rather than an exception, so `||` / `&&` can absorb it as CEL requires.

Kubernetes' three libraries joined v1.24 in kubernetes/kubernetes#108312, after v1.24.0-alpha.2
(the real-apiserver tier's build, which refuses them, and `join`, as undeclared references).
"""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import re2  # type: ignore[import-untyped]  # RE2, the engine cel-go's matches/find use
from celpy import celtypes
from celpy.evaluation import CELEvalError

__all__ = ["FUNCTIONS", "GLOBAL", "METHODS"]

Fn = Callable[..., Any]


def _str_index(s: str, sub: str, offset: int = 0) -> int:
    if not 0 <= offset <= len(s):
        raise IndexError(f"index out of range: {offset}")
    return s.find(sub, offset)


def _str_last_index(s: str, sub: str, offset: int | None = None) -> int:
    if offset is None:
        return s.rfind(sub)
    if not 0 <= offset <= len(s):
        raise IndexError(f"index out of range: {offset}")
    return s.rfind(sub, 0, offset + len(sub))


def _index_of(recv: Any, item: Any, *offset: int) -> int:
    """`indexOf` is both ext.Strings' (on strings) and the lists library's (on lists)."""
    if isinstance(recv, str):
        return _str_index(recv, item, *offset)
    if isinstance(recv, list) and not offset:
        return next((i for i, x in enumerate(recv) if _eq(x, item)), -1)
    raise TypeError("no such overload")


def _last_index_of(recv: Any, item: Any, *offset: int) -> int:
    if isinstance(recv, str):
        return _str_last_index(recv, item, *offset)
    if isinstance(recv, list) and not offset:
        return next((i for i in range(len(recv) - 1, -1, -1) if _eq(recv[i], item)), -1)
    raise TypeError("no such overload")


def _eq(a: Any, b: Any) -> bool:
    try:
        return bool(a == b)
    except TypeError:
        return False


def _char_at(s: str, i: int) -> str:
    if not 0 <= i <= len(s):
        raise IndexError(f"index out of range: {i}")
    return s[i : i + 1]


def _substring(s: str, start: int, end: int | None = None) -> str:
    end = len(s) if end is None else end
    if not 0 <= start <= len(s) or not 0 <= end <= len(s) or start > end:
        raise IndexError(f"substring out of range: [{start}:{end}] of length {len(s)}")
    return s[start:end]


def _replace(s: str, old: str, new: str, n: int = -1) -> str:
    return s.replace(old, new, n)


def _split(s: str, sep: str, n: int = -1) -> list[str]:
    """Go's strings.SplitN: n < 0 all, n == 0 none, an empty separator splits into characters."""
    if n == 0:
        return []
    if sep == "":
        chars = list(s)
        return chars if n < 0 or n >= len(chars) else [*chars[: n - 1], "".join(chars[n - 1 :])]
    return s.split(sep, n - 1 if n > 0 else -1)


_LOWER, _UPPER = "abcdefghijklmnopqrstuvwxyz", "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
_TO_UPPER, _TO_LOWER = str.maketrans(_LOWER, _UPPER), str.maketrans(_UPPER, _LOWER)


def _join(items: list[Any], sep: str = "") -> str:
    if not all(isinstance(x, str) for x in items):
        raise TypeError("no such overload")
    return sep.join(items)


def _comparable(items: list[Any]) -> list[Any]:
    if not isinstance(items, list):
        raise TypeError("no such overload")
    return items


def _is_sorted(items: list[Any]) -> bool:
    items = _comparable(items)
    return all(not items[i] > items[i + 1] for i in range(len(items) - 1))


def _sum(items: list[Any]) -> Any:
    items = _comparable(items)
    if not items:
        return celtypes.IntType(0)
    total = items[0]
    for x in items[1:]:
        total = total + x
    return total


def _extreme(name: str, pick: Callable[[list[Any]], Any]) -> Fn:
    def fn(items: list[Any]) -> Any:
        if not _comparable(items):
            raise ValueError(f"{name} called on empty list")
        return pick(items)

    return fn


def _find(s: str, pattern: str) -> str:
    m = _regex(pattern).search(s)
    return m.group(0) if m else ""


def _find_all(s: str, pattern: str, n: int = -1) -> list[str]:
    """Go's Regexp.FindAllString: an empty match right after the previous match is skipped."""
    rx, pos, prev_end = _regex(pattern), 0, -1
    out: list[str] = []
    while pos <= len(s) and (n < 0 or len(out) < n):
        m = rx.search(s, pos)
        if m is None:
            break
        if m.end() == m.start() == prev_end:
            pos += 1
            continue
        out.append(m.group(0))
        prev_end = m.end()
        pos = m.end() if m.end() > m.start() else m.end() + 1
    return out


def _regex(pattern: str) -> Any:
    try:
        return re2.compile(pattern)
    except re2.error as exc:
        raise ValueError(f"Illegal regex: {exc}") from exc


@dataclass(frozen=True, slots=True)
class URL:
    """The Kubernetes URL library's value (`url('https://...')`): Go's url.URL parts we expose."""

    parts: urllib.parse.SplitResult


_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def _parse_url(s: str) -> URL:
    """Go's url.ParseRequestURI: an absolute URI (`scheme:...`) or an absolute path."""
    if not (_SCHEME.match(s) or s.startswith("/")) or any(ord(c) < 0x20 or c == "\x7f" for c in s):
        raise ValueError(
            f'URL parse error during conversion from string: parse "{s}": invalid URI for request'
        )
    parts = urllib.parse.urlsplit(s)
    try:
        parts.port  # noqa: B018 - validates the port like Go's parser
    except ValueError as exc:
        raise ValueError(f"URL parse error during conversion from string: {exc}") from exc
    return URL(parts)


def _is_url(s: str) -> bool:
    try:
        _parse_url(s)
    except ValueError:
        return False
    return True


def _url_part(get: Callable[[urllib.parse.SplitResult], Any]) -> Fn:
    def fn(u: URL) -> Any:
        if not isinstance(u, URL):
            raise TypeError("no such overload")
        return get(u.parts)

    return fn


def _hostname(p: urllib.parse.SplitResult) -> str:
    host = p.netloc.rpartition("@")[2]
    if host.startswith("["):
        return host[1 : host.find("]")]
    return host.rpartition(":")[0] if ":" in host else host


def _port(p: urllib.parse.SplitResult) -> str:
    host = p.netloc.rpartition("@")[2]
    tail = host[host.find("]") + 1 :] if host.startswith("[") else host
    return tail.rpartition(":")[2] if ":" in tail else ""


def _query(p: urllib.parse.SplitResult) -> dict[str, list[str]]:
    return urllib.parse.parse_qs(p.query, keep_blank_values=True)


# The functions apiextensions-apiserver v1.24 declares on top of CEL's standard library.
LIBRARY: dict[str, Fn] = {
    # cel-go ext.Strings
    "charAt": _char_at,
    "indexOf": _index_of,
    "lastIndexOf": _last_index_of,
    "lowerAscii": lambda s: s.translate(_TO_LOWER),
    "upperAscii": lambda s: s.translate(_TO_UPPER),
    "replace": _replace,
    "split": _split,
    "substring": _substring,
    "trim": lambda s: s.strip(),
    "join": _join,
    # Kubernetes lists library (indexOf / lastIndexOf above serve lists too)
    "isSorted": _is_sorted,
    "sum": _sum,
    "min": _extreme("min", min),
    "max": _extreme("max", max),
    # Kubernetes regex library
    "find": _find,
    "findAll": _find_all,
    # Kubernetes URL library
    "url": _parse_url,
    "isURL": _is_url,
    "getScheme": _url_part(lambda p: p.scheme),
    "getHost": _url_part(lambda p: p.netloc.rpartition("@")[2]),
    "getHostname": _url_part(_hostname),
    "getPort": _url_part(_port),
    "getEscapedPath": _url_part(
        lambda p: urllib.parse.quote(urllib.parse.unquote(p.path), safe="/:@!$&'()*+,;=")
    ),
    "getQuery": _url_part(_query),
}


def _cel(value: Any) -> Any:
    """A library function's plain Python result as a CEL value."""
    if isinstance(value, bool):
        return celtypes.BoolType(value)
    if isinstance(value, int) and not isinstance(value, celtypes.IntType | celtypes.UintType):
        return celtypes.IntType(value)
    if isinstance(value, str) and not isinstance(value, celtypes.StringType):
        return celtypes.StringType(value)
    if isinstance(value, list):
        return celtypes.ListType([_cel(v) for v in value])
    if isinstance(value, dict):
        return celtypes.MapType({_cel(k): _cel(v) for k, v in value.items()})
    return value


def _guarded(fn: Fn) -> Fn:
    """A library function whose failures become CEL error values, so `||` / `&&` can absorb them."""

    def call(*args: Any) -> Any:
        try:
            return _cel(fn(*args))
        except (TypeError, AttributeError) as exc:
            return CELEvalError("no such overload", TypeError, exc.args)
        except (ValueError, IndexError, OverflowError) as exc:
            return CELEvalError(str(exc), type(exc), exc.args)

    return call


FUNCTIONS: dict[str, Fn] = {name: _guarded(fn) for name, fn in LIBRARY.items()}

# How cel-go declares each name of CEL's standard library (as celpy ships it) and the libraries
# above: as a global function `f(x)`, as a method `x.f()`, or both.
GLOBAL = {
    "size",
    "matches",
    "type",
    "dyn",
    "int",
    "uint",
    "double",
    "string",
    "bytes",
    "bool",
    "duration",
    "timestamp",
    "url",
    "isURL",
}
METHODS = {
    "size",
    "contains",
    "startsWith",
    "endsWith",
    "matches",
    "getDate",
    "getDayOfMonth",
    "getDayOfWeek",
    "getDayOfYear",
    "getFullYear",
    "getMonth",
    "getHours",
    "getMilliseconds",
    "getMinutes",
    "getSeconds",
} | (set(LIBRARY) - GLOBAL)
