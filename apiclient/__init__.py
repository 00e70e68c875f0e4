"""Thin, typed access to the Kubernetes API on top of kubernetes_asyncio.

Every controller, informer and the manager itself talk to the API server through
`KubeClient`: raw JSON (parsed with orjson into plain dicts) instead of the generated
models, one client-side token bucket (`--kube-api-qps` / `--kube-api-burst`) in front of
every request, and client-go's `rest_client_*` metrics.
"""

from apiclient.client import KubeClient, WatchEvent
from apiclient.errors import ApiError
from apiclient.resources import Resource

__all__ = ["ApiError", "KubeClient", "Resource", "WatchEvent"]
