"""A local cluster without the garbage collector for these tests.

The tests fake the pods' owners with ownerReferences to objects that do not exist (the owner's
answer, `EvacuationInitiated`, is written by the test), and a real garbage collector deletes such
dependents at once — as the local cluster's does. Scheduler and kubelets stay on.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from localcluster.cluster import LocalCluster


@pytest.fixture
async def cluster() -> AsyncIterator[LocalCluster]:
    async with LocalCluster(nodes=3, gc=False) as started:
        yield started
