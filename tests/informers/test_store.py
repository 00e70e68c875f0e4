from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from informers import CONTROLLER_UID_INDEX, NAMESPACE_INDEX, NODE_NAME_INDEX, Store, label_index, meta_key
from informers.indexers import default_indexers

from .helpers import pod


def _store() -> Store:
    return Store(default_indexers(pods=True))


def test_update_moves_object_between_index_values() -> None:
    s = _store()
    s.update("default/a", pod("a", node="n1", owner_uid="u1"))
    assert [o["metadata"]["name"] for o in s.by_index(NODE_NAME_INDEX, "n1")] == ["a"]
    s.update("default/a", pod("a", node="n2", owner_uid="u1"))
    assert s.by_index(NODE_NAME_INDEX, "n1") == []
    assert s.index_values(NODE_NAME_INDEX) == ["n2"]
    assert s.index_keys(CONTROLLER_UID_INDEX, "u1") == ["default/a"]


def test_delete_removes_from_every_index_and_returns_old() -> None:
    s = _store()
    s.update("ns/a", pod("a", "ns", node="n1", owner_uid="u1"))
    old = s.delete("ns/a")
    assert old is not None and old["metadata"]["name"] == "a"
    assert s.delete("ns/a") is None
    assert s.by_index(NAMESPACE_INDEX, "ns") == []
    assert s.index_values(NODE_NAME_INDEX) == []
    assert s.index_values(CONTROLLER_UID_INDEX) == []
    assert len(s) == 0


def test_unscheduled_and_unowned_objects_are_not_indexed() -> None:
    s = _store()
    s.update("default/a", pod("a"))
    assert s.index_values(NODE_NAME_INDEX) == []
    assert s.index_values(CONTROLLER_UID_INDEX) == []


def test_owner_without_controller_flag_is_not_the_controller() -> None:
    s = _store()
    p = pod("a")
    p["metadata"]["ownerReferences"] = [{"kind": "ReplicaSet", "name": "rs", "uid": "u9"}]
    s.update("default/a", p)
    assert s.by_index(CONTROLLER_UID_INDEX, "u9") == []


def test_custom_indexer_added_later_indexes_existing_objects() -> None:
    s = _store()
    s.update("default/a", pod("a", labels={"tier": "front"}))
    s.update("default/b", pod("b", labels={"tier": "back"}))
    s.add_indexers({"tier": label_index("tier")})
    assert [o["metadata"]["name"] for o in s.by_index("tier", "back")] == ["b"]
    with pytest.raises(ValueError):
        s.add_indexers({"tier": label_index("tier")})
    with pytest.raises(KeyError):
        s.by_index("nope", "x")


def test_replace_rebuilds_indexes() -> None:
    s = _store()
    s.update("default/a", pod("a", node="n1"))
    s.replace([("default/b", pod("b", node="n2"))])
    assert s.keys() == ["default/b"]
    assert s.index_values(NODE_NAME_INDEX) == ["n2"]


_ops = st.lists(
    st.tuples(
        st.sampled_from(["put", "delete"]),
        st.sampled_from(["a", "b", "c", "d"]),
        st.sampled_from(["ns1", "ns2"]),
        st.one_of(st.none(), st.sampled_from(["n1", "n2"])),
        st.one_of(st.none(), st.sampled_from(["u1", "u2"])),
    ),
    max_size=40,
)


@settings(max_examples=60, deadline=None)
@given(_ops)
def test_indexes_always_equal_a_rebuild_from_scratch(ops: list[tuple[str, str, str, Any, Any]]) -> None:
    s = _store()
    for op, name, ns, node, owner in ops:
        obj = pod(name, ns, node=node, owner_uid=owner)
        if op == "put":
            s.update(meta_key(obj), obj)
        else:
            s.delete(meta_key(obj))
    fresh = _store()
    fresh.replace(s.items())
    for index in (NAMESPACE_INDEX, NODE_NAME_INDEX, CONTROLLER_UID_INDEX):
        assert sorted(s.index_values(index)) == sorted(fresh.index_values(index))
        for value in fresh.index_values(index):
            assert sorted(s.index_keys(index, value)) == sorted(fresh.index_keys(index, value))
