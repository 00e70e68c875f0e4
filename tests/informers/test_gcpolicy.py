"""GC policy: pausing is bounded and always restored; freezing is the process owner's choice."""

from __future__ import annotations

import gc
from typing import Any

import pytest

from informers import SharedInformerFactory, pod_projection
from informers.gcpolicy import transform_page

from .fakeserver import FakeApiServer


async def test_the_factory_leaves_the_process_gc_alone_by_default(server: FakeApiServer) -> None:
    assert SharedInformerFactory(server.client()).freezer.enabled is False
    assert SharedInformerFactory(server.client(), gc_freeze=True).freezer.enabled is True


async def test_the_manager_owns_the_gc_policy(server: FakeApiServer) -> None:
    from controller_manager.app import Manager
    from controller_manager.options import parse_run_args
    from controller_manager.registry import default_registry

    client = server.client()
    on = parse_run_args([], default_registry())
    off = parse_run_args(["--no-gc-freeze"], default_registry())
    assert (on.gc_freeze, off.gc_freeze) == (True, False)
    assert Manager(on, client).factory(client).freezer.enabled is True
    assert Manager(off, client).factory(client).freezer.enabled is False


@pytest.mark.parametrize("freeze", [False, True])
def test_transform_page_keeps_order_types_items_and_restores_the_collector(
    monkeypatch: pytest.MonkeyPatch, freeze: bool
) -> None:
    frozen: list[bool] = []
    monkeypatch.setattr(gc, "freeze", lambda: frozen.append(gc.isenabled()))
    was = gc.isenabled()
    items: list[Any] = [{"metadata": {"name": f"p{i}", "namespace": "ns"}} for i in range(5)]
    out: list[Any] = []
    transform_page(items, "v1", "Pod", pod_projection, out, freeze=freeze)
    assert [o["metadata"]["name"] for o in out] == [f"p{i}" for i in range(5)]
    assert all(o["kind"] == "Pod" for o in out)
    assert items == []  # the parsed objects were released
    assert gc.isenabled() == was
    assert frozen == ([False] if freeze else [])  # frozen inside the pause, once


def test_transform_page_without_transform_types_items() -> None:
    items: list[Any] = [
        {"metadata": {"name": "a"}},
        {"kind": "Pod", "apiVersion": "v1", "metadata": {"name": "b"}},
    ]
    out: list[Any] = []
    transform_page(items, "v1", "Pod", None, out, freeze=False)
    assert [(o["kind"], o["metadata"]["name"]) for o in out] == [("Pod", "a"), ("Pod", "b")]
