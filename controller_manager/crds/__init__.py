"""The CustomResourceDefinitions aiokcm serves, shipped inside the package.

An installed wheel or the container image has no `deploy/` folder, yet the embedded cluster's demo
and tools that set up a cluster need the CRDs; so the YAML travels as package data and is read
through `importlib.resources`, which works from a wheel, a zip or a source checkout. The files in
`deploy/crds/` stay for `kubectl apply -k deploy/` users; a test keeps each pair byte-identical.

NodeMaintenance is aiokcm's own API. EvictionRequest and Eviction are KEP-4563's, in aiokcm's group
`lifecycle.aiokcm.io`, for clusters whose API server does not serve `lifecycle.k8s.io/v1alpha1`.
"""

from __future__ import annotations

import copy
from importlib import resources
from typing import Any

import yaml

NODEMAINTENANCE = "nodemaintenance.yaml"
EVICTIONREQUEST = "evictionrequest.yaml"
EVICTION = "eviction.yaml"


def _yaml(name: str) -> str:
    return resources.files(__name__).joinpath(name).read_text(encoding="utf-8")


def _crd(name: str) -> dict[str, Any]:
    crd: dict[str, Any] = yaml.safe_load(_yaml(name))
    return crd


def nodemaintenance_yaml() -> str:
    """The NodeMaintenance CRD as the YAML text users `kubectl apply` (parse it with a YAML loader)."""
    return _yaml(NODEMAINTENANCE)


def nodemaintenance_crd() -> dict[str, Any]:
    """The NodeMaintenance CRD as an object, ready for a create call."""
    return _crd(NODEMAINTENANCE)


def evictionrequest_crd() -> dict[str, Any]:
    """The EvictionRequest CRD (`evictionrequests.lifecycle.aiokcm.io`) as an object."""
    return _crd(EVICTIONREQUEST)


def eviction_crd() -> dict[str, Any]:
    """The Eviction CRD (`evictions.lifecycle.aiokcm.io`) as an object."""
    return _crd(EVICTION)


def eviction_api_crds(*, transition_rules: bool = True) -> list[dict[str, Any]]:
    """Both CRDs of the EvictionRequest API, EvictionRequest first.

    `transition_rules=False` leaves out the rules that compare with `oldSelf` (what makes the
    target, the requester and the responder list immutable), for an API server whose CEL predates
    them: v1.24's pre-releases refuse such a CRD as a whole, and every server before v1.24 drops
    `x-kubernetes-validations` anyway.
    """
    crds = [evictionrequest_crd(), eviction_crd()]
    return crds if transition_rules else [without_transition_rules(c) for c in crds]


def without_transition_rules(crd: dict[str, Any]) -> dict[str, Any]:
    """A copy of `crd` without the `x-kubernetes-validations` rules that read `oldSelf`."""
    out = copy.deepcopy(crd)

    def strip(node: Any) -> None:
        if isinstance(node, dict):
            rules = node.get("x-kubernetes-validations")
            if isinstance(rules, list):
                kept = [r for r in rules if "oldSelf" not in str(r.get("rule", ""))]
                if kept:
                    node["x-kubernetes-validations"] = kept
                else:
                    del node["x-kubernetes-validations"]
            for value in node.values():
                strip(value)
        elif isinstance(node, list):
            for value in node:
                strip(value)

    for version in out["spec"]["versions"]:
        strip(version.get("schema"))
    return out
