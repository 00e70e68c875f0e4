"""Build a kubernetes_asyncio `ApiClient` the way KCM resolves its connection.

Order as client-go's `BuildConfigFromFlags`: `--kubeconfig` (or $KUBECONFIG), overridden by
`--master` when both are given; with neither, the in-cluster service account.
"""

from __future__ import annotations

import os

from kubernetes_asyncio import client as k8s_client
from kubernetes_asyncio import config as k8s_config


class KubeconfigError(ValueError):
    """The connection settings name something that is not there."""


async def build_api_client(
    *, kubeconfig: str | None = None, master: str | None = None, context: str | None = None
) -> k8s_client.ApiClient:
    configuration = k8s_client.Configuration()
    path = kubeconfig or os.environ.get("KUBECONFIG") or None
    if path and not os.path.isfile(path):  # noqa: ASYNC240 - one stat at start-up, before any work runs
        # The library would only log a warning and then fail on the missing `current-context`.
        source = "--kubeconfig" if kubeconfig else "$KUBECONFIG"
        raise KubeconfigError(f"{source} {path}: no such file")
    if path:
        await k8s_config.load_kube_config(
            config_file=path, context=context, client_configuration=configuration, persist_config=False
        )
    elif master:
        configuration.host = master
    else:
        try:
            k8s_config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
        except k8s_config.ConfigException as exc:
            raise KubeconfigError(
                f"no --kubeconfig, --master or $KUBECONFIG, and no in-cluster service account ({exc})"
            ) from None
    if master:
        configuration.host = master
    return k8s_client.ApiClient(configuration=configuration)


def describe_config_error(exc: BaseException) -> str | None:
    """One line for a connection-settings error a user can fix, None for anything else.

    kubernetes_asyncio reports a bad kubeconfig or missing in-cluster credentials with its
    `ConfigException`; a missing file is our own `KubeconfigError`.
    """
    if isinstance(exc, KubeconfigError | k8s_config.ConfigException):
        return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return None
