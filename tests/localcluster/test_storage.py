"""The store itself: one RV counter, ordered keys, the watch window and continue tokens."""

from __future__ import annotations

import pytest

from localcluster import errors
from localcluster.storage import Storage, decode_continue, encode_continue


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
    with pytest.raises(errors.StatusError):
        storage.check_continue_rv("pods", first)


def test_continue_token_round_trips() -> None:
    rv, key = decode_continue(encode_continue(42, "ns/name"))
    assert (rv, key) == (42, "ns/name")
    with pytest.raises(errors.StatusError) as caught:
        decode_continue("not-a-token")
    assert caught.value.code == 400
