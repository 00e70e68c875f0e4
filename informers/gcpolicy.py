"""Keep CPython's cyclic garbage collector off the cache: measured, it dominates ingest.

A cached pod is ~150 dicts and lists. CPython's collector revisits every tracked container in
each full collection, so with a large cache (a) decoding a LIST runs 5-10x slower than orjson
alone (collections triggered by the allocations keep rescanning the growing heap) and (b)
every full collection later stops the event loop for seconds (about 1 s per 20,000 pods).
Yet JSON trees cannot form reference cycles: reference counting frees them, and the collector
scanning them is pure waste.

Two measures:
- `decode_page()`: no collection while one LIST page is decoded (synchronous and bounded, so
  the pause is too). With freezing on, the young generation is collected just before and the
  fresh page frozen right after, so its ~75,000 containers are never scanned at all; without,
  the next allocation afterwards runs the young-generation collection once over them.
- `Freezer`: after a (re)list and then every `every` watch events, collect the young
  generations and `gc.freeze()` what survives, moving it out of reach of future collections.
  Frozen objects are still freed by reference counting when the cache drops them; only cyclic
  garbage that is already old at freeze time would be kept, which the young collection right
  before makes rare. `gc.freeze` is constant time.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import orjson


@contextmanager
def paused() -> Iterator[None]:
    """Disable the collector for a synchronous block (no await inside!); restore its state."""
    was_enabled = gc.isenabled()
    if was_enabled:
        gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def decode_page(raw: bytes, *, freeze: bool) -> Any:
    """`orjson.loads` of one LIST page, out of the collector's way (see the module docstring)."""
    if freeze:
        gc.collect(0)
    with paused():
        page = orjson.loads(raw)
        if freeze:
            gc.freeze()
    return page


class Freezer:
    """Freeze the heap after a list and every `every` events (does nothing if disabled)."""

    __slots__ = ("_count", "enabled", "every")

    def __init__(self, *, enabled: bool = True, every: int = 1000) -> None:
        self.enabled = enabled
        self.every = every
        self._count = 0

    def freeze(self) -> None:
        if self.enabled:
            gc.collect(1)
            gc.freeze()
        self._count = 0

    def note_event(self) -> None:
        self._count += 1
        if self._count >= self.every:
            self.freeze()
