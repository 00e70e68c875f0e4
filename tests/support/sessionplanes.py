"""The real control planes tests share: started on a worker's first need, stopped when its next
test needs none, and the tests that use them gathered on few xdist workers.

An idle plane (etcd, kube-apiserver, its scheduler and KCM) costs about 0.04 of a core, and
starting one about 8 CPU-seconds. Held for the whole session by each of four xdist workers, the
planes cost more CPU than a fifth of the suite's tests on a machine where the suite is CPU-bound;
gathered on three workers and stopped once those move on, they cost a fraction of that.

Which tests use them is known before they run: a `[real…]` backend parameter, a plane fixture
among the test's fixtures, or the `session_plane` mark where a test asks for its plane by name at
run time. A test they miss still gets its plane (started again on its worker), only later.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from realcluster import Assets, ControlPlane
from tests.backends import real_assets_or_skip

#: Each plane fixture's name, and the plane it stands for.
PLANES: dict[str, Callable[[Assets], ControlPlane]] = {
    # etcd, kube-apiserver, kube-scheduler and KCM minus aiokcm's controllers.
    "real_plane": lambda assets: ControlPlane(assets),
    # The stock KCM with all of its controllers: the managed-cluster layout, where aiokcm runs beside
    # KCM's own ReplicaSet and Deployment controllers.
    "real_stock_plane": lambda assets: ControlPlane(assets, kcm_controllers="*"),
    # kube-apiserver for tests of the API's own semantics: no scheduler, and of KCM only the namespace
    # controller (the embedded cluster always runs one too). Nobody creates the `default` service
    # accounts, so the ServiceAccount admission plugin, which refuses pods until one exists, is off.
    "real_bare_plane": lambda assets: ControlPlane(
        assets,
        kcm_controllers="namespace",
        scheduler=False,
        apiserver_flags=("--disable-admission-plugins=ServiceAccount",),
    ),
}

#: The mark of a test that asks for a plane fixture by name (`request.getfixturevalue`).
SESSION_PLANE = pytest.mark.session_plane

#: How many xdist groups share out the plane tests that carry no group of their own: each group's
#: worker starts the planes its tests use, once.
GROUPS = 3


class SessionPlanes:
    """The planes running in this process, by fixture name."""

    def __init__(self) -> None:
        self._running: dict[str, ControlPlane] = {}

    def get(self, name: str) -> ControlPlane:
        plane = self._running.get(name)
        if plane is None:
            plane = PLANES[name](real_assets_or_skip())
            plane.start()
            self._running[name] = plane
        return plane

    def stop(self) -> None:
        while self._running:
            _, plane = self._running.popitem()
            plane.stop()


def on_session_plane(item: pytest.Item) -> bool:
    """Whether `item` runs on one of the session's planes."""
    return (
        "[real" in item.nodeid
        or item.get_closest_marker("session_plane") is not None
        or any(name in PLANES for name in getattr(item, "fixturenames", ()))
    )


def gather(items: list[pytest.Item]) -> None:
    """Give the plane tests without an xdist group one of `GROUPS` groups, a module's tests all in
    one, the modules dealt out by their count of such tests (largest first, to the smallest group)."""
    by_module: dict[str, list[pytest.Item]] = {}
    for item in items:
        if on_session_plane(item) and item.get_closest_marker("xdist_group") is None:
            by_module.setdefault(item.nodeid.split("::", 1)[0], []).append(item)
    sizes = [0] * GROUPS
    for module_items in sorted(by_module.values(), key=len, reverse=True):
        group = sizes.index(min(sizes))
        sizes[group] += len(module_items)
        for item in module_items:
            item.add_marker(pytest.mark.xdist_group(f"session-plane-{group}"))
