"""`aiokcm run`'s event loop: uvloop when installed, asyncio's own loop when it is not."""

from __future__ import annotations

import asyncio
import importlib.util
from typing import Any

import anyio
import pytest

from controller_manager import eventloop


async def _loop_module() -> str:
    return type(asyncio.get_running_loop()).__module__


def test_uvloop_is_used_when_installed() -> None:
    pytest.importorskip("uvloop")
    assert eventloop.backend_options() == {"use_uvloop": True}
    assert anyio.run(_loop_module, backend_options=eventloop.backend_options()).startswith("uvloop")


def test_without_uvloop_the_default_loop_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec

    def find_spec(name: str, *args: Any) -> Any:
        return None if name == "uvloop" else real(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    assert eventloop.backend_options() == {}
    assert anyio.run(_loop_module, backend_options=eventloop.backend_options()).startswith("asyncio")
