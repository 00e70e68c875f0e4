"""A container's `resources`, as `ValidateResourceRequirements` checks them.

A request above its limit is refused at create, not left for the scheduler or kubelet to
trip over; extended resources (a domain other than kubernetes.io) and huge pages cannot be
overcommitted, so their request must equal the limit and a request needs a limit.
"""

from __future__ import annotations

from typing import Any

from localcluster import quantity
from localcluster.registry import FieldError


def overcommit_allowed(name: str) -> bool:
    """`helper.IsOvercommitAllowed`: native resources (no domain, or kubernetes.io) but huge pages."""
    domain = name.split("/", 1)[0] if "/" in name else ""
    native = domain == "" or domain == "kubernetes.io" or domain.endswith(".kubernetes.io")
    return native and not name.startswith("hugepages-")


def _negative(values: dict[str, Any], path: str) -> list[FieldError]:
    errs = []
    for name, value in values.items():
        parsed = quantity.parse(value)
        if parsed is not None and parsed < 0:
            errs.append(
                FieldError.invalid(f"{path}[{name}]", str(value), "must be greater than or equal to 0")
            )
    return errs


def resource_requirements_errors(resources: Any, path: str) -> list[FieldError]:
    """Limits then requests; each request at most its limit (equal for what cannot be overcommitted)."""
    if not isinstance(resources, dict):
        return []
    limits: dict[str, Any] = resources["limits"] if isinstance(resources.get("limits"), dict) else {}
    requests: dict[str, Any] = resources["requests"] if isinstance(resources.get("requests"), dict) else {}
    lim_path, req_path = f"{path}.limits", f"{path}.requests"
    errs = _negative(limits, lim_path) + _negative(requests, req_path)
    for name, value in requests.items():
        request = quantity.parse(value)
        if name not in limits:
            if not overcommit_allowed(name):
                errs.append(
                    FieldError.required(
                        lim_path, "Required value: Limit must be set for non overcommitable resources"
                    )
                )
            continue
        limit = quantity.parse(limits[name])
        if request is None or limit is None:
            continue
        if request != limit and not overcommit_allowed(name):
            errs.append(FieldError.invalid(req_path, str(value), f"must be equal to {name} limit"))
        elif request > limit:
            errs.append(
                FieldError.invalid(req_path, str(value), f"must be less than or equal to {name} limit")
            )
    return errs
