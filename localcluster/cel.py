"""CRD `x-kubernetes-validations` rules, evaluated with cel-python plus Kubernetes' CEL libraries.

kube-apiserver compiles rules with cel-go; cel-python (`celpy`) evaluates the CEL language
here, with the function libraries v1.24 adds (`localcluster.cel_library`). This module keeps
the contract the schema layer relies on: `compile_rule` raises `CelSyntaxError` for a rule the
real server would not compile (its CRD is refused with a 422, cel-go's message shape),
`Program.evaluate` raises `CelError` for a runtime error, worded as cel-go words it. It also
maps schema-typed JSON to CEL values as Kubernetes does: `number` is always a double,
`format: byte|duration|date|date-time` strings are bytes, durations and timestamps, and
property names are escaped (`x-y` is `x__dash__y`).

celpy parses but does not type-check, so `compile_rule` checks what cel-go's checker would
refuse by name: undeclared variables and functions (only `self`, `oldSelf` and macro variables
exist) and, given the rule's schema, fields its objects do not declare. Type errors the checker
would also catch (`self.replicas == 'x'`) surface here at run time, as `no such overload`.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

import celpy
import lark
from celpy import celtypes
from celpy.celparser import CELParseError
from celpy.evaluation import CELEvalError

from localcluster.cel_library import FUNCTIONS, GLOBAL, METHODS

__all__ = ["CelError", "CelSyntaxError", "Program", "compile_rule"]


class CelSyntaxError(ValueError):
    """The rule does not compile (reported at CRD creation, as the real server does)."""


class CelError(Exception):
    """A runtime evaluation error (`no such key`, `no such overload`), worded like cel-go's."""


# --------------------------------------------------------------------------- CEL semantics


def _logic(decisive: bool) -> Callable[[Any, Any], Any]:
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


_FUNCTIONS: dict[str, Callable[..., Any]] = {**FUNCTIONS, "_||_": _logic(True), "_&&_": _logic(False)}
_MACROS = {"has", "all", "exists", "exists_one", "map", "filter"}
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
    while (
        isinstance(tree, lark.Tree) and tree.data not in {"member_dot", "ident"} and len(tree.children) == 1
    ):
        tree = tree.children[0]
    return isinstance(tree, lark.Tree) and tree.data == "member_dot"


# Names in scope, each with the schema of its value when known (a macro variable over a list).
Scope = dict[str, dict[str, Any] | None]
_UNWRAP = {
    "expr",
    "conditionalor",
    "conditionaland",
    "relation",
    "addition",
    "multiplication",
    "unary",
    "member",
    "primary",
    "paren_expr",
}
_OBJECT_META: dict[str, Any] = {
    "apiVersion": {"type": "string"},
    "kind": {"type": "string"},
    "metadata": {
        "type": "object",
        "properties": {"name": {"type": "string"}, "generateName": {"type": "string"}},
    },
}


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
        if (
            not parent
            or parent.get("type") != "object"
            or isinstance(parent.get("additionalProperties"), dict)
        ):
            addl = (parent or {}).get("additionalProperties")
            return addl if isinstance(addl, dict) else None
        props = {
            **(parent.get("properties") or {}),
            **(_OBJECT_META if parent.get("x-kubernetes-embedded-resource") else {}),
        }
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
            elif str(fn) in METHODS - GLOBAL:
                raise self.fail(fn, f"found no matching overload for '{fn}' applied as a global function")
            elif str(fn) not in GLOBAL:
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
                element = (
                    (target_schema or {}).get("items")
                    if (target_schema or {}).get("type") == "array"
                    else None
                )
                for e in exprs[1:]:
                    self.check(e, {**scope, var: element})
                return
            if str(fn) in GLOBAL - METHODS:
                raise self.fail(fn, f"found no matching overload for '{fn}' applied as a method")
            if str(fn) not in METHODS:
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

_RESERVED = {
    "true",
    "false",
    "null",
    "in",
    "as",
    "break",
    "const",
    "continue",
    "else",
    "for",
    "function",
    "if",
    "import",
    "let",
    "loop",
    "package",
    "namespace",
    "return",
    "var",
    "void",
    "while",
}
_ESCAPABLE = re.compile(r"^[a-zA-Z_.\-/][a-zA-Z0-9_.\-/]*$")


def escape(name: str) -> str | None:
    """A property name as rules see it (`x-y` is `x__dash__y`); None if rules cannot reach it."""
    if name in _RESERVED:
        return f"__{name}__"
    if not _ESCAPABLE.match(name):
        return None
    return (
        name.replace("__", "__underscores__")
        .replace(".", "__dot__")
        .replace("-", "__dash__")
        .replace("/", "__slash__")
    )


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
    if (
        "no matching overload" in text
        or "no such overload" in text
        or "does not support field selection" in text
    ):
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


def compile_rule(
    source: str, schema: dict[str, Any] | None = None, *, resource_root: bool = False
) -> Program:
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
        raise _error(
            source, exc.line, exc.column, "Syntax error: " + str(exc.args[0]).splitlines()[0]
        ) from exc
    if schema is not None and resource_root:
        schema = {**schema, "x-kubernetes-embedded-resource": True}
    checker = _Checker(source)
    checker.check(tree, dict.fromkeys(_VARIABLES, schema))
    return Program(source, checker.uses_old_self, _ENV.program(tree, functions=_FUNCTIONS))
