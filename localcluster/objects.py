"""`ObjectAPI`: the generic registry store of the real API server, without HTTP.

Every write takes the same path whether it came over HTTP or from an in-process actor (the
scheduler, kubelets and garbage collector): prune unknown fields, default, the strategy's
prepare hook, metadata rules (uid, creationTimestamp, generateName, immutable fields),
validation (422 with causes), optimistic concurrency (409 on a stale resourceVersion),
then storage. Deletion follows `k8s.io/apiserver/pkg/registry/generic/registry/store.go`:
preconditions, propagation recorded as the `orphan` / `foregroundDeletion` finalizers,
graceful deletion (deletionTimestamp + deletionGracePeriodSeconds) for kinds that have it, and
objects with finalizers kept until the last one is removed.

Writes return the stored `Entry` (its `raw` bytes are what HTTP sends; `entry.load()` gives a
private dict); `get` returns a private dict callers may mutate.
"""

from __future__ import annotations

import copy
import datetime as dt
import secrets
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

from kubeutil import selectors
from kubeutil.timestamps import format_time, utcnow
from localcluster import errors, listoptions, patch, podstate
from localcluster.builtin.validation import validate_meta
from localcluster.fieldmanager import kinds, managed
from localcluster.registry import FieldError, Obj, Registry, ResourceType
from localcluster.storage import Compacted, Entry, Storage, decode_continue, encode_continue

#: `storage/etcd3`'s `inconsistentContinue`: a continue whose RV was compacted, with a token to go on at the latest.
_INCONSISTENT_CONTINUE = (
    "The provided continue parameter is too old to display a consistent list result. You can start a new list without "
    "the continue parameter, or use the continue token in this response to retrieve the remainder of the results. "
    "Continuing with the provided token results in an inconsistent list - objects that were created, modified, or "
    "deleted between the time the first chunk was returned and now may show up in the list."
)
_GENERATE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
_GENERATE_NAME_ATTEMPTS = 8


def _random_suffix() -> str:
    """Five characters from the alphabet `names.SimpleNameGenerator` uses (no vowels, no 0/1/3)."""
    return "".join(secrets.choice(_GENERATE_ALPHABET) for _ in range(5))


_IMMUTABLE_META = (
    "name",
    "namespace",
    "uid",
    "creationTimestamp",
    "generateName",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
)
ORPHAN = "orphan"
FOREGROUND = "foregroundDeletion"
SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")


def now_rfc3339() -> str:
    return format_time(utcnow())


def _later_rfc3339(seconds: int) -> str:
    return format_time(utcnow() + dt.timedelta(seconds=seconds))


@dataclass(slots=True)
class ListResult:
    """One LIST page: entries in key order, the list's RV, and the continue token if more remain."""

    entries: list[Entry]
    resource_version: int
    continue_token: str | None
    remaining: int | None


FIELD_VALIDATION = ("Ignore", "Warn", "Strict")


@dataclass(slots=True)
class WriteOptions:
    """Per-request options of a write, as the real server's `CreateOptions` / `UpdateOptions` /
    `PatchOptions` / `DeleteOptions` carry them. In-process actors pass none (no dry run, unknown
    fields dropped silently); HTTP requests default to `Warn`, as kube-apiserver >= 1.27 does.

    `warnings` collects what the REST layer sends back as `Warning: 299` headers.
    """

    dry_run: bool = False
    field_validation: str = "Ignore"
    warnings: list[str] = field(default_factory=list)
    #: Duplicate fields the body decoder found (`fieldValidation=Strict` reports them).
    duplicates: list[str] = field(default_factory=list)
    #: (name, uid, creationTimestamp) a create takes instead of drawing its own: those of the dry
    #: run the admission webhooks judged, so the stored object is the one they saw.
    identity: tuple[str, str, str] | None = None
    #: Who owns the fields this write sets (`metadata.managedFields`). None for in-process actors:
    #: their bulk writes skip ownership bookkeeping and keep the entries the object has.
    field_manager: str | None = None
    #: `force=true` of an apply: take fields other managers own instead of failing with a conflict.
    force: bool = False


_NO_OPTIONS = WriteOptions()


@dataclass(slots=True)
class DeleteResult:
    """`deleted` is False when the object only got a deletionTimestamp (grace or finalizers)."""

    entry: Entry
    deleted: bool


class ObjectAPI:
    def __init__(self, registry: Registry, storage: Storage) -> None:
        self.registry = registry
        self.storage = storage
        #: Hooks other modules add (e.g. `namespace` -> cascade). Called after an object is removed.
        self.on_removed: list[Callable[[ResourceType, Obj], None]] = []
        #: Admission plugins run on create, as kube-apiserver orders them: mutating ones after
        #: decoding and defaulting, validating ones after the kind's validation. Either refuses
        #: by raising a `StatusError` (LimitRanger, Priority, ResourceQuota: `localcluster.quota`).
        self.mutating_admission: list[Callable[[ResourceType, Obj], None]] = []
        self.validating_admission: list[Callable[[ResourceType, Obj], None]] = []

    # -- helpers ------------------------------------------------------------------------
    def _namespace_of(self, rt: ResourceType, namespace: str | None) -> str:
        if not rt.namespaced:
            return ""
        if not namespace:
            raise errors.bad_request("the server could not find the requested resource (namespace required)")
        return namespace

    def _entry(self, rt: ResourceType, namespace: str, name: str) -> Entry:
        entry = self.storage.get(rt.storage_key, namespace, name)
        if entry is None:
            raise errors.not_found(rt.group_resource, name, group=rt.group, kind=rt.plural)
        return entry

    def _check_namespace_exists(self, namespace: str) -> None:
        if self.storage.get("namespaces", "", namespace) is None:
            raise errors.not_found("namespaces", namespace, kind="namespaces")

    def _fields(self, rt: ResourceType, obj: Obj) -> dict[str, str]:
        meta = obj["metadata"]
        fields = rt.strategy.selectable_fields(obj)
        fields["metadata.name"] = meta["name"]
        fields["metadata.namespace"] = meta.get("namespace", "") if rt.namespaced else ""
        return fields

    def _store(self, rt: ResourceType, obj: Obj, *, new: bool, opts: WriteOptions = _NO_OPTIONS) -> Entry:
        labels = obj["metadata"].get("labels") or {}
        if opts.dry_run:
            return self._dry_entry(rt, obj, new=new)
        return self.storage.write(
            rt.storage_key, obj, labels=labels, fields=self._fields(rt, obj), expect_new=new
        )

    def _dry_entry(self, rt: ResourceType, obj: Obj, *, new: bool) -> Entry:
        """`dryRun=All`: the would-be object, never stored and never seen by a watch. A dry-run
        create has no resourceVersion (as upstream); an update keeps the current one."""
        meta = obj["metadata"]
        if new:
            meta.pop("resourceVersion", None)
        rv = int(meta.get("resourceVersion") or 0)
        return Entry(
            orjson.dumps(obj),
            rv,
            meta.get("namespace", "") or "",
            meta["name"],
            meta.get("labels") or {},
            self._fields(rt, obj),
        )

    def _check_unknown_fields(self, rt: ResourceType, opts: WriteOptions) -> None:
        """`fieldValidation`: what pruning dropped (and duplicates the decoder saw) is an error
        under Strict, a `Warning` header under Warn, nothing under Ignore (the fields are gone
        either way). Read right after `strategy.prune`, which records what it dropped."""
        if opts.field_validation == "Ignore":
            return
        problems = [f'unknown field "{p}"' for p in getattr(rt.strategy, "last_pruned", None) or ()]
        if opts.field_validation == "Strict":
            problems += [f'duplicate field "{p}"' for p in opts.duplicates]
            if problems:
                raise errors.bad_request(
                    f'{rt.kind} in version "{rt.version}" cannot be handled as a {rt.kind}: strict decoding error: '
                    + ", ".join(problems)
                )
            return
        opts.warnings.extend(problems)

    def _validate(self, rt: ResourceType, obj: Obj, old: Obj | None, *, status: bool = False) -> None:
        strategy = rt.strategy
        errs: list[FieldError] = validate_meta(
            obj.get("metadata"),
            label_name=getattr(strategy, "label_names", False),
            namespaced=rt.namespaced,
            segment_name=getattr(strategy, "path_segment_names", False),
        )
        if old is not None:
            old_finalizers = set(old["metadata"].get("finalizers") or [])
            new_finalizers = set(obj["metadata"].get("finalizers") or [])
            if old["metadata"].get("deletionTimestamp") and new_finalizers - old_finalizers:
                errs.append(
                    FieldError.forbidden(
                        "metadata.finalizers", "no new finalizers can be added if the object is being deleted"
                    )
                )
        if not errs:
            errs = (
                strategy.validate_status(obj, old)
                if status and old is not None
                else strategy.validate(obj, old)
            )
        if errs:
            raise errors.invalid(rt.kind, obj["metadata"].get("name", ""), errs, group=rt.group)

    def _check_type(self, rt: ResourceType, obj: Any) -> Obj:
        if not isinstance(obj, dict):
            raise errors.bad_request("the object provided is not a JSON object")
        api_version, kind = obj.get("apiVersion"), obj.get("kind")
        if rt.strategy.requires_type_meta and (not kind or not api_version):
            missing = "Kind" if not kind else "apiVersion"
            raise errors.bad_request(
                f'{rt.kind} in version "{rt.version}" cannot be handled as a {rt.kind}: '
                f"Object '{missing}' is missing in '{orjson.dumps(obj).decode()}'"
            )
        if api_version is not None and api_version != rt.api_version:
            raise errors.bad_request(
                f"the API version in the data ({api_version}) does not match the expected API version ({rt.api_version})"
            )
        if kind is not None and kind != rt.kind:
            raise errors.bad_request(
                f"the kind in the data ({kind}) does not match the expected kind ({rt.kind})"
            )
        obj["apiVersion"], obj["kind"] = rt.api_version, rt.kind
        meta = obj.get("metadata")
        if meta is None:
            obj["metadata"] = meta = {}
        if not isinstance(meta, dict):
            raise errors.bad_request("metadata must be an object")
        return obj

    # -- reads --------------------------------------------------------------------------
    def get(self, rt: ResourceType, namespace: str | None, name: str) -> Obj:
        return self._entry(rt, self._namespace_of(rt, namespace), name).load()

    def get_entry(self, rt: ResourceType, namespace: str | None, name: str) -> Entry:
        return self._entry(rt, namespace or "" if rt.namespaced else "", name)

    def list(
        self,
        rt: ResourceType,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        limit: int = 0,
        continue_token: str | None = None,
        resource_version: str = "",
        resource_version_match: str = "",
    ) -> ListResult:
        """Entries in key order; with `limit`, one page and a continue token (RV + last key).

        `resource_version` / `resource_version_match` as kube-apiserver reads them (see
        `listoptions`): a watch-cache read answers the current objects (any limit ignored) or 504
        if the cache is behind the RV (the HTTP layer waits for it first); an etcd read is at
        the latest RV or, for `Exact` (and a limit with an RV) and every continue page, at the
        RV asked: the objects as they were then, or 410 once compacted."""
        label_sel, field_reqs = self.parse_selectors(rt, label_selector, field_selector)
        storage, key = self.storage, rt.storage_key
        opts = listoptions.ListOptions(resource_version, resource_version_match, continue_token or "", limit)
        after: str | None = None
        at: int | None = None  # read the objects as they were at this RV
        list_rv = storage.rv
        if continue_token:
            if resource_version not in ("", "0"):
                raise errors.bad_request("specifying resource version is not allowed when using continue")
            token_rv, after = decode_continue(continue_token)
            if token_rv > 0:
                at = list_rv = token_rv
        elif opts.from_cache:
            rv = listoptions.parse_rv(resource_version)
            list_rv = storage.cache_rv(key)
            if rv > list_rv:
                raise errors.too_large_resource_version(rv, list_rv, 1)
            limit = 0  # the watch cache answers everything in one page
        elif resource_version:
            rv = listoptions.parse_rv(resource_version)
            if resource_version_match == listoptions.EXACT or (
                not resource_version_match and limit > 0 and rv > 0
            ):
                if rv > storage.rv:
                    raise errors.storage_failure("etcdserver: mvcc: required revision is a future revision")
                at = list_rv = rv
            elif rv > storage.rv:
                raise errors.too_large_resource_version(rv, storage.rv, 0)
        if at is not None:
            try:
                storage.check_readable(key, at)
            except Compacted as exc:
                if continue_token:
                    raise errors.gone(
                        _INCONSISTENT_CONTINUE, continue_token=encode_continue(-1, after or "")
                    ) from exc
                raise errors.gone("The resourceVersion for the provided list is too old.") from exc
        ns = namespace if rt.namespaced else None
        out: list[Entry] = []
        token: str | None = None
        remaining: int | None = None
        if at is None:
            iterator = storage.iter_entries(key, ns or None, after)
        else:
            iterator = storage.iter_entries_at(key, at, ns or None, after)
        for entry in iterator:
            if not label_sel.empty and not label_sel.matches(entry.labels):
                continue
            if field_reqs and not _fields_match(entry.fields, field_reqs):
                continue
            if limit and len(out) >= limit:
                last = out[-1]
                last_key = f"{last.namespace}/{last.name}" if last.namespace else last.name
                token = encode_continue(list_rv, last_key)
                if label_sel.empty and not field_reqs:
                    # from sorted-key positions: O(log n), where counting the rest was O(n)
                    if at is None:
                        remaining = storage.count_entries(key, ns or None, last_key)
                    else:
                        remaining = storage.count_entries_at(key, at, ns or None, last_key)
                break
            out.append(entry)
        return ListResult(out, list_rv, token, remaining)

    def parse_selectors(
        self, rt: ResourceType, label_selector: str | None, field_selector: str | None
    ) -> tuple[selectors.Selector, tuple[selectors.FieldRequirement, ...]]:
        try:
            label_sel = selectors.parse(label_selector)
        except selectors.SelectorError as exc:
            raise errors.bad_request(f"unable to parse requirement: {exc}") from exc
        try:
            field_reqs = selectors.parse_fields(field_selector)
        except selectors.SelectorError as exc:
            raise errors.bad_request(str(exc)) from exc
        allowed = rt.strategy.field_labels | {"metadata.name", "metadata.namespace"}
        for req in field_reqs:
            if req.field not in allowed:
                raise errors.bad_request(f"field label not supported: {req.field}")
        return label_sel, field_reqs

    # -- create -------------------------------------------------------------------------
    def create(
        self,
        rt: ResourceType,
        namespace: str | None,
        body: Any,
        *,
        opts: WriteOptions = _NO_OPTIONS,
        owners: managed.Managed | None = None,
    ) -> Entry:
        """POST. `owners` are the managedFields an apply computed; otherwise the creator owns
        every field it set (an Update entry)."""
        obj = self._check_type(rt, body)
        meta = obj["metadata"]
        requested = meta.get("managedFields")
        ns = self._namespace_of(rt, namespace or meta.get("namespace"))
        if rt.namespaced:
            if meta.get("namespace") and meta["namespace"] != ns:
                raise errors.bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request"
                )
            meta["namespace"] = ns
            self._check_namespace_exists(ns)
            self._check_namespace_active(rt, ns, meta)
        else:
            meta.pop("namespace", None)
        generated = not meta.get("name") and bool(meta.get("generateName"))
        identity = opts.identity
        if generated:
            meta["name"] = identity[0] if identity is not None else meta["generateName"] + _random_suffix()
        strategy = rt.strategy
        strategy.prune(obj)
        self._check_unknown_fields(rt, opts)
        strategy.default(obj)
        for admit in self.mutating_admission:
            admit(rt, obj)
        requested_rv = meta.get("resourceVersion")
        for key in (
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "resourceVersion",
            "selfLink",
            "managedFields",
        ):
            meta.pop(key, None)
        meta["uid"] = identity[1] if identity is not None else str(uuid.uuid4())
        meta["creationTimestamp"] = identity[2] if identity is not None else now_rfc3339()
        strategy.prepare_for_create(obj)
        self._validate(rt, obj, None)
        for admit in self.validating_admission:
            admit(rt, obj)
        if _parse_rv(requested_rv) != 0 and not opts.dry_run:
            # etcd3 `store.Create`, after validation and admission: a plain error, so a 500 (a
            # dry run never reaches etcd, so it is not refused)
            raise errors.storage_failure("resourceVersion should not be set on objects to be created")
        if owners is None and opts.field_manager is not None:
            start = None if managed.is_reset(requested) else managed.decode(requested)
            owners = managed.update(
                {},
                obj,
                start or {},
                opts.field_manager,
                rt.api_version,
                "",
                kinds.kind_type(rt),
                kinds.reset_fields(rt, None, obj),
            )
        if owners:
            meta["managedFields"] = managed.encode(owners)
        # As kube-apiserver since 1.31 (RetryGenerateName): a generated name that is taken is drawn
        # again, up to 8 attempts in all, before the create fails with AlreadyExists. With 27^5
        # suffixes, one ReplicaSet of 5,000 pods would otherwise almost surely see a collision.
        for _ in range(_GENERATE_NAME_ATTEMPTS - 1):
            if (
                not generated
                or identity is not None
                or self.storage.get(rt.storage_key, ns, meta["name"]) is None
            ):
                break
            meta["name"] = meta["generateName"] + _random_suffix()
        if self.storage.get(rt.storage_key, ns, meta["name"]) is not None:
            raise errors.already_exists(rt.group_resource, meta["name"], group=rt.group, kind=rt.plural)
        return self._store(rt, obj, new=True, opts=opts)

    # -- update -------------------------------------------------------------------------
    def update(
        self,
        rt: ResourceType,
        namespace: str | None,
        name: str,
        body: Any,
        *,
        subresource: str | None = None,
        opts: WriteOptions = _NO_OPTIONS,
    ) -> Entry:
        """PUT: the body replaces the object (status or not, per `subresource`)."""
        ns = self._namespace_of(rt, namespace)
        obj = self._check_type(rt, body)
        entry = self._entry(rt, ns, name)
        meta = obj["metadata"]
        _check_target(rt, meta, name, entry, namespace=ns if rt.namespaced else None)
        uid = meta.get("uid")
        old = entry.load()
        if uid and uid != old["metadata"]["uid"]:
            raise _conflict(rt, name, uid_precondition_failed(uid, old["metadata"]["uid"]))
        return self._apply_update(rt, obj, old, entry, subresource=subresource, opts=opts)

    def _apply_update(
        self,
        rt: ResourceType,
        obj: Obj,
        old: Obj,
        entry: Entry,
        *,
        subresource: str | None,
        opts: WriteOptions = _NO_OPTIONS,
        owners: managed.Managed | None = None,
    ) -> Entry:
        meta, old_meta = obj["metadata"], old["metadata"]
        requested = meta.get("managedFields")
        for key in _IMMUTABLE_META:
            if key in old_meta:
                meta[key] = old_meta[key]
            else:
                meta.pop(key, None)
        meta.pop("managedFields", None)
        meta.pop("selfLink", None)
        strategy = rt.strategy
        strategy.prune(obj)
        self._check_unknown_fields(rt, opts)
        strategy.default(obj)
        status = subresource == "status"
        if status:
            strategy.prepare_for_status_update(obj, old)
        elif subresource == "finalize":
            strategy.prepare_for_finalize(obj, old)  # type: ignore[attr-defined]  # namespaces only
        else:
            strategy.prepare_for_update(obj, old)
        meta["resourceVersion"] = old_meta.get("resourceVersion")
        self._track_owners(rt, obj, old, subresource, opts, requested, owners)
        if obj == old:
            return entry  # a no-op write: no new RV, no event (as etcd's guaranteed update)
        self._validate(rt, obj, old, status=status)
        if (
            meta.get("deletionTimestamp")
            and not meta.get("finalizers")
            and not meta.get("deletionGracePeriodSeconds")
        ):
            # a terminating namespace goes only once its spec.finalizers are gone too
            # (`ShouldDeleteNamespaceDuringUpdate`)
            if not (rt.storage_key == "namespaces" and (obj.get("spec") or {}).get("finalizers")):
                return self._remove(rt, obj, opts)
        return self._store(rt, obj, new=False, opts=opts)

    def _track_owners(
        self,
        rt: ResourceType,
        obj: Obj,
        old: Obj,
        subresource: str | None,
        opts: WriteOptions,
        requested: Any,
        owners: managed.Managed | None,
    ) -> None:
        """`metadata.managedFields` of an update: an apply's entries as computed, or the
        writer's Update entry (`decodeLiveOrNew`: entries the request sends replace the live
        ones, `[]` or `[{}]` clears them). In-process writes keep the live entries."""
        meta, old_meta = obj["metadata"], old["metadata"]
        live_entries = old_meta.get("managedFields")
        if owners is None and opts.field_manager is not None:
            start: managed.Managed = {}
            if not managed.is_reset(requested):
                start = (
                    (managed.decode(requested, stored=requested == live_entries) if requested else None)
                    or managed.decode(live_entries, stored=True)
                    or {}
                )
            if not start:
                # `skipNonAppliedManager`: an object without entries (none ever, or cleared by
                # `managedFields: []`) gains none from an update; only an apply starts tracking
                return
            old_view = {**old, "metadata": {k: v for k, v in old_meta.items() if k != "managedFields"}}
            owners = managed.update(
                old_view,
                obj,
                start,
                opts.field_manager,
                rt.api_version,
                subresource or "",
                kinds.kind_type(rt),
                kinds.reset_fields(rt, subresource, obj),
            )
        if owners is not None:
            encoded = managed.encode(owners)
            if encoded:
                meta["managedFields"] = encoded
        elif live_entries is not None:
            meta["managedFields"] = live_entries

    # -- apply --------------------------------------------------------------------------
    def apply(
        self,
        rt: ResourceType,
        namespace: str | None,
        name: str,
        body: bytes,
        *,
        subresource: str | None = None,
        opts: WriteOptions,
    ) -> tuple[Entry, bool]:
        """Server-side apply (`application/apply-patch+yaml`): (the stored entry, created)."""
        if not opts.field_manager:
            raise errors.invalid(
                "PatchOptions",
                "",
                [FieldError.required("fieldManager", "Required value: is required for apply patch")],
                group="meta.k8s.io",
            )
        config = patch.decode_body(body, patch.APPLY_PATCH)
        if not isinstance(config, dict):
            raise errors.bad_request("the patch must be a JSON object")
        if config.get("apiVersion") != rt.api_version:
            raise errors.bad_request(
                f"Incorrect version specified in apply patch. Specified patch version: "
                f"{config.get('apiVersion') or ''}, expected: {rt.api_version}"
            )
        if isinstance(config.get("metadata"), dict) and config["metadata"].get("managedFields") is not None:
            raise errors.bad_request("metadata.managedFields must be nil")
        config = self._check_type(rt, config)
        meta = config["metadata"]
        if meta.get("name", name) != name:
            raise errors.bad_request(
                f"the name of the object ({meta.get('name')}) does not match the name on the URL ({name})"
            )
        ns = self._namespace_of(rt, namespace)
        t = kinds.kind_type(rt)
        entry = self.storage.get(rt.storage_key, ns, name)
        if entry is None:
            if subresource:
                raise errors.not_found(rt.group_resource, name, group=rt.group, kind=rt.plural)
            meta["name"] = name
            merged, owners = managed.apply(
                {},
                config,
                {},
                opts.field_manager,
                "",
                t,
                force=opts.force,
                ignored=kinds.reset_fields(rt, None, config),
            )
            merged.get("metadata", {}).pop(
                "resourceVersion", None
            )  # apply's create is `store.Update`'s, not POST's
            return self.create(rt, namespace, merged, opts=opts, owners=owners), True
        old = entry.load()
        live = entry.load()
        entries = managed.decode(live["metadata"].pop("managedFields", None), stored=True) or {}
        if not entries:
            # the first apply to an object nobody owns gives what it has to `before-first-apply`
            entries = managed.update(
                {},
                live,
                {},
                managed.BEFORE_FIRST_APPLY,
                rt.api_version,
                subresource or "",
                t,
                kinds.reset_fields(rt, subresource, live),
            )
        rv = meta.get("resourceVersion")
        if rv not in (None, "") and str(rv) != str(entry.rv):
            raise _conflict(rt, name, errors.STALE)
        merged, owners = managed.apply(
            live,
            config,
            entries,
            opts.field_manager,
            subresource or "",
            t,
            force=opts.force,
            ignored=kinds.reset_fields(rt, subresource, config),
            allowed=managed.last_applied_fields(live, rt.api_version, t),
        )
        obj = self._check_type(rt, merged)
        return self._apply_update(
            rt, obj, old, entry, subresource=subresource, opts=opts, owners=owners
        ), False

    def update_status(self, rt: ResourceType, namespace: str | None, name: str, body: Any) -> Entry:
        return self.update(rt, namespace, name, body, subresource="status")

    # -- patch --------------------------------------------------------------------------
    def patch(
        self,
        rt: ResourceType,
        namespace: str | None,
        name: str,
        patch_body: bytes,
        content_type: str,
        *,
        subresource: str | None = None,
        opts: WriteOptions = _NO_OPTIONS,
    ) -> Entry:
        """PATCH: the patch applied to the stored object, the result checked and written as a PUT
        of it would be (only the UID precondition's message differs, as the real server's does)."""
        ns = self._namespace_of(rt, namespace)
        entry = self._entry(rt, ns, name)
        old = entry.load()
        patched = patch.apply_patch(content_type, copy.deepcopy(old), patch_body, rt)
        if not isinstance(patched, dict):
            raise errors.bad_request("the patch did not produce an object")
        patched.setdefault("metadata", {})
        meta = patched["metadata"]
        if not isinstance(meta, dict):
            raise errors.bad_request("metadata must be an object")
        _check_target(rt, meta, name, entry)
        if meta.get("uid") not in (None, old["metadata"]["uid"]):
            raise _conflict(rt, name, "Precondition failed: UID mismatch")
        obj = self._check_type(rt, patched)
        return self._apply_update(rt, obj, old, entry, subresource=subresource, opts=opts)

    # -- delete -------------------------------------------------------------------------
    def delete(
        self,
        rt: ResourceType,
        namespace: str | None,
        name: str,
        *,
        grace_period_seconds: int | None = None,
        propagation_policy: str | None = None,
        preconditions: dict[str, Any] | None = None,
        orphan_dependents: bool | None = None,
        opts: WriteOptions = _NO_OPTIONS,
    ) -> DeleteResult:
        ns = self._namespace_of(rt, namespace)
        entry = self._entry(rt, ns, name)
        obj = entry.load()
        meta = obj["metadata"]
        pre = preconditions or {}
        if pre.get("uid") and pre["uid"] != meta.get("uid"):
            raise _conflict(rt, name, uid_precondition_failed(pre["uid"], meta.get("uid")))
        if pre.get("resourceVersion") and str(pre["resourceVersion"]) != str(entry.rv):
            raise _conflict(
                rt,
                name,
                f"Precondition failed: ResourceVersion in precondition: {pre['resourceVersion']}, ResourceVersion in object meta: {entry.rv}",
            )
        if propagation_policy is not None and propagation_policy not in (
            "Orphan",
            "Background",
            "Foreground",
        ):
            raise errors.invalid(
                "DeleteOptions",
                "",
                [
                    FieldError.not_supported(
                        "propagationPolicy", propagation_policy, ("Foreground", "Background", "Orphan")
                    )
                ],
            )
        if orphan_dependents is not None and propagation_policy is None:
            propagation_policy = "Orphan" if orphan_dependents else "Background"
        before = copy.deepcopy(obj)
        finalizers: list[str] = list(meta.get("finalizers") or [])
        if propagation_policy == "Orphan":
            finalizers = [f for f in finalizers if f != FOREGROUND]
            if ORPHAN not in finalizers:
                finalizers.append(ORPHAN)
        elif propagation_policy == "Foreground":
            finalizers = [f for f in finalizers if f != ORPHAN]
            if FOREGROUND not in finalizers:
                finalizers.append(FOREGROUND)
        elif propagation_policy == "Background":
            finalizers = [f for f in finalizers if f not in (ORPHAN, FOREGROUND)]
        if finalizers:
            meta["finalizers"] = finalizers
        else:
            meta.pop("finalizers", None)
        if rt.storage_key == "namespaces":
            return self._delete_namespace(rt, obj, before, entry, opts)

        grace: int | None = 0
        if rt.strategy.graceful_deletion:
            grace = rt.strategy.graceful_period(obj, grace_period_seconds)
            current = meta.get("deletionGracePeriodSeconds")
            if current is not None and grace is not None and grace > current:
                grace = current  # a later delete may only shorten the grace period
        if grace:
            if meta.get("deletionGracePeriodSeconds") != grace:
                meta["deletionTimestamp"] = _later_rfc3339(grace)
                meta["deletionGracePeriodSeconds"] = grace
            return DeleteResult(self._store_if_changed(rt, obj, before, entry, opts), False)
        if finalizers:
            meta.setdefault("deletionTimestamp", now_rfc3339())
            meta["deletionGracePeriodSeconds"] = 0
            return DeleteResult(self._store_if_changed(rt, obj, before, entry, opts), False)
        return DeleteResult(self._remove(rt, obj, opts), True)

    def _delete_namespace(
        self, rt: ResourceType, obj: Obj, before: Obj, entry: Entry, opts: WriteOptions
    ) -> DeleteResult:
        """Namespace REST `Delete`: the first DELETE only marks the namespace (deletionTimestamp,
        phase Terminating); the namespace controller (`localcluster.namespaces`) empties it and
        removes the `kubernetes` finalizer through `/finalize`, which deletes it. A DELETE of a
        namespace already terminating with no spec.finalizers left deletes it for real."""
        meta = obj["metadata"]
        if not before["metadata"].get("deletionTimestamp"):
            meta["deletionTimestamp"] = now_rfc3339()
            obj.setdefault("status", {})["phase"] = "Terminating"
            return DeleteResult(self._store_if_changed(rt, obj, before, entry, opts), False)
        if (obj.get("spec") or {}).get("finalizers") or meta.get("finalizers"):
            return DeleteResult(self._store_if_changed(rt, obj, before, entry, opts), False)
        return DeleteResult(self._remove(rt, obj, opts), True)

    def _check_namespace_active(self, rt: ResourceType, namespace: str, meta: Obj) -> None:
        """NamespaceLifecycle admission: no new content in a terminating namespace. The cause
        (`NamespaceTerminating` on metadata.namespace) is what controllers look for."""
        entry = self.storage.get("namespaces", "", namespace)
        if entry is None or b'"deletionTimestamp"' not in entry.raw:
            return
        if not entry.load()["metadata"].get("deletionTimestamp"):
            return
        name = meta.get("name") or meta.get("generateName") or "Unknown"
        details: dict[str, Any] = {
            "name": name,
            "kind": rt.plural,
            "causes": [
                {
                    "reason": "NamespaceTerminating",
                    "message": f"namespace {namespace} is being terminated",
                    "field": "metadata.namespace",
                }
            ],
        }
        if rt.group:
            details["group"] = rt.group
        raise errors.StatusError(
            403,
            "Forbidden",
            f'{rt.group_resource} "{name}" is forbidden: unable to create new content in namespace {namespace} because it is being terminated',
            details,
        )

    def _store_if_changed(
        self, rt: ResourceType, obj: Obj, before: Obj, entry: Entry, opts: WriteOptions = _NO_OPTIONS
    ) -> Entry:
        if obj == before:
            return entry
        return self._store(rt, obj, new=False, opts=opts)

    def _remove(self, rt: ResourceType, obj: Obj, opts: WriteOptions = _NO_OPTIONS) -> Entry:
        if opts.dry_run:
            return self._dry_entry(rt, obj, new=False)
        entry = self.storage.remove(rt.storage_key, obj)
        rt.strategy.released(obj)
        for hook in list(self.on_removed):
            hook(rt, obj)
        return entry

    # -- subresources -------------------------------------------------------------------
    def bind(self, rt: ResourceType, namespace: str, name: str, binding: Any) -> None:
        """pods/binding: set spec.nodeName once (409 if already bound), as `BindingREST`."""
        if not isinstance(binding, dict):
            raise errors.bad_request("binding must be an object")
        target = (binding.get("target") or {}).get("name")
        if not target:
            raise errors.invalid("Binding", name, [FieldError.required("target.name")])
        entry = self._entry(rt, namespace, name)
        obj = entry.load()
        meta = obj["metadata"]
        uid = (binding.get("metadata") or {}).get("uid")
        if uid and uid != meta["uid"]:
            raise _conflict(rt, name, uid_precondition_failed(uid, meta["uid"]))
        if meta.get("deletionTimestamp"):
            raise _conflict(rt, name, "pod is being deleted, cannot be assigned to a host")
        spec = obj["spec"]
        if spec.get("nodeName"):
            raise _conflict(rt, name, f'pod {name} is already assigned to node "{spec["nodeName"]}"')
        spec["nodeName"] = target
        podstate.put_condition(obj.setdefault("status", {}), "PodScheduled", "True")
        self._store(rt, obj, new=False)

    def get_scale(self, rt: ResourceType, namespace: str | None, name: str) -> Obj:
        obj = self.get(rt, namespace, name)
        return self._scale_of(rt, obj)

    def _scale_of(self, rt: ResourceType, obj: Obj) -> Obj:
        assert rt.scale is not None
        meta = obj["metadata"]
        status: Obj = {"replicas": _read_path(obj, rt.scale.status_replicas_path) or 0}
        if rt.scale.label_selector_path:
            selector = _read_path(obj, rt.scale.label_selector_path)
            if isinstance(selector, dict):
                selector = str(selectors.from_label_selector(selector))
            if selector is not None:
                status["selector"] = selector
        scale_meta = {
            k: meta[k]
            for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
            if k in meta
        }
        return {
            "kind": "Scale",
            "apiVersion": "autoscaling/v1",
            "metadata": scale_meta,
            "spec": {"replicas": _read_path(obj, rt.scale.spec_replicas_path) or 0},
            "status": status,
        }

    def update_scale(
        self,
        rt: ResourceType,
        namespace: str | None,
        name: str,
        scale: Any,
        *,
        opts: WriteOptions = _NO_OPTIONS,
    ) -> Obj:
        if not isinstance(scale, dict) or not isinstance(scale.get("spec"), dict):
            raise errors.bad_request("scale must be an object with a spec")
        replicas = scale["spec"].get("replicas", 0)
        if not isinstance(replicas, int) or replicas < 0:
            raise errors.invalid(
                "Scale",
                name,
                [FieldError.invalid("spec.replicas", replicas, "must be greater than or equal to 0")],
                group="autoscaling",
            )
        obj = self.get(rt, namespace, name)
        rv = (scale.get("metadata") or {}).get("resourceVersion")
        if rv and str(rv) != obj["metadata"]["resourceVersion"]:
            raise _conflict(rt, name, errors.STALE)
        assert rt.scale is not None
        _write_path(obj, rt.scale.spec_replicas_path, replicas)
        updated = self.update(rt, namespace, name, obj, subresource="scale", opts=opts)
        return self._scale_of(rt, updated.load())

    def patch_scale(
        self,
        rt: ResourceType,
        namespace: str | None,
        name: str,
        patch_body: bytes,
        content_type: str,
        *,
        opts: WriteOptions = _NO_OPTIONS,
    ) -> Obj:
        current = self.get_scale(rt, namespace, name)
        patched = patch.apply_patch(content_type, current, patch_body, None)
        return self.update_scale(rt, namespace, name, patched, opts=opts)


def _conflict(rt: ResourceType, name: str, why: str) -> errors.StatusError:
    """409 about an object of type `rt`, its `details` naming the resource's group and plural as
    the real server's registry fills them, so clients see the same Status either way."""
    return errors.conflict(rt.group_resource, name, why, group=rt.group, kind=rt.plural)


def uid_precondition_failed(wanted: Any, stored: Any) -> str:
    """`storage.Preconditions.Check`'s words, the request's UID first: a client told which UID it
    sent and which the object has can tell a recreated object from its own mistake."""
    return f"Precondition failed: UID in precondition: {wanted}, UID in object meta: {stored}"


def _check_target(
    rt: ResourceType, meta: Obj, name: str, entry: Entry, *, namespace: str | None = None
) -> None:
    """What an update and a patch both refuse: renaming the object through its body (a name
    left out means the URL's), moving it to another namespace, or a stale resourceVersion."""
    if meta.get("name", name) != name:
        raise errors.bad_request(
            f"the name of the object ({meta.get('name')}) does not match the name on the URL ({name})"
        )
    if namespace is not None and meta.get("namespace") not in (None, "", namespace):
        raise errors.bad_request(
            "the namespace of the provided object does not match the namespace sent on the request"
        )
    rv = meta.get("resourceVersion")
    if rv not in (None, "") and str(rv) != str(entry.rv):
        raise _conflict(rt, name, errors.STALE)


def _parse_rv(value: Any) -> int:
    """The versioner's `ObjectResourceVersion`: a resourceVersion that is not a number counts as unset."""
    try:
        return int(str(value)) if value not in (None, "") else 0
    except ValueError:
        return 0


def _read_path(obj: Obj, path: str) -> Any:
    cur: Any = obj
    for part in path.strip(".").split("."):
        if not isinstance(cur, dict):
            return None
        cur = cur.get(part)
    return cur


def _write_path(obj: Obj, path: str, value: Any) -> None:
    parts = path.strip(".").split(".")
    cur = obj
    for part in parts[:-1]:
        cur = cur.setdefault(part, {})
    cur[parts[-1]] = value


def _fields_match(fields: dict[str, str], reqs: tuple[selectors.FieldRequirement, ...]) -> bool:
    for req in reqs:
        if (fields.get(req.field, "") == req.value) != (req.operator == "="):
            return False
    return True


def dumps(obj: Any) -> bytes:
    return orjson.dumps(obj)
