"""Field sets kept in their `FieldsV1` form: a trie whose keys are path elements (`f:name`,
`k:{"name":"x"}`, `v:"value"`, `i:0`). A child that is `{}`, or that holds `"."`, is a member
of the set; any other child is only a parent of members. Working on this form directly spares
a decode and an encode of every entry on each write."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson

Trie = dict[str, Any]
SELF = "."


def is_member(child: Trie) -> bool:
    return not child or SELF in child


def node(children: Trie, member: bool) -> Trie | None:
    """A child entry from its children and membership (None: neither, so nothing to keep)."""
    if not children:
        return {} if member else None
    if member and SELF not in children:
        children[SELF] = {}
    elif not member:
        children.pop(SELF, None)
        if not children:
            return None
    return children


def _kids(t: Trie) -> Trie:
    return {k: v for k, v in t.items() if k != SELF} if SELF in t else t


def union(a: Trie, b: Trie) -> Trie:
    if not a:
        return dict(b)
    if not b:
        return dict(a)
    out: Trie = {}
    for key in a.keys() | b.keys():
        if key == SELF:
            continue
        ca, cb = a.get(key), b.get(key)
        if ca is None or cb is None:
            out[key] = ca if cb is None else cb
            continue
        merged = node(union(_kids(ca), _kids(cb)), is_member(ca) or is_member(cb))
        if merged is not None:
            out[key] = merged
    return out


def difference(a: Trie, b: Trie) -> Trie:
    if not b:
        return dict(a)
    return _over_a(a, b, difference, keep_a_only=True, both_member=lambda in_a, in_b: in_a and not in_b)


def intersection(a: Trie, b: Trie) -> Trie:
    return _over_a(a, b, intersection, keep_a_only=False, both_member=lambda in_a, in_b: in_a and in_b)


def _over_a(
    a: Trie,
    b: Trie,
    combine: Callable[[Trie, Trie], Trie],
    *,
    keep_a_only: bool,
    both_member: Callable[[bool, bool], bool],
) -> Trie:
    """The walk difference and intersection share: each child of `a` is kept whole when `b`
    has no such key (`keep_a_only`) or dropped, and where both have it, `combine` recurses into
    the children and `both_member` says whether the path itself stays a member."""
    out: Trie = {}
    for key, ca in a.items():
        if key == SELF:
            continue
        cb = b.get(key)
        if cb is None:
            if keep_a_only:
                out[key] = ca
            continue
        kept = node(combine(_kids(ca), _kids(cb)), both_member(is_member(ca), is_member(cb)))
        if kept is not None:
            out[key] = kept
    return out


def members(t: Trie, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every member path, in the order `Set.Iterate` gives them."""
    out: list[tuple[str, ...]] = []
    for key in sorted((k for k in t if k != SELF), key=element_order):
        child = t[key]
        path = (*prefix, key)
        if is_member(child):
            out.append(path)
        out.extend(members(_kids(child), path))
    return out


# -- path elements -------------------------------------------------------------------------
def field(name: str) -> str:
    return "f:" + name


def key_element(item: dict[str, Any], keys: tuple[str, ...]) -> str:
    return "k:" + orjson.dumps({k: item.get(k) for k in sorted(keys) if k in item}).decode()


def value_element(value: Any) -> str:
    return "v:" + orjson.dumps(value).decode()


def index_element(i: int) -> str:
    return f"i:{i}"


def _value_order(value: Any) -> tuple[int, Any]:
    if value is None:
        return (0, 0)
    if isinstance(value, bool):
        return (3, value)
    if isinstance(value, int | float):
        return (1, value)
    if isinstance(value, str):
        return (2, value)
    return (4, orjson.dumps(value, option=orjson.OPT_SORT_KEYS))


def element_order(key: str) -> tuple[Any, ...]:
    """`PathElement.Compare`: fields, then keys, values and indexes, each in its own order."""
    kind, _, rest = key.partition(":")
    if kind == "f":
        return (0, rest.encode())
    if kind == "k":
        fields = orjson.loads(rest)
        return (1, [(name.encode(), _value_order(fields[name])) for name in sorted(fields)])
    if kind == "v":
        return (2, _value_order(orjson.loads(rest)))
    return (3, int(rest) if rest.lstrip("-").isdigit() else 0)


def _go_string(value: Any) -> str:
    """`value.ToString`: strings quoted, numbers and bools bare."""
    if isinstance(value, str):
        return orjson.dumps(value).decode()
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def path_string(path: tuple[str, ...]) -> str:
    """`fieldpath.Path.String`, as conflicts name fields: `.spec.containers[name="app"].image`."""
    out = []
    for element in path:
        kind, _, rest = element.partition(":")
        if kind == "f":
            out.append("." + rest)
        elif kind == "k":
            fields = orjson.loads(rest)
            out.append("[" + ",".join(f"{k}={_go_string(fields[k])}" for k in sorted(fields)) + "]")
        elif kind == "v":
            out.append(f"[={_go_string(orjson.loads(rest))}]")
        else:
            out.append(f"[{rest}]")
    return "".join(out)


def sort_trie(t: Trie) -> Trie:
    """The key order the real server serializes FieldsV1 in (`"."` first)."""
    out: Trie = {SELF: {}} if SELF in t else {}
    keys = [k for k in t if k != SELF]
    if all(k.startswith("f:") for k in keys):
        keys.sort()  # field names alone: code point order is Go's byte order
    else:
        keys.sort(key=element_order)
    for key in keys:
        child = t[key]
        out[key] = sort_trie(child) if child else {}
    return out
