"""Fixtures for the manager tests: the fake API server and a KubeClient to it."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from kubernetes_asyncio import client as k8s_client

from apiclient import KubeClient
from tests.manager.fakeapi import FakeApi, serve_fake_api


@pytest.fixture
async def fake_api() -> AsyncIterator[FakeApi]:
    async with serve_fake_api() as api:
        yield api


def make_client(api: FakeApi) -> KubeClient:
    configuration = k8s_client.Configuration()
    configuration.host = api.url
    return KubeClient(k8s_client.ApiClient(configuration=configuration), qps=0, burst=1)


@pytest.fixture
async def fake_client(fake_api: FakeApi) -> AsyncIterator[KubeClient]:
    client = make_client(fake_api)
    try:
        yield client
    finally:
        await client.close()
