"""A cache behind our own writes is recognised until it shows any newer version."""

from __future__ import annotations

from controllers.common.written import WrittenVersions


def obj(rv: str) -> dict[str, dict[str, str]]:
    return {"metadata": {"resourceVersion": rv}}


def test_replaced_versions_are_stale_until_the_cache_moves_on() -> None:
    w = WrittenVersions()
    w.wrote("d", obj("10"), obj("11"))
    w.wrote("d", obj("11"), obj("12"))  # a second write in the same sync
    assert w.superseded("d", obj("10")) and w.superseded("d", obj("11"))
    assert not w.superseded("d", obj("12"))  # our write arrived: nothing to wait for
    assert len(w) == 0
    assert not w.superseded("d", obj("10"))  # forgotten once the cache caught up


def test_a_newer_version_by_someone_else_also_ends_the_wait() -> None:
    w = WrittenVersions()
    w.wrote("d", obj("10"), obj("11"))
    assert not w.superseded("d", obj("13"))
    w.wrote("d", obj("20"), obj("21"))
    w.forget("d")  # deleted
    assert not w.superseded("d", obj("20"))
