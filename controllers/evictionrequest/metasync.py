"""The refresh loop: an Eviction's participant labels and its owner references.

Labels name every requester and responder with its role, so that each can watch only the
Evictions it takes part in (`<name>=responder` as a label selector). Every live EvictionRequest of
the target owns the Eviction, so the garbage collector removes it once the last is deleted; a
reference once added is never removed here (that is the collector's job), and none is added for
a request being deleted (it would undo the orphaning).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from structlog.typing import FilteringBoundLogger

from apiclient import ApiError, KubeClient
from controllers.evictionrequest import metrics
from controllers.evictionrequest.reader import Reader
from controllers.evictionrequest.rules import (
    compute_eviction_labels,
    eviction_labels_need_update,
    is_deleted,
    owner_reference,
)
from controllers.evictionrequest.target import target_index_value
from evictionapi import names
from evictionapi.served import EvictionAPI

Obj = Mapping[str, Any]


def _meta(obj: Obj) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def metadata_patch(
    eviction: Obj, labels: Mapping[str, str], target_requests: list[Obj], group: str
) -> dict[str, Any] | None:
    """The merge patch of the Eviction's labels and owners; None when nothing needs writing."""
    meta = _meta(eviction)
    old_labels: Mapping[str, str] = meta.get("labels") or {}
    patch: dict[str, Any] = {}
    if eviction_labels_need_update(old_labels, labels):
        label_patch: dict[str, str | None] = {k: v for k, v in labels.items() if old_labels.get(k) != v}
        for key, value in old_labels.items():
            if value == names.ROLE_REQUESTER and not labels.get(key):
                label_patch[key] = None
        patch["labels"] = label_patch
    refs = [dict(r) for r in meta.get("ownerReferences") or ()]
    present = {(r.get("name"), r.get("uid")) for r in refs if r.get("kind") == names.EVICTION_REQUEST_KIND}
    added = [
        owner_reference(r, group)
        for r in sorted(target_requests, key=lambda r: str(_meta(r).get("name") or ""))
        if not is_deleted(r) and (_meta(r).get("name"), _meta(r).get("uid")) not in present
    ]
    if added:
        patch["ownerReferences"] = refs + added
    if not patch:
        return None
    patch["resourceVersion"] = meta.get("resourceVersion")
    return {"metadata": patch}


@dataclass
class MetadataSync:
    client: KubeClient
    api: EvictionAPI
    reader: Reader
    log: FilteringBoundLogger

    async def sync(self, key: str) -> None:
        eviction = self.reader.evictions.get_by_key(key)
        if eviction is None:
            return
        meta = _meta(eviction)
        target = self.reader.target_of(eviction)
        if target.to_eviction_target() is None:
            self.log.error("unrecognized target", key=key)
            return
        target_requests = self.reader.requests_for(
            target_index_value(str(meta.get("namespace") or ""), eviction)
        )
        labels = compute_eviction_labels(eviction, target, target_requests)
        body = metadata_patch(eviction, labels, target_requests, self.api.group)
        if body is None:
            return
        try:
            await self.client.patch(
                self.api.evictions, str(meta.get("name")), body, namespace=str(meta.get("namespace"))
            )
        except ApiError as exc:
            if exc.not_found:
                return
            raise
        metrics.ACTIONS.labels("refresh").inc()
        self.log.info(
            "eviction labels and owners refreshed", key=key,
            labels=sorted((body["metadata"].get("labels") or {}).keys()),
            owners=len(body["metadata"].get("ownerReferences") or ()),
        )  # fmt: skip
