"""One way for any fixture to get a cluster on the backend its test was parametrized with.

`local` is the embedded cluster with the options given; `real` is a clean world on the
session's real control plane (see tests/conftest.py). Options the real control plane cannot
switch per test (its scheduler and kube-controller-manager's garbage collector always run)
are honoured only all together: with neither scheduler nor garbage collector the test gets the
session's bare control plane (kube-apiserver alone), and the local cluster runs none of the
KCM controllers it simulates either; otherwise the full one. The kubelets' timing
(`pod_start_delay`, `termination_cap`) holds on both.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from localcluster.cluster import LocalCluster
from realcluster import ENV, Assets, RealCluster, assets_from_env

REQUIRE_REAL = "AIOKCM_REQUIRE_REAL"


def real_assets_or_skip() -> Assets:
    """The control-plane binaries; without them skip, or fail when the run requires the real tier."""
    assets = assets_from_env()
    if assets is None:
        reason = f"{ENV} is not set: no real control plane (see README, 'The real-apiserver tier')"
        if os.environ.get(REQUIRE_REAL) == "1":
            pytest.fail(reason)
        pytest.skip(reason)
    return assets


def backend_of(request: pytest.FixtureRequest) -> str:
    return str(getattr(request, "param", "local"))


@asynccontextmanager
async def cluster_on_backend(request: pytest.FixtureRequest, **local_options: Any) -> AsyncIterator[Any]:
    if backend_of(request) == "real":
        bare = not local_options.get("scheduler", True) and not local_options.get("gc", True)
        plane = request.getfixturevalue("real_bare_plane" if bare else "real_plane")
        kubelet_timing = {
            name: local_options[name]
            for name in ("pod_start_delay", "termination_cap")
            if name in local_options
        }
        async with RealCluster(
            plane,
            nodes=local_options.get("nodes", 3),
            kubelets=local_options.get("kubelets", True),
            **kubelet_timing,
        ) as real:
            yield real
        return
    if not local_options.get("scheduler", True) and not local_options.get("gc", True):
        local_options.setdefault("controllers", False)  # as the bare plane: no KCM controller but namespaces'
    async with LocalCluster(**local_options) as local:
        yield local
