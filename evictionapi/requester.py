"""Writing EvictionRequests as a requester: one per (pod, requester), named so a retry finds it.

The merged API makes `spec.requester` a single immutable value, so two requesters of one pod each
own an EvictionRequest of their own (the evictionrequest controller merges them into the pod's one
Eviction). The name is a function of the pod's name, its UID and the requester: a requester that
runs again (a CLI re-run, a controller after a restart) computes the same name and finds its
request, a second requester never collides with the first, and a new pod that took an old pod's
name gets a new request rather than the old one's settled conditions. The pod's name leads so
`kubectl get evictionrequests` reads as a list of pods.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from typing import Any

from evictionapi import names
from evictionapi.served import EvictionAPI

# A DNS subdomain's length, what metadata.name allows.
MAX_NAME_LENGTH = 253
_HASH_CHARS = 10
_LABEL_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def request_name(pod_name: str, pod_uid: str, requester: str) -> str:
    """`<pod>-<10 hex of sha256(uid, requester)>`, cut to a valid name (the hash always kept)."""
    digest = hashlib.sha256(f"{pod_uid}\x00{requester}".encode()).hexdigest()[:_HASH_CHARS]
    head = pod_name[: MAX_NAME_LENGTH - _HASH_CHARS - 1].rstrip("-.")
    return f"{head}-{digest}"


def requester_problem(requester: str) -> str | None:
    """Why `requester` is not a name the API accepts (None when it is).

    The API's rule (`IsDomainPrefixedKey`): `<DNS subdomain>/<name>`, the name a label name of at
    most 63 characters; the `k8s.io` and `kubernetes.io` domains are Kubernetes' own.
    """
    prefix, sep, name = requester.partition("/")
    if not sep or not prefix or not name:
        return f'requester "{requester}" must be a domain-prefixed name such as "acme.io/foo"'
    if len(prefix) > MAX_NAME_LENGTH or not all(_DNS_LABEL.match(p) for p in prefix.split(".")):
        return f'requester "{requester}": "{prefix}" is not a DNS subdomain'
    if "." not in prefix:
        return f'requester "{requester}": "{prefix}" is not a domain (it has no dot)'
    if len(name) > 63 or not _LABEL_NAME.match(name):
        return (
            f'requester "{requester}": "{name}" is not a valid name (at most 63 alphanumerics, "-", "_", ".")'
        )
    for domain in names.RESERVED_DOMAINS:
        if prefix == domain or prefix.endswith("." + domain):
            return f'requester "{requester}": the domain {domain} is reserved for Kubernetes'
    return None


def new_request(
    api: EvictionAPI,
    pod: Mapping[str, Any],
    requester: str,
    *,
    intent: str = names.INTENT_EVICTION,
    labels: Mapping[str, str] | None = None,
    owner: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The EvictionRequest `requester` creates for `pod`, in the group `api` serves.

    `owner` is an ownerReference (a NodeMaintenance), so the garbage collector removes the
    request with it.
    """
    meta = pod.get("metadata") or {}
    pod_name, uid = str(meta.get("name") or ""), str(meta.get("uid") or "")
    metadata: dict[str, Any] = {
        "name": request_name(pod_name, uid, requester),
        "namespace": str(meta.get("namespace") or ""),
    }
    if labels:
        metadata["labels"] = dict(labels)
    if owner:
        metadata["ownerReferences"] = [dict(owner)]
    return {
        "apiVersion": api.requests.api_version,
        "kind": names.EVICTION_REQUEST_KIND,
        "metadata": metadata,
        "spec": {
            "target": {"pod": {"name": pod_name, "uid": uid}},
            "requester": requester,
            "intent": intent,
        },
    }
