"""Delete handlers get either the object or a tombstone; both read the same."""

from __future__ import annotations

from informers import DeletedFinalStateUnknown, deleted_object


def test_object_and_tombstone_read_alike() -> None:
    pod = {"metadata": {"name": "p", "namespace": "ns"}}
    assert deleted_object(pod) is pod
    assert deleted_object(DeletedFinalStateUnknown("ns/p", pod)) is pod


def test_anything_else_is_none() -> None:
    assert deleted_object(None) is None
    assert deleted_object("ns/p") is None
