"""Controller references and `ControllerRefManager`: who owns an object, adopting and releasing.

As `pkg/controller/controller_ref_manager.go`: a controller claims the objects its selector
matches. An object it already controls but that no longer matches is released; a matching orphan
is adopted — but never by a controller that is being deleted, never when the orphan is itself being
deleted or lives in another namespace than a namespaced controller, and only after a *fresh* read
from the API server (not the cache) confirms the controller still exists with the same UID
(`RecheckDeletionTimestamp`), checked at most once per claim. Objects controlled by someone else
are never touched. Adopt and release are strategic-merge PATCHes carrying the object's UID as a
precondition, so a deleted-and-recreated namesake is never mis-owned; a manager given finalizers
adds them on adoption and removes them on release, in the same patch.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Protocol

from apiclient import ApiError, KubeClient
from apiclient.resources import PODS, Resource
from kubeutil.selectors import Selector

Obj = Mapping[str, Any]


def get_controller_of(obj: Obj) -> Mapping[str, Any] | None:
    """The owner reference with `controller: true`, or None (`metav1.GetControllerOf`)."""
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or ():
        if ref.get("controller"):
            return ref  # type: ignore[no-any-return]
    return None


def is_controlled_by(obj: Obj, owner: Obj) -> bool:
    ref = get_controller_of(obj)
    return ref is not None and ref.get("uid") == (owner.get("metadata") or {}).get("uid")


def new_controller_ref(owner: Obj, *, api_version: str, kind: str) -> dict[str, Any]:
    """`metav1.NewControllerRef`: controller and blockOwnerDeletion both true."""
    meta = owner.get("metadata") or {}
    return {
        "apiVersion": api_version,
        "kind": kind,
        "name": meta.get("name", ""),
        "uid": meta.get("uid", ""),
        "controller": True,
        "blockOwnerDeletion": True,
    }


def adopt_patch(owner_ref: Mapping[str, Any], obj_uid: str, finalizers: Sequence[str] = ()) -> dict[str, Any]:
    """Strategic-merge patch adding `owner_ref` (merge key `uid`) and any `finalizers`, guarded by the
    object's UID (`ownerRefControllerPatch`)."""
    meta: dict[str, Any] = {"ownerReferences": [dict(owner_ref)], "uid": obj_uid}
    if finalizers:
        meta["finalizers"] = list(finalizers)
    return {"metadata": meta}


def delete_owner_refs_patch(
    dependent_uid: str, owner_uids: Sequence[str], finalizers: Sequence[str] = ()
) -> dict[str, Any]:
    """`GenerateDeleteOwnerRefStrategicMergeBytes`: delete the owner references with `owner_uids`
    (and remove `finalizers`), guarded by the dependent's UID. Keys in Go's order, so the JSON is
    byte for byte the same."""
    meta: dict[str, Any] = {
        "uid": dependent_uid,
        "ownerReferences": [{"$patch": "delete", "uid": uid} for uid in owner_uids],
    }
    if finalizers:
        meta["$deleteFromPrimitiveList/finalizers"] = list(finalizers)
    return {"metadata": meta}


def release_patch(owner_uid: str, obj_uid: str, finalizers: Sequence[str] = ()) -> dict[str, Any]:
    """Strategic-merge patch deleting the owner reference with `owner_uid`, guarded by the object's UID."""
    return delete_owner_refs_patch(obj_uid, [owner_uid], finalizers)


def recheck_deletion_timestamp(get_fresh: Callable[[], Awaitable[Obj]]) -> Callable[[], Awaitable[None]]:
    """`controller.RecheckDeletionTimestamp`: a `can_adopt` that fails if the controller is being deleted."""

    async def can_adopt() -> None:
        fresh = await get_fresh()
        meta = fresh.get("metadata") or {}
        stamp = meta.get("deletionTimestamp")
        if stamp:
            raise AdoptionRefused(
                f"{meta.get('namespace', '')}/{meta.get('name')} has just been deleted at {stamp}"
            )

    return can_adopt


def fresh_getter(client: KubeClient, res: Resource, owner: Obj) -> Callable[[], Awaitable[Obj]]:
    """A quorum read of `owner` that fails when it was deleted or replaced by a namesake (UID changed)."""
    meta = owner.get("metadata") or {}

    async def get() -> Obj:
        fresh = await client.get(res, str(meta.get("name")), namespace=meta.get("namespace"))
        fresh_uid = (fresh.get("metadata") or {}).get("uid")
        if fresh_uid != meta.get("uid"):
            raise AdoptionRefused(
                f"original {res.kind} {meta.get('namespace', '')}/{meta.get('name')} is gone: "
                f"got uid {fresh_uid}, wanted {meta.get('uid')}"
            )
        return fresh

    return get


class AdoptionRefused(Exception):
    """The controller may not adopt now (it is being deleted, or was replaced)."""


class ControllerRefManager:
    """Claims objects of one resource (pods by default) for one controller.

    `claim(objs)` returns the objects the controller owns after adopting and releasing; errors
    from individual adopt/release calls are collected and raised together after the pass (as
    `utilerrors.NewAggregate`), so one bad object never stops the others from being claimed.
    """

    def __init__(
        self,
        client: KubeClient,
        controller: Obj,
        selector: Selector,
        *,
        api_version: str,
        kind: str,
        can_adopt: Callable[[], Awaitable[None]],
        resource: Resource = PODS,
        finalizers: Sequence[str] = (),
    ) -> None:
        self.client = client
        self.controller = controller
        self.selector = selector
        self.resource = resource
        self.finalizers = tuple(finalizers)
        self.controller_ref = new_controller_ref(controller, api_version=api_version, kind=kind)
        self._can_adopt = can_adopt
        self._can_adopt_result: BaseException | bool | None = False  # False: not checked yet

    @property
    def controller_uid(self) -> str:
        return str(self.controller_ref["uid"])

    @property
    def controller_deleting(self) -> bool:
        return bool((self.controller.get("metadata") or {}).get("deletionTimestamp"))

    @property
    def controller_namespace(self) -> str:
        return str((self.controller.get("metadata") or {}).get("namespace") or "")

    async def can_adopt(self) -> None:
        """Run the fresh check once per manager; remember its verdict."""
        if self._can_adopt_result is False:
            try:
                await self._can_adopt()
                self._can_adopt_result = None
            except Exception as exc:
                self._can_adopt_result = exc
        if isinstance(self._can_adopt_result, BaseException):
            raise self._can_adopt_result

    async def claim(self, objs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        claimed: list[dict[str, Any]] = []
        errors: list[BaseException] = []
        for obj in objs:
            try:
                if await self._claim_one(obj):
                    claimed.append(obj)
            except Exception as exc:
                errors.append(exc)
        if errors:
            raise ClaimErrors(errors, claimed)
        return claimed

    async def _claim_one(self, obj: dict[str, Any]) -> bool:
        ref = get_controller_of(obj)
        matches = self.selector.matches_obj(obj)
        if ref is not None:
            if ref.get("uid") != self.controller_uid:
                return False  # someone else's
            if matches:
                return True
            if self.controller_deleting:
                return False  # let garbage collection deal with it
            await self.release(obj)
            return False
        if self.controller_deleting or not matches:
            return False
        meta = obj.get("metadata") or {}
        if meta.get("deletionTimestamp"):
            return False  # never adopt an object on its way out
        namespace = self.controller_namespace
        if namespace and namespace != meta.get("namespace"):
            return False  # a namespaced controller adopts in its own namespace only
        return await self.adopt(obj)

    async def adopt(self, obj: Obj) -> bool:
        """Adopt an orphan; False when it vanished meanwhile."""
        await self.can_adopt()
        try:
            await self._patch(
                obj,
                adopt_patch(
                    self.controller_ref, str((obj.get("metadata") or {}).get("uid")), self.finalizers
                ),
            )
        except ApiError as exc:
            if exc.not_found:
                return False
            raise
        return True

    async def release(self, obj: Obj) -> None:
        """Drop our controller reference; a vanished or replaced object (404 / 422) is fine."""
        try:
            await self._patch(
                obj,
                release_patch(
                    self.controller_uid, str((obj.get("metadata") or {}).get("uid")), self.finalizers
                ),
            )
        except ApiError as exc:
            if exc.not_found or exc.invalid:
                return
            raise

    async def _patch(self, obj: Obj, patch: dict[str, Any]) -> None:
        """A strategic-merge patch of `obj`'s owner references; the uid in `patch` guards the object."""
        meta = obj.get("metadata") or {}
        await self.client.patch(
            self.resource,
            str(meta.get("name")),
            patch,
            namespace=meta.get("namespace"),
            patch_type="strategic",
        )


class ClaimErrors(Exception):
    """Some adopt/release calls failed; `claimed` is what was claimed anyway."""

    def __init__(self, errors: list[BaseException], claimed: list[dict[str, Any]]) -> None:
        super().__init__("; ".join(str(e) for e in errors))
        self.errors = errors
        self.claimed = claimed


ORPHAN_INDEX = "orphanNamespace"


def orphan_namespace_index(obj: Mapping[str, Any]) -> list[str]:
    """Index objects that have no controller by their namespace: the adoption candidates.

    With this index and `CONTROLLER_UID_INDEX` a controller finds exactly the objects a claim can
    touch (its own plus orphans) without scanning the namespace on every sync; objects controlled
    by someone else are never candidates anyway.
    """
    if get_controller_of(obj) is not None:
        return []
    namespace = (obj.get("metadata") or {}).get("namespace")
    return [namespace] if namespace else []


class _Indexable(Protocol):
    def add_indexers(self, indexers: Mapping[str, Callable[[Mapping[str, Any]], list[str]]]) -> None: ...


def ensure_orphan_index(informer: _Indexable) -> None:
    """Add `ORPHAN_INDEX` to a shared informer unless another controller already did."""
    try:
        informer.add_indexers({ORPHAN_INDEX: orphan_namespace_index})
    except ValueError:
        pass  # shared informer: the first controller to ask added it
