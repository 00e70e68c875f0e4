"""Fixtures for informer tests: a fake API server and a factory with test-sized backoffs."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from informers import BackoffPolicy, ReflectorOptions, SharedInformerFactory

from .fakeserver import FakeApiServer

FAST = ReflectorOptions(
    page_size=500,
    backoff=BackoffPolicy(initial=0.001, cap=0.02, reset_after=1.0),
    min_watch_duration=0.0,
)


@pytest.fixture
async def server() -> AsyncIterator[FakeApiServer]:
    async with FakeApiServer() as srv:
        yield srv


@pytest.fixture
async def factory(server: FakeApiServer) -> SharedInformerFactory:
    return SharedInformerFactory(server.client(), options=FAST)
