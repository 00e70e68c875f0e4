"""Property tests: random interleavings of add / add_after / get / done / shutdown.

Two views. The model test replays a random operation sequence against a literal transcription
of client-go's semantics (dirty set, processing set, FIFO, earliest-ready-time-wins waiting
map) and demands identical answers. The concurrent test runs several real worker tasks against
a random producer on a virtual clock and checks the invariants users rely on: no key is held by
two workers at once, no update is lost, and deduplication never creates extra work.
"""

from __future__ import annotations

import asyncio
import itertools
import random
from collections.abc import Awaitable, Callable
from typing import TypeVar

import anyio
import looptime
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from workqueue import RateLimitingQueue, ShutDown

R = TypeVar("R")


def run_virtual(main: Callable[[], Awaitable[R]]) -> R:
    """Run `main` on a fresh loop with looptime's virtual clock (sleeps cost no real time)."""
    loop = looptime.new_event_loop()
    try:
        return loop.run_until_complete(main())
    finally:
        loop.close()


class Model:
    """client-go's queue.go + delaying_queue.go, as plainly as possible."""

    def __init__(self) -> None:
        self.queue: list[int] = []
        self.dirty: set[int] = set()
        self.processing: set[int] = set()
        self.waiting: dict[int, tuple[float, int]] = {}
        self.seq = itertools.count()
        self.now = 0.0
        self.shutting_down = False

    def add(self, k: int) -> None:
        if self.shutting_down or k in self.dirty:
            return
        self.dirty.add(k)
        if k not in self.processing:
            self.queue.append(k)

    def add_after(self, k: int, d: float) -> None:
        if self.shutting_down:
            return
        if d <= 0:
            self.add(k)
            return
        ready = self.now + d
        if k in self.waiting and self.waiting[k][0] <= ready:
            return
        self.waiting[k] = (ready, next(self.seq))

    def advance(self, d: float) -> None:
        self.now += d
        due = sorted((v, k) for k, v in self.waiting.items() if v[0] <= self.now)
        for _, k in due:
            del self.waiting[k]
            self.add(k)

    def get(self) -> int | None:
        if not self.queue:
            return None
        k = self.queue.pop(0)
        self.processing.add(k)
        self.dirty.discard(k)
        return k

    def done(self, k: int) -> None:
        self.processing.discard(k)
        if k in self.dirty:
            self.queue.append(k)

    def shutdown(self) -> None:
        self.shutting_down = True
        self.waiting.clear()


KEYS = st.integers(min_value=0, max_value=4)
WORKERS = st.integers(min_value=0, max_value=2)
_ADD = st.tuples(st.just("add"), KEYS)
_GET = st.tuples(st.just("get"), WORKERS)
_DONE = st.tuples(st.just("done"), WORKERS)
# Duplicated branches weigh the draw: mostly add / get / done, some delays, shutdown rarely.
OPS = st.lists(
    st.one_of(
        _ADD,
        _ADD,
        _GET,
        _GET,
        _DONE,
        _DONE,
        st.tuples(st.just("add_after"), KEYS, st.integers(min_value=-1, max_value=3)),
        st.tuples(st.just("advance"), st.integers(min_value=1, max_value=3)),
    ),
    min_size=10,
    max_size=80,
).flatmap(lambda ops: st.tuples(st.just(ops), st.integers(min_value=0, max_value=2 * len(ops))))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(OPS)
def test_queue_matches_client_go_model(case: tuple[list[tuple[object, ...]], int]) -> None:
    ops, shutdown_at = case
    if shutdown_at < len(ops):  # about half the runs shut down part-way
        ops = [*ops[:shutdown_at], ("shutdown",), *ops[shutdown_at:]]

    async def main() -> None:
        q: RateLimitingQueue[int] = RateLimitingQueue()
        m = Model()
        held: dict[int, int] = {}  # worker -> item
        for op in ops:
            match op:
                case ("add", int(k)):
                    q.add(k)
                    m.add(k)
                case ("add_after", int(k), int(d)):
                    q.add_after(k, d)
                    m.add_after(k, d)
                case ("get", int(w)) if w not in held:
                    expected = m.get()
                    if expected is None:
                        assert len(q) == 0
                        if q.shutting_down:
                            try:
                                await q.get()
                            except ShutDown:
                                pass
                            else:
                                raise AssertionError("get on a drained, shut down queue must raise")
                        continue
                    got = await q.get()
                    assert got == expected
                    assert got not in held.values()  # never two workers on one key
                    held[w] = got
                case ("done", int(w)) if w in held:
                    k = held.pop(w)
                    q.done(k)
                    m.done(k)
                case ("advance", int(d)):
                    await asyncio.sleep(d)
                    m.advance(d)
                case ("shutdown",):
                    q.shutdown()
                    m.shutdown()
            assert len(q) == len(m.queue)
            assert q.waiting == len(m.waiting)
        q.shutdown()

    run_virtual(main)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    producer=st.lists(
        st.tuples(
            st.sampled_from(["add", "add_after", "sleep"]), KEYS, st.integers(min_value=0, max_value=4)
        ),
        max_size=80,
    ),
    workers=st.integers(min_value=1, max_value=4),
    seed=st.integers(min_value=0, max_value=2**16),
)
def test_concurrent_workers_never_share_a_key_and_lose_no_update(
    producer: list[tuple[str, int, int]], workers: int, seed: int
) -> None:
    rnd = random.Random(seed)
    clock = itertools.count()
    in_flight: set[int] = set()
    requests: dict[int, int] = {}  # key -> add / add_after calls
    last_request: dict[int, int] = {}  # key -> sequence number of its last request
    starts: dict[int, list[int]] = {}  # key -> sequence numbers at which a worker took it

    async def main() -> None:
        q: RateLimitingQueue[int] = RateLimitingQueue()

        async def worker() -> None:
            while True:
                try:
                    k = await q.get()
                except ShutDown:
                    return
                assert k not in in_flight, f"key {k} handed to two workers"
                in_flight.add(k)
                starts.setdefault(k, []).append(next(clock))
                await asyncio.sleep(rnd.choice([0, 0, 0.5, 1, 3]))
                in_flight.discard(k)
                q.done(k)

        async with anyio.create_task_group() as tg:
            for _ in range(workers):
                tg.start_soon(worker)
            for op, k, n in producer:
                if op == "sleep":
                    await asyncio.sleep(n / 2)
                    continue
                requests[k] = requests.get(k, 0) + 1
                last_request[k] = next(clock)
                if op == "add":
                    q.add(k)
                else:
                    q.add_after(k, n)
            await asyncio.sleep(5)  # every add_after is due
            await q.shutdown_with_drain()

    run_virtual(main)
    assert not in_flight
    for k, seq in last_request.items():
        assert starts.get(k) and starts[k][-1] > seq, f"update of key {k} was lost"
    for k, taken in starts.items():
        assert len(taken) <= requests[k], f"key {k} processed more often than it was added"
