"""Fixtures the controller suites share."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from apiclient import KubeClient
from apiclient.resources import Resource
from informers import PROJECTIONS
from localcluster.demo import ensure_crd
from tests.controllers import harness
from tests.controllers.projectionguard import Guard, GuardedTransforms


@pytest.fixture
async def crd(kube: KubeClient) -> None:
    """The NodeMaintenance CRD (package data, the same bytes as deploy/crds/), installed and served."""
    await ensure_crd(kube)


@pytest.fixture(autouse=True)
def projection_guard(monkeypatch: pytest.MonkeyPatch) -> Iterator[Guard]:
    """Every controller under `running_controllers` reads guarded caches (see `projectionguard`).

    Fails the test on a read of a field the manager's projections drop, on a mutation of a
    cached object, and on a PUT of a pod or node (it would write a projected object back
    without the fields the projection dropped: writes to them are patches).
    """
    guard = Guard()
    monkeypatch.setattr(harness, "transform_for", GuardedTransforms(guard))
    replace = KubeClient.replace

    async def checked_replace(self: KubeClient, res: Resource, body: dict[str, Any], **kwargs: Any) -> Any:
        if res in PROJECTIONS:
            guard.violations.append(f"PUT of a {res.kind} (projected in the cache): write it with a patch")
        return await replace(self, res, body, **kwargs)

    monkeypatch.setattr(KubeClient, "replace", checked_replace)
    yield guard
    assert not guard.violations, "controllers read dropped fields or mutated cached objects:\n" + "\n".join(
        dict.fromkeys(guard.violations)
    )
