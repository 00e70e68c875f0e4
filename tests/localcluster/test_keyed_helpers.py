"""The watch handlers and the refused-write policy every in-process controller shares."""

from __future__ import annotations

import orjson
import pytest

from localcluster import errors
from localcluster.keyed import (
    RETRY_AFTER_RACE,
    RETRY_AFTER_REFUSAL,
    KeyedLoop,
    add_controller,
    add_unless_deleted,
    retry_after,
)
from localcluster.registry import Obj
from localcluster.storage import StoredEvent


def _event(type_: str, obj: Obj) -> StoredEvent:
    return StoredEvent(type_, 1, obj, orjson.dumps(obj), obj["metadata"].get("namespace", ""), {}, {})


def _pod(*refs: Obj) -> Obj:
    return {"metadata": {"name": "p", "namespace": "ns", "ownerReferences": list(refs)}}


def _dirty(loop: KeyedLoop[tuple[str, str]]) -> list[tuple[str, str]]:
    return list(loop._dirty)


@pytest.mark.parametrize(
    ("code", "expected"),
    [(404, RETRY_AFTER_RACE), (409, RETRY_AFTER_RACE), (403, None), (422, RETRY_AFTER_REFUSAL)],
)
def test_retry_after(code: int, expected: float | None) -> None:
    assert retry_after(errors.StatusError(code, "Reason", "message")) == expected


def test_add_unless_deleted_skips_deletions() -> None:
    loop: KeyedLoop[tuple[str, str]] = KeyedLoop(lambda _key: None)
    handle = add_unless_deleted(loop)
    obj = {"metadata": {"name": "a", "namespace": "ns"}}
    handle(_event("DELETED", obj))
    assert _dirty(loop) == []
    handle(_event("MODIFIED", obj))
    assert _dirty(loop) == [("ns", "a")]


def test_add_controller_takes_only_the_controlling_ref_of_its_kind_and_version() -> None:
    loop: KeyedLoop[tuple[str, str]] = KeyedLoop(lambda _key: None)
    handle = add_controller(loop, "StatefulSet", "apps/v1")
    handle(_event("ADDED", _pod({"kind": "StatefulSet", "apiVersion": "apps/v1", "name": "owner"})))
    handle(
        _event(
            "ADDED", _pod({"kind": "StatefulSet", "apiVersion": "apps/v2", "name": "v2", "controller": True})
        )
    )
    handle(
        _event(
            "ADDED", _pod({"kind": "DaemonSet", "apiVersion": "apps/v1", "name": "ds", "controller": True})
        )
    )
    assert _dirty(loop) == []
    handle(
        _event(
            "ADDED", _pod({"kind": "StatefulSet", "apiVersion": "apps/v1", "name": "web", "controller": True})
        )
    )
    assert _dirty(loop) == [("ns", "web")]
