"""Caches that catch a controller reading a field its projection drops, or mutating a cached object.

`aiokcm run` caches pods and nodes narrowed (`informers.PROJECTIONS`). A controller reading a
dropped field would not fail: it would see the field absent and quietly decide wrong. So the
controller suites run on guarded caches: every object an informer caches is rebuilt from
`GuardedDict` / `GuardedList`, which note (in `Guard.violations`) and refuse

- a read (`obj[k]`, `obj.get(k)`, `k in obj`) of a key the projection drops, judged on the
  projection's field table (`POD_FIELDS`: what is kept, `NODE_DROPPED`: what is not), so a new
  read is caught whether or not the test's objects happen to carry the field;
- any mutation of a cached object (or of a sub-object reached through a shallow copy): cached
  objects are shared with every other controller, and projected ones share sub-objects
  between pods.

A deep copy (`copy.deepcopy`) is a plain, mutable dict: copying is how a controller gets
something to edit. Violations are recorded as well as raised because controllers catch
errors in their syncs; the fixture in `conftest.py` fails the test on any recorded one.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NoReturn, SupportsIndex

from apiclient.resources import Resource
from informers import FieldTree, Transform, default_transform
from informers.transform import NODE_DROPPED, POD_FIELDS, PROJECTIONS, node_projection, pod_projection


class ProjectionViolation(AssertionError):
    """A dropped field was read or a cached object was mutated."""


@dataclass
class Guard:
    violations: list[str] = field(default_factory=list)

    def fail(self, message: str) -> NoReturn:
        self.violations.append(message)
        raise ProjectionViolation(message)


@dataclass(frozen=True, slots=True)
class _Rule:
    """What may be read at one level: `kept` (None: any key) minus `dropped`; children by key."""

    kept: frozenset[str] | None
    dropped: frozenset[str]
    children: dict[str, _Rule]

    @staticmethod
    def keeping(tree: FieldTree | None) -> _Rule | None:
        if tree is None:
            return None
        children = {k: r for k, sub in tree.items() if (r := _Rule.keeping(sub)) is not None}
        return _Rule(frozenset(tree), frozenset(), children)

    @staticmethod
    def dropping(tree: FieldTree) -> _Rule:
        dropped = frozenset(k for k, sub in tree.items() if sub is None)
        children = {k: _Rule.dropping(sub) for k, sub in tree.items() if sub is not None}
        return _Rule(None, dropped, children)

    def allows(self, key: object) -> bool:
        if key in self.dropped:
            return False
        return self.kept is None or key in self.kept


_MUTATORS_DICT = ("__setitem__", "__delitem__", "__ior__", "pop", "popitem", "clear", "update")
_MUTATORS_LIST = (
    "__setitem__",
    "__delitem__",
    "__iadd__",
    "__imul__",
    "append",
    "extend",
    "insert",
    "pop",
    "remove",
    "clear",
    "sort",
    "reverse",
)


class GuardedDict(dict[str, Any]):
    __slots__ = ("_guard", "_path", "_rule")

    _guard: Guard
    _path: str
    _rule: _Rule | None

    def _check(self, key: object) -> None:
        rule = self._rule
        if rule is not None and not rule.allows(key):
            self._guard.fail(f"read of dropped field {self._path}.{key}")

    def __getitem__(self, key: str) -> Any:
        self._check(key)
        return super().__getitem__(key)

    def get(self, key: str, default: Any = None) -> Any:
        self._check(key)
        return super().get(key, default)

    def __contains__(self, key: object) -> bool:
        self._check(key)
        return super().__contains__(key)

    def setdefault(self, key: str, default: Any = None) -> Any:
        self._check(key)
        if not super().__contains__(key):
            self._guard.fail(f"mutation of cached {self._path} (setdefault {key!r})")
        return super().__getitem__(key)

    def __copy__(self) -> dict[str, Any]:
        return dict(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> dict[str, Any]:
        return {k: copy.deepcopy(v, memo) for k, v in dict.items(self)}

    def __reduce_ex__(self, protocol: SupportsIndex) -> Any:
        return (dict, (dict(self),))


class GuardedList(list[Any]):
    __slots__ = ("_guard", "_path")

    _guard: Guard
    _path: str

    def __copy__(self) -> list[Any]:
        return list(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> list[Any]:
        return [copy.deepcopy(v, memo) for v in list.__iter__(self)]

    def __reduce_ex__(self, protocol: SupportsIndex) -> Any:
        return (list, (list(self),))


def _refuse(cls: type, name: str) -> None:
    def mutate(self: Any, *args: Any, **kwargs: Any) -> Any:
        self._guard.fail(f"mutation of cached {self._path} ({name})")

    mutate.__name__ = name
    setattr(cls, name, mutate)


for _name in _MUTATORS_DICT:
    _refuse(GuardedDict, _name)
for _name in _MUTATORS_LIST:
    _refuse(GuardedList, _name)


def guarded(value: Any, rule: _Rule | None, guard: Guard, path: str) -> Any:
    """`value` rebuilt from guarded containers; `rule` says which keys may be read at this level."""
    if isinstance(value, dict):
        out = GuardedDict()
        for k, v in value.items():
            child = rule.children.get(k) if rule is not None else None
            dict.__setitem__(out, k, guarded(v, child, guard, f"{path}.{k}"))
        out._guard, out._path, out._rule = guard, path, rule
        return out
    if isinstance(value, list):
        lst = GuardedList(guarded(v, rule, guard, f"{path}[]") for v in value)
        lst._guard, lst._path = guard, path
        return lst
    return value


def guarded_transform(inner: Transform, rule: _Rule | None, guard: Guard, kind: str) -> Transform:
    def transform(obj: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = guarded(inner(obj), rule, guard, kind)
        return out

    return transform


RULES: dict[Transform, Callable[[], _Rule | None]] = {
    pod_projection: lambda: _Rule.keeping(POD_FIELDS),
    node_projection: lambda: _Rule.dropping(NODE_DROPPED),
}


class GuardedTransforms:
    """One stable guarded transform per resource (the factory compares transforms by identity)."""

    def __init__(self, guard: Guard, projections: dict[Resource, Transform] | None = None) -> None:
        self.guard = guard
        self.projections = dict(PROJECTIONS if projections is None else projections)
        self._made: dict[Resource, Transform] = {}

    def __call__(self, res: Resource) -> Transform:
        made = self._made.get(res)
        if made is None:
            inner = self.projections.get(res, default_transform)
            rule = RULES[inner]() if inner in RULES else None
            made = self._made[res] = guarded_transform(inner, rule, self.guard, res.kind or res.plural)
        return made
