"""The CustomResourceDefinitions aiokcm serves, shipped inside the package.

An installed wheel or the container image has no `deploy/` folder, yet the embedded cluster's demo
and tools that set up a cluster need the NodeMaintenance CRD; so the YAML travels as package data
and is read through `importlib.resources`, which works from a wheel, a zip or a source checkout.
`deploy/crds/nodemaintenance.yaml` stays for `kubectl apply -k deploy/` users; a test keeps the two
byte-identical.
"""

from __future__ import annotations

from importlib import resources
from typing import Any

import yaml

NODEMAINTENANCE = "nodemaintenance.yaml"


def nodemaintenance_yaml() -> str:
    """The NodeMaintenance CRD as the YAML text users `kubectl apply` (parse it with a YAML loader)."""
    return resources.files(__name__).joinpath(NODEMAINTENANCE).read_text(encoding="utf-8")


def nodemaintenance_crd() -> dict[str, Any]:
    """The NodeMaintenance CRD as an object, ready for a create call."""
    crd: dict[str, Any] = yaml.safe_load(nodemaintenance_yaml())
    return crd
