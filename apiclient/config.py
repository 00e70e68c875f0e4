"""Build a kubernetes_asyncio `ApiClient` the way KCM resolves its connection.

Order as client-go's `BuildConfigFromFlags`: `--kubeconfig` (or $KUBECONFIG), overridden by
`--master` when both are given; with neither, the in-cluster service account.
"""

from __future__ import annotations

import os

from kubernetes_asyncio import client as k8s_client
from kubernetes_asyncio import config as k8s_config


async def build_api_client(
    *, kubeconfig: str | None = None, master: str | None = None, context: str | None = None
) -> k8s_client.ApiClient:
    configuration = k8s_client.Configuration()
    path = kubeconfig or os.environ.get("KUBECONFIG") or None
    if path:
        await k8s_config.load_kube_config(
            config_file=path, context=context, client_configuration=configuration, persist_config=False
        )
    elif master:
        configuration.host = master
    else:
        k8s_config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
    if master:
        configuration.host = master
    return k8s_client.ApiClient(configuration=configuration)
