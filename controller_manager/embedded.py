"""The `aiokcm.embedded` plugin seam: how `--embedded` and `aiokcm cluster up` find a local cluster.

Product packages must not import `localcluster` (import-linter forbids it), yet `make run` has to
start one in-process. So, as kubectl finds its plugins, the manager looks the cluster up at run
time through the Python entry point group `aiokcm.embedded`, entry `cluster`, which names a
module (declared in pyproject.toml as `cluster = "localcluster.embedded"`). The module must
provide what `EmbeddedClusterPlugin` describes; when it is missing the user gets one line and
exit code 2, never a traceback.

The local cluster's own dependencies (a CEL interpreter, Kubernetes' OpenAPI schemas, cron
parsing, JSON patch) are the `embedded` extra, so a production install carries none of them; the
production image leaves `localcluster` out altogether. Either way the entry point may be declared
yet fail to import, and the line then says how to get a cluster: the extra or the demo image.
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from importlib.metadata import entry_points
from typing import Any, Protocol, cast, runtime_checkable

GROUP = "aiokcm.embedded"
ENTRY = "cluster"
INSTALL_HINT = (
    "install the embedded extra (pip install 'aiokcm[embedded]') or use the demo image "
    "(docker build --target demo)"
)


@runtime_checkable
class EmbeddedClusterPlugin(Protocol):
    """The contract `localcluster.embedded` fulfils (see docs/CONTRACTS.md).

    `start_embedded(nodes=, pods_per_node=)` returns an async context manager that starts a
    local cluster in this process, yields the path of a kubeconfig pointing at it, and stops the
    cluster on exit; with `demo=True` it also runs the narrated demo beside the manager (and with
    `demo_exit_after_drain=True` stops the process as SIGTERM does once the demo is over). `cluster_up(nodes=, pods_per_node=, kubeconfig=)` serves a cluster until
    cancelled (SIGINT/SIGTERM), writing its kubeconfig to `kubeconfig`, and returns an exit code.
    """

    def start_embedded(
        self, *, nodes: int, pods_per_node: int = 0, demo: bool = False, demo_exit_after_drain: bool = False
    ) -> AbstractAsyncContextManager[str]: ...

    async def cluster_up(self, *, nodes: int, pods_per_node: int, kubeconfig: str) -> int: ...


class PluginMissing(Exception):
    """No usable `aiokcm.embedded` plugin is installed."""


def load_plugin() -> EmbeddedClusterPlugin:
    """Load the `cluster` entry of `aiokcm.embedded`; PluginMissing with a one-line reason if absent."""
    found = [ep for ep in entry_points(group=GROUP) if ep.name == ENTRY]
    if not found:
        raise PluginMissing(
            f"the embedded local cluster is not installed (no entry point {GROUP}:{ENTRY}); {INSTALL_HINT}"
        )
    try:
        loaded: Any = found[0].load()
    except ImportError as exc:
        # The production install: `localcluster` left out, or present without the extra's packages.
        raise PluginMissing(
            f"the embedded local cluster is not installed ({found[0].value} cannot be imported: {exc}); "
            f"{INSTALL_HINT}"
        ) from None
    missing = [attr for attr in ("start_embedded", "cluster_up") if not callable(getattr(loaded, attr, None))]
    if missing:
        raise PluginMissing(f"local cluster plugin {found[0].value!r} lacks {', '.join(missing)}")
    return cast(EmbeddedClusterPlugin, loaded)
