"""Objects walked against their `Type`: the field set an applied configuration names, what
changed between two objects, the merge of an applied configuration onto the live object, and
the removal of fields a manager stopped applying. Each follows the walker of the same name in
structured-merge-diff's `typed` package."""

from __future__ import annotations

import copy
from typing import Any

from localcluster.fieldmanager.fieldpath import (
    Trie,
    field,
    index_element,
    is_member,
    key_element,
    node,
    value_element,
)
from localcluster.fieldmanager.typeinfo import ASSOCIATIVE, LIST, SCALAR, SET, STRUCT, Type


def _is_leaf(value: Any, t: Type) -> bool:
    if t.kind == SCALAR or t.atomic:
        return True
    if isinstance(value, dict):
        return t.kind == LIST
    if isinstance(value, list):
        return t.kind != LIST
    return True


def element(item: Any, index: int, t: Type) -> str:
    """The path element of a list item: its key fields, its value, or (atomic lists) its index."""
    if t.list_type == ASSOCIATIVE and isinstance(item, dict):
        if t.key_defaults and any(k not in item for k in t.key_defaults):
            item = {**t.key_defaults, **item}
        return key_element(item, t.keys)
    if t.list_type == SET:
        return value_element(item)
    return index_element(index)


def field_set(value: Any, t: Type) -> Trie:
    """`ToFieldSet`: leaves, list items and undeclared map keys are members; a declared field
    holding a non-empty object is only the parent of what is in it."""
    out: Trie = {}
    if _is_leaf(value, t):
        return out
    if isinstance(value, dict):
        for key, child in value.items():
            ct = t.child(key)
            leaf = child is None or _is_leaf(child, ct)
            children = {} if leaf else field_set(child, ct)
            declared = t.kind == STRUCT and key in t.fields
            member = leaf or child == {} or not declared
            entry = node(children, member)
            if entry is not None:
                out[field(key)] = entry
    else:
        elem = t.elem or t
        for i, item in enumerate(value):
            children = {} if item is None or _is_leaf(item, elem) else field_set(item, elem)
            out[element(item, i, t)] = node(children, True)
    return out


def _everything(value: Any, t: Type) -> Trie:
    """Every path inside `value`, each a member: what an added or removed subtree changes."""
    out: Trie = {}
    if value is None or _is_leaf(value, t):
        return out
    if isinstance(value, dict):
        for key, child in value.items():
            out[field(key)] = node(_everything(child, t.child(key)), True)
    else:
        elem = t.elem or t
        for i, item in enumerate(value):
            out[element(item, i, t)] = node(_everything(item, elem), True)
    return out


def _same_shape(a: Any, b: Any) -> bool:
    """Both objects or both lists (decoders may hand dict subclasses)."""
    return isinstance(a, dict) == isinstance(b, dict) and isinstance(a, list) == isinstance(b, list)


def _zero(like: Any) -> Any:
    return {} if isinstance(like, dict) else [] if isinstance(like, list) else None


def diff(old: Any, new: Any, t: Type) -> tuple[Trie, Trie, bool]:
    """`Compare`: (added or modified, removed, whether this node itself was modified). Equal
    subtrees are skipped by one `==`, which keeps ordinary writes cheap."""
    if old == new:
        return {}, {}, False
    if old is None and isinstance(new, dict | list) and not _is_leaf(new, t):
        old = _zero(new)
    elif new is None and isinstance(old, dict | list) and not _is_leaf(old, t):
        new = _zero(old)
    if _is_leaf(new, t) or _is_leaf(old, t) or not _same_shape(old, new):
        return {}, {}, True
    changed: Trie = {}
    removed: Trie = {}
    if isinstance(new, dict):
        for key in old.keys() | new.keys():
            ct = t.child(key)
            in_old, in_new = key in old, key in new
            ov, nv = old.get(key), new.get(key)
            if ov is None and nv is None:
                continue  # null and absent are the same zero value
            if not in_old and key in t.implicit:
                ov, in_old = _zero(nv), True
            elif not in_new and key in t.implicit:
                nv, in_new = _zero(ov), True
            _diff_child(field(key), ov, nv, in_old, in_new, ct, changed, removed)
    else:
        elem = t.elem or t
        old_items = {element(item, i, t): item for i, item in enumerate(old)}
        new_items = {element(item, i, t): item for i, item in enumerate(new)}
        for pe in old_items.keys() | new_items.keys():
            _diff_child(
                pe,
                old_items.get(pe),
                new_items.get(pe),
                pe in old_items,
                pe in new_items,
                elem,
                changed,
                removed,
            )
    return changed, removed, False


def created(new: dict[str, Any], t: Type) -> Trie:
    """`diff` from the kind's zero object: what a create sets. The same result as
    `diff({}, new, t)[0]`, in one pass without the comparisons (creates are the bulk of writes)."""
    out: Trie = {}
    for key, value in new.items():
        if value is None:
            continue
        ct = t.child(key)
        if key in t.implicit and isinstance(value, dict | list) and not _is_leaf(value, ct):
            inner = created(value, ct) if isinstance(value, dict) else _everything(value, ct)
            if inner:
                out[field(key)] = inner
        else:
            out[field(key)] = node(_everything(value, ct), True)
    return out


def _diff_child(
    pe: str, ov: Any, nv: Any, in_old: bool, in_new: bool, t: Type, changed: Trie, removed: Trie
) -> None:
    if in_old and in_new:
        c, r, modified = diff(ov, nv, t)
        entry = node(c, modified)
        if entry is not None:
            changed[pe] = entry
        gone = node(r, False)
        if gone is not None:
            removed[pe] = gone
    elif in_new:
        changed[pe] = node(_everything(nv, t), True)
    else:
        removed[pe] = node(_everything(ov, t), True)


def merge(live: Any, config: Any, t: Type) -> Any:
    """`Merge`: the applied configuration over the live object; lists merge per their type."""
    if live is None or config is None or _is_leaf(config, t) or not _same_shape(live, config):
        return copy.deepcopy(config)
    if isinstance(config, dict):
        out = dict(live)
        for key, value in config.items():
            if value is None:
                out.pop(key, None)
            elif key in out:
                out[key] = merge(out[key], value, t.child(key))
            else:
                out[key] = copy.deepcopy(value)
        return out
    return _merge_list(live, config, t)


def _merge_list(live: list[Any], config: list[Any], t: Type) -> list[Any]:
    """Items of both, ordered as SMD's `visitListItems`: live items the configuration does not
    name keep their place; named ones follow the configuration's order."""
    elem = t.elem or t
    lhs = [(element(v, i, t), v) for i, v in enumerate(live)]
    rhs = [(element(v, i, t), v) for i, v in enumerate(config)]
    lhs_map = dict(lhs)
    rhs_map = dict(rhs)
    shared = [pe for pe, _ in rhs if pe in lhs_map]
    shared_i = 0
    done: set[str] = set()
    out: list[Any] = []
    li = ri = 0
    while li < len(lhs) or ri < len(rhs):
        if li < len(lhs) and ri < len(rhs):
            pe = lhs[li][0]
            if pe == rhs[ri][0]:
                done.add(pe)
                out.append(merge(lhs_map[pe], rhs_map[pe], elem))
                li += 1
                ri += 1
                if shared_i < len(shared) and shared[shared_i] == pe:
                    shared_i += 1
                continue
            if pe in rhs_map and shared_i < len(shared) and shared[shared_i] != pe:
                li += 1
                continue
        if li < len(lhs):
            pe = lhs[li][0]
            if pe not in rhs_map:
                out.append(lhs[li][1])
                li += 1
                continue
            if pe in done:
                li += 1
                continue
        if ri < len(rhs):
            pe = rhs[ri][0]
            done.add(pe)
            out.append(merge(lhs_map[pe], rhs_map[pe], elem) if pe in lhs_map else copy.deepcopy(rhs_map[pe]))
            ri += 1
            if shared_i < len(shared) and shared[shared_i] == pe:
                shared_i += 1
    return out


def remove(obj: Any, last: Trie, owned: Trie, t: Type) -> None:
    """Drop from `obj` (in place) what `last` names and no manager in `owned` still owns. A
    field another manager owns part of keeps that part; a map or list left empty goes too."""
    if isinstance(obj, dict):
        for key, child in last.items():
            name = key[2:]
            if not key.startswith("f:") or name not in obj:
                continue
            owner = owned.get(key)
            if is_member(child) and owner is None:
                del obj[name]
            elif obj[name] is not None:
                remove(obj[name], child, owner or {}, t.child(name))
                if isinstance(obj[name], dict | list) and not obj[name]:
                    del obj[name]  # emptied: SMD's remover leaves null, which the typed object omits
    elif isinstance(obj, list) and not t.atomic:
        elem = t.elem or t
        keep = []
        for i, item in enumerate(obj):
            pe = element(item, i, t)
            child = last.get(pe)
            owner = owned.get(pe)
            if child is not None and is_member(child) and owner is None:
                continue
            if child is not None:
                remove(item, child, owner or {}, elem)
            keep.append(item)
        obj[:] = keep
