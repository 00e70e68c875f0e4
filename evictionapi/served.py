"""Which group serves the API on this cluster: Kubernetes' built-in one, or aiokcm's CRDs.

Decided once at start by discovery, as KCM decides which controllers can run from the resources
the server offers: a server that serves `lifecycle.k8s.io/v1alpha1` runs upstream's
evictionrequest and imperative-eviction controllers in its own KCM, so aiokcm leaves those to it
and speaks the built-in group for everything else (requests, responders).
"""

from __future__ import annotations

from dataclasses import dataclass

from apiclient.client import KubeClient
from apiclient.errors import ApiError
from apiclient.resources import Resource
from evictionapi import names


@dataclass(frozen=True, slots=True)
class EvictionAPI:
    """The two resources of the API in the group this cluster serves them from."""

    group: str
    requests: Resource
    evictions: Resource

    @property
    def builtin(self) -> bool:
        """Kubernetes serves the API itself (and KCM runs its two controllers)."""
        return self.group == names.BUILTIN_GROUP


def api_in(group: str) -> EvictionAPI:
    return EvictionAPI(
        group=group,
        requests=Resource(group, names.VERSION, names.EVICTION_REQUESTS, names.EVICTION_REQUEST_KIND, True),
        evictions=Resource(group, names.VERSION, names.EVICTIONS, names.EVICTION_KIND, True),
    )


AIOKCM = api_in(names.AIOKCM_GROUP)
BUILTIN = api_in(names.BUILTIN_GROUP)


async def discover(client: KubeClient) -> EvictionAPI:
    """The built-in API when the server lists both its resources, aiokcm's CRDs otherwise.

    A 404 on the group version is the ordinary answer of every server before 1.37 or without the
    gate; other errors propagate, so a flaky server does not silently pick the wrong group.
    """
    try:
        listing = await client.request("GET", f"/apis/{names.BUILTIN_GROUP}/{names.VERSION}")
    except ApiError as exc:
        if exc.status == 404:
            return AIOKCM
        raise
    served = {str(r.get("name", "")) for r in listing.get("resources") or ()}
    if {names.EVICTION_REQUESTS, names.EVICTIONS} <= served:
        return BUILTIN
    return AIOKCM
