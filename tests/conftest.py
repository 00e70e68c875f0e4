"""Shared fixtures: a task-leak guard for every async test, the cluster (local or real), a client to it.

Tests and modules marked `@pytest.mark.backends("local", "real")` run once per backend: their
`cluster` (and so `kube`) is the embedded local cluster, then a real kube-apiserver beside the
real kube-controller-manager (minus the controllers aiokcm replaces), with ids `[local]` and
`[real]`. The real control plane starts once per session from `KUBEBUILDER_ASSETS`; without it
the `[real]` cases are skipped with the reason, unless `AIOKCM_REQUIRE_REAL=1` (CI) makes that a
failure.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from apiclient import KubeClient
from localcluster.cluster import LocalCluster
from realcluster import ControlPlane
from tests.backends import REQUIRE_REAL, cluster_on_backend
from tests.support.leaks import no_leaked_tasks
from tests.support.sessionplanes import SessionPlanes, gather, on_session_plane


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    marker = metafunc.definition.get_closest_marker("backends")
    if marker is None or "cluster" not in metafunc.fixturenames:
        return
    metafunc.parametrize("cluster", list(marker.args), indirect=True, ids=list(marker.args))


#: The folders with the longest tests (real control planes, end-to-end stories), collected first.
#: `--dist loadgroup` hands out work in collection order (after the xdist groups, largest first):
#: run last, one of these kept a worker busy for a minute while the others sat idle.
_COLLECTED_FIRST = ("tests/real/", "tests/e2e/")


@pytest.hookimpl(tryfirst=True)  # before the xdist worker writes the groups into the node ids
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    gather(items)

    def rank(item: pytest.Item) -> int:
        return next(
            (i for i, folder in enumerate(_COLLECTED_FIRST) if item.nodeid.startswith(folder)),
            len(_COLLECTED_FIRST),
        )

    items.sort(key=rank)  # stable: a module's tests stay together and in order


class _XdistGroupsKept:
    """Fails the grouped tests where `--dist loadgroup` lost their `xdist_group` marks.

    xdist learns an item's group from a suffix its worker writes into the item's node id; a pytest
    that keeps node ids elsewhere (9.2, pytest-dev/pytest-xdist#1386) silently drops it, and then
    the tests of one group spread over every worker, each starting the group's control planes
    again. Nothing else would fail: the suite would only take minutes longer.
    """

    def __init__(self) -> None:
        self.lost: set[str] = set()

    @pytest.hookimpl(trylast=True)  # after the xdist worker's own hook has written the suffixes
    def pytest_collection_modifyitems(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        if not getattr(config.option, "loadgroup", False):
            return  # not an xdist worker under --dist loadgroup
        self.lost = {
            item.nodeid
            for item in items
            if item.get_closest_marker("xdist_group") is not None
            and "@" not in item.nodeid.rsplit("]", 1)[-1]
        }

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        if item.nodeid in self.lost:
            pytest.fail(
                "--dist loadgroup ignored this test's xdist_group mark: this pytest and pytest-xdist "
                "do not work together (see the pin in pyproject.toml)",
                pytrace=False,
            )


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(_XdistGroupsKept(), "aiokcm-xdist-groups-kept")


_real_outcomes: dict[str, int] = {"passed": 0, "skipped": 0, "failed": 0}


#: Every skipped test, real tier or not (a missing kubectl binary, say): CI runs all of them.
_skipped: list[str] = []


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.skipped:
        _skipped.append(report.nodeid)
    if "[real" not in report.nodeid and "/real/" not in report.nodeid:
        return
    if report.when == "call" or (report.when == "setup" and not report.passed):
        _real_outcomes[report.outcome] = _real_outcomes.get(report.outcome, 0) + 1


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if os.environ.get(REQUIRE_REAL) == "1" and _skipped:
        terminalreporter.write_line(f"{len(_skipped)} skipped, which AIOKCM_REQUIRE_REAL=1 fails:")
        for nodeid in _skipped[:20]:
            terminalreporter.write_line(f"  {nodeid}")
    if any(_real_outcomes.values()):
        terminalreporter.write_line(
            "real-apiserver tier: {passed} passed, {failed} failed, {skipped} skipped".format(
                **_real_outcomes
            )
        )


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Under AIOKCM_REQUIRE_REAL=1 (CI) a skipped test fails the run: a skip there means a tool or
    the real tier went missing, and the tests it hides would pass unseen. The shared planes stop here."""
    _planes.stop()
    if os.environ.get(REQUIRE_REAL) == "1" and _skipped and session.exitstatus == 0:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


_planes = SessionPlanes()


@pytest.fixture
def real_plane() -> ControlPlane:
    """etcd, kube-apiserver, kube-scheduler and KCM (minus aiokcm's controllers), shared (see
    tests/support/sessionplanes.py)."""
    return _planes.get("real_plane")


@pytest.fixture
def real_stock_plane() -> ControlPlane:
    """The stock KCM with all of its controllers beside etcd, kube-apiserver and kube-scheduler: the
    managed-cluster layout, shared."""
    return _planes.get("real_stock_plane")


@pytest.fixture
def real_bare_plane() -> ControlPlane:
    """kube-apiserver for tests of the API's own semantics (no scheduler, of KCM only the namespace
    controller), shared."""
    return _planes.get("real_bare_plane")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """Once the test's own fixtures are gone: the shared planes stop when the next test runs on none.
    The last test of the worker has no next one; the session's end stops them."""
    try:
        return (yield)
    finally:
        if nextitem is not None and not on_session_plane(nextitem):
            _planes.stop()


@pytest.fixture(autouse=True)
async def _no_leaked_tasks() -> AsyncIterator[None]:
    """Fail any test that leaves a task running: every background task must be owned and cancelled."""
    async with no_leaked_tasks():
        yield


@pytest.fixture
async def cluster(request: pytest.FixtureRequest) -> AsyncIterator[Any]:
    """A started API server with three Ready nodes: the local one, or the real one for `[real]` cases.

    Its kubelets start a pod in 0.2 s and finish one in at most 0.5 s, as most tests' own clusters
    do: what these tests watch is the order of what happens, not how long a container takes."""
    async with cluster_on_backend(request, nodes=3, pod_start_delay=0.2, termination_cap=0.5) as started:
        yield started


@pytest.fixture
def cluster_factory() -> type[LocalCluster]:
    """For tests that need a cluster with other options: `async with cluster_factory(nodes=1, gc=False)`.

    `LocalCluster` may be entered and left from different tasks (its background actors live in a
    task it owns), so it works directly in async fixtures.
    """
    return LocalCluster


@pytest.fixture
async def kube(cluster: LocalCluster) -> AsyncIterator[KubeClient]:
    """A KubeClient to `cluster`, built from its kubeconfig; closed after the test."""
    client = await cluster.client()
    try:
        yield client
    finally:
        await client.close()
