"""A ConfigMap's keys and size, as `ValidateConfigMap` checks them.

Keys become file names in a volume, so they follow the same rule as a Secret's; the whole
payload is bounded by etcd's value size (`MaxSecretSize`, 1 MiB), reported against the
object itself (path "", printed `[]`).
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

from localcluster.builtin.validation import config_key
from localcluster.registry import FieldError

MAX_SIZE = 1024 * 1024


def _byte_length(value: str, *, binary: bool) -> int:
    if binary:
        try:
            return len(base64.b64decode(value, validate=True))
        except (binascii.Error, ValueError):
            return len(value)
    return len(value.encode())


def configmap_content_errors(data: dict[str, Any], binary: dict[str, Any]) -> list[FieldError]:
    """Each key of `data` then `binaryData`: the key rule and no key in both; then the total size."""
    errs: list[FieldError] = []
    total = 0
    for field_name, own, other, other_name in (
        ("data", data, binary, "binaryData"),
        ("binaryData", binary, data, "data"),
    ):
        for key, value in own.items():
            path = f"{field_name}[{key}]"
            errs.extend(FieldError.invalid(path, key, msg) for msg in config_key(str(key)))
            if key in other:
                errs.append(FieldError.invalid(path, key, f"duplicate of key present in {other_name}"))
            total += _byte_length(str(value), binary=field_name == "binaryData")
    if total > MAX_SIZE:
        errs.append(FieldError("FieldValueTooLong", "[]", f"Too long: must have at most {MAX_SIZE} bytes"))
    return errs
