"""The store itself: one RV counter, ordered keys, the two histories (reads at an old RV until
compaction, the watch cache's window) and continue tokens."""

from __future__ import annotations

import itertools
from collections import deque

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from localcluster import errors
from localcluster.storage import Compacted, Storage, StoredEvent, _History, decode_continue, encode_continue


def _put(storage: Storage, name: str, labels: dict[str, str] | None = None, key: str = "pods") -> int:
    obj = {"metadata": {"name": name, "namespace": "ns", "labels": labels or {}}}
    return storage.write(key, obj, labels=labels or {}, fields={}, expect_new=True).rv


def test_resource_version_is_global_and_monotonic() -> None:
    storage = Storage()
    a = _put(storage, "a", key="pods")
    b = _put(storage, "b", key="configmaps")
    c = _put(storage, "c", key="pods")
    assert a < b < c


def test_entries_are_listed_in_key_order_and_after_a_key() -> None:
    storage = Storage()
    for name in ("c", "a", "b"):
        _put(storage, name)
    assert [e.name for e in storage.iter_entries("pods")] == ["a", "b", "c"]
    assert [e.name for e in storage.iter_entries("pods", "ns", after="ns/a")] == ["b", "c"]
    assert list(storage.iter_entries("pods", "other")) == []


async def test_subscription_replays_events_after_rv_then_live() -> None:
    storage = Storage()
    first = _put(storage, "a")
    _put(storage, "b")
    with storage.subscribe("pods", first) as sub:
        _put(storage, "c")
        names = [ev.obj["metadata"]["name"] for ev in sub.drain()]
    assert names == ["b", "c"]


def test_rv_older_than_window_is_expired() -> None:
    storage = Storage(window=2)
    first = _put(storage, "a")
    for name in "bcd":
        _put(storage, name)
    with pytest.raises(errors.StatusError) as caught:
        storage.subscribe("pods", first)
    assert caught.value.code == 410 and caught.value.reason == "Expired"
    assert caught.value.message == f"too old resource version: {first} ({first + 1})"  # window: c, d
    storage.check_readable("pods", first)  # etcd still has it: only the watch cache forgot


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_read_at_an_old_rv_sees_the_objects_as_they_were() -> None:
    storage = Storage()
    for name in ("a", "b", "c"):
        _put(storage, name, {"v": "1"})
    at = storage.rv
    _put(storage, "aa")  # created after: not there at `at`
    storage.write(
        "pods", {"metadata": {"name": "b", "namespace": "ns"}}, labels={"v": "2"}, fields={}, expect_new=False
    )
    storage.remove("pods", {"metadata": {"name": "c", "namespace": "ns"}})
    then = list(storage.iter_entries_at("pods", at))
    assert [(e.name, e.labels) for e in then] == [("a", {"v": "1"}), ("b", {"v": "1"}), ("c", {"v": "1"})]
    assert [e.name for e in storage.iter_entries_at("pods", at, "ns", after="ns/a")] == ["b", "c"]
    assert storage.count_entries_at("pods", at, "ns", after="ns/a") == 2
    assert [e.name for e in storage.iter_entries("pods")] == ["a", "aa", "b"]
    # written again after the first page: still the old state, and no key twice
    _put(storage, "c")
    assert [e.name for e in storage.iter_entries_at("pods", at)] == ["a", "b", "c"]
    assert storage.count_entries_at("pods", at) == 3


def test_compaction_forgets_what_the_previous_run_saw() -> None:
    storage = Storage()
    first = _put(storage, "a")
    storage.compact()  # the first run only notes the revision
    storage.check_readable("pods", first)
    second = _put(storage, "b")
    storage.compact()  # compacts to the revision the first run saw: older ones are gone
    with pytest.raises(Compacted):
        storage.check_readable("pods", first - 1)
    storage.check_readable("pods", first)
    storage.check_readable("pods", second)
    # the watch cache is not etcd: its window still replays both events
    with storage.subscribe("pods", first - 1) as sub:
        assert [ev.obj["metadata"]["name"] for ev in sub.drain()] == ["a", "b"]


def test_the_watch_window_grows_while_busy_and_shrinks_when_old() -> None:
    clock = Clock()
    storage = Storage(clock=clock)
    first = _put(storage, "p-0")
    for i in range(1, 300):  # 300 events within a second: the window grows past its 100
        _put(storage, f"p-{i}")
    with storage.subscribe("pods", first) as sub:
        assert len(sub.drain()) == 299
    clock.now = 200.0  # then quiet, then busy again: the old events are no longer fresh
    for i in range(300, 700):
        _put(storage, f"p-{i}")
    with pytest.raises(errors.StatusError) as caught:
        storage.subscribe("pods", first)
    assert caught.value.code == 410


def test_a_watch_from_a_future_rv_skips_events_up_to_it() -> None:
    storage = Storage()
    future = storage.rv + 2
    with storage.subscribe("pods", future) as sub:
        for name in "abcd":
            _put(storage, name)
        assert [ev.obj["metadata"]["name"] for ev in sub.drain()] == ["c", "d"]  # b is at the RV itself


def test_continue_token_round_trips() -> None:
    rv, key = decode_continue(encode_continue(42, "ns/name"))
    assert (rv, key) == (42, "ns/name")
    with pytest.raises(errors.StatusError) as caught:
        decode_continue("not-a-token")
    assert caught.value.code == 400
    assert caught.value.message.startswith("invalid continue token: continue key is not valid: ")
    assert decode_continue(encode_continue(-1, "ns/name")) == (-1, "ns/name")


@given(
    st.lists(
        st.tuples(st.sampled_from(["put", "del"]), st.sampled_from("abcdefgh"), st.sampled_from(["x", "y"])),
        max_size=40,
    ),
    st.integers(min_value=1, max_value=4),
)
def test_reads_at_any_old_rv_match_what_was_stored_then(ops: list[tuple[str, str, str]], page: int) -> None:
    """Every RV's objects, rebuilt from today's objects and the events since, page by page."""
    storage = Storage()
    states: dict[int, dict[str, str]] = {storage.rv: {}}
    current: dict[str, str] = {}
    for op, name, label in ops:
        key = f"ns/{name}"
        if op == "put":
            storage.write(
                "pods",
                {"metadata": {"name": name, "namespace": "ns"}},
                labels={"v": label},
                fields={},
                expect_new=key not in current,
            )
            current[key] = label
        elif key in current:
            storage.remove("pods", {"metadata": {"name": name, "namespace": "ns"}})
            del current[key]
        states[storage.rv] = dict(current)
    for rv, then in states.items():
        seen: list[tuple[str, str]] = []
        after: str | None = None
        while True:  # pages of `page` entries, each continuing after the last key, as a continue token does
            chunk = list(itertools.islice(storage.iter_entries_at("pods", rv, "ns", after), page))
            seen.extend((f"{e.namespace}/{e.name}", e.labels["v"]) for e in chunk)
            if len(chunk) < page:
                break
            after = seen[-1][0]
            assert storage.count_entries_at("pods", rv, "ns", after) == sum(1 for k in then if k > after)
        assert seen == sorted(then.items())


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.just("pop"), st.integers(min_value=0, max_value=3000)), max_size=400))
def test_the_history_reads_and_drops_as_a_deque(ops: list[object]) -> None:
    """The event history is indexed deep on every write; it must behave exactly as the deque it
    replaced, across its compactions (runs of appends then pops cross the 1,024-item mark)."""
    history, model = _History(), deque[StoredEvent]()
    rv = 0
    for op in ops:
        if op == "pop":
            if model:
                assert history.popleft() is model.popleft()
            else:
                with pytest.raises(IndexError):
                    history.popleft()
        else:
            assert isinstance(op, int)
            for _ in range(op % 7 + (1500 if op == 3000 else 0)):
                rv += 1
                ev = StoredEvent("ADDED", rv, None, b"{}", "default", {}, {}, at=float(rv))
                history.append(ev)
                model.append(ev)
            for _ in range(op // 1000 * 600):
                if model:
                    assert history.popleft() is model.popleft()
        assert len(history) == len(model) and bool(history) == bool(model)
        assert list(history) == list(model)
        for i in (0, len(model) // 2, len(model) - 1, -1, -len(model)):
            if model and -len(model) <= i < len(model):
                assert history[i] is model[i]
        with pytest.raises(IndexError):
            history[len(model)]
