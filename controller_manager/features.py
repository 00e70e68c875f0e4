"""The feature-gate registry, parsed from `--feature-gates` as Kubernetes' component-base does.

Each gate has a default and a maturity stage. Alpha gates default off, beta gates usually on,
GA gates are locked on: setting a GA gate to false is an error, because the code path without it
is gone. `AllAlpha` / `AllBeta` flip every gate of that stage not set explicitly, as in
`k8s.io/component-base/featuregate`. Errors are `ValueError`s whose text is one line saying
what is wrong and what is allowed; the CLI turns them into exit code 2.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

# The names are spelt once, in `controllers.features`; they are re-exported here for the manager.
from controllers.features import (
    DECLARATIVE_NODE_MAINTENANCE as DECLARATIVE_NODE_MAINTENANCE,
)
from controllers.features import (
    EVICTION_REQUEST_API as EVICTION_REQUEST_API,
)
from controllers.features import (
    EVICTION_SURGE as EVICTION_SURGE,
)
from controllers.features import (
    LOGARITHMIC_SCALE_DOWN as LOGARITHMIC_SCALE_DOWN,
)
from controllers.features import (
    NODE_MAINTENANCE_DEPLOYMENT as NODE_MAINTENANCE_DEPLOYMENT,
)
from controllers.features import (
    NODE_MAINTENANCE_LEASE as NODE_MAINTENANCE_LEASE,
)
from controllers.features import (
    POD_DELETION_COST as POD_DELETION_COST,
)
from controllers.features import (
    SEPARATE_TAINT_EVICTION_CONTROLLER as SEPARATE_TAINT_EVICTION_CONTROLLER,
)

ALL_ALPHA = "AllAlpha"
ALL_BETA = "AllBeta"


class Stage(enum.Enum):
    ALPHA = "ALPHA"
    BETA = "BETA"
    GA = "GA"


@dataclass(frozen=True, slots=True)
class FeatureSpec:
    default: bool
    stage: Stage

    @property
    def locked(self) -> bool:
        """GA gates cannot be turned off (component-base's LockToDefault)."""
        return self.stage is Stage.GA


# Stages and defaults follow KEP-4212 (alpha) and Kubernetes 1.29+ for the taint-eviction split (beta).
DEFAULT_FEATURES: Mapping[str, FeatureSpec] = {
    DECLARATIVE_NODE_MAINTENANCE: FeatureSpec(default=False, stage=Stage.ALPHA),
    NODE_MAINTENANCE_DEPLOYMENT: FeatureSpec(default=False, stage=Stage.ALPHA),
    NODE_MAINTENANCE_LEASE: FeatureSpec(default=False, stage=Stage.ALPHA),
    SEPARATE_TAINT_EVICTION_CONTROLLER: FeatureSpec(default=True, stage=Stage.BETA),
    # Surge at eviction time (the admission webhook on pods/eviction): aiokcm's own, alpha.
    EVICTION_SURGE: FeatureSpec(default=False, stage=Stage.ALPHA),
    # KEP-4563's EvictionRequest API: alpha and off by default, as upstream's gate.
    EVICTION_REQUEST_API: FeatureSpec(default=False, stage=Stage.ALPHA),
    # The ReplicaSet controller's scale-down order, as in Kubernetes (beta since 1.22).
    POD_DELETION_COST: FeatureSpec(default=True, stage=Stage.BETA),
    LOGARITHMIC_SCALE_DOWN: FeatureSpec(default=True, stage=Stage.BETA),
}

_TRUE = {"true", "1", "t", "yes", "on"}
_FALSE = {"false", "0", "f", "no", "off"}


def _parse_bool(text: str) -> bool | None:
    lowered = text.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    return None


class FeatureGate:
    """Known gates plus the values set on the command line; implements `FeatureGates`."""

    def __init__(self, known: Mapping[str, FeatureSpec] | None = None) -> None:
        self.known: dict[str, FeatureSpec] = dict(DEFAULT_FEATURES if known is None else known)
        self._explicit: dict[str, bool] = {}
        self._all: dict[Stage, bool] = {}

    def known_names(self) -> list[str]:
        return sorted(self.known)

    def set_from_map(self, values: Mapping[str, bool]) -> None:
        """Apply gate values, validating each as component-base does; all-or-nothing."""
        explicit = dict(self._explicit)
        all_stages = dict(self._all)
        for name, value in values.items():
            if name == ALL_ALPHA:
                all_stages[Stage.ALPHA] = value
                continue
            if name == ALL_BETA:
                all_stages[Stage.BETA] = value
                continue
            spec = self.known.get(name)
            if spec is None:
                raise ValueError(
                    f"unrecognized feature gate: {name} (known gates: {', '.join(self._listing())})"
                )
            if spec.locked and value != spec.default:
                raise ValueError(
                    f"cannot set feature gate {name} to {str(value).lower()}, "
                    f"feature is locked to {str(spec.default).lower()}"
                )
            explicit[name] = value
        self._explicit = explicit
        self._all = all_stages

    def set_from_string(self, text: str) -> None:
        """Parse `A=true,B=false` (the `--feature-gates` syntax)."""
        self.set_from_map(parse_feature_gates(text))

    def enabled(self, name: str) -> bool:
        if name in self._explicit:
            return self._explicit[name]
        spec = self.known.get(name)
        if spec is None:
            return False
        if spec.stage in self._all and not spec.locked:
            return self._all[spec.stage]
        return spec.default

    def effective(self) -> dict[str, bool]:
        """Every known gate's value, for the startup log line."""
        return {name: self.enabled(name) for name in sorted(self.known)}

    def _listing(self) -> Iterable[str]:
        yield f"{ALL_ALPHA}=true|false (ALPHA - default=false)"
        yield f"{ALL_BETA}=true|false (BETA - default=false)"
        for name in sorted(self.known):
            spec = self.known[name]
            yield f"{name}=true|false ({spec.stage.value} - default={str(spec.default).lower()})"

    def help_text(self) -> str:
        """The list `--help` shows, in component-base's format."""
        return "; ".join(self._listing())


def parse_feature_gates(text: str) -> dict[str, bool]:
    """Split `A=true,B=false` into a mapping; a malformed pair or value is a `ValueError`."""
    values: dict[str, bool] = {}
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        name, sep, raw = part.partition("=")
        name = name.strip()
        if not sep or not name:
            raise ValueError(f"missing bool value for {name or part!r} (expected Name=true|false)")
        value = _parse_bool(raw)
        if value is None:
            raise ValueError(f"invalid value of {name}={raw.strip()}, expected true or false")
        values[name] = value
    return values
