"""A tiny evaluator for the subset of CEL that CRD `x-kubernetes-validations` rules use here.

The real API server compiles rules with cel-go. We cannot ship that, and a partial
evaluator that silently accepted unknown syntax would let a CRD install here and fail on a
real cluster (or the reverse). So `compile_rule` parses the whole rule up front and raises
`CelSyntaxError` for anything outside the subset; the CRD strategy turns that into a 422 at
CRD creation, as the real server does for rules that do not compile.

Supported: literals (int, double, string, bool, null, lists), `self` / `oldSelf`, field
selection `a.b`, indexing `a[i]` / `a['k']`, `has(a.b)`, `size(x)` / `x.size()`,
`x.startsWith(s)` / `endsWith` / `contains` / `matches`, `x in list|map`, `!`, unary `-`,
`* / %`, `+ -`, comparisons, `==` / `!=`, `&&` / `||` (with CEL's commutative error
absorption), and `c ? a : b`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["CelError", "CelSyntaxError", "Program", "compile_rule"]


class CelSyntaxError(ValueError):
    """The rule is not valid in the supported CEL subset (reported at CRD creation)."""


class CelError(Exception):
    """A runtime evaluation error (`no such key`, type mismatch), reported like cel-go does."""


_TOKEN = re.compile(
    r"""\s*(?:
        (?P<num>\d+\.\d+(?:[eE][+-]?\d+)?|\d+[uU]?)
      | (?P<str>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')
      | (?P<op>&&|\|\||==|!=|<=|>=|[<>!?:.,()\[\]+\-*/%])
      | (?P<ident>[A-Za-z_][A-Za-z0-9_]*)
    )""",
    re.VERBOSE,
)

_RESERVED = {"in", "as", "break", "const", "continue", "else", "for", "function", "if", "import", "let",
             "loop", "package", "namespace", "return", "var", "void", "while"}


@dataclass(frozen=True, slots=True)
class _Tok:
    kind: str
    text: str
    pos: int


def _tokenize(src: str) -> list[_Tok]:
    toks: list[_Tok] = []
    pos = 0
    while pos < len(src):
        if src[pos:].strip() == "":
            break
        m = _TOKEN.match(src, pos)
        if m is None or m.end() == pos:
            raise CelSyntaxError(f"unexpected character {src[pos:].lstrip()[:1]!r} at position {pos}")
        kind = m.lastgroup or ""
        toks.append(_Tok(kind, m.group(kind), m.start(kind)))
        pos = m.end()
    toks.append(_Tok("eof", "", len(src)))
    return toks


# An AST node is a closure: env -> value. `Node` keeps the field-path shape for `has()`.
Env = dict[str, Any]
Eval = Callable[[Env], Any]


@dataclass(frozen=True, slots=True)
class _Node:
    eval: Eval
    # For `has()`: the operand and field name of a select expression.
    select: tuple[_Node, str] | None = None
    uses_old_self: bool = False


_ABSENT = object()


def _unescape(lit: str) -> str:
    body = lit[1:-1]
    return re.sub(r"\\(.)", lambda m: {"n": "\n", "t": "\t", "r": "\r"}.get(m.group(1), m.group(1)), body)


def _type_name(v: Any) -> str:
    if v is None:
        return "null_type"
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, int):
        return "int"
    if isinstance(v, float):
        return "double"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "list"
    if isinstance(v, dict):
        return "map"
    return type(v).__name__


def _is_num(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _equal(a: Any, b: Any) -> bool:
    if _is_num(a) and _is_num(b):
        return bool(a == b)
    if type(a) is not type(b) and not (a is None or b is None):
        raise CelError(f"no such overload: {_type_name(a)} == {_type_name(b)}")
    return bool(a == b)


def _compare(op: str, a: Any, b: Any) -> bool:
    ok = (_is_num(a) and _is_num(b)) or (type(a) is type(b) and isinstance(a, str | bool))
    if not ok:
        raise CelError(f"no such overload: {_type_name(a)} {op} {_type_name(b)}")
    if op == "<":
        return bool(a < b)
    if op == "<=":
        return bool(a <= b)
    if op == ">":
        return bool(a > b)
    return bool(a >= b)


def _arith(op: str, a: Any, b: Any) -> Any:
    if op == "+" and type(a) is type(b) and isinstance(a, str | list):
        return a + b
    if not (_is_num(a) and _is_num(b)) or isinstance(a, float) != isinstance(b, float):
        raise CelError(f"no such overload: {_type_name(a)} {op} {_type_name(b)}")
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if b == 0:
        raise CelError("division by zero" if op == "/" else "modulus by zero")
    if isinstance(a, float):
        return a / b if op == "/" else a % b
    q = abs(a) // abs(b) * (1 if (a >= 0) == (b >= 0) else -1)  # truncated, like Go
    return q if op == "/" else a - q * b


def _size(v: Any) -> int:
    if isinstance(v, str | list | dict):
        return len(v)
    raise CelError(f"no such overload: size({_type_name(v)})")


def _str_method(name: str, recv: Any, arg: Any) -> bool:
    if not isinstance(recv, str) or not isinstance(arg, str):
        raise CelError(f"no such overload: {_type_name(recv)}.{name}({_type_name(arg)})")
    if name == "startsWith":
        return recv.startswith(arg)
    if name == "endsWith":
        return recv.endswith(arg)
    if name == "contains":
        return arg in recv
    return re.search(arg, recv) is not None  # matches (RE2 and Python agree on the common subset)


_STRING_METHODS = {"startsWith", "endsWith", "contains", "matches"}


class _Parser:
    """Precedence climbing over CEL's grammar (ternary < || < && < relations < + < * < unary)."""

    def __init__(self, src: str) -> None:
        self.toks = _tokenize(src)
        self.i = 0

    def peek(self) -> _Tok:
        return self.toks[self.i]

    def take(self, text: str | None = None) -> _Tok:
        tok = self.toks[self.i]
        if text is not None and tok.text != text:
            found = tok.text or "end of expression"
            raise CelSyntaxError(f"expected {text!r} at position {tok.pos}, found {found!r}")
        self.i += 1
        return tok

    def parse(self) -> _Node:
        node = self.ternary()
        if self.peek().kind != "eof":
            tok = self.peek()
            raise CelSyntaxError(f"unexpected {tok.text!r} at position {tok.pos}")
        return node

    def ternary(self) -> _Node:
        cond = self.or_()
        if self.peek().text != "?":
            return cond
        self.take("?")
        a = self.ternary()
        self.take(":")
        b = self.ternary()

        def ev(env: Env) -> Any:
            c = cond.eval(env)
            if not isinstance(c, bool):
                raise CelError(f"no such overload: {_type_name(c)} ? _ : _")
            return a.eval(env) if c else b.eval(env)

        return _Node(ev, uses_old_self=cond.uses_old_self or a.uses_old_self or b.uses_old_self)

    def _logical(self, op: str, sub: Callable[[], _Node]) -> _Node:
        left = sub()
        while self.peek().text == op:
            self.take()
            right = sub()
            left = _Node(_logic(op, left.eval, right.eval), uses_old_self=left.uses_old_self or right.uses_old_self)
        return left

    def or_(self) -> _Node:
        return self._logical("||", self.and_)

    def and_(self) -> _Node:
        return self._logical("&&", self.relation)

    def relation(self) -> _Node:
        left = self.additive()
        while self.peek().text in {"==", "!=", "<", "<=", ">", ">="} or (
            self.peek().kind == "ident" and self.peek().text == "in"
        ):
            op = self.take().text
            right = self.additive()
            left = _Node(_relation(op, left.eval, right.eval), uses_old_self=left.uses_old_self or right.uses_old_self)
        return left

    def additive(self) -> _Node:
        left = self.multiplicative()
        while self.peek().text in {"+", "-"}:
            op = self.take().text
            right = self.multiplicative()
            left = _Node(_binary(op, left.eval, right.eval), uses_old_self=left.uses_old_self or right.uses_old_self)
        return left

    def multiplicative(self) -> _Node:
        left = self.unary()
        while self.peek().text in {"*", "/", "%"}:
            op = self.take().text
            right = self.unary()
            left = _Node(_binary(op, left.eval, right.eval), uses_old_self=left.uses_old_self or right.uses_old_self)
        return left

    def unary(self) -> _Node:
        tok = self.peek()
        if tok.text == "!":
            self.take()
            inner = self.unary()

            def not_(env: Env) -> bool:
                v = inner.eval(env)
                if not isinstance(v, bool):
                    raise CelError(f"no such overload: !{_type_name(v)}")
                return not v

            return _Node(not_, uses_old_self=inner.uses_old_self)
        if tok.text == "-":
            self.take()
            inner = self.unary()

            def neg(env: Env) -> Any:
                v = inner.eval(env)
                if not _is_num(v):
                    raise CelError(f"no such overload: -{_type_name(v)}")
                return -v

            return _Node(neg, uses_old_self=inner.uses_old_self)
        return self.member()

    def member(self) -> _Node:
        node = self.primary()
        while True:
            tok = self.peek()
            if tok.text == ".":
                self.take()
                name = self.take()
                if name.kind != "ident":
                    raise CelSyntaxError(f"expected a field name at position {name.pos}")
                if self.peek().text == "(":
                    node = self.method(node, name)
                else:
                    node = _Node(_select(node.eval, name.text), select=(node, name.text),
                                 uses_old_self=node.uses_old_self)
            elif tok.text == "[":
                self.take()
                idx = self.ternary()
                self.take("]")
                node = _Node(_index(node.eval, idx.eval), uses_old_self=node.uses_old_self or idx.uses_old_self)
            else:
                return node

    def args(self) -> list[_Node]:
        self.take("(")
        out: list[_Node] = []
        if self.peek().text != ")":
            out.append(self.ternary())
            while self.peek().text == ",":
                self.take()
                out.append(self.ternary())
        self.take(")")
        return out

    def method(self, recv: _Node, name: _Tok) -> _Node:
        args = self.args()
        old = recv.uses_old_self or any(a.uses_old_self for a in args)
        if name.text == "size" and not args:
            return _Node(lambda env: _size(recv.eval(env)), uses_old_self=old)
        if name.text in _STRING_METHODS and len(args) == 1:
            arg = args[0]
            if name.text == "matches":
                _check_regex(arg)
            return _Node(lambda env: _str_method(name.text, recv.eval(env), arg.eval(env)), uses_old_self=old)
        raise CelSyntaxError(f"unsupported function {name.text!r} at position {name.pos}")

    def primary(self) -> _Node:
        tok = self.take()
        if tok.kind == "num":
            text = tok.text.rstrip("uU")
            value: Any = float(text) if "." in text or "e" in text.lower() else int(text)
            return _Node(lambda env: value)
        if tok.kind == "str":
            s = _unescape(tok.text)
            return _Node(lambda env: s)
        if tok.text == "(":
            inner = self.ternary()
            self.take(")")
            return inner
        if tok.text == "[":
            items: list[_Node] = []
            if self.peek().text != "]":
                items.append(self.ternary())
                while self.peek().text == ",":
                    self.take()
                    items.append(self.ternary())
            self.take("]")
            return _Node(lambda env: [n.eval(env) for n in items], uses_old_self=any(n.uses_old_self for n in items))
        if tok.kind == "ident":
            return self.ident(tok)
        raise CelSyntaxError(f"unexpected {tok.text or 'end of expression'!r} at position {tok.pos}")

    def ident(self, tok: _Tok) -> _Node:
        name = tok.text
        if name in {"true", "false"}:
            b = name == "true"
            return _Node(lambda env: b)
        if name == "null":
            return _Node(lambda env: None)
        if self.peek().text == "(":
            return self.call(tok)
        if name in {"self", "oldSelf"}:
            return _Node(lambda env: env[name], uses_old_self=name == "oldSelf")
        if name in _RESERVED:
            raise CelSyntaxError(f"reserved word {name!r} at position {tok.pos}")
        raise CelSyntaxError(f"undeclared reference to {name!r} at position {tok.pos}")

    def call(self, tok: _Tok) -> _Node:
        if tok.text == "has":
            self.take("(")
            arg = self.ternary()
            self.take(")")
            if arg.select is None:
                raise CelSyntaxError(f"invalid argument to has() macro at position {tok.pos}")
            operand, field = arg.select
            return _Node(_has(operand.eval, field), uses_old_self=operand.uses_old_self)
        args = self.args()
        old = any(a.uses_old_self for a in args)
        if tok.text == "size" and len(args) == 1:
            arg = args[0]
            return _Node(lambda env: _size(arg.eval(env)), uses_old_self=old)
        raise CelSyntaxError(f"unsupported function {tok.text!r} at position {tok.pos}")


def _check_regex(arg: _Node) -> None:
    try:
        pattern = arg.eval({})
    except (CelError, KeyError):
        return
    if isinstance(pattern, str):
        try:
            re.compile(pattern)
        except re.error as exc:
            raise CelSyntaxError(f"invalid regular expression {pattern!r}: {exc}") from exc


def _logic(op: str, left: Eval, right: Eval) -> Eval:
    """`&&` / `||` are commutative in CEL: a decisive side wins even if the other side errors."""
    decisive = op == "||"

    def ev(env: Env) -> bool:
        err: CelError | None = None
        for side in (left, right):
            try:
                v = side(env)
            except CelError as exc:
                err = err or exc
                continue
            if not isinstance(v, bool):
                err = err or CelError(f"no such overload: {_type_name(v)} {op} _")
                continue
            if v is decisive:
                return decisive
        if err is not None:
            raise err
        return not decisive

    return ev


def _relation(op: str, left: Eval, right: Eval) -> Eval:
    def ev(env: Env) -> bool:
        a, b = left(env), right(env)
        if op == "==":
            return _equal(a, b)
        if op == "!=":
            return not _equal(a, b)
        if op == "in":
            if isinstance(b, list):
                return any(_safe_equal(a, x) for x in b)
            if isinstance(b, dict):
                return a in b
            raise CelError(f"no such overload: {_type_name(a)} in {_type_name(b)}")
        return _compare(op, a, b)

    return ev


def _safe_equal(a: Any, b: Any) -> bool:
    try:
        return _equal(a, b)
    except CelError:
        return False


def _binary(op: str, left: Eval, right: Eval) -> Eval:
    return lambda env: _arith(op, left(env), right(env))


def _select(operand: Eval, field: str) -> Eval:
    def ev(env: Env) -> Any:
        obj = operand(env)
        if not isinstance(obj, dict):
            raise CelError(f"no such key: {field}" if obj is None else f"type '{_type_name(obj)}' does not support field selection")
        if field not in obj:
            raise CelError(f"no such key: {field}")
        return obj[field]

    return ev


def _has(operand: Eval, field: str) -> Eval:
    def ev(env: Env) -> bool:
        obj = operand(env)
        if not isinstance(obj, dict):
            raise CelError(f"invalid type for field selection: {_type_name(obj)}")
        return field in obj

    return ev


def _index(operand: Eval, index: Eval) -> Eval:
    def ev(env: Env) -> Any:
        obj, idx = operand(env), index(env)
        if isinstance(obj, list):
            if not _is_num(idx) or isinstance(idx, float):
                raise CelError(f"no such overload: list[{_type_name(idx)}]")
            if not 0 <= idx < len(obj):
                raise CelError(f"index out of bounds: {idx}")
            return obj[idx]
        if isinstance(obj, dict):
            if idx not in obj:
                raise CelError(f"no such key: {idx}")
            return obj[idx]
        raise CelError(f"no such overload: {_type_name(obj)}[{_type_name(idx)}]")

    return ev


@dataclass(frozen=True, slots=True)
class Program:
    """A compiled rule. `is_transition` rules (those reading `oldSelf`) only run on updates."""

    source: str
    _root: _Node

    @property
    def is_transition(self) -> bool:
        return self._root.uses_old_self

    def evaluate(self, self_value: Any, old_self: Any = None) -> Any:
        try:
            return self._root.eval({"self": self_value, "oldSelf": old_self})
        except RecursionError as exc:
            raise CelError("expression too deeply nested") from exc


def compile_rule(source: str) -> Program:
    """Parse `source`; raise `CelSyntaxError` (with a position) for anything outside the subset."""
    if not source.strip():
        raise CelSyntaxError("rule is empty")
    return Program(source, _Parser(source).parse())
