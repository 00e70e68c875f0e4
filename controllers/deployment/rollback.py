"""Rolling back through the `deprecated.deployment.rollback.to` annotation, as `rollback.go`.

apps/v1 dropped `spec.rollbackTo`; KCM still honours the annotation (a revision number, 0 meaning
the previous one). Today's `kubectl rollout undo` does the same work client-side (it copies the
old ReplicaSet's template and annotations into the Deployment), after which an ordinary rollout
follows; both paths end in the same state. Rolling back never scales anything itself: it rewrites
the template, clears the annotation, and the next sync rolls out.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

from apiclient.resources import DEPLOYMENTS
from controllers.deployment.sync import RS, DeploymentSync
from controllers.deployment.util import (
    ANNOTATIONS_TO_SKIP,
    POD_TEMPLATE_HASH_LABEL,
    ROLLBACK_TO_ANNOTATION,
    annotations_of,
    equal_ignore_hash,
    last_revision,
    meta,
    name_of,
    revision,
    rollback_to,
    template_of,
)

ROLLBACK_REVISION_NOT_FOUND = "DeploymentRollbackRevisionNotFound"
ROLLBACK_TEMPLATE_UNCHANGED = "DeploymentRollbackTemplateUnchanged"
ROLLBACK_DONE = "DeploymentRollback"


async def rollback(s: DeploymentSync, d: RS, rs_list: Sequence[RS]) -> None:
    new_rs, old_rss = await s.get_all_replica_sets_and_sync_revision(d, rs_list, create_if_not_existed=True)
    all_rss = [rs for rs in [*old_rss, new_rs] if rs is not None]
    target = rollback_to(d) or 0
    if target == 0:
        target = last_revision(all_rss)
        if target == 0:
            s.recorder.event(d, "Warning", ROLLBACK_REVISION_NOT_FOUND, "Unable to find last revision.")
            await _clear_rollback_to(s, d, None)
            return
    for rs in all_rss:
        if revision(rs) == target:
            if equal_ignore_hash(template_of(d), template_of(rs)):
                s.recorder.event(
                    d,
                    "Warning",
                    ROLLBACK_TEMPLATE_UNCHANGED,
                    f'The rollback revision contains the same template as current deployment "{name_of(d)}"',
                )
                await _clear_rollback_to(s, d, None)
                return
            await _clear_rollback_to(s, d, rs)
            s.recorder.event(
                d, "Normal", ROLLBACK_DONE, f'Rolled back deployment "{name_of(d)}" to revision {target}'
            )
            return
    s.recorder.event(d, "Warning", ROLLBACK_REVISION_NOT_FOUND, "Unable to find the revision to rollback to.")
    await _clear_rollback_to(s, d, None)


async def _clear_rollback_to(s: DeploymentSync, d: RS, rs: RS | None) -> None:
    """One PATCH: drop the annotation and, when rolling back, take `rs`'s template and annotations.

    The template is replaced wholesale with a JSON patch (guarded by resourceVersion), as
    `kubectl rollout undo` does: a merge patch could not drop fields the old template lacks.
    """
    changes: dict[str, Any] = {ROLLBACK_TO_ANNOTATION: None}
    namespace = meta(d).get("namespace")
    if rs is None:
        body = {"metadata": {"annotations": changes, "resourceVersion": meta(d).get("resourceVersion")}}
        updated = await s.client.patch(DEPLOYMENTS, name_of(d), body, namespace=namespace)
    else:
        template = copy.deepcopy(dict(template_of(rs)))
        labels = (template.get("metadata") or {}).get("labels") or {}
        labels.pop(POD_TEMPLATE_HASH_LABEL, None)
        # `SetDeploymentAnnotationsTo`: the old ReplicaSet's annotations replace the Deployment's
        # (all but the skipped ones, which stay as they are) together with its template.
        for key in annotations_of(d):
            if key not in ANNOTATIONS_TO_SKIP:
                changes[key] = None
        for key, value in annotations_of(rs).items():
            if key not in ANNOTATIONS_TO_SKIP:
                changes[key] = value
        ops: list[dict[str, Any]] = [
            {"op": "test", "path": "/metadata/resourceVersion", "value": meta(d).get("resourceVersion")},
            {"op": "replace", "path": "/spec/template", "value": template},
        ]
        # Key by key, so annotations the cache does not hold (last-applied) survive.
        for key, value in changes.items():
            path = "/metadata/annotations/" + key.replace("~", "~0").replace("/", "~1")
            if value is not None:
                ops.append({"op": "add", "path": path, "value": value})
            elif key in annotations_of(d):
                ops.append({"op": "remove", "path": path})
        updated = await s.client.patch(DEPLOYMENTS, name_of(d), ops, namespace=namespace, patch_type="json")
    d.clear()
    d.update(copy.deepcopy(updated))
