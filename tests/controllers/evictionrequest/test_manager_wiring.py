"""The manager leaves KCM's two EvictionRequest controllers to KCM where the server serves the
built-in API, and runs them over aiokcm's CRDs otherwise."""

from __future__ import annotations

from controller_manager.app import KCM_EVICTION_CONTROLLERS, _leave_builtin_eviction_controllers
from controller_manager.registry import default_registry
from evictionapi import served


def test_builtin_api_leaves_the_two_controllers_to_kcm() -> None:
    rows = list(default_registry())
    kept = {d.name for d in _leave_builtin_eviction_controllers(rows, served.BUILTIN)}
    assert kept == {d.name for d in rows} - KCM_EVICTION_CONTROLLERS
    assert "eviction-responder" in kept


def test_aiokcm_crds_keep_every_controller() -> None:
    rows = list(default_registry())
    assert _leave_builtin_eviction_controllers(rows, served.AIOKCM) == rows
