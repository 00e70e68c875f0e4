"""The reconcile steps every strategy shares, as `pkg/controller/deployment/sync.go`.

`DeploymentSync` holds the client and event recorder and works on a Deployment dict the caller
owns (a deep copy of the cached one): when a step writes the Deployment it updates that copy too,
so later steps of the same sync see what was written, as the Go code does with its pointer.

- `get_all_replica_sets_and_sync_revision`: find the new ReplicaSet (template equal ignoring the
  `pod-template-hash` label), create it when a rollout needs it (named `<deployment>-<hash>`,
  handling hash collisions through `status.collisionCount`), and keep revision annotations in step;
- `scale`: a scaling event (spec.replicas changed, seen through the `desired-replicas`
  annotation) is applied to the only active ReplicaSet, or proportionally across all of them in
  the middle of a rolling update;
- `cleanup_deployment`: old ReplicaSets beyond `revisionHistoryLimit`, oldest revision first, only
  those already scaled to zero;
- `sync_rollout_status`: write the status computed by `progress` when it changed.

Writes are PATCHes carrying the cached `resourceVersion`, so a stale cache turns into a
conflict and a retry rather than a lost update.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

import structlog

from apiclient import ApiError, KubeClient
from apiclient.resources import DEPLOYMENTS, REPLICASETS
from controllers.common.controller_ref import is_controlled_by, new_controller_ref
from controllers.common.deploymentstrategy import is_rolling_update, max_surge, replicas
from controllers.common.written import WrittenVersions
from controllers.context import EventRecorder
from controllers.deployment import progress
from controllers.deployment.util import (
    MAX_INT32,
    POD_TEMPLATE_HASH_LABEL,
    REVISION_ANNOTATION,
    annotations_of,
    compute_hash,
    desired_replicas_annotation,
    equal_ignore_hash,
    filter_active,
    find_active_or_latest,
    find_new_replica_set,
    find_old_replica_sets,
    has_progress_deadline,
    is_saturated,
    max_revision,
    meta,
    name_of,
    new_rs_new_replicas,
    proportional_sizes,
    replicas_annotations_need_update,
    revision_history_limit,
    revision_key,
    rollback_to,
    set_new_replica_set_annotations,
    set_replicas_annotations,
    template_of,
)
from informers import meta_key
from kubeutil.conditions import get_condition, set_condition
from kubeutil.timestamps import utcnow

log = structlog.get_logger()

# Where a sync's deferred annotation changes wait for its status write (a key of the sync's own
# copy of the Deployment, never sent: every write builds its own body).
PENDING_ANNOTATIONS = "__pendingAnnotations"

Obj = Mapping[str, Any]
RS = dict[str, Any]


def _d_key(d: Obj) -> str:
    return f"deployments/{meta_key(d)}"


def _rs_key(rs: Obj) -> str:
    return f"replicasets/{meta_key(rs)}"


def _namespace_terminating(exc: ApiError) -> bool:
    """`errors.HasStatusCause(err, NamespaceTerminatingCause)` (a cause's type is its "reason")."""
    causes = exc.details.get("causes") or []
    return any(isinstance(c, dict) and c.get("reason") == "NamespaceTerminating" for c in causes)


class DeploymentSync:
    """Shared reconcile steps; `requeue_after(d, seconds)` schedules a later look at `d`.

    `written` remembers the versions of Deployments and ReplicaSets this controller has written
    over, so a sync started before the informer delivered our last write waits for it instead of
    writing with a resourceVersion that is certain to conflict (`is_behind_our_writes`)."""

    def __init__(
        self, client: KubeClient, recorder: EventRecorder, *, requeue_after: Callable[[Obj, float], None]
    ) -> None:
        self.client = client
        self.recorder = recorder
        self.requeue_after = requeue_after
        self.written = WrittenVersions()

    # -- writes ---------------------------------------------------------------------------

    async def update_status(
        self, d: RS, status: dict[str, Any] | None, *, annotations: Mapping[str, str | None] | None = None
    ) -> None:
        """Write through `/status`, annotations included, as KCM's `UpdateStatus`: kube-apiserver
        bumps a Deployment's generation on any annotation change through the main resource, but
        not through `/status`, so revision bookkeeping never looks like a new spec. Annotations
        deferred earlier in the sync (`defer_annotations`) go in the same write."""
        pending = d.pop(PENDING_ANNOTATIONS, None) or {}
        annotations = {**pending, **(annotations or {})}
        body: dict[str, Any] = {"metadata": {"resourceVersion": meta(d).get("resourceVersion")}}
        if annotations:
            body["metadata"]["annotations"] = dict(annotations)
        if status is not None:
            body["status"] = status
        try:
            updated = await self.client.patch(
                DEPLOYMENTS, name_of(d), body, namespace=meta(d).get("namespace"), subresource="status"
            )
        except BaseException:
            if pending:
                d[PENDING_ANNOTATIONS] = pending
            raise
        self.written.wrote(_d_key(d), d, updated)
        if status is not None:
            d["status"] = status
        written = updated.get("metadata") or {}
        d_meta = d.setdefault("metadata", {})
        d_meta["resourceVersion"] = written.get("resourceVersion")
        if annotations:
            d_meta["annotations"] = dict(written.get("annotations") or {})

    def defer_annotations(self, d: RS, changes: Mapping[str, str | None]) -> None:
        """Annotation changes (None removes one) for the sync's status write, or for
        `flush_annotations` at its end when the sync writes no status: one write, not two."""
        d.setdefault(PENDING_ANNOTATIONS, {}).update(changes)

    async def flush_annotations(self, d: RS) -> None:
        """Write the annotations still deferred (through `/status`, alone)."""
        if d.get(PENDING_ANNOTATIONS):
            await self.update_status(d, None)

    async def update_annotations(self, d: RS, changes: Mapping[str, str | None]) -> None:
        """Merge the Deployment's annotations (None removes one) through `/status`; mirror them in `d`."""
        await self.update_status(d, None, annotations=changes)

    async def patch_replica_set(self, rs: Obj, body: dict[str, Any]) -> RS:
        body.setdefault("metadata", {})["resourceVersion"] = meta(rs).get("resourceVersion")
        updated = await self.client.patch(REPLICASETS, name_of(rs), body, namespace=meta(rs).get("namespace"))
        self.written.wrote(_rs_key(rs), rs, updated)
        return updated

    def forget(self, obj: Obj, *, replica_set: bool) -> None:
        """The object is gone: nothing of it to wait for."""
        self.written.forget(_rs_key(obj) if replica_set else _d_key(obj))

    def is_behind_our_writes(self, d: Obj, rs_list: Sequence[Obj]) -> bool:
        """The cache still holds a version of `d` or of one of its ReplicaSets that this
        controller has already written over: the informer will deliver the write and wake the
        Deployment again, so this sync would only act on what it has already changed."""
        return self.written.superseded(_d_key(d), d) or any(
            self.written.superseded(_rs_key(rs), rs) for rs in rs_list
        )

    # -- new and old ReplicaSets ------------------------------------------------------------

    async def get_all_replica_sets_and_sync_revision(
        self, d: RS, rs_list: Sequence[RS], *, create_if_not_existed: bool
    ) -> tuple[RS | None, list[RS]]:
        """`getAllReplicaSetsAndSyncRevision`: the new ReplicaSet (maybe created) and the old ones."""
        existing = find_new_replica_set(d, rs_list)
        old_rss = [dict(rs) for rs in find_old_replica_sets(existing, rs_list)]
        new_rs = await self.get_new_replica_set(
            d, rs_list, old_rss, create_if_not_existed=create_if_not_existed
        )
        return new_rs, old_rss

    async def get_new_replica_set(
        self, d: RS, rs_list: Sequence[RS], old_rss: Sequence[RS], *, create_if_not_existed: bool
    ) -> RS | None:
        existing = find_new_replica_set(d, rs_list)
        new_revision = max_revision(old_rss) + 1
        if existing is not None:
            return await self._sync_existing_new_rs(d, existing, new_revision)
        if not create_if_not_existed:
            return None
        return await self._create_new_rs(d, old_rss, new_revision)

    async def _sync_existing_new_rs(self, d: RS, existing: Obj, new_revision: int) -> RS:
        rs_ann = dict(annotations_of(existing))
        annotations_updated = set_new_replica_set_annotations(d, rs_ann, new_revision, exists=True)
        min_ready = (d.get("spec") or {}).get("minReadySeconds") or 0
        min_ready_update = ((existing.get("spec") or {}).get("minReadySeconds") or 0) != min_ready
        if annotations_updated or min_ready_update:
            body: dict[str, Any] = {
                "metadata": {"annotations": rs_ann},
                "spec": {"minReadySeconds": min_ready},
            }
            return await self.patch_replica_set(existing, body)
        rs = dict(existing)
        await self._note_new_rs(
            d,
            annotations_of(rs).get(REVISION_ANNOTATION),
            progressing=has_progress_deadline(d)
            and get_condition(d.get("status") or {}, progress.PROGRESSING) is None,
            reason=progress.FOUND_NEW_RS_REASON,
            message=f'Found new replica set "{name_of(rs)}"',
        )
        return rs

    async def _note_new_rs(
        self, d: RS, revision: str | None, *, progressing: bool, reason: str, message: str
    ) -> None:
        """Bring the Deployment's revision annotation up to the new ReplicaSet's and, when
        `progressing`, say Progressing=True with `reason`: one `/status` write, as KCM's."""
        annotations: dict[str, str | None] = {}
        if revision is not None and annotations_of(d).get(REVISION_ANNOTATION) != revision:
            annotations[REVISION_ANNOTATION] = revision
        new_status: dict[str, Any] | None = None
        if progressing:
            new_status = copy.deepcopy(d.get("status") or {})
            set_condition(
                new_status, progress.deployment_condition(progress.PROGRESSING, "True", reason, message)
            )
        if annotations or new_status is not None:
            await self.update_status(d, new_status, annotations=annotations)

    async def _create_new_rs(self, d: RS, old_rss: Sequence[RS], new_revision: int) -> RS | None:
        namespace = meta(d).get("namespace")
        collision_count = (d.get("status") or {}).get("collisionCount")
        template = copy.deepcopy(dict(template_of(d)))
        pod_hash = compute_hash(template, collision_count)
        template.setdefault("metadata", {}).setdefault("labels", {})[POD_TEMPLATE_HASH_LABEL] = pod_hash
        selector = copy.deepcopy(dict((d.get("spec") or {}).get("selector") or {}))
        selector.setdefault("matchLabels", {})[POD_TEMPLATE_HASH_LABEL] = pod_hash
        rs_ann: dict[str, str] = {}
        new_rs: RS = {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {
                "name": f"{name_of(d)}-{pod_hash}",
                "namespace": namespace,
                "ownerReferences": [new_controller_ref(d, api_version="apps/v1", kind="Deployment")],
                "labels": dict(template["metadata"]["labels"]),
            },
            "spec": {
                "replicas": 0,
                "minReadySeconds": (d.get("spec") or {}).get("minReadySeconds") or 0,
                "selector": selector,
                "template": template,
            },
        }
        new_replicas = new_rs_new_replicas(d, [*old_rss, new_rs], new_rs)
        new_rs["spec"]["replicas"] = new_replicas
        set_new_replica_set_annotations(d, rs_ann, new_revision, exists=False)
        set_replicas_annotations(rs_ann, replicas(d), replicas(d) + max_surge(d))
        new_rs["metadata"]["annotations"] = rs_ann
        already_exists = False
        try:
            created = await self.client.create(REPLICASETS, new_rs, namespace=namespace)
        except ApiError as exc:
            if _namespace_terminating(exc):
                raise  # every later create fails too: nothing to report
            if not exc.already_exists:
                msg = f'Failed to create new replica set "{new_rs["metadata"]["name"]}": {exc}'
                if has_progress_deadline(d):
                    status = copy.deepcopy(d.get("status") or {})
                    set_condition(
                        status,
                        progress.deployment_condition(
                            progress.PROGRESSING, "False", progress.FAILED_RS_CREATE_REASON, msg
                        ),
                    )
                    try:
                        await self.update_status(d, status)
                    except ApiError:
                        pass  # the failed create is the error to report, as KCM's
                self.recorder.event(d, "Warning", progress.FAILED_RS_CREATE_REASON, msg)
                raise
            already_exists = True
            found = await self.client.get(REPLICASETS, new_rs["metadata"]["name"], namespace=namespace)
            if not (is_controlled_by(found, d) and equal_ignore_hash(template_of(found), template_of(d))):
                # A different object owns the name: bump collisionCount so the next hash differs.
                status = copy.deepcopy(d.get("status") or {})
                status["collisionCount"] = int(collision_count or 0) + 1
                await self.update_status(d, status)
                log.info("hash collision for new replica set", replicaset=new_rs["metadata"]["name"])
                raise
            created = found  # we created it before but our cache had not seen it
        if not already_exists and new_replicas > 0:
            self.recorder.event(
                d,
                "Normal",
                "ScalingReplicaSet",
                f"Scaled up replica set {name_of(created)} to {new_replicas}",
            )
        await self._note_new_rs(
            d,
            str(new_revision),
            progressing=not already_exists and has_progress_deadline(d),
            reason=progress.NEW_RS_CREATED_REASON,
            message=f'Created new replica set "{name_of(created)}"',
        )
        return created

    # -- scaling ----------------------------------------------------------------------------

    async def scale_replica_set_and_record_event(self, rs: RS, new_scale: int, d: Obj) -> tuple[bool, RS]:
        if replicas(rs) == new_scale:
            return False, rs
        op = "up" if replicas(rs) < new_scale else "down"
        return await self.scale_replica_set(rs, new_scale, d, op)

    async def scale_replica_set(
        self, rs: RS, new_scale: int, d: Obj, op: str, *, max_replicas: int | None = None
    ) -> tuple[bool, RS]:
        """`scaleReplicaSet`: set replicas and the desired/max-replicas annotations together."""
        desired = replicas(d)
        max_total = desired + max_surge(d) if max_replicas is None else max_replicas
        size_changed = replicas(rs) != new_scale
        if not size_changed and not replicas_annotations_need_update(rs, desired, max_total):
            return False, rs
        rs_ann: dict[str, str] = {}
        set_replicas_annotations(rs_ann, desired, max_total)
        updated = await self.patch_replica_set(
            rs, {"metadata": {"annotations": rs_ann}, "spec": {"replicas": new_scale}}
        )
        if size_changed:
            self.recorder.event(
                d,
                "Normal",
                "ScalingReplicaSet",
                f"Scaled {op} replica set {name_of(rs)} to {new_scale}",
            )
        return size_changed, updated

    async def scale(self, d: RS, new_rs: RS | None, old_rss: list[RS]) -> None:
        """`scale`: follow a change of spec.replicas without starting a rollout."""
        active_or_latest = find_active_or_latest(new_rs, old_rss)
        if active_or_latest is not None:
            if replicas(active_or_latest) != replicas(d):
                await self.scale_replica_set_and_record_event(dict(active_or_latest), replicas(d), d)
            return
        if is_saturated(d, new_rs):
            for old in filter_active(old_rss):
                await self.scale_replica_set_and_record_event(dict(old), 0, d)
            return
        if is_rolling_update(d):
            active = filter_active([*old_rss, new_rs])
            sizes = proportional_sizes(d, active)
            total = sum(replicas(rs) for rs in active)
            allowed = replicas(d) + max_surge(d) if replicas(d) > 0 else 0
            op = "up" if allowed > total else "down" if allowed < total else ""
            by_name = {name_of(rs): rs for rs in active}
            # In the order the sizes were worked out (KCM's), so a failed write leaves the same
            # ReplicaSets scaled as it would under KCM.
            for name, size in sizes.items():
                await self.scale_replica_set(dict(by_name[name]), size, d, op)

    async def is_scaling_event(self, d: RS, rs_list: Sequence[RS]) -> bool:
        """`isScalingEvent`: an active ReplicaSet was last sized for another spec.replicas."""
        new_rs, old_rss = await self.get_all_replica_sets_and_sync_revision(
            d, rs_list, create_if_not_existed=False
        )
        for rs in filter_active([*old_rss, new_rs]):
            desired = desired_replicas_annotation(rs)
            if desired is not None and desired != replicas(d):
                return True
        return False

    # -- history and status ----------------------------------------------------------------

    async def cleanup_deployment(self, old_rss: Sequence[Obj], d: Obj) -> None:
        """`cleanupDeployment`: delete the oldest scaled-down ReplicaSets beyond the history limit."""
        limit = revision_history_limit(d)
        if limit is None or limit == MAX_INT32:
            return
        alive = [rs for rs in old_rss if not meta(rs).get("deletionTimestamp")]
        diff = len(alive) - limit
        if diff <= 0:
            return
        for rs in sorted(alive, key=revision_key)[:diff]:
            st = rs.get("status") or {}
            if int(st.get("replicas") or 0) != 0 or replicas(rs) != 0:
                continue
            if int(meta(rs).get("generation") or 0) > int(st.get("observedGeneration") or 0):
                continue
            try:
                await self.client.delete(REPLICASETS, name_of(rs), namespace=meta(rs).get("namespace"))
            except ApiError as exc:
                if not exc.not_found:
                    raise

    async def sync_deployment_status(self, all_rss: Sequence[Obj | None], new_rs: Obj | None, d: RS) -> None:
        """`syncDeploymentStatus`: counts and `Available` only (no progress estimation)."""
        status = progress.calculate_status(all_rss, new_rs, d)
        if not progress.status_equal(d.get("status"), status):
            await self.update_status(d, status)

    async def sync_rollout_status(self, all_rss: Sequence[Obj | None], new_rs: Obj | None, d: RS) -> None:
        """`syncRolloutStatus`: as above plus Progressing; requeue to catch a missed deadline."""
        now = utcnow()
        status = progress.rollout_status(all_rss, new_rs, d, now=now)
        if progress.status_equal(d.get("status"), status):
            self.requeue_stuck_deployment(d, status, now)
            return
        await self.update_status(d, status)

    def requeue_stuck_deployment(self, d: Obj, status: Obj, now: datetime) -> float:
        """`requeueStuckDeployment`: schedule the check of a rollout's progress deadline.

        Returns what KCM's does: -1 when there is nothing to check, 0 when the check is due now
        (requeued through the rate limiter), else the seconds left; the requeue comes a second
        after that, against clock skew."""
        after = progress.stuck_deployment_deadline_in(d, status, now)
        if after is None:
            return -1.0
        if after == 0:
            self.requeue_after(d, 0.0)
            return 0.0
        self.requeue_after(d, after + 1)
        return after

    async def sync(self, d: RS, rs_list: Sequence[RS]) -> None:
        """`sync`: scaling events and paused Deployments: scale, clean up, update status."""
        new_rs, old_rss = await self.get_all_replica_sets_and_sync_revision(
            d, rs_list, create_if_not_existed=False
        )
        await self.scale(d, new_rs, old_rss)
        if (d.get("spec") or {}).get("paused") and rollback_to(d) is None:
            await self.cleanup_deployment(old_rss, d)
        await self.sync_deployment_status([*old_rss, new_rs], new_rs, d)

    async def sync_status_only(self, d: RS, rs_list: Sequence[RS]) -> None:
        new_rs, old_rss = await self.get_all_replica_sets_and_sync_revision(
            d, rs_list, create_if_not_existed=False
        )
        await self.sync_deployment_status([*old_rss, new_rs], new_rs, d)

    async def check_paused_conditions(self, d: RS) -> None:
        """`checkPausedConditions`: Unknown Progressing while paused, so pause time never times out."""
        if not has_progress_deadline(d):
            return
        cond = get_condition(d.get("status"), progress.PROGRESSING)
        if cond is not None and cond.get("reason") == progress.TIMED_OUT_REASON:
            return
        paused_cond = cond is not None and cond.get("reason") == progress.PAUSED_DEPLOY_REASON
        paused = bool((d.get("spec") or {}).get("paused"))
        if paused and not paused_cond:
            new = progress.deployment_condition(
                progress.PROGRESSING, "Unknown", progress.PAUSED_DEPLOY_REASON, "Deployment is paused"
            )
        elif not paused and paused_cond:
            new = progress.deployment_condition(
                progress.PROGRESSING, "Unknown", progress.RESUMED_DEPLOY_REASON, "Deployment is resumed"
            )
        else:
            return
        status = copy.deepcopy(d.get("status") or {})
        set_condition(status, new)
        await self.update_status(d, status)
