"""Events expire an hour after their last write (kube-apiserver's `--event-ttl`), on the loop's clock."""

from __future__ import annotations

import asyncio

import anyio
import pytest

from localcluster.eventttl import EventTTL
from localcluster.storage import Storage

pytestmark = pytest.mark.looptime


def _event(storage: Storage, name: str, *, new: bool = True, count: int = 1) -> None:
    obj = {"metadata": {"name": name, "namespace": "default"}, "reason": "Started", "count": count}
    storage.write("events", obj, labels={}, fields={}, expect_new=new)


async def test_an_event_goes_an_hour_after_its_last_write() -> None:
    storage = Storage()
    ttl = EventTTL(storage)
    async with anyio.create_task_group() as tg:
        tg.start_soon(ttl.run)
        await asyncio.sleep(0)
        _event(storage, "once")
        _event(storage, "repeated")
        await asyncio.sleep(1800)
        _event(storage, "repeated", new=False, count=2)  # the recorder bumps its count: a new hour
        await asyncio.sleep(1900)
        assert storage.get("events", "default", "once") is None
        assert storage.get("events", "default", "repeated") is not None
        await asyncio.sleep(1800)
        assert storage.count("events") == 0
        tg.cancel_scope.cancel()
