"""Structural OpenAPI v3 schemas of CustomResourceDefinitions: check, prune, default, validate.

The real API server processes a custom resource write in this order, and so do we:
1. prune fields the schema does not know (unless `x-kubernetes-preserve-unknown-fields`),
   remembering them so `fieldValidation=Strict` can reject instead of drop;
2. apply `default`s where a field is missing (also inside array items and map values);
3. validate types, `enum`, `required`, min/max (value, length, items, properties), `pattern`,
   list-type uniqueness and `x-kubernetes-validations` rules, reporting each failure as a
   `StatusCause` whose `field` is the JSON path (`spec.replicas`, `spec.items[0].name`) and
   whose `message` reads exactly like the apiserver's `field.Error` body.

`check_schema` runs once at CRD creation: it enforces the structural rules we rely on and
compiles every CEL rule (`localcluster.cel`), so a CRD whose rule the real server would not
compile is rejected up front with a 422, as there.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import orjson

from localcluster.cel import CelError, CelSyntaxError, Program, compile_rule
from localcluster.registry import FieldError

__all__ = [
    "apply_defaults",
    "check_schema",
    "prune",
    "validate",
]

Schema = dict[str, Any]


def format_value(value: Any) -> str:
    """Render a bad value as Go's field.Error does (`%q` for strings, plain numbers/bools)."""
    if isinstance(value, str):
        return orjson.dumps(value).decode()
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, int | float):
        return repr(value)
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()


def _invalid(path: str, value: Any, detail: str) -> FieldError:
    return FieldError("FieldValueInvalid", path, f"Invalid value: {format_value(value)}: {detail}")


def _required(path: str) -> FieldError:
    return FieldError("FieldValueRequired", path, "Required value")


def _child(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _body_path(path: str) -> str:
    """kube-openapi names the location `<path> in body`."""
    return f"{path} in body" if path else "body"


# --------------------------------------------------------------------------- type helpers


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _type_ok(expected: str, value: Any) -> bool:
    actual = _json_type(value)
    if expected == "number":
        return actual in {"number", "integer"}
    if expected == "integer" and isinstance(value, float):
        return value.is_integer()
    return actual == expected


# --------------------------------------------------------------------------- CRD-time checks


@lru_cache(maxsize=512)
def _compile(rule: str) -> Program:
    return compile_rule(rule)


def check_schema(schema: Schema, path: str = "spec.versions[0].schema.openAPIV3Schema") -> list[FieldError]:
    """Structural and rule checks done when a CRD is created or updated (422 on any cause)."""
    causes: list[FieldError] = []
    if schema.get("type") != "object":
        causes.append(
            FieldError(
                "FieldValueRequired" if "type" not in schema else "FieldValueInvalid",
                f"{path}.type",
                "Required value: must be object at the root"
                if "type" not in schema
                else f"Invalid value: {format_value(schema.get('type'))}: must be object at the root",
            )
        )
    _check_node(schema, path, causes, root=True)
    return causes


def _check_node(node: Schema, path: str, causes: list[FieldError], *, root: bool = False) -> None:
    if not isinstance(node, dict):
        causes.append(FieldError("FieldValueInvalid", path, "Invalid value: must be a schema object"))
        return
    loose = node.get("x-kubernetes-int-or-string") or node.get("x-kubernetes-preserve-unknown-fields")
    if "type" not in node and not loose and not root and ("properties" in node or "items" in node):
        causes.append(
            FieldError(
                "FieldValueRequired",
                f"{path}.type",
                "Required value: must not be empty for specified "
                + ("object" if "properties" in node else "array")
                + " fields",
            )
        )
    if "properties" in node and "additionalProperties" in node:
        causes.append(
            FieldError(
                "FieldValueForbidden",
                f"{path}.additionalProperties",
                "Forbidden: additionalProperties and properties are mutual exclusive",
            )
        )
    if node.get("type") == "array" and "items" not in node:
        causes.append(FieldError("FieldValueRequired", f"{path}.items", "Required value: must be specified"))
    for i, rule in enumerate(node.get("x-kubernetes-validations") or []):
        rpath = f"{path}.x-kubernetes-validations[{i}]"
        expr = rule.get("rule") if isinstance(rule, dict) else None
        if not isinstance(expr, str) or not expr.strip():
            causes.append(FieldError("FieldValueRequired", f"{rpath}.rule", "Required value"))
            continue
        try:
            compile_rule(expr, node, resource_root=root or bool(node.get("x-kubernetes-embedded-resource")))
        except CelSyntaxError as exc:
            causes.append(
                FieldError(
                    "FieldValueInvalid",
                    f"{rpath}.rule",
                    f"Invalid value: {format_value(expr)}: compilation failed: {exc}",
                )
            )
        if "messageExpression" in rule:
            causes.append(
                FieldError(
                    "FieldValueForbidden",
                    f"{rpath}.messageExpression",
                    "Forbidden: messageExpression is not supported by this local cluster; use message",
                )
            )
    for name, sub in (node.get("properties") or {}).items():
        if (
            root
            and name == "metadata"
            and isinstance(sub, dict)
            and set(sub.get("properties") or {}) - {"name", "generateName"}
        ):
            causes.append(
                FieldError(
                    "FieldValueForbidden",
                    f"{path}.properties[metadata]",
                    "Forbidden: must not specify anything other than name and generateName, "
                    "but metadata is implicitly specified",
                )
            )
        _check_node(sub, f"{path}.properties[{name}]", causes)
    if isinstance(node.get("items"), dict):
        _check_node(node["items"], f"{path}.items", causes)
    if isinstance(node.get("additionalProperties"), dict):
        _check_node(node["additionalProperties"], f"{path}.additionalProperties", causes)


# --------------------------------------------------------------------------- pruning

_ROOT_KEEP = {"apiVersion", "kind", "metadata"}


def prune(obj: dict[str, Any], schema: Schema) -> list[str]:
    """Drop unknown fields in place; return their paths (for `fieldValidation=Strict` / `Warn`)."""
    dropped: list[str] = []
    _prune(obj, schema, "", dropped, root=True)
    return dropped


def _prune(value: Any, node: Schema, path: str, dropped: list[str], *, root: bool = False) -> None:
    if isinstance(value, dict):
        props = node.get("properties")
        addl = node.get("additionalProperties")
        embedded = root or node.get("x-kubernetes-embedded-resource")
        preserve = node.get("x-kubernetes-preserve-unknown-fields")
        for key in list(value):
            if embedded and key in _ROOT_KEEP:
                continue
            if props is not None and key in props:
                _prune(value[key], props[key], _child(path, key), dropped)
            elif isinstance(addl, dict):
                _prune(value[key], addl, f"{path}[{key}]" if path else key, dropped)
            elif addl is True or preserve:
                continue
            else:
                dropped.append(_child(path, key))
                del value[key]
    elif isinstance(value, list) and isinstance(node.get("items"), dict):
        for i, item in enumerate(value):
            _prune(item, node["items"], f"{path}[{i}]", dropped)


# --------------------------------------------------------------------------- defaulting


def apply_defaults(obj: Any, schema: Schema) -> None:
    """Fill missing fields that declare a `default` (deep copies; nested objects only if present)."""
    if isinstance(obj, dict):
        for key, sub in (schema.get("properties") or {}).items():
            if key not in obj and "default" in sub:
                obj[key] = copy.deepcopy(sub["default"])
            if key in obj:
                apply_defaults(obj[key], sub)
        addl = schema.get("additionalProperties")
        if isinstance(addl, dict):
            for key, val in obj.items():
                if key not in (schema.get("properties") or {}):
                    apply_defaults(val, addl)
    elif isinstance(obj, list) and isinstance(schema.get("items"), dict):
        for item in obj:
            apply_defaults(item, schema["items"])


# --------------------------------------------------------------------------- validation


@dataclass(slots=True)
class _Walk:
    causes: list[FieldError] = field(default_factory=list)


def validate(obj: dict[str, Any], schema: Schema, old: dict[str, Any] | None = None) -> list[FieldError]:
    """All schema and rule violations of `obj` (after pruning and defaulting); `old` on updates."""
    walk = _Walk()
    root = {k: v for k, v in schema.items() if k != "properties"}
    root["properties"] = {k: v for k, v in (schema.get("properties") or {}).items() if k != "metadata"}
    _validate(_rule_view(obj), root, "", None if old is None else _rule_view(old), walk)
    return walk.causes


def _rule_view(obj: dict[str, Any]) -> dict[str, Any]:
    """The object as validation and root rules see it: of metadata, only name and generateName."""
    body = {k: v for k, v in obj.items() if k != "metadata"}
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        body["metadata"] = {k: meta[k] for k in ("name", "generateName") if k in meta}
    return body


def _validate(value: Any, node: Schema, path: str, old: Any, walk: _Walk) -> None:
    causes = walk.causes
    if value is None:
        if not node.get("nullable") and "type" in node:
            causes.append(
                _invalid(path, "null", f'{_body_path(path)} must be of type {node["type"]}: "null"')
            )
        return
    typ = node.get("type")
    if node.get("x-kubernetes-int-or-string"):
        if not (isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))):
            actual = _json_type(value)
            causes.append(
                _invalid(
                    path,
                    actual,
                    f"{_body_path(path)} must be of type integer-or-string: {format_value(actual)}",
                )
            )
            return
    elif typ and not _type_ok(typ, value):
        actual = _json_type(value)
        causes.append(
            _invalid(path, actual, f"{_body_path(path)} must be of type {typ}: {format_value(actual)}")
        )
        return
    before = len(causes)
    _check_enum(value, node, path, causes)
    _check_scalar(value, node, path, causes)
    if isinstance(value, dict):
        _validate_object(value, node, path, old if isinstance(old, dict) else None, walk)
    elif isinstance(value, list):
        _validate_array(value, node, path, old if isinstance(old, list) else None, walk)
    if len(causes) == before:  # rules see only values that passed the schema, as in the apiserver
        _check_rules(value, node, path, old, causes)


def _check_enum(value: Any, node: Schema, path: str, causes: list[FieldError]) -> None:
    enum = node.get("enum")
    if enum is not None and value not in enum:
        supported = ", ".join(format_value(v) for v in enum)
        causes.append(
            FieldError(
                "FieldValueNotSupported",
                path,
                f"Unsupported value: {format_value(value)}: supported values: {supported}",
            )
        )


def _check_scalar(value: Any, node: Schema, path: str, causes: list[FieldError]) -> None:
    where = _body_path(path)
    if isinstance(value, int | float) and not isinstance(value, bool):
        if "minimum" in node:
            lo = node["minimum"]
            if value < lo or (node.get("exclusiveMinimum") and value == lo):
                rel = "greater than" if node.get("exclusiveMinimum") else "greater than or equal to"
                causes.append(_invalid(path, value, f"{where} should be {rel} {lo}"))
        if "maximum" in node:
            hi = node["maximum"]
            if value > hi or (node.get("exclusiveMaximum") and value == hi):
                rel = "less than" if node.get("exclusiveMaximum") else "less than or equal to"
                causes.append(_invalid(path, value, f"{where} should be {rel} {hi}"))
        if node.get("multipleOf") and value % node["multipleOf"]:
            causes.append(_invalid(path, value, f"{where} should be a multiple of {node['multipleOf']}"))
    if isinstance(value, str):
        if "minLength" in node and len(value) < node["minLength"]:
            causes.append(_invalid(path, value, f"{where} should be at least {node['minLength']} chars long"))
        if "maxLength" in node and len(value) > node["maxLength"]:
            causes.append(
                FieldError(
                    "FieldValueTooLong", path, f"Too long: may not be more than {node['maxLength']} bytes"
                )
            )
        if "pattern" in node and re.search(node["pattern"], value) is None:
            causes.append(_invalid(path, value, f"{where} should match '{node['pattern']}'"))


def _validate_object(
    value: dict[str, Any], node: Schema, path: str, old: dict[str, Any] | None, walk: _Walk
) -> None:
    causes = walk.causes
    for name in node.get("required") or []:
        if name not in value:
            causes.append(_required(_child(path, name)))
    if "minProperties" in node and len(value) < node["minProperties"]:
        causes.append(
            _invalid(
                path,
                len(value),
                f"{_body_path(path)} should have at least {node['minProperties']} properties",
            )
        )
    if "maxProperties" in node and len(value) > node["maxProperties"]:
        causes.append(
            FieldError(
                "FieldValueTooMany",
                path,
                f"Too many: {len(value)}: must have at most {node['maxProperties']} items",
            )
        )
    props = node.get("properties") or {}
    addl = node.get("additionalProperties")
    for key, sub in value.items():
        old_sub = old.get(key) if old is not None else None
        if key in props:
            _validate(sub, props[key], _child(path, key), old_sub, walk)
        elif isinstance(addl, dict):
            _validate(sub, addl, f"{path}[{key}]" if path else key, old_sub, walk)


def _validate_array(value: list[Any], node: Schema, path: str, old: list[Any] | None, walk: _Walk) -> None:
    causes = walk.causes
    if "minItems" in node and len(value) < node["minItems"]:
        causes.append(
            _invalid(path, len(value), f"{_body_path(path)} should have at least {node['minItems']} items")
        )
    if "maxItems" in node and len(value) > node["maxItems"]:
        causes.append(
            FieldError(
                "FieldValueTooMany",
                path,
                f"Too many: {len(value)}: must have at most {node['maxItems']} items",
            )
        )
    list_type = node.get("x-kubernetes-list-type")
    keys = node.get("x-kubernetes-list-map-keys") or []
    if node.get("uniqueItems") or list_type == "set":
        seen: set[bytes] = set()
        for i, item in enumerate(value):
            enc = orjson.dumps(item, option=orjson.OPT_SORT_KEYS)
            if enc in seen:
                causes.append(
                    FieldError(
                        "FieldValueDuplicate", f"{path}[{i}]", f"Duplicate value: {format_value(item)}"
                    )
                )
            seen.add(enc)
    old_by_key: dict[tuple[Any, ...], Any] = {}
    if list_type == "map" and keys:
        seen_keys: set[tuple[Any, ...]] = set()
        for i, item in enumerate(value):
            if isinstance(item, dict):
                k = tuple(item.get(n) for n in keys)
                if k in seen_keys:
                    dup = {n: item.get(n) for n in keys}
                    causes.append(
                        FieldError(
                            "FieldValueDuplicate", f"{path}[{i}]", f"Duplicate value: {format_value(dup)}"
                        )
                    )
                seen_keys.add(k)
        for item in old or []:
            if isinstance(item, dict):
                old_by_key[tuple(item.get(n) for n in keys)] = item
    items = node.get("items")
    if isinstance(items, dict):
        for i, item in enumerate(value):
            # Only map-type lists correlate items with the old object (for transition rules).
            old_item = (
                old_by_key.get(tuple(item.get(n) for n in keys))
                if old_by_key and isinstance(item, dict)
                else None
            )
            _validate(item, items, f"{path}[{i}]", old_item, walk)


def _check_rules(value: Any, node: Schema, path: str, old: Any, causes: list[FieldError]) -> None:
    rules = node.get("x-kubernetes-validations")
    if not rules:
        return
    typ = node.get("type") or "object"
    for rule in rules:
        program = _compile(rule["rule"])
        if program.is_transition and old is None:
            continue  # transition rules run only on updates whose old object has this value
        where = path
        if rule.get("fieldPath"):
            fp = str(rule["fieldPath"]).lstrip(".")
            where = _child(path, fp)
        reason = rule.get("reason") or "FieldValueInvalid"
        try:
            ok = program.evaluate(value, old, node)
        except CelError as exc:
            if str(exc).startswith("no such overload"):  # the apiserver's words for a dyn value's type error
                detail = (
                    f"'{exc}': call arguments did not match a supported operator, function or macro "
                    f"signature for rule: {_rule_text(rule)}"
                )
            else:
                detail = f"{exc} evaluating rule: {_rule_text(rule)}"
            causes.append(_invalid(where, typ, detail))
            continue
        if ok is True:
            continue
        if ok is not False:
            causes.append(_invalid(where, typ, f"rule did not evaluate to a bool: {_rule_text(rule)}"))
            continue
        msg = rule.get("message") or f"failed rule: {rule['rule']}"
        causes.append(_rule_cause(reason, where, typ, msg))


def _rule_text(rule: dict[str, Any]) -> str:
    return str(rule.get("message") or rule["rule"])


def _rule_cause(reason: str, path: str, typ: str, msg: str) -> FieldError:
    if reason == "FieldValueRequired":
        return FieldError(reason, path, f"Required value: {msg}")
    if reason == "FieldValueForbidden":
        return FieldError(reason, path, f"Forbidden: {msg}")
    if reason == "FieldValueDuplicate":
        return FieldError(reason, path, f"Duplicate value: {format_value(typ)}: {msg}")
    return _invalid(path, typ, msg)
