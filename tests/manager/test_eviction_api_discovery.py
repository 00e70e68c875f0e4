"""The manager asks which group serves the EvictionRequest API until the API server answers."""

from __future__ import annotations

from typing import Any

import pytest

from apiclient import ApiError
from controller_manager.app import discover_eviction_api
from evictionapi import names, served


class FlakyServer:
    """Answers discovery with the given failures first, then with the built-in group's resources."""

    def __init__(self, failures: list[BaseException]) -> None:
        self.failures = failures
        self.calls = 0

    async def request(self, method: str, path: str, **_: Any) -> dict[str, Any]:
        self.calls += 1
        if self.failures:
            raise self.failures.pop(0)
        assert (method, path) == ("GET", f"/apis/{names.BUILTIN_GROUP}/{names.VERSION}")
        return {"resources": [{"name": names.EVICTION_REQUESTS}, {"name": names.EVICTIONS}]}


async def test_a_restarting_or_throttling_server_is_asked_again() -> None:
    server = FlakyServer([ApiError(503), ApiError(429)])
    api = await discover_eviction_api(server, max_wait=0.01)  # type: ignore[arg-type]
    assert api == served.BUILTIN and server.calls == 3


async def test_a_server_without_the_group_means_aiokcms_crds_at_once() -> None:
    server = FlakyServer([ApiError(404)])
    assert await discover_eviction_api(server) == served.AIOKCM  # type: ignore[arg-type]
    assert server.calls == 1


async def test_a_bug_is_not_retried() -> None:
    with pytest.raises(TypeError):
        await discover_eviction_api(FlakyServer([TypeError("ours")]))  # type: ignore[arg-type]
