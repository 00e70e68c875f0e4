"""The event-loop monitor: lag is measured, and a stall fails the liveness check for a while."""

from __future__ import annotations

import time

import anyio

from controller_manager.loopmonitor import LOOP_LAG, LoopMonitor


async def test_a_stall_fails_liveness_until_it_is_old_news() -> None:
    monitor = LoopMonitor(interval=0.01, stall_threshold=0.2, recent=0.5)
    async with anyio.create_task_group() as tg:
        tg.start_soon(monitor.run)
        await anyio.sleep(0.05)
        assert monitor.healthy()
        time.sleep(0.3)  # noqa: ASYNC251 - the point: a sync path that never yields
        # the first code to run after the stall (a probe) already sees it
        assert not monitor.healthy()
        await anyio.sleep(0.05)
        assert monitor.max_lag >= 0.25
        assert not monitor.healthy()  # recent: a manager that keeps wedging gets restarted
        await anyio.sleep(0.6)
        assert monitor.healthy()
        tg.cancel_scope.cancel()


async def test_an_idle_loop_is_healthy_and_its_lag_is_exported() -> None:
    monitor = LoopMonitor(interval=0.01, stall_threshold=5.0)
    before = next(iter(LOOP_LAG.collect())).samples
    count = next(s.value for s in before if s.name.endswith("_count"))
    async with anyio.create_task_group() as tg:
        tg.start_soon(monitor.run)
        await anyio.sleep(0.2)
        assert monitor.healthy()
        tg.cancel_scope.cancel()
    after = next(s.value for s in next(iter(LOOP_LAG.collect())).samples if s.name.endswith("_count"))
    assert after > count
