"""Who answers evacuation requests by surging, as the manager decides it when it starts leading.

Two responders for one pod would surge twice; none where the drain waits would hold it for
nothing. So: aiokcm's own ReplicaSet and Deployment controllers with the gate answer in-controller
and the replacement surge stands aside; without them (beside KCM's own) the replacement surge
answers when enabled; `--controllers=-replacement-surge` leaves nobody, and the drain evicts.
"""

from __future__ import annotations

import pytest

from controller_manager.app import _implicit_responders, _surge_layout
from controller_manager.features import FeatureGate
from controller_manager.registry import default_registry
from controllers.evictionresponder.registration import RESPONDER_NAME, RESPONDER_PRIORITY


def _gates(spec: str) -> FeatureGate:
    gates = FeatureGate()
    gates.set_from_string(spec)
    return gates


ON = _gates("DeclarativeNodeMaintenance=true,NodeMaintenanceDeployment=true")
OFF = _gates("DeclarativeNodeMaintenance=true")


@pytest.mark.parametrize(
    ("controllers", "gates", "own", "public", "built"),
    [
        # overlays/replace-kcm: every controller; aiokcm's own surge, replacement-surge stands aside
        (["*"], ON, True, False, False),
        # deploy/ as applied beside the stock KCM
        (["nodemaintenance", "maintenance-lease", "replacement-surge"], ON, False, True, True),
        # the override: nobody surges, the drain evicts as kubectl drain does
        (["*", "-replacement-surge"], ON, True, False, False),
        (["nodemaintenance", "maintenance-lease"], ON, False, False, False),
        # aiokcm's controllers without the gate behave as KCM's: the replacement surge answers
        # (its own row needs the gate, so with it off nothing is enabled to answer at all)
        (["*"], OFF, False, False, False),
    ],
)
def test_one_responder_at_most(
    controllers: list[str], gates: FeatureGate, own: bool, public: bool, built: bool
) -> None:
    registry = default_registry()
    enabled = registry.enabled(registry.resolve_controllers_flag(controllers), gates)
    kept, got_own, got_public = _surge_layout(enabled, gates)
    assert (got_own, got_public) == (own, public)
    assert ("replacement-surge" in {d.name for d in kept}) is built
    assert not (got_own and got_public)


EVICTION_ON = _gates("DeclarativeNodeMaintenance=true,NodeMaintenanceDeployment=true,EvictionRequestAPI=true")


@pytest.mark.parametrize(
    ("controllers", "gates", "registered"),
    [
        # the surge responder enabled: every new Eviction lists it, nobody edits a workload
        (["*", "eviction-responder"], EVICTION_ON, True),
        # disabled (by flag, or its gates): Evictions list only the pod's own and the evictor
        (["*", "-eviction-responder"], EVICTION_ON, False),
        (["*", "eviction-responder"], ON, False),
    ],
)
def test_the_surge_responder_is_registered_only_when_it_runs(
    controllers: list[str], gates: FeatureGate, registered: bool
) -> None:
    registry = default_registry()
    enabled = registry.enabled(registry.resolve_controllers_flag(controllers), gates)
    implicit = _implicit_responders(enabled)
    assert (implicit == ((RESPONDER_NAME, RESPONDER_PRIORITY),)) is registered
    assert registered or implicit == ()
