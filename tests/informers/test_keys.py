from __future__ import annotations

import pytest

from informers import DeletedFinalStateUnknown, meta_key, split_key

from .helpers import pod


def test_namespaced_and_cluster_scoped_keys_round_trip() -> None:
    assert meta_key(pod("a", "ns1")) == "ns1/a"
    assert split_key("ns1/a") == ("ns1", "a")
    node = {"metadata": {"name": "node-1"}}
    assert meta_key(node) == "node-1"
    assert split_key("node-1") == ("", "node-1")


def test_tombstone_keys_by_its_own_key() -> None:
    assert meta_key(DeletedFinalStateUnknown("ns/x", pod("y"))) == "ns/x"


@pytest.mark.parametrize("bad", ["", "/", "a/", "/b", "a/b/c"])
def test_split_key_rejects_malformed(bad: str) -> None:
    with pytest.raises(ValueError):
        split_key(bad)
