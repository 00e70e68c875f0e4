"""CRD `x-kubernetes-validations` rules, evaluated with cel-python plus Kubernetes' CEL libraries.

kube-apiserver compiles rules with cel-go and the libraries apiextensions-apiserver enables
(v1.24: cel-go's `ext.Strings` and Kubernetes' lists, regex and URL libraries). cel-python
(`celpy`) evaluates the CEL language itself; this module adds those libraries as celpy
functions, maps schema-typed JSON to CEL values the way Kubernetes does (`number` is always a
double, `format: byte|duration|date|date-time` strings become bytes, durations and timestamps,
property names are escaped), and keeps the contract the schema layer relies on:
`compile_rule` raises `CelSyntaxError` for a rule the real server would not compile (its CRD
is refused with a 422), `Program.evaluate` raises `CelError` for a runtime error.

celpy parses but does not type-check, so `compile_rule` also checks names: only `self`,
`oldSelf`, macro variables, type names and declared functions may appear, as cel-go's checker
requires. Type errors cel-go would catch at compile time (`self.replicas == 'x'`) surface here
as runtime `no such overload` errors instead.
"""

from __future__ import annotations

import base64
import re
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

import celpy
import lark
import re2  # type: ignore[import-untyped]  # RE2, the engine cel-go's matches/find use
from celpy import celtypes
from celpy.celparser import CELParseError
from celpy.evaluation import CELEvalError

__all__ = ["CelError", "CelSyntaxError", "Program", "compile_rule"]


class CelSyntaxError(ValueError):
    """The rule does not compile (reported at CRD creation, as the real server does)."""


class CelError(Exception):
    """A runtime evaluation error (`no such key`, `no such overload`), worded like cel-go's."""


# --------------------------------------------------------------------------- Kubernetes' libraries

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
    return s[i:i + 1]


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
        return chars if n < 0 or n >= len(chars) else [*chars[:n - 1], "".join(chars[n - 1:])]
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
        raise ValueError(f'URL parse error during conversion from string: parse "{s}": invalid URI for request')
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
        return host[1:host.find("]")]
    return host.rpartition(":")[0] if ":" in host else host


def _port(p: urllib.parse.SplitResult) -> str:
    host = p.netloc.rpartition("@")[2]
    tail = host[host.find("]") + 1:] if host.startswith("[") else host
    return tail.rpartition(":")[2] if ":" in tail else ""


def _query(p: urllib.parse.SplitResult) -> dict[str, list[str]]:
    return urllib.parse.parse_qs(p.query, keep_blank_values=True)


# The functions apiextensions-apiserver v1.24 declares on top of CEL's standard library.
_LIBRARY: dict[str, Fn] = {
    # cel-go ext.Strings
    "charAt": _char_at, "indexOf": _index_of, "lastIndexOf": _last_index_of,
    "lowerAscii": lambda s: s.translate(_TO_LOWER), "upperAscii": lambda s: s.translate(_TO_UPPER),
    "replace": _replace, "split": _split, "substring": _substring, "trim": lambda s: s.strip(), "join": _join,
    # Kubernetes lists library (indexOf / lastIndexOf above serve lists too)
    "isSorted": _is_sorted, "sum": _sum, "min": _extreme("min", min), "max": _extreme("max", max),
    # Kubernetes regex library
    "find": _find, "findAll": _find_all,
    # Kubernetes URL library
    "url": _parse_url, "isURL": _is_url,
    "getScheme": _url_part(lambda p: p.scheme), "getHost": _url_part(lambda p: p.netloc.rpartition("@")[2]),
    "getHostname": _url_part(_hostname), "getPort": _url_part(_port),
    "getEscapedPath": _url_part(lambda p: urllib.parse.quote(urllib.parse.unquote(p.path), safe="/:@!$&'()*+,;=")),
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


def _logic(decisive: bool) -> Fn:
    """cel-go's `||` (decisive True) / `&&` (decisive False): commutative, else the left error first."""
    def op(x: Any, y: Any) -> Any:
        for v in (x, y):
            if isinstance(v, celtypes.BoolType) and bool(v) is decisive:
                return v
        if isinstance(x, celtypes.BoolType) and isinstance(y, celtypes.BoolType):
            return celtypes.BoolType(not decisive)
        for v in (x, y):
            if isinstance(v, CELEvalError):
                return v
        raise TypeError("no such overload")
    return op


_FUNCTIONS: dict[str, Fn] = {name: _guarded(fn) for name, fn in _LIBRARY.items()}
_FUNCTIONS |= {"_||_": _logic(True), "_&&_": _logic(False)}

# Names a rule may call: CEL's standard library (as celpy ships it) and the libraries above,
# as global functions `f(x)` or as methods `x.f()` the way cel-go declares each.
_MACROS = {"has", "all", "exists", "exists_one", "map", "filter"}
_GLOBAL = {"size", "matches", "type", "dyn", "int", "uint", "double", "string", "bytes", "bool", "duration",
           "timestamp", "url", "isURL"}
_METHODS = {"size", "contains", "startsWith", "endsWith", "matches", "getDate", "getDayOfMonth", "getDayOfWeek",
            "getDayOfYear", "getFullYear", "getMonth", "getHours", "getMilliseconds", "getMinutes",
            "getSeconds"} | (set(_LIBRARY) - _GLOBAL)
_TYPE_NAMES = {"int", "uint", "double", "bool", "string", "bytes", "list", "map", "null_type", "type"}
_VARIABLES = {"self", "oldSelf"}


# --------------------------------------------------------------------------- compile-time checks

def _error(source: str, line: int | None, column: int | None, msg: str) -> CelSyntaxError:
    """cel-go's error shape: `ERROR: <input>:1:5: msg` then the source line and a caret."""
    line, column = line or 1, column or 1
    text = source.splitlines()[line - 1] if source.splitlines() else ""
    return CelSyntaxError(f"ERROR: <input>:{line}:{column}: {msg}\n | {text}\n | {'.' * (column - 1)}^")


def _ident(tree: Any) -> str | None:
    """The name of a bare identifier expression (`x`), else None."""
    while isinstance(tree, lark.Tree) and tree.data != "ident" and len(tree.children) == 1:
        tree = tree.children[0]
    if isinstance(tree, lark.Tree) and tree.data == "ident":
        return str(tree.children[0])
    return None


def _is_select(tree: Any) -> bool:
    while isinstance(tree, lark.Tree) and tree.data not in {"member_dot", "ident"} and len(tree.children) == 1:
        tree = tree.children[0]
    return isinstance(tree, lark.Tree) and tree.data == "member_dot"


# Names in scope, each with the schema of its value when known (a macro variable over a list).
Scope = dict[str, dict[str, Any] | None]
_UNWRAP = {"expr", "conditionalor", "conditionaland", "relation", "addition", "multiplication", "unary", "member",
           "primary", "paren_expr"}
_OBJECT_META: dict[str, Any] = {"apiVersion": {"type": "string"}, "kind": {"type": "string"},
                                "metadata": {"type": "object", "properties": {"name": {"type": "string"},
                                                                              "generateName": {"type": "string"}}}}


class _Checker:
    """Resolves names as cel-go's checker would, with `self` / `oldSelf` the only variables, and
    field selections on declared objects against their schema (`undefined field 'x'`)."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.uses_old_self = False

    def schema_of(self, tree: Any, scope: Scope) -> dict[str, Any] | None:
        """The schema of the value `tree` selects (`self.a[0].b`), None when not statically known."""
        while isinstance(tree, lark.Tree) and tree.data in _UNWRAP and len(tree.children) == 1:
            tree = tree.children[0]
        if not isinstance(tree, lark.Tree):
            return None
        if tree.data == "ident":
            return scope.get(str(tree.children[0]))
        if tree.data == "member_index":
            container = self.schema_of(tree.children[0], scope) or {}
            if container.get("type") == "array":
                return cast(dict[str, Any] | None, container.get("items"))
            addl = container.get("additionalProperties")
            return addl if isinstance(addl, dict) else None
        if tree.data != "member_dot":
            return None
        parent, field = self.schema_of(tree.children[0], scope), cast(lark.Token, tree.children[1])
        if not parent or parent.get("type") != "object" or isinstance(parent.get("additionalProperties"), dict):
            addl = (parent or {}).get("additionalProperties")
            return addl if isinstance(addl, dict) else None
        props = {**(parent.get("properties") or {}), **(_OBJECT_META if parent.get("x-kubernetes-embedded-resource") else {})}
        for name, sub in props.items():
            if escape(name) == str(field):
                return sub if isinstance(sub, dict) else None
        if parent.get("x-kubernetes-int-or-string"):
            return None
        raise _error(self.source, field.line, (field.column or 2) - 1, f"undefined field '{field}'")

    def fail(self, where: Any, msg: str) -> CelSyntaxError:
        """`where` is a token or a tree: either carries the position cel-go would report."""
        pos = getattr(where, "meta", where)
        return _error(self.source, getattr(pos, "line", None), getattr(pos, "column", None), msg)

    def check(self, tree: Any, scope: Scope) -> None:
        if not isinstance(tree, lark.Tree):
            return
        if tree.data == "ident":
            self.name(tree.children[0], scope)
            return
        if tree.data == "ident_arg":  # a global call: f(args)
            fn, args = tree.children[0], tree.children[1:]
            if fn == "has":
                arg = args[0].children if args and isinstance(args[0], lark.Tree) else []
                if len(arg) != 1 or not _is_select(arg[0]):
                    raise self.fail(fn, "invalid argument to has() macro")
            elif str(fn) in _METHODS - _GLOBAL:
                raise self.fail(fn, f"found no matching overload for '{fn}' applied as a global function")
            elif str(fn) not in _GLOBAL:
                raise self.fail(fn, f"undeclared reference to '{fn}' (in container '')")
            for a in args:
                self.check(a, scope)
            return
        if tree.data == "member_dot_arg":  # a method call or macro: target.f(args)
            target, fn, *rest = tree.children
            exprs = rest[0].children if rest and isinstance(rest[0], lark.Tree) else []
            if str(fn) in _MACROS - {"has"}:
                var = _ident(exprs[0]) if exprs else None
                if var is None:
                    raise self.fail(fn, "argument must be a simple name")
                self.check(target, scope)
                target_schema = self.schema_of(target, scope)
                element = (target_schema or {}).get("items") if (target_schema or {}).get("type") == "array" else None
                for e in exprs[1:]:
                    self.check(e, {**scope, var: element})
                return
            if str(fn) in _GLOBAL - _METHODS:
                raise self.fail(fn, f"found no matching overload for '{fn}' applied as a method")
            if str(fn) not in _METHODS:
                raise self.fail(fn, f"undeclared reference to '{fn}' (in container '')")
            self.check(target, scope)
            for e in exprs:
                self.check(e, scope)
            return
        if tree.data == "member_object":
            raise self.fail(tree, "message construction is not supported")
        if tree.data == "member_dot":
            self.schema_of(tree, scope)
        for child in tree.children:
            self.check(child, scope)

    def name(self, token: Any, scope: Scope) -> None:
        name = str(token)
        if name == "oldSelf":
            self.uses_old_self = True
        if name not in scope and name not in _TYPE_NAMES:
            raise self.fail(token, f"undeclared reference to '{name}' (in container '')")


# --------------------------------------------------------------------------- values

_RESERVED = {"true", "false", "null", "in", "as", "break", "const", "continue", "else", "for", "function", "if",
             "import", "let", "loop", "package", "namespace", "return", "var", "void", "while"}
_ESCAPABLE = re.compile(r"^[a-zA-Z_.\-/][a-zA-Z0-9_.\-/]*$")


def escape(name: str) -> str | None:
    """A property name as rules see it (`x-y` is `x__dash__y`); None if rules cannot reach it."""
    if name in _RESERVED:
        return f"__{name}__"
    if not _ESCAPABLE.match(name):
        return None
    return (name.replace("__", "__underscores__").replace(".", "__dot__")
            .replace("-", "__dash__").replace("/", "__slash__"))


def to_cel(value: Any, schema: dict[str, Any] | None = None) -> Any:
    """JSON `value` as the CEL value a rule on `schema` sees (Kubernetes' UnstructuredToVal)."""
    schema = schema or {}
    typ, fmt = schema.get("type"), schema.get("format")
    if value is None:
        return None
    if isinstance(value, bool):
        return celtypes.BoolType(value)
    if isinstance(value, int | float) and not schema.get("x-kubernetes-int-or-string"):
        if typ == "number" or (isinstance(value, float) and not (typ == "integer" and value.is_integer())):
            return celtypes.DoubleType(value)
        return celtypes.IntType(int(value))
    if isinstance(value, int):
        return celtypes.IntType(value)
    if isinstance(value, str):
        return _string(value, fmt)
    if isinstance(value, list):
        items = schema.get("items") if isinstance(schema.get("items"), dict) else None
        return celtypes.ListType([to_cel(v, items) for v in value])
    if isinstance(value, dict):
        props, addl = schema.get("properties"), schema.get("additionalProperties")
        out: dict[Any, Any] = {}
        for key, sub in value.items():
            if isinstance(props, dict) and key in props:
                name = escape(key)
                if name is not None:
                    out[celtypes.StringType(name)] = to_cel(sub, props[key])
            elif isinstance(addl, dict):
                out[celtypes.StringType(key)] = to_cel(sub, addl)
            elif not isinstance(props, dict) or key in _OBJECT_META:
                out[celtypes.StringType(key)] = to_cel(sub, None)
        return celtypes.MapType(out)
    return value


def _string(value: str, fmt: Any) -> Any:
    try:
        if fmt == "byte":
            return celtypes.BytesType(base64.b64decode(value))
        if fmt == "duration":
            return celtypes.DurationType(value)
        if fmt in {"date", "date-time"}:
            return celtypes.TimestampType(value if fmt == "date-time" else f"{value}T00:00:00Z")
    except (ValueError, TypeError):
        pass  # schema validation reports the malformed value; rules see the plain string
    return celtypes.StringType(value)


# --------------------------------------------------------------------------- programs

_ENV = celpy.Environment()


def _message(err: BaseException) -> str:
    """A celpy error, worded as cel-go words the same failure."""
    text = str(err.args[0]) if err.args else str(err)
    if m := re.match(r"no such member in mapping: '(.*)'", text):
        return f"no such key: {m.group(1)}"
    if "no matching overload" in text or "no such overload" in text or "does not support field selection" in text:
        return "no such overload"
    if text.startswith("Attempt to reduce an empty sequence"):
        return "min called on empty list"
    if "divide by zero" in text:
        return "division by zero"
    if "overflow" in text:
        return "integer overflow"
    if m := re.match(r"undeclared reference to '([^']*)'", text):
        return f"no such attribute: {m.group(1)}"
    return text


@dataclass(frozen=True, slots=True)
class Program:
    """A compiled rule. `is_transition` rules (those reading `oldSelf`) only run on updates."""

    source: str
    is_transition: bool
    _runner: Any

    def evaluate(self, self_value: Any, old_self: Any = None, schema: dict[str, Any] | None = None) -> Any:
        """The rule's value for `self` (and `oldSelf`), both typed by `schema`; `CelError` on failure."""
        activation = {"self": to_cel(self_value, schema), "oldSelf": to_cel(old_self, schema)}
        try:
            result = self._runner.evaluate(activation)
        except CELEvalError as exc:
            raise CelError(_message(exc)) from exc
        except RecursionError as exc:
            raise CelError("expression too deeply nested") from exc
        if isinstance(result, CELEvalError):
            raise CelError(_message(result))
        return bool(result) if isinstance(result, celtypes.BoolType) else result


def compile_rule(source: str, schema: dict[str, Any] | None = None, *, resource_root: bool = False) -> Program:
    """Parse and name-check `source`; raise `CelSyntaxError` as cel-go would fail to compile it.

    With the `schema` of the value the rule sits on (at CRD creation), fields selected from
    declared objects must exist; a resource's root also has `apiVersion`, `kind` and
    `metadata.name` / `metadata.generateName`.
    """
    if not source.strip():
        raise CelSyntaxError("rule is empty")
    try:
        tree = _ENV.compile(source)
    except CELParseError as exc:
        raise _error(source, exc.line, exc.column, "Syntax error: " + str(exc.args[0]).splitlines()[0]) from exc
    if schema is not None and resource_root:
        schema = {**schema, "x-kubernetes-embedded-resource": True}
    checker = _Checker(source)
    checker.check(tree, dict.fromkeys(_VARIABLES, schema))
    return Program(source, checker.uses_old_self, _ENV.program(tree, functions=_FUNCTIONS))
