"""The conditions' expression language: the subset of expr-lang that Argo Rollouts' analyses use.

Argo Rollouts evaluates `successCondition` and `failureCondition` with expr-lang
(github.com/expr-lang/expr), so the conditions people already have are written in it:
`result[0] >= 0.95`, `len(result) == 0 || result[0] < 0.05`, `!isNaN(result[0])`,
`all(result, {# < 0.5})`. Rather than carry a second parser, an expression is rewritten into the
Python expression that means the same and handed to `simpleeval`, which walks the tree without ever
calling Python's `eval`: `&&`, `||` and `!` become `and`, `or` and `not`, `^` becomes `**`,
`true`/`false`/`nil` are names, and a predicate `{...}` (where `#` is the element) becomes a
separate expression applied element by element by `all` and `any`.

The tree is then checked against an allow-list before anything runs: only comparisons, arithmetic,
`and`/`or`/`not`, `in`, indexing and slicing, list literals, numbers and strings, the name `result`
and calls of the functions below. So there is no attribute access, no comprehension, no lambda,
and the spec can be refused when it is written (`check`) rather than when the first node is gated.
Where expr-lang and Python differ the evaluator takes expr-lang's side: `&&`, `||` and `!` take
booleans only, `/` is float division with IEEE results for a zero divisor (`x / 0` is `+Inf`, as in
Go) and `**` is a float power that neither builds huge integers nor returns complex numbers.

Functions: `len`, `isNaN`, `isInf`, `all`, `any`, `abs`, `min`, `max`, and Argo's `asInt`,
`asFloat` and `default` (`result` is never nil here, so `default(result, 0)` is `result`).
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import simpleeval

#: Longer conditions are refused: a condition is one line of a spec, and the bound keeps parsing and
#: evaluation cheap whatever is written.
MAX_LENGTH = 1000
#: Deeper trees are refused: no condition needs them, and evaluation recurses once per level.
MAX_DEPTH = 100

_ELEMENT = "_element"
_PREDICATE = "_predicate"
_CONSTANTS: dict[str, Any] = {"true": True, "false": False, "nil": None}
_NUMBER = (int, float)


class ExpressionError(ValueError):
    """A condition that cannot be parsed, or cannot be evaluated against this result."""


@dataclass(frozen=True, slots=True)
class _Program:
    """One expression rewritten and checked: its tree, and the predicates (`{...}`) it names."""

    source: str
    tree: ast.expr
    predicates: tuple[_Program, ...]


def check(expr: str) -> None:
    """Refuse an expression that could never be evaluated (syntax, an unknown name or function, an
    operator expr-lang does not have), with a message that says what is wrong."""
    _compile(_text(expr))


def evaluate(expr: str, result: float | list[float]) -> bool:
    """The condition's value with `result` bound; ExpressionError when it cannot be had (an index
    out of range, a function given the wrong kind of value) or is not a boolean."""
    program = _compile(_text(expr))
    value = _run(program, result, element=None)
    if not isinstance(value, bool):
        raise ExpressionError(f"expected bool, but got {_kind(value)}")
    return value


# -- rewriting -------------------------------------------------------------------------------


def _text(expr: object) -> str:
    if not isinstance(expr, str):
        raise ExpressionError(f"an expression must be a string, got {type(expr).__name__}")
    return expr


@lru_cache(maxsize=512)
def _compile(expr: str) -> _Program:
    if len(expr) > MAX_LENGTH:
        raise ExpressionError(f"expression is {len(expr)} characters long, at most {MAX_LENGTH} are allowed")
    if not expr.strip():
        raise ExpressionError("expression is empty")
    program, _ = _translate(expr, 0, predicate=False)
    return program


def _translate(text: str, start: int, *, predicate: bool) -> tuple[_Program, int]:
    """Rewrite from `start` to the end (or, inside a predicate, to its closing brace)."""
    out: list[str] = []
    predicates: list[_Program] = []
    i = start
    while i < len(text):
        c = text[i]
        if c in "\"'`":
            literal, i = _string(text, i)
            out.append(literal)
            continue
        pair = text[i : i + 2]
        if pair in ("&&", "||"):
            out.append(" and " if pair == "&&" else " or ")
            i += 2
        elif pair in ("!=", "**"):
            out.append(pair)
            i += 2
        elif c == "!":
            out.append(" not ")
            i += 1
        elif c == "^":
            out.append("**")
            i += 1
        elif c == "#":
            if not predicate:
                raise ExpressionError(
                    f"'#' at column {i + 1} outside a predicate: write predicates in braces, "
                    "like all(result, {# < 0.5})"
                )
            out.append(f" {_ELEMENT} ")
            i += 1
        elif c == "{":
            inner, i = _translate(text, i + 1, predicate=True)
            out.append(f" {_PREDICATE}{len(predicates)} ")
            predicates.append(inner)
        elif c == "}":
            if not predicate:
                raise ExpressionError(f"unbalanced '}}' at column {i + 1}")
            return _parse("".join(out), tuple(predicates), element=True), i + 1
        elif c in "\r\n\t":
            out.append(" ")
            i += 1
        else:
            out.append(c)
            i += 1
    if predicate:
        raise ExpressionError("unbalanced '{': a predicate is not closed")
    return _parse("".join(out), tuple(predicates), element=False), i


def _string(text: str, start: int) -> tuple[str, int]:
    """A string literal copied as a Python literal; backquoted strings are raw, as in expr-lang."""
    quote = text[start]
    i = start + 1
    while i < len(text):
        c = text[i]
        if c == "\\" and quote != "`":
            i += 2
            continue
        if c == quote:
            body = text[start + 1 : i]
            return (repr(body) if quote == "`" else quote + body + quote), i + 1
        i += 1
    raise ExpressionError(f"unterminated string literal at column {start + 1}")


def _parse(source: str, predicates: tuple[_Program, ...], *, element: bool) -> _Program:
    if not source.strip():
        raise ExpressionError("empty predicate {}" if element else "expression is empty")
    try:
        tree = ast.parse(source.strip(), mode="eval")
    except SyntaxError as exc:
        raise ExpressionError(f"syntax error: {exc.msg}") from None
    except (ValueError, RecursionError, MemoryError):
        raise ExpressionError("expression is nested too deeply") from None
    _check_tree(tree.body, names=_allowed_names(len(predicates), element=element))
    return _Program(source=source, tree=tree.body, predicates=predicates)


# -- the allow-list --------------------------------------------------------------------------

_BINARY: dict[type[ast.operator], str] = {
    ast.Add: "+",
    ast.Sub: "-",
    ast.Mult: "*",
    ast.Div: "/",
    ast.Mod: "%",
    ast.Pow: "**",
}
_UNARY: dict[type[ast.unaryop], str] = {ast.Not: "!", ast.USub: "-", ast.UAdd: "+"}
_COMPARE: dict[type[ast.cmpop], str] = {
    ast.Eq: "==",
    ast.NotEq: "!=",
    ast.Lt: "<",
    ast.LtE: "<=",
    ast.Gt: ">",
    ast.GtE: ">=",
    ast.In: "in",
    ast.NotIn: "not in",
}
_FORBIDDEN_OPERATORS = {
    ast.BitAnd: "&",
    ast.BitOr: "|",
    ast.BitXor: "^",
    ast.LShift: "<<",
    ast.RShift: ">>",
    ast.FloorDiv: "//",
    ast.MatMult: "@",
    ast.Invert: "~",
    ast.Is: "is",
    ast.IsNot: "is not",
}


def _allowed_names(predicates: int, *, element: bool) -> frozenset[str]:
    names = {"result", *_CONSTANTS, *(f"{_PREDICATE}{n}" for n in range(predicates))}
    if element:
        names.add(_ELEMENT)
    return frozenset(names)


def _check_tree(root: ast.AST, *, names: frozenset[str]) -> None:
    callees: set[int] = set()  # the Name nodes of checked calls (the walk meets a call before its name)
    for node in _walk(root):
        if isinstance(node, (ast.BoolOp, ast.Subscript, ast.Slice, ast.List)):
            continue
        if isinstance(node, (ast.expr_context, ast.boolop, ast.operator, ast.unaryop, ast.cmpop)):
            continue  # judged with the node that holds them
        if isinstance(node, ast.BinOp | ast.UnaryOp):
            if type(node.op) not in _BINARY and type(node.op) not in _UNARY:
                raise ExpressionError(f"operator {_symbol(node.op)} is not supported")
        elif isinstance(node, ast.Compare):
            if len(node.ops) > 1:  # Python would read `a < b == c` as `a < b and b == c`, expr-lang not
                raise ExpressionError(
                    "chained comparisons are ambiguous: write a < b && b < c, or use parentheses"
                )
            for op in node.ops:
                if type(op) not in _COMPARE:
                    raise ExpressionError(f"operator {_symbol(op)} is not supported")
        elif isinstance(node, ast.Constant):
            if not isinstance(node.value, str) and type(node.value) not in _NUMBER:
                raise ExpressionError(_unknown(str(node.value)))
        elif isinstance(node, ast.Name):
            if id(node) not in callees and node.id not in names:
                raise ExpressionError(_unknown(node.id))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            if node.keywords or any(isinstance(a, ast.Starred) for a in node.args):
                raise ExpressionError(f"{node.func.id}() takes positional arguments only")
            if node.func.id not in _FUNCTIONS:
                known = ", ".join(sorted(_FUNCTIONS))
                raise ExpressionError(f"unknown function {node.func.id}() (known: {known})")
            callees.add(id(node.func))
        elif isinstance(node, ast.Attribute):
            raise ExpressionError(
                f"member access (.{node.attr}) is not supported: result is a number or a list of numbers"
            )
        else:
            raise ExpressionError(f"{_describe(node)} is not supported")


def _walk(root: ast.AST) -> Iterator[ast.AST]:
    """Every node, parents first; refused beyond MAX_DEPTH, so that evaluation's recursion (and
    with it, whether an expression works) never depends on the interpreter's recursion limit."""
    pending = [(root, 1)]
    while pending:
        node, depth = pending.pop()
        if depth > MAX_DEPTH:
            raise ExpressionError(f"expression is nested too deeply (more than {MAX_DEPTH} levels)")
        yield node
        pending.extend((child, depth + 1) for child in reversed(list(ast.iter_child_nodes(node))))


def _symbol(op: ast.AST) -> str:
    return _FORBIDDEN_OPERATORS.get(type(op), type(op).__name__)


def _unknown(name: str) -> str:
    if name in ("True", "False", "None"):
        return f"unknown name {name} (expr-lang spells it {'nil' if name == 'None' else name.lower()})"
    return f"unknown name {name}"


def _describe(node: ast.AST) -> str:
    return {
        "Call": "calling anything but a function by its name",
        "IfExp": "a conditional expression",
        "Lambda": "a lambda",
        "Tuple": "a tuple",
        "Dict": "a map literal",
        "Set": "a set literal",
        "ListComp": "a comprehension",
        "GeneratorExp": "a comprehension",
        "SetComp": "a comprehension",
        "DictComp": "a comprehension",
        "NamedExpr": "an assignment",
        "JoinedStr": "a formatted string",
        "Await": "await",
        "Yield": "yield",
        "Starred": "unpacking",
    }.get(type(node).__name__, type(node).__name__)


# -- evaluation ------------------------------------------------------------------------------


def _run(program: _Program, result: float | list[float], *, element: object) -> object:
    names: dict[str, Any] = {"result": result, **_CONSTANTS}
    if element is not None:
        names[_ELEMENT] = element
    for n, inner in enumerate(program.predicates):
        names[f"{_PREDICATE}{n}"] = _Predicate(inner, result)
    evaluator = _Evaluator(operators=_OPERATORS, functions=dict(_FUNCTIONS), names=names)
    try:
        return evaluator.eval(program.source, previously_parsed=program.tree)
    except ExpressionError:
        raise
    except IndexError:
        raise ExpressionError("index out of range") from None
    except KeyError as exc:
        raise ExpressionError(f"index {exc} out of range") from None
    except ZeroDivisionError:
        raise ExpressionError("integer divide by zero") from None
    except RecursionError:
        raise ExpressionError("expression is nested too deeply") from None
    except (TypeError, ValueError, OverflowError, simpleeval.InvalidExpression) as exc:
        raise ExpressionError(str(exc) or type(exc).__name__) from None


class _Predicate:
    """A `{...}` predicate: called once per element by all() and any()."""

    __slots__ = ("program", "result")

    def __init__(self, program: _Program, result: float | list[float]) -> None:
        self.program = program
        self.result = result

    def __call__(self, element: object) -> bool:
        value = _run(self.program, self.result, element=element)
        if not isinstance(value, bool):
            raise ExpressionError(f"a predicate must be a bool, but got {_kind(value)}")
        return value


class _Evaluator(simpleeval.SimpleEval):  # type: ignore[misc]
    """simpleeval with expr-lang's boolean operators: booleans in, a boolean out."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.nodes[ast.List] = self._eval_list

    def _eval_boolop(self, node: ast.BoolOp) -> bool:
        symbol = "&&" if isinstance(node.op, ast.And) else "||"
        for value in node.values:
            outcome = self._eval(value)
            if not isinstance(outcome, bool):
                raise ExpressionError(f"invalid operation: {symbol} needs bools, got {_kind(outcome)}")
            if outcome is isinstance(node.op, ast.Or):
                return outcome
        return not isinstance(node.op, ast.Or)

    def _eval_list(self, node: ast.List) -> list[Any]:
        return [self._eval(item) for item in node.elts]


def _kind(value: object) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float64"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if value is None:
        return "nil"
    return type(value).__name__


def _not(value: object) -> bool:
    if not isinstance(value, bool):
        raise ExpressionError(f"invalid operation: ! needs a bool, got {_kind(value)}")
    return not value


def _divide(a: object, b: object) -> float:
    """expr-lang's `/`: float division, and Go's IEEE answers for a zero divisor."""
    x, y = _float(a, "/"), _float(b, "/")
    if y == 0.0:
        if x == 0.0 or math.isnan(x):
            return math.nan
        return math.copysign(math.inf, x) * math.copysign(1.0, y)
    return x / y


def _power(a: object, b: object) -> float:
    """expr-lang's `**` (and `^`): a float, NaN where Go's math.Pow has no real answer."""
    x, y = _float(a, "**"), _float(b, "**")
    try:
        return math.pow(x, y)
    except OverflowError:
        negative = x < 0 and y.is_integer() and int(y) % 2 == 1
        return -math.inf if negative else math.inf
    except ValueError:
        return math.inf if x == 0.0 else math.nan


def _float(value: object, symbol: str) -> float:
    if isinstance(value, bool) or not isinstance(value, _NUMBER):
        raise ExpressionError(f"invalid operation: {symbol} needs numbers, got {_kind(value)}")
    return float(value)


def _is_nan(value: object) -> bool:
    return math.isnan(_float(value, "isNaN"))


def _is_inf(value: object) -> bool:
    return math.isinf(_float(value, "isInf"))


def _all(values: Iterable[Any], predicate: Callable[[Any], bool] | None = None) -> bool:
    if predicate is None:
        return all(_boolean(v, "all") for v in values)
    return all(predicate(v) for v in values)


def _any(values: Iterable[Any], predicate: Callable[[Any], bool] | None = None) -> bool:
    if predicate is None:
        return any(_boolean(v, "any") for v in values)
    return any(predicate(v) for v in values)


def _boolean(value: object, function: str) -> bool:
    if not isinstance(value, bool):
        raise ExpressionError(f"{function}() without a predicate needs bools, got {_kind(value)}")
    return value


def _length(value: object) -> int:
    if not isinstance(value, (list, str)):
        raise ExpressionError(f"invalid argument for len (type {_kind(value)})")
    return len(value)


def _extreme(pick: Callable[..., Any], name: str) -> Callable[..., Any]:
    def extreme(*args: Any) -> Any:
        values: Sequence[Any] = args[0] if len(args) == 1 and isinstance(args[0], list) else args
        if not values:
            raise ExpressionError(f"{name}() of an empty array")
        for v in values:
            _float(v, f"{name}()")
        return pick(values)

    return extreme


def _as_int(value: object) -> int:
    if isinstance(value, str):
        try:
            return int(value, 10)
        except ValueError:
            raise ExpressionError(f"asInt: cannot parse {value!r}") from None
    return int(_float(value, "asInt"))


def _as_float(value: object) -> float:
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            raise ExpressionError(f"asFloat: cannot parse {value!r}") from None
    return _float(value, "asFloat")


def _default(value: object, fallback: object) -> object:
    return fallback if value is None else value


def _abs(value: object) -> float | int:
    _float(value, "abs")
    return abs(value)  # type: ignore[arg-type]


_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "len": _length,
    "isNaN": _is_nan,
    "isInf": _is_inf,
    "all": _all,
    "any": _any,
    "abs": _abs,
    "min": _extreme(min, "min"),
    "max": _extreme(max, "max"),
    "asInt": _as_int,
    "asFloat": _as_float,
    "default": _default,
}

_OPERATORS: dict[type[ast.AST], Callable[..., Any]] = {
    ast.Add: simpleeval.safe_add,
    ast.Sub: operator.sub,
    ast.Mult: simpleeval.safe_mult,
    ast.Div: _divide,
    ast.Mod: operator.mod,
    ast.Pow: _power,
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.In: lambda x, y: operator.contains(y, x),
    ast.NotIn: lambda x, y: not operator.contains(y, x),
    ast.Not: _not,
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
}
