"""`--feature-gates` parsing: known gates, bad values, GA locking, AllAlpha/AllBeta."""

from __future__ import annotations

import pytest

from controller_manager.features import FeatureGate, FeatureSpec, Stage


def test_defaults_and_explicit_values() -> None:
    gates = FeatureGate()
    assert not gates.enabled("DeclarativeNodeMaintenance")
    assert gates.enabled("SeparateTaintEvictionController")
    gates.set_from_string("DeclarativeNodeMaintenance=true, SeparateTaintEvictionController=false")
    assert gates.enabled("DeclarativeNodeMaintenance")
    assert not gates.enabled("SeparateTaintEvictionController")
    assert not gates.enabled("NodeMaintenanceLease")


def test_unknown_gate_names_the_known_ones() -> None:
    with pytest.raises(
        ValueError, match=r"unrecognized feature gate: Bogus \(known gates: .*DeclarativeNodeMaintenance"
    ):
        FeatureGate().set_from_string("Bogus=true")


@pytest.mark.parametrize("text", ["DeclarativeNodeMaintenance=maybe", "DeclarativeNodeMaintenance", "=true"])
def test_bad_values_are_rejected(text: str) -> None:
    with pytest.raises(ValueError, match=r"DeclarativeNodeMaintenance|expected"):
        FeatureGate().set_from_string(text)


def test_ga_gates_are_locked_to_true() -> None:
    gates = FeatureGate({"Done": FeatureSpec(default=True, stage=Stage.GA)})
    gates.set_from_string("Done=true")
    with pytest.raises(ValueError, match="cannot set feature gate Done to false, feature is locked to true"):
        gates.set_from_string("Done=false")
    gates.set_from_string("AllBeta=false")
    assert gates.enabled("Done")


def test_a_failed_parse_changes_nothing() -> None:
    gates = FeatureGate()
    with pytest.raises(ValueError):
        gates.set_from_string("DeclarativeNodeMaintenance=true,Bogus=true")
    assert not gates.enabled("DeclarativeNodeMaintenance")


def test_all_alpha_flips_alpha_gates_but_explicit_values_win() -> None:
    gates = FeatureGate()
    gates.set_from_string("AllAlpha=true,NodeMaintenanceLease=false")
    assert gates.enabled("DeclarativeNodeMaintenance")
    assert gates.enabled("NodeMaintenanceDeployment")
    assert not gates.enabled("NodeMaintenanceLease")
    assert gates.enabled("SeparateTaintEvictionController")
