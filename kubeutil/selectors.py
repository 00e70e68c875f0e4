"""Label and field selectors with Kubernetes' semantics.

One implementation for the string form (`a=b,c in (x,y),!d`, what `?labelSelector=` carries)
and the structured `metav1.LabelSelector` (`matchLabels` / `matchExpressions`), so the
informer listers, the controllers and the local API server agree on what matches.

As `metav1.LabelSelectorAsSelector`: an absent (None) LabelSelector matches nothing, an empty
one matches everything.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kubeutil.strconv import go_quote, parse_int

_OPERATORS = ("in", "notin", "=", "==", "!=", "exists", "!")


class SelectorError(ValueError):
    """A selector that cannot be parsed or is not valid."""


@dataclass(frozen=True, slots=True)
class Requirement:
    key: str
    operator: str  # "in", "notin", "exists", "!" (does not exist), "=", "!=", "gt", "lt"
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        op = self.operator
        if op == "exists":
            return self.key in labels
        if op == "!":
            return self.key not in labels
        present = self.key in labels
        value = labels.get(self.key)
        if op in ("=", "in"):
            return present and value in self.values
        if op in ("!=", "notin"):
            return not present or value not in self.values
        if op in ("gt", "lt"):
            if not present or value is None or len(self.values) != 1:
                return False
            have, want = parse_int(value), parse_int(self.values[0])
            if have is None or want is None:
                return False
            return have > want if op == "gt" else have < want
        raise SelectorError(f"unknown operator {op!r}")

    def __str__(self) -> str:
        op = self.operator
        if op == "exists":
            return self.key
        if op == "!":
            return f"!{self.key}"
        if op in ("=", "!="):
            return f"{self.key}{op}{self.values[0]}"
        if op in ("gt", "lt"):
            return f"{self.key}{'>' if op == 'gt' else '<'}{self.values[0]}"
        return f"{self.key} {op} ({','.join(sorted(self.values))})"


@dataclass(frozen=True, slots=True)
class Selector:
    """A conjunction of requirements; `nothing=True` is the selector that matches no object."""

    requirements: tuple[Requirement, ...] = ()
    nothing: bool = False

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        if self.nothing:
            return False
        lbls = labels or {}
        return all(r.matches(lbls) for r in self.requirements)

    def matches_obj(self, obj: Mapping[str, Any]) -> bool:
        return self.matches((obj.get("metadata") or {}).get("labels"))

    @property
    def empty(self) -> bool:
        return not self.nothing and not self.requirements

    def __str__(self) -> str:
        return ",".join(str(r) for r in self.requirements)


EVERYTHING = Selector()
NOTHING = Selector(nothing=True)

_KEY_RE = re.compile(
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"
)
_VALUE_RE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


def is_label_key(key: str) -> bool:
    """A qualified name (`[prefix/]name`), as `labels.NewRequirement` validates every key."""
    return bool(key) and len(key) <= 316 and _KEY_RE.match(key) is not None


def is_label_value(value: str) -> bool:
    """At most 63 characters, alphanumeric at both ends; the empty value is valid."""
    return len(value) <= 63 and _VALUE_RE.match(value) is not None


def _check_key(key: str) -> str:
    if not is_label_key(key):
        raise SelectorError(f"invalid label key {key!r}")
    return key


def _check_value(value: str) -> str:
    if not is_label_value(value):
        raise SelectorError(f"invalid label value {value!r}")
    return value


def _split_top_level(text: str) -> list[str]:
    parts: list[str] = []
    depth = 0
    current: list[str] = []
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth < 0:
                raise SelectorError(f"unbalanced parenthesis in {text!r}")
        if ch == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    if depth != 0:
        raise SelectorError(f"unbalanced parenthesis in {text!r}")
    parts.append("".join(current))
    return parts


_SET_RE = re.compile(r"^\s*(\S+)\s+(in|notin)\s*\((.*)\)\s*$")
_CMP_RE = re.compile(r"^\s*([^=!<>\s]+)\s*(==|=|!=|<|>)\s*(\S*)\s*$")


def parse(text: str | None) -> Selector:
    """Parse the string form; an empty string selects everything."""
    if text is None or not text.strip():
        return EVERYTHING
    reqs: list[Requirement] = []
    for raw in _split_top_level(text):
        part = raw.strip()
        if not part:
            raise SelectorError(f"empty requirement in selector {text!r}")
        m = _SET_RE.match(part)
        if m:
            key, op, vals = m.group(1), m.group(2), m.group(3)
            values = tuple(sorted({_check_value(v.strip()) for v in vals.split(",")}))
            reqs.append(Requirement(_check_key(key), op, values))
            continue
        m = _CMP_RE.match(part)
        if m:
            key, op, value = m.group(1), m.group(2), m.group(3)
            if op == "==":
                op = "="
            if op in ("<", ">"):
                if parse_int(value) is None:
                    raise SelectorError(f"{part!r}: {op} needs an integer")
                reqs.append(Requirement(_check_key(key), "lt" if op == "<" else "gt", (value,)))
            else:
                reqs.append(Requirement(_check_key(key), op, (_check_value(value),)))
            continue
        if part.startswith("!"):
            reqs.append(Requirement(_check_key(part[1:].strip()), "!"))
            continue
        if re.match(r"^\S+$", part):
            reqs.append(Requirement(_check_key(part), "exists"))
            continue
        raise SelectorError(f"unable to parse requirement {part!r}")
    return Selector(tuple(reqs))


_LABEL_SELECTOR_OPERATORS = frozenset({"In", "NotIn", "Exists", "DoesNotExist"})


def from_label_selector(selector: Mapping[str, Any] | None) -> Selector:
    """`metav1.LabelSelectorAsSelector`: None matches nothing, {} matches everything."""
    if selector is None:
        return NOTHING
    reqs: list[Requirement] = []
    for key, value in sorted((selector.get("matchLabels") or {}).items()):
        reqs.append(Requirement(_check_key(key), "=", (_check_value(str(value)),)))
    for expr in selector.get("matchExpressions") or []:
        op = str(expr.get("operator") or "")
        if op not in _LABEL_SELECTOR_OPERATORS:
            # Checked before the key, with Go's message: it ends up in PDB and ReplicaSet conditions.
            raise SelectorError(f"{go_quote(op)} is not a valid label selector operator")
        key = _check_key(str(expr.get("key", "")))
        values = tuple(sorted(str(v) for v in (expr.get("values") or [])))
        if op == "In":
            if not values:
                raise SelectorError(f"{key}: operator In needs at least one value")
            reqs.append(Requirement(key, "in", values))
        elif op == "NotIn":
            if not values:
                raise SelectorError(f"{key}: operator NotIn needs at least one value")
            reqs.append(Requirement(key, "notin", values))
        elif op == "Exists":
            if values:
                raise SelectorError(f"{key}: operator Exists takes no values")
            reqs.append(Requirement(key, "exists"))
        else:
            if values:
                raise SelectorError(f"{key}: operator DoesNotExist takes no values")
            reqs.append(Requirement(key, "!"))
    if not reqs:
        return EVERYTHING
    return Selector(tuple(reqs))


@dataclass(frozen=True, slots=True)
class FieldRequirement:
    field: str
    operator: str  # "=" or "!="
    value: str


def parse_fields(text: str | None) -> tuple[FieldRequirement, ...]:
    """Field selectors support only `=`, `==` and `!=`, as the API server does."""
    if text is None or not text.strip():
        return ()
    out: list[FieldRequirement] = []
    for raw in text.split(","):
        part = raw.strip()
        if not part:
            continue  # an empty term selects nothing more, as `fields.ParseSelector` skips it
        m = re.match(r"^([^=!\s]+)\s*(==|=|!=)\s*(.*)$", part)
        if not m:
            raise SelectorError(f"invalid field selector {part!r}")
        op = "=" if m.group(2) in ("=", "==") else "!="
        out.append(FieldRequirement(m.group(1), op, m.group(3).strip()))
    return tuple(out)


def field_value(obj: Mapping[str, Any], path: str) -> str:
    """The string value at a dotted path (`spec.nodeName`); missing fields read as ''."""
    cur: Any = obj
    for part in path.split("."):
        if not isinstance(cur, Mapping):
            return ""
        cur = cur.get(part)
    if cur is None:
        return ""
    if isinstance(cur, bool):
        return "true" if cur else "false"
    return str(cur)


def fields_match(obj: Mapping[str, Any], requirements: tuple[FieldRequirement, ...]) -> bool:
    for req in requirements:
        have = field_value(obj, req.field)
        if (have == req.value) != (req.operator == "="):
            return False
    return True
