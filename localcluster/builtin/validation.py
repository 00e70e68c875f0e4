"""Validation shared by every kind: object metadata and the name formats of apimachinery.

Messages follow `k8s.io/apimachinery/pkg/util/validation` word for word where clients or
humans read them (kubectl prints them back).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import Any

from kubeutil import selectors
from localcluster.registry import FieldError, Obj

_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")

LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start "
    "and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)
SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and "
    "must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)


def dns_label(value: str) -> str | None:
    if len(value) > 63:
        return "must be no more than 63 characters"
    return None if _DNS1123_LABEL.match(value) else LABEL_MSG


def dns_subdomain(value: str) -> str | None:
    if len(value) > 253:
        return "must be no more than 253 characters"
    return None if _DNS1123_SUBDOMAIN.match(value) else SUBDOMAIN_MSG


def path_segment(value: str) -> str | None:
    """`path.IsValidPathSegmentName`: what RBAC names must be (they may hold ':', as `system:discovery`)."""
    if value in (".", ".."):
        return f"may not be '{value}'"
    for bad in ("/", "%"):
        if bad in value:
            return f"may not contain '{bad}'"
    return None


def validate_name(name: str, *, label: bool, segment: bool = False) -> list[FieldError]:
    problem = path_segment(name) if segment else dns_label(name) if label else dns_subdomain(name)
    return [FieldError.invalid("metadata.name", name, problem)] if problem else []


def validate_labels(labels: Any, path: str) -> list[FieldError]:
    if labels is None:
        return []
    if not isinstance(labels, dict):
        return [FieldError.invalid(path, labels, "must be a map of strings")]
    out: list[FieldError] = []
    for key, value in labels.items():
        try:
            selectors._check_key(key)
        except selectors.SelectorError:
            out.append(
                FieldError.invalid(
                    path, key, "name part must consist of alphanumeric characters, '-', '_' or '.'"
                )
            )
        if not isinstance(value, str):
            out.append(FieldError.invalid(f"{path}.{key}", value, "must be a string"))
            continue
        try:
            selectors._check_value(value)
        except selectors.SelectorError:
            out.append(
                FieldError.invalid(
                    path,
                    value,
                    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
                    "and must start and end with an alphanumeric character",
                )
            )
    return out


def validate_meta(
    meta: Any, *, label_name: bool, namespaced: bool, segment_name: bool = False
) -> list[FieldError]:
    """Metadata checks the generic registry makes on every write."""
    if not isinstance(meta, dict):
        return [FieldError.required("metadata")]
    out: list[FieldError] = []
    name = meta.get("name")
    if not name:
        out.append(FieldError.required("metadata.name", "Required value: name or generateName is required"))
    elif not isinstance(name, str):
        out.append(FieldError.invalid("metadata.name", name, "must be a string"))
    else:
        out.extend(validate_name(name, label=label_name, segment=segment_name))
    if namespaced and not meta.get("namespace"):
        out.append(FieldError.required("metadata.namespace"))
    out.extend(validate_labels(meta.get("labels"), "metadata.labels"))
    annotations = meta.get("annotations")
    if annotations is not None:
        if not isinstance(annotations, dict) or not all(isinstance(v, str) for v in annotations.values()):
            out.append(FieldError.invalid("metadata.annotations", annotations, "must be a map of strings"))
        elif sum(len(k) + len(v) for k, v in annotations.items()) > 256 * 1024:
            out.append(
                FieldError(
                    "FieldValueTooLong", "metadata.annotations", "Too long: must have at most 262144 bytes"
                )
            )
    finalizers = meta.get("finalizers")
    if finalizers is not None:
        if not isinstance(finalizers, list) or not all(isinstance(f, str) for f in finalizers):
            out.append(FieldError.invalid("metadata.finalizers", finalizers, "must be a list of strings"))
        elif "orphan" in finalizers and "foregroundDeletion" in finalizers:
            out.append(
                FieldError.invalid(
                    "metadata.finalizers",
                    "foregroundDeletion",
                    "finalizer orphan and foregroundDeletion cannot be both set",
                )
            )
    for i, ref in enumerate(meta.get("ownerReferences") or []):
        path = f"metadata.ownerReferences[{i}]"
        for key in ("apiVersion", "kind", "name", "uid"):
            if not isinstance(ref, dict) or not ref.get(key):
                out.append(FieldError.invalid(f"{path}.{key}", "", f"{key} must not be empty"))
    controllers = [
        r for r in meta.get("ownerReferences") or [] if isinstance(r, dict) and r.get("controller")
    ]
    if len(controllers) > 1:
        out.append(
            FieldError.invalid(
                "metadata.ownerReferences", controllers, "Only one reference can have Controller set to true"
            )
        )
    return out


def object_items(items: Iterable[Any], path: str, errs: list[FieldError]) -> Iterator[tuple[str, Obj]]:
    """Each item of a list that must hold objects, with its path (`path[i]`); an item that is not
    an object goes to `errs` as an invalid value, in list order with what the caller adds."""
    for i, item in enumerate(items):
        item_path = f"{path}[{i}]"
        if isinstance(item, dict):
            yield item_path, item
        else:
            errs.append(FieldError.invalid(item_path, item, "must be an object"))


def non_negative(value: Any, path: str) -> list[FieldError]:
    if value is None:
        return []
    if not isinstance(value, int) or isinstance(value, bool):
        return [FieldError.invalid(path, value, "must be an integer")]
    if value < 0:
        return [FieldError.invalid(path, value, "must be greater than or equal to 0")]
    return []


def validate_label_selector(selector: Any, path: str) -> list[FieldError]:
    if selector is None:
        return []
    try:
        selectors.from_label_selector(selector)
    except selectors.SelectorError as exc:
        return [FieldError.invalid(path, selector, str(exc))]
    return []


def immutable(new: Any, old: Any, path: str) -> list[FieldError]:
    if new != old:
        return [FieldError("FieldValueInvalid", path, f"Invalid value: {_compact(new)}: field is immutable")]
    return []


def _compact(value: Any) -> str:
    import orjson

    return orjson.dumps(value).decode() if not isinstance(value, str) else f'"{value}"'


PORT_RANGE_MSG = "must be between 1 and 65535, inclusive"


def port_number(value: Any, path: str) -> list[FieldError]:
    """`validation.IsValidPortNum` as `field.Invalid` words it (ports of containers and services)."""
    if isinstance(value, int) and not isinstance(value, bool) and not 1 <= value <= 65535:
        return [FieldError.invalid(path, value, PORT_RANGE_MSG)]
    return []


_CONFIG_KEY = re.compile(r"^[-._a-zA-Z0-9]+$")
CONFIG_KEY_MSG = (
    "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or "
    "'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')"
)


def config_key(key: str) -> list[str]:
    """`validation.IsConfigMapKey`: the key rule of ConfigMaps and Secrets (they become file names)."""
    problems: list[str] = []
    if len(key) > 253:
        problems.append("must be no more than 253 characters")
    if not _CONFIG_KEY.match(key):
        problems.append(CONFIG_KEY_MSG)
    if key in (".", ".."):
        problems.append(f"must not be '{key}'")
    elif key.startswith(".."):
        problems.append("must not start with '..'")
    return problems
