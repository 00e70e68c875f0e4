"""A pod from a workload's pod template, as `controller.GetPodFromTemplate`.

`generateName` is `<owner>-` (the API server appends 5 random characters); the template's labels,
annotations and finalizers are copied; the controller reference makes the owner the pod's
controller (and lets garbage collection remove it with its owner).
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from typing import Any

_DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def pods_prefix(controller_name: str) -> str:
    """`getPodsPrefix`: `name-` when that is a valid generateName, else the bare name."""
    prefix = f"{controller_name}-"
    # `ValidatePodName(prefix, true)` validates the prefix with its trailing dash masked
    # (`maskTrailingDash`: the last two characters become one "a"), as a DNS-1123 subdomain.
    masked = prefix[:-2] + "a" if len(prefix) > 1 else prefix
    if len(masked) <= 253 and _DNS1123_SUBDOMAIN.match(masked):
        return prefix
    return controller_name


class NoLabelsError(ValueError):
    """The template has no labels: the pod could never be matched back to its controller."""


def pod_from_template(
    template: Mapping[str, Any],
    owner: Mapping[str, Any],
    controller_ref: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """A new pod body (not yet created) for `owner`'s `template`; raises `NoLabelsError` as KCM's createPods."""
    tmeta = template.get("metadata") or {}
    ometa = owner.get("metadata") or {}
    labels = dict(tmeta.get("labels") or {})
    if not labels:
        raise NoLabelsError("unable to create pods, no labels")
    meta: dict[str, Any] = {"generateName": pods_prefix(str(ometa.get("name", ""))), "labels": labels}
    if ometa.get("namespace"):
        meta["namespace"] = ometa["namespace"]
    if tmeta.get("annotations"):
        meta["annotations"] = dict(tmeta["annotations"])
    if tmeta.get("finalizers"):
        meta["finalizers"] = list(tmeta["finalizers"])
    if controller_ref is not None:
        meta["ownerReferences"] = [dict(controller_ref)]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": copy.deepcopy(dict(template.get("spec") or {})),
    }
