"""A container's arguments as the kubelet hands them over: `$(VAR)` expanded from its env.

Tests run the manager outside a pod with the arguments `deploy/` gives it; the kubelet would first
expand each `$(NAME)` from the container's environment (`$$` escapes a dollar, an undefined name
stays as written), and a `fieldRef` to `status.podIP` is the pod's address.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

_REFERENCE = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)")


def container_env(container: Mapping[str, Any], *, pod_ip: str = "127.0.0.1") -> dict[str, str]:
    env: dict[str, str] = {}
    for var in container.get("env") or []:
        if "value" in var:
            env[var["name"]] = str(var["value"])
        elif ((var.get("valueFrom") or {}).get("fieldRef") or {}).get("fieldPath") == "status.podIP":
            env[var["name"]] = pod_ip
    return env


def expanded_args(container: Mapping[str, Any], *, pod_ip: str = "127.0.0.1") -> list[str]:
    env = container_env(container, pod_ip=pod_ip)

    def expand(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        return env.get(match.group(1), match.group(0))

    return [_REFERENCE.sub(expand, str(arg)) for arg in container.get("args") or []]
