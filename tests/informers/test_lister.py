from __future__ import annotations

import pytest

from informers import CONTROLLER_UID_INDEX, NODE_NAME_INDEX, Lister, Store, meta_key
from informers.indexers import default_indexers
from kubeutil.selectors import parse

from .helpers import pod


def _lister() -> Lister:
    s = Store(default_indexers(pods=True))
    for p in (
        pod("a", "ns1", node="n1", labels={"app": "web"}, owner_uid="rs1"),
        pod("b", "ns1", node="n2", labels={"app": "db"}),
        pod("c", "ns2", node="n1", labels={"app": "web"}, owner_uid="rs1"),
    ):
        s.update(meta_key(p), p)
    s.update("node-1", {"metadata": {"name": "node-1"}})
    return Lister(s)


def _names(objs: list[dict[str, object]]) -> list[str]:
    return sorted(o["metadata"]["name"] for o in objs)  # type: ignore[index]


def test_get_by_name_and_namespace() -> None:
    lister = _lister()
    got = lister.get("a", "ns1")
    assert got is not None and got["metadata"]["namespace"] == "ns1"
    assert lister.get("a", "ns2") is None
    assert lister.get("node-1") is not None


def test_get_by_key_reads_what_a_queue_key_names() -> None:
    lister = _lister()
    assert lister.get_by_key("ns1/a") is lister.get("a", "ns1")
    assert lister.get_by_key("ns2/a") is None
    assert lister.get_by_key("node-1") is lister.get("node-1")
    with pytest.raises(ValueError):
        lister.get_by_key("ns1/a/extra")


def test_list_by_namespace_and_selector() -> None:
    lister = _lister()
    assert _names(lister.list("ns1")) == ["a", "b"]
    assert _names(lister.list(selector="app=web")) == ["a", "c"]
    assert _names(lister.list("ns1", parse("app in (db)"))) == ["b"]
    assert len(lister.list()) == 4


def test_by_index_node_and_owner() -> None:
    lister = _lister()
    assert _names(lister.by_index(NODE_NAME_INDEX, "n1")) == ["a", "c"]
    assert _names(lister.by_index(CONTROLLER_UID_INDEX, "rs1")) == ["a", "c"]
