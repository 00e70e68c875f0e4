"""Fixtures the controller suites share."""

from __future__ import annotations

import pytest

from apiclient import KubeClient
from localcluster.demo import ensure_crd


@pytest.fixture
async def crd(kube: KubeClient) -> None:
    """The NodeMaintenance CRD from deploy/crds/, installed and served."""
    await ensure_crd(kube)
