"""The real Prometheus and Alertmanager the gate tests share (tests/support/monitoring.py).

They start once per session (per xdist worker; the tests that use them carry one xdist_group) and
live on pytest-asyncio's session-scoped loop, since the exporter they scrape serves from an event
loop: a test that uses them runs on that loop too (`pytestmark = ON_SHARED_LOOP`, from
tests/support/monitoring.py). The suite's task-leak guard watches each test's own function-scoped
loop, so `no_leaked_tasks_on_shared_loop` keeps the same watch on the shared one.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from tests.support.leaks import no_leaked_tasks
from tests.support.monitoring import Monitoring, monitoring_binaries_or_skip, running_monitoring


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def monitoring(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Monitoring]:
    """Prometheus scraping a /metrics endpoint whose gauges tests set, alerting to Alertmanager."""
    binaries = monitoring_binaries_or_skip()
    async with running_monitoring(tmp_path_factory.mktemp("monitoring"), binaries) as mon:
        yield mon


@pytest_asyncio.fixture(loop_scope="session")
async def no_leaked_tasks_on_shared_loop() -> AsyncIterator[None]:
    """tests/conftest.py's `_no_leaked_tasks`, on the session loop the monitoring tests run on."""
    async with no_leaked_tasks():
        yield
