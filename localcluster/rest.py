"""REST handlers: `/api/v1/...` and `/apis/<group>/<version>/...` onto `ObjectAPI`.

Path resolution follows the real server's request-info parser: `namespaces/<ns>/<plural>...`
is a namespaced request unless `<plural>` is a subresource of namespaces; `watch/` prefixes
are the legacy watch form. Bodies are read as JSON (or YAML), responses are orjson bytes
written as stored, so LIST and GET cost no re-serialization. Protobuf request bodies (Go clients,
kubectl's typed clients) are decoded by `localcluster.protobuf` into the same dicts; a client that
prefers protobuf answers gets them (`negotiated`: objects, lists, Status errors, watch frames).

`Accept: application/json;as=Table;g=meta.k8s.io;v=v1` gets a `meta.k8s.io/v1 Table` (what
`kubectl get` prints), built from the strategy's `table` hook with NAME first and AGE last;
`as=PartialObjectMetadata(List)` the metadata only (see `mediatypes`). List and watch options
(`resourceVersion`, `resourceVersionMatch`, `continue`) follow `listoptions`.
Subresources another module serves (pods/eviction, pods/log) plug in through
`RestHandlers.subresource_handlers[(storage_key, name)]`.
"""

from __future__ import annotations

import asyncio
import copy
import json
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import orjson
import yaml
from aiohttp import web

from localcluster import errors, listoptions, mediatypes, negotiation, patch, protobuf
from localcluster.admission.dispatcher import ValidatingAdmission
from localcluster.admission.matching import Request
from localcluster.builtin.base import age
from localcluster.objects import FIELD_VALIDATION, ObjectAPI, WriteOptions
from localcluster.registry import FieldError, Registry, ResourceType, TableColumn
from localcluster.storage import Entry
from localcluster.watch import JSON_FRAMING, Framing, WatchOptions, serve_watch

JSON = "application/json"
_ENCODE_BATCH = 50
PROTOBUF_FRAMING = Framing(protobuf.WATCH_CONTENT_TYPE, protobuf.watch_frame)
SubresourceHandler = Callable[[web.Request, "Target"], Awaitable[web.StreamResponse]]
#: A write run once as a dry run for the webhooks to judge, then for real (see `_admitted`).
Write = Callable[[Any, WriteOptions], Entry]
UserOf = Callable[[web.Request], dict[str, Any]]
_ADMISSION_RETRIES = 5
_NAMESPACE_SUBRESOURCES = frozenset({"status", "finalize"})


@dataclass(slots=True)
class Target:
    rt: ResourceType
    namespace: str | None
    name: str | None
    subresource: str | None
    watch: bool


def status_response(exc: errors.StatusError) -> web.Response:
    """The Status as the body; a positive `details.retryAfterSeconds` also as the Retry-After
    header, as `responsewriters.ErrorNegotiated` sends it (client-go waits that long and retries)."""
    response = web.Response(status=exc.code, body=orjson.dumps(exc.status()), content_type=JSON)
    retry = (exc.details or {}).get("retryAfterSeconds")
    if isinstance(retry, int) and retry > 0:
        response.headers["Retry-After"] = str(retry)
    return response


def _json(body: bytes, status: int = 200) -> web.Response:
    return web.Response(status=status, body=body, content_type=JSON)


def _bool(value: str | None) -> bool:
    return value is not None and value.lower() in ("1", "true", "t", "yes")


def _int(value: str | None, name: str) -> int | None:
    if value in (None, ""):
        return None
    try:
        return int(value)  # type: ignore[arg-type]
    except ValueError as exc:
        raise errors.bad_request(f"invalid {name}: {value!r}") from exc


def _custom(rt: ResourceType) -> bool:
    """A custom resource (served from a CRD): the real server names its Go type `Unstructured`."""
    return type(rt.strategy).__name__ == "CustomResourceStrategy"


class RestHandlers:
    def __init__(
        self,
        registry: Registry,
        objects: ObjectAPI,
        *,
        bookmark_interval: float = 10.0,
        first_bookmark_after: float = 1.0,
    ) -> None:
        self.registry = registry
        self.objects = objects
        self.bookmark_interval = bookmark_interval
        self.first_bookmark_after = first_bookmark_after
        self.subresource_handlers: dict[tuple[str, str], SubresourceHandler] = {}
        #: Validating webhooks, when the cluster calls them; `user_of` says who is asking.
        self.admission: ValidatingAdmission | None = None
        self.user_of: UserOf = lambda _request: {
            "username": "system:anonymous",
            "groups": ["system:unauthenticated"],
        }
        #: (group, plural) -> served at several versions; `_render` runs per event per watcher,
        #: so the registry scan is memoized and forgotten on every (un)registration.
        self._multi_version: dict[tuple[str, str], bool] = {}
        registry.subscribe(lambda _event, _rt: self._multi_version.clear())

    def setup_routes(self, app: web.Application) -> None:
        app.router.add_route("*", "/api/{path:.+}", self.handle_core)
        app.router.add_route("*", "/apis/{path:.+}", self.handle_group)

    # -- routing ------------------------------------------------------------------------
    async def handle_core(self, request: web.Request) -> web.StreamResponse:
        parts = request.match_info["path"].strip("/").split("/")
        return await self._dispatch(request, "", parts[0], parts[1:])

    async def handle_group(self, request: web.Request) -> web.StreamResponse:
        parts = request.match_info["path"].strip("/").split("/")
        if len(parts) < 3:
            return status_response(errors.resource_not_found())
        return await self._dispatch(request, parts[0], parts[1], parts[2:])

    def resolve(self, group: str, version: str, parts: list[str]) -> Target:
        not_found = errors.resource_not_found()
        watch = False
        if parts and parts[0] == "watch":
            watch, parts = True, parts[1:]
        namespace: str | None = None
        if len(parts) >= 3 and parts[0] == "namespaces" and parts[2] not in _NAMESPACE_SUBRESOURCES:
            namespace, parts = parts[1], parts[2:]
        if not parts or len(parts) > 3:
            raise not_found
        rt = self.registry.get(group, version, parts[0])
        if rt is None or (namespace is not None and not rt.namespaced):
            raise not_found
        name = parts[1] if len(parts) > 1 else None
        sub = parts[2] if len(parts) > 2 else None
        if sub is not None and sub not in rt.subresources:
            raise not_found
        return Target(rt, namespace, name, sub, watch)

    async def _dispatch(
        self, request: web.Request, group: str, version: str, parts: list[str]
    ) -> web.StreamResponse:
        try:
            target = self.resolve(group, version, parts)
            handler = self.subresource_handlers.get((target.rt.storage_key, target.subresource or ""))
            if handler is not None:
                return negotiation.negotiated(request, await handler(request, target))
            return negotiation.negotiated(request, await self._serve(request, target))
        except errors.StatusError as exc:
            return negotiation.negotiated(request, status_response(exc))

    async def _serve(self, request: web.Request, t: Target) -> web.StreamResponse:
        method = request.method
        q = request.query
        if t.name is None:
            if method == "GET":
                if t.watch or _bool(q.get("watch")):
                    return await self._watch(request, t)
                return await self._list(request, t)
            if method == "POST":
                opts = _write_options(request, "CreateOptions")
                body = await _body(request, opts, t.rt)
                entry = await self._admitted(request, t, "CREATE", body, opts, self._create_write(t))
                return _warned(_json(entry.raw, 201), opts)
            if method == "DELETE" and "deletecollection" in t.rt.verbs:
                return await self._delete_collection(request, t, await _optional_body(request))
            raise _not_allowed(method, t)
        if t.watch and method == "GET":  # legacy /watch/<plural>/<name>
            request = request.clone(
                rel_url=request.rel_url.update_query({"fieldSelector": f"metadata.name={t.name}"})
            )
            t.name = None
            return await self._watch(request, t)
        if t.subresource in ("scale",):
            return await self._scale(request, t)
        if t.subresource == "binding":
            if method != "POST":
                raise _not_allowed(method, t)
            self.objects.bind(t.rt, t.namespace or "", t.name, await _body(request))
            return _json(
                orjson.dumps(
                    {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}
                ),
                201,
            )
        sub = t.subresource
        if sub == "finalize" and method == "PUT":  # namespaces/<name>/finalize
            opts = _write_options(request, "UpdateOptions")
            entry = await self._admitted(
                request, t, "UPDATE", await _body(request, opts, t.rt), opts, self._update_write(t)
            )
            return _warned(_json(self._render(t.rt, entry.raw)), opts)
        if sub not in (None, "status"):
            raise errors.resource_not_found()
        if method == "GET":
            shape = mediatypes.negotiate(request.headers.get("Accept", ""))
            mediatypes.check_single(shape, group=t.rt.group, kind=t.rt.kind, custom=_custom(t.rt))
            await self._wait_fresh(t.rt, request.query.get("resourceVersion") or "")
            entry = self.objects.get_entry(t.rt, t.namespace, t.name)
            if shape.as_ == mediatypes.TABLE:
                return _json(orjson.dumps(self._table(t.rt, [entry], entry.rv, shape.api_version)))
            if shape.as_ == mediatypes.PARTIAL:
                return _json(mediatypes.partial_object(entry.raw, shape))
            return _json(self._render(t.rt, entry.raw))
        if method == "PUT":
            opts = _write_options(request, "UpdateOptions")
            body = await _body(request, opts, t.rt)
            if (
                sub is None
                and t.rt.strategy.allow_create_on_update
                and self.objects.storage.get(t.rt.storage_key, t.namespace or "", t.name) is None
            ):
                entry = await self._admitted(
                    request, t, "CREATE", body, opts, lambda b, o: self._create_on_update(t, b, o)
                )
                return _warned(_json(entry.raw, 201), opts)
            if not t.rt.strategy.allow_unconditional_update and not ((body or {}).get("metadata") or {}).get(
                "resourceVersion"
            ):
                raise errors.invalid(
                    t.rt.plural,
                    t.name,
                    [
                        FieldError(
                            "FieldValueInvalid",
                            "metadata.resourceVersion",
                            "Invalid value: 0x0: must be specified for an update",
                        )
                    ],
                    group=t.rt.group,
                )
            entry = await self._admitted(request, t, "UPDATE", body, opts, self._update_write(t))
            return _warned(_json(self._render(t.rt, entry.raw)), opts)
        if method == "PATCH":
            opts = _write_options(request, "PatchOptions")
            content_type = request.headers.get("Content-Type", "")
            raw = await request.read()
            name = t.name
            if content_type.startswith(patch.APPLY_PATCH):
                opts.field_manager = request.query.get("fieldManager") or None
                opts.force = _bool(request.query.get("force"))
                exists = self.objects.storage.get(t.rt.storage_key, t.namespace or "", name) is not None
                created: list[bool] = []

                def applied(body: bytes, o: WriteOptions) -> Entry:
                    entry, made = self.objects.apply(t.rt, t.namespace, name, body, subresource=sub, opts=o)
                    created.append(made)
                    return entry

                entry = await self._admitted(
                    request, t, "UPDATE" if exists else "CREATE", raw, opts, applied, reapply=True
                )
                return _warned(_json(self._render(t.rt, entry.raw), 201 if created[-1] else 200), opts)
            if "force" in request.query:
                raise errors.invalid(
                    "PatchOptions",
                    "",
                    [FieldError.forbidden("force", "may not be specified for non-apply patch")],
                    group="meta.k8s.io",
                )

            def patched(body: bytes, o: WriteOptions) -> Entry:
                return self.objects.patch(
                    t.rt, t.namespace, name, body, content_type, subresource=sub, opts=o
                )

            entry = await self._admitted(request, t, "UPDATE", raw, opts, patched)
            return _warned(_json(self._render(t.rt, entry.raw)), opts)
        if method == "DELETE" and sub is None:
            return await self._delete(request, t, await _optional_body(request))
        raise _not_allowed(method, t)

    # -- verbs --------------------------------------------------------------------------
    async def _wait_fresh(self, rt: ResourceType, resource_version: str) -> None:
        """A read the watch cache serves at an RV waits (3 s at most) for the cache to reach it,
        then answers 504 "Too large resource version" (`waitUntilFreshAndBlock`)."""
        rv = listoptions.parse_rv(resource_version)
        storage = self.objects.storage
        if rv and not await storage.wait_for_rv(rt.storage_key, rv, listoptions.FRESHNESS_TIMEOUT):
            raise errors.too_large_resource_version(rv, storage.cache_rv(rt.storage_key), 1)

    async def _list(self, request: web.Request, t: Target) -> web.Response:
        q = request.query
        opts = listoptions.from_query(q, watch=False)
        shape = mediatypes.negotiate(request.headers.get("Accept", ""))
        mediatypes.check_list(shape, group=t.rt.group, kind=t.rt.kind, custom=_custom(t.rt))
        if opts.from_cache:
            await self._wait_fresh(t.rt, opts.resource_version)
        result = self.objects.list(
            t.rt,
            t.namespace,
            label_selector=q.get("labelSelector"),
            field_selector=q.get("fieldSelector"),
            limit=opts.limit,
            continue_token=opts.continue_token or None,
            resource_version=opts.resource_version,
            resource_version_match=opts.resource_version_match,
        )
        if shape.as_ == mediatypes.TABLE:
            table = self._table(t.rt, result.entries, result.resource_version, shape.api_version)
            if result.continue_token:
                table["metadata"]["continue"] = result.continue_token
            return _json(orjson.dumps(table))
        if shape.as_ == mediatypes.PARTIAL_LIST:
            items = [mediatypes.partial_object(e.raw, shape) for e in result.entries]
            return _json(
                mediatypes.partial_list(
                    items,
                    shape,
                    resource_version=str(result.resource_version),
                    continue_token=result.continue_token,
                )
            )
        meta: dict[str, Any] = {"resourceVersion": str(result.resource_version)}
        if result.continue_token:
            meta["continue"] = result.continue_token
            if result.remaining is not None:
                meta["remainingItemCount"] = result.remaining
        if negotiation.wants_protobuf(request, t.rt.api_version, t.rt.list_kind):
            # each stored object is encoded once and cached; a batch at a time, so that a first
            # large LIST does not hold the event loop
            items = []
            for i in range(0, len(result.entries), _ENCODE_BATCH):
                batch = [self._render(t.rt, e.raw) for e in result.entries[i : i + _ENCODE_BATCH]]
                items.append(protobuf.encode_items(t.rt.api_version, t.rt.kind, batch))
                await asyncio.sleep(0)
            body = protobuf.encode_list(t.rt.api_version, t.rt.list_kind, meta, b"".join(items))
            return web.Response(body=body, content_type=protobuf.CONTENT_TYPE)
        head = orjson.dumps({"kind": t.rt.list_kind, "apiVersion": t.rt.api_version, "metadata": meta})
        joined = b",".join(self._render(t.rt, e.raw) for e in result.entries)
        return _json(head[:-1] + b',"items":[' + joined + b"]}")

    async def _watch(self, request: web.Request, t: Target) -> web.StreamResponse:
        q = request.query
        listoptions.from_query(q, watch=True)
        label_sel, field_reqs = self.objects.parse_selectors(
            t.rt, q.get("labelSelector"), q.get("fieldSelector")
        )
        rv_text = q.get("resourceVersion") or ""
        rv = None if rv_text in ("", "0") else listoptions.parse_rv(rv_text)
        timeout = _int(q.get("timeoutSeconds"), "timeoutSeconds")
        opts = WatchOptions(
            resource_version=rv,
            namespace=t.namespace,
            label_selector=label_sel,
            field_requirements=field_reqs,
            bookmarks=_bool(q.get("allowWatchBookmarks")),
            timeout=float(timeout) if timeout else random.uniform(1800, 3600),
            send_initial_events=_bool(q.get("sendInitialEvents")),
            first_bookmark_after=self.first_bookmark_after,
            bookmark_interval=self.bookmark_interval,
        )
        storage = self.objects.storage
        shape = mediatypes.negotiate(request.headers.get("Accept", ""))
        if shape.as_ == mediatypes.PARTIAL_LIST:
            # no event converts to a list: the real server's stream ends at once, empty
            return web.Response(status=200, body=b"", content_type=JSON)
        table = shape.as_ == mediatypes.TABLE
        partial = shape.as_ == mediatypes.PARTIAL

        def initial() -> tuple[list[Entry], int]:
            result = self.objects.list(
                t.rt,
                t.namespace,
                label_selector=q.get("labelSelector"),
                field_selector=q.get("fieldSelector"),
            )
            return result.entries, result.resource_version

        def render(kind: str, raw: bytes) -> bytes:
            if table:
                obj = orjson.loads(raw)
                return orjson.dumps(
                    self._table_of(
                        t.rt, [obj], int(obj["metadata"].get("resourceVersion", 0)), shape.api_version
                    )
                )
            if partial:
                return mediatypes.partial_object(raw, shape)
            return self._render(t.rt, raw)

        return await serve_watch(
            request,
            t.rt,
            opts,
            subscribe=lambda rv_, flt: storage.subscribe(t.rt.storage_key, rv_, flt),
            initial=initial,
            render=render,
            framing=PROTOBUF_FRAMING
            if not table and negotiation.wants_protobuf(request, t.rt.api_version, t.rt.kind)
            else JSON_FRAMING,
        )

    def _create_on_update(self, t: Target, body: Any, opts: WriteOptions) -> Entry:
        """PUT of a missing object of a kind that allows it is a create under the URL's name
        (the generic store's `AllowCreateOnUpdate` path; a resourceVersion sent is ignored)."""
        assert t.name is not None
        if isinstance(body, dict):
            meta = body.setdefault("metadata", {})
            if isinstance(meta, dict):
                if meta.get("name") not in (None, t.name):
                    raise errors.bad_request(
                        f"the name of the object ({meta.get('name')}) does not match the name on the URL ({t.name})"
                    )
                meta["name"] = t.name
                meta.pop("resourceVersion", None)
        return self.objects.create(t.rt, t.namespace, body, opts=opts)

    async def _delete(self, request: web.Request, t: Target, options: dict[str, Any]) -> web.Response:
        q = request.query
        assert t.name is not None
        await self._admit_delete(request, t, t.namespace, t.name, options)
        grace = _int(q.get("gracePeriodSeconds"), "gracePeriodSeconds")
        if grace is None and options.get("gracePeriodSeconds") is not None:
            grace = int(options["gracePeriodSeconds"])
        policy = q.get("propagationPolicy") or options.get("propagationPolicy")
        orphan = options.get("orphanDependents")
        if q.get("orphanDependents") is not None:
            orphan = _bool(q.get("orphanDependents"))
        opts = _write_options(request, "DeleteOptions", options)
        result = self.objects.delete(
            t.rt,
            t.namespace,
            t.name,
            grace_period_seconds=grace,
            propagation_policy=policy,
            preconditions=options.get("preconditions"),
            orphan_dependents=orphan,
            opts=opts,
        )
        if result.deleted and not t.rt.strategy.return_deleted_object:
            obj = orjson.loads(result.entry.raw)
            details: dict[str, Any] = {"name": t.name, "kind": t.rt.plural, "uid": obj["metadata"].get("uid")}
            if t.rt.group:
                details["group"] = t.rt.group
            body = {
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Success",
                "details": details,
            }
            return _json(orjson.dumps(body))
        return _json(self._render(t.rt, result.entry.raw))

    async def _delete_collection(
        self, request: web.Request, t: Target, options: dict[str, Any]
    ) -> web.Response:
        q = request.query
        result = self.objects.list(
            t.rt, t.namespace, label_selector=q.get("labelSelector"), field_selector=q.get("fieldSelector")
        )
        raws = []
        grace = _int(q.get("gracePeriodSeconds"), "gracePeriodSeconds")
        opts = _write_options(request, "DeleteOptions", options)
        for entry in result.entries:
            try:
                await self._admit_delete(request, t, entry.namespace or None, entry.name, options)
                deleted = self.objects.delete(
                    t.rt,
                    entry.namespace or None,
                    entry.name,
                    grace_period_seconds=grace,
                    propagation_policy=q.get("propagationPolicy") or options.get("propagationPolicy"),
                    opts=opts,
                )
            except errors.StatusError as exc:
                if exc.code == 404:
                    continue
                raise
            raws.append(self._render(t.rt, deleted.entry.raw))
        head = orjson.dumps(
            {
                "kind": t.rt.list_kind,
                "apiVersion": t.rt.api_version,
                "metadata": {"resourceVersion": str(self.objects.storage.rv)},
            }
        )
        return _json(head[:-1] + b',"items":[' + b",".join(raws) + b"]}")

    # -- validating admission -------------------------------------------------------------
    def _create_write(self, t: Target) -> Write:
        return lambda body, opts: self.objects.create(t.rt, t.namespace, body, opts=opts)

    def _update_write(self, t: Target) -> Write:
        name = t.name
        assert name is not None
        return lambda body, opts: self.objects.update(
            t.rt, t.namespace, name, body, subresource=t.subresource, opts=opts
        )

    def admission_request(
        self,
        request: web.Request,
        t: Target,
        operation: str,
        name: str,
        *,
        namespace: str | None = None,
        kind: tuple[str, str, str] | None = None,
        options: dict[str, Any] | None = None,
    ) -> Request:
        """The attributes webhooks are matched on and sent (`admission.NewAttributesRecord`)."""
        q = request.query
        options_kind = {"CREATE": "CreateOptions", "UPDATE": "UpdateOptions", "DELETE": "DeleteOptions"}[
            operation
        ]
        opts: dict[str, Any] = {"kind": options_kind, "apiVersion": "meta.k8s.io/v1"}
        for key, value in (options or {}).items():
            if key not in ("kind", "apiVersion") and value is not None:
                opts[key] = value
        dry = q.getall("dryRun", []) or list(opts.get("dryRun") or [])
        if dry:
            opts["dryRun"] = dry
        for key in ("fieldManager", "fieldValidation"):
            if q.get(key) and operation != "DELETE":
                opts[key] = q[key]
        ns = t.namespace if namespace is None else namespace
        if t.rt.storage_key == "namespaces" and not t.subresource:
            ns = name  # a Namespace's requests carry its own name as their namespace
        return Request(
            operation=operation,
            group=t.rt.group,
            version=t.rt.version,
            resource=t.rt.plural,
            subresource=t.subresource or "",
            kind=kind or (t.rt.group, t.rt.version, t.rt.kind),
            namespace=ns or "",
            name=name,
            dry_run=bool(dry),
            user=self.user_of(request),
            options=opts,
        )

    async def _admitted(
        self,
        request: web.Request,
        t: Target,
        operation: str,
        body: Any,
        opts: WriteOptions,
        write: Write,
        *,
        reapply: bool = False,
    ) -> Entry:
        """`write(body, opts)`, judged first by the validating webhooks that match it.

        With none configured (or none whose rules match) this is the write alone. Otherwise the
        write runs as a dry run to get the object as it would be stored (defaulted, patched,
        validated), the webhooks judge it with the stored object as the old one, and the write
        is made for real only if nothing changed the object meanwhile; else all of it runs again,
        as kube-apiserver re-runs admission when its guaranteed update meets a newer object.
        `reapply` (server-side apply): the final write is the request's own write again, so field
        ownership is recorded as an Apply by its manager; the resourceVersion check above still
        guarantees it stores what was judged."""
        admission = self.admission
        if admission is None or not admission.active():
            return write(body, opts)
        meta = (body.get("metadata") or {}) if isinstance(body, dict) else {}
        name = t.name or str(meta.get("name") or "")
        attrs = self.admission_request(request, t, operation, name)
        candidates = admission.candidates(attrs)
        if not candidates:
            return write(body, opts)
        storage, key = self.objects.storage, t.rt.storage_key
        namespace = (t.namespace or str(meta.get("namespace") or "")) if t.rt.namespaced else ""
        for _ in range(_ADMISSION_RETRIES):
            current = storage.get(key, namespace, name) if operation == "UPDATE" else None
            rehearsal = WriteOptions(
                dry_run=True,
                field_validation=opts.field_validation,
                duplicates=opts.duplicates,
                field_manager=opts.field_manager,
                force=opts.force,
            )
            would_be = orjson.loads(write(copy.deepcopy(body), rehearsal).raw)
            attrs.obj, attrs.old = would_be, current.load() if current is not None else None
            if (
                not attrs.name
            ):  # a generated name is the request's from here on (`AdmissionToValidateObjectFunc`)
                attrs.name = str(would_be["metadata"].get("name") or "")
            await admission.validate(attrs, candidates, opts.warnings)
            latest = storage.get(key, namespace, name) if current is not None else None
            if current is not None and (latest is None or latest.rv != current.rv):
                continue  # changed while the webhooks judged it: judge the new state
            # what is stored is what was judged (its name, uid, cluster IP, node ports, patched
            # fields), never a second draw from the request
            opts.warnings[:0] = rehearsal.warnings  # decoding warnings come before the webhooks'
            if reapply:
                return write(body, opts)
            opts.field_validation = (
                "Ignore"  # the judged object is already pruned; its warnings are kept above
            )
            if operation == "CREATE":
                judged = would_be["metadata"]
                opts.identity = (judged["name"], judged["uid"], judged["creationTimestamp"])
                return write(would_be, opts)
            return self.objects.update(
                t.rt, t.namespace, name, would_be, subresource=t.subresource, opts=opts
            )
        raise errors.conflict(t.rt.group_resource, name, errors.STALE, group=t.rt.group, kind=t.rt.plural)

    async def _admit_delete(
        self, request: web.Request, t: Target, namespace: str | None, name: str, options: dict[str, Any]
    ) -> None:
        """DELETE: the webhooks see the stored object as the old one (a missing one is the 404 the delete gives)."""
        admission = self.admission
        if admission is None or not admission.active():
            return
        attrs = self.admission_request(request, t, "DELETE", name, namespace=namespace, options=options)
        candidates = admission.candidates(attrs)
        if not candidates:
            return
        current = self.objects.storage.get(
            t.rt.storage_key, (namespace or "") if t.rt.namespaced else "", name
        )
        if current is None:
            return
        attrs.old = current.load()
        await admission.validate(attrs, candidates, [])

    async def _scale(self, request: web.Request, t: Target) -> web.Response:
        assert t.name is not None
        method = request.method
        if method == "GET":
            return _json(orjson.dumps(self.objects.get_scale(t.rt, t.namespace, t.name)))
        if method == "PUT":
            opts = _write_options(request, "UpdateOptions")
            body = await _body(request)
            await self._admit_scale(request, t, lambda old: body)
            return _json(orjson.dumps(self.objects.update_scale(t.rt, t.namespace, t.name, body, opts=opts)))
        if method == "PATCH":
            opts = _write_options(request, "PatchOptions")
            raw = await request.read()
            content_type = request.headers.get("Content-Type", "")
            await self._admit_scale(
                request, t, lambda old: patch.apply_patch(content_type, copy.deepcopy(old), raw, None)
            )
            scale = self.objects.patch_scale(t.rt, t.namespace, t.name, raw, content_type, opts=opts)
            return _json(orjson.dumps(scale))
        raise _not_allowed(method, t)

    async def _admit_scale(
        self, request: web.Request, t: Target, updated: Callable[[dict[str, Any]], Any]
    ) -> None:
        """`/scale` writes are UPDATEs of an autoscaling/v1 Scale: the webhooks see the new and the old one."""
        admission = self.admission
        if admission is None or not admission.active():
            return
        assert t.name is not None
        attrs = self.admission_request(request, t, "UPDATE", t.name, kind=("autoscaling", "v1", "Scale"))
        candidates = admission.candidates(attrs)
        if not candidates:
            return
        old = self.objects.get_scale(t.rt, t.namespace, t.name)
        new = updated(old)
        attrs.obj, attrs.old = (new if isinstance(new, dict) else None), old
        await admission.validate(attrs, candidates, [])

    # -- output -------------------------------------------------------------------------
    def _render(self, rt: ResourceType, raw: bytes) -> bytes:
        """Rewrite apiVersion when a resource is served at several versions (CRDs)."""
        multi = self._multi_version.get((rt.group, rt.plural))
        if multi is None:
            multi = self._multi_version[(rt.group, rt.plural)] = (
                len(self.registry.by_group_resource(rt.group, rt.plural)) > 1
            )
        if not multi:
            return raw
        obj = orjson.loads(raw)
        if obj.get("apiVersion") == rt.api_version:
            return raw
        obj["apiVersion"] = rt.api_version
        return orjson.dumps(obj)

    def _table(self, rt: ResourceType, entries: list[Entry], rv: int, api_version: str) -> dict[str, Any]:
        return self._table_of(rt, [orjson.loads(e.raw) for e in entries], rv, api_version)

    def _table_of(
        self, rt: ResourceType, objs: list[dict[str, Any]], rv: int, api_version: str
    ) -> dict[str, Any]:
        """A `Table` at `api_version` (meta.k8s.io/v1 or v1beta1, as asked), rows carrying metadata."""
        extra: list[TableColumn] = []
        rows = []
        # strategies whose table places age itself (CRDs, custom resources) set this to None
        age_column: str | None = getattr(rt.strategy, "table_age_column", "Age")
        for obj in objs:
            result = rt.strategy.table(obj)
            cells: list[Any] = []
            if result is not None:
                extra, cells = result
            meta = obj.get("metadata") or {}
            if age_column is not None:
                created = age(meta.get("creationTimestamp"))
                age_at = next((i for i, c in enumerate(extra) if c.name == age_column), None)
                if age_at is None:
                    cells = [*cells, created]
                else:
                    cells = list(cells)
                    cells[age_at] = created
            partial = {"kind": "PartialObjectMetadata", "apiVersion": api_version, "metadata": meta}
            rows.append({"cells": [meta.get("name", ""), *cells], "object": partial})
        if not objs:
            probe = rt.strategy.table({"metadata": {}})
            if probe is not None:
                extra = probe[0]
        name_col = {
            "name": "Name",
            "type": "string",
            "format": "name",
            "description": "Name must be unique within a namespace.",
            "priority": 0,
        }
        age_col = {
            "name": "Age",
            "type": "string",
            "format": "",
            "description": "CreationTimestamp is a timestamp representing the server time when this object was created.",
            "priority": 0,
        }
        cols = [
            name_col,
            *(
                {
                    "name": c.name,
                    "type": c.type,
                    "format": c.format,
                    "description": c.description,
                    "priority": c.priority,
                }
                for c in extra
            ),
        ]
        if age_column is not None and not any(c.name == age_column for c in extra):
            cols.append(age_col)
        return {
            "kind": "Table",
            "apiVersion": api_version,
            "metadata": {"resourceVersion": str(rv)},
            "columnDefinitions": cols,
            "rows": rows,
        }


def _not_allowed(method: str, t: Target) -> errors.StatusError:
    return errors.method_not_allowed(
        f"the server does not allow this method on the requested resource ({method} {t.rt.plural})"
    )


_FIELD_MANAGER_MAX = 128


def _write_options(
    request: web.Request, kind: str, body_options: dict[str, Any] | None = None
) -> WriteOptions:
    """`dryRun` and `fieldValidation` of a write (query, or DeleteOptions body for DELETE).
    Absent `fieldValidation` means Warn, as kube-apiserver >= 1.27 (kubectl 1.32 sends Strict)."""
    q = request.query
    dry = q.getall("dryRun", [])
    if not dry and body_options:
        dry = list(body_options.get("dryRun") or [])
    bad = [v for v in dry if v != "All"]
    if bad:
        raise errors.invalid(
            kind, "", [FieldError.not_supported("dryRun", bad[0], ("All",))], group="meta.k8s.io"
        )
    validation = q.get("fieldValidation") or "Warn"
    if validation not in FIELD_VALIDATION:
        raise errors.invalid(
            kind,
            "",
            [FieldError.not_supported("fieldValidation", validation, FIELD_VALIDATION)],
            group="meta.k8s.io",
        )
    # `managerOrUserAgent`: without `fieldManager`, the User-Agent up to its first "/"
    manager = q.get("fieldManager") or request.headers.get("User-Agent", "").split("/", 1)[0]
    if len(q.get("fieldManager") or "") > _FIELD_MANAGER_MAX:
        raise errors.invalid(
            kind,
            "",
            [
                FieldError(
                    "FieldValueTooLong",
                    "fieldManager",
                    f"Too long: must have at most {_FIELD_MANAGER_MAX} bytes",
                )
            ],
            group="meta.k8s.io",
        )
    return WriteOptions(dry_run=bool(dry), field_validation=validation, field_manager=manager)


def _warned(response: web.Response, opts: WriteOptions) -> web.Response:
    add_warnings(response, opts.warnings)
    return response


def add_warnings(response: web.StreamResponse, warnings: list[str]) -> web.StreamResponse:
    """One `Warning: 299 - "<text>"` header per warning, as the real server's warning recorder;
    kubectl prints each as `Warning: <text>`."""
    for text in dict.fromkeys(warnings):
        escaped = text.replace("\\", "\\\\").replace('"', '\\"')
        response.headers.add("Warning", f'299 - "{escaped}"')
    return response


class _Fields(dict[str, Any]):
    """A decoded JSON object that remembers keys it saw twice (the last one wins, as in Go)."""

    duplicates: list[str]


def _pairs(pairs: list[tuple[str, Any]]) -> _Fields:
    out = _Fields()
    out.duplicates = []
    for key, value in pairs:
        if key in out:
            out.duplicates.append(key)
        out[key] = value
    return out


def _duplicate_paths(value: Any, path: str, found: list[str]) -> None:
    if isinstance(value, _Fields):
        found.extend(f"{path}.{k}" if path else k for k in value.duplicates)
        for key, sub in value.items():
            _duplicate_paths(sub, f"{path}.{key}" if path else key, found)
    elif isinstance(value, list):
        for i, sub in enumerate(value):
            _duplicate_paths(sub, f"{path}[{i}]", found)


async def _body(
    request: web.Request, opts: WriteOptions | None = None, rt: ResourceType | None = None
) -> Any:
    """The request's object; `rt` is the kind a protobuf body without apiVersion and kind is read as."""
    raw = await request.read()
    content_type = request.headers.get("Content-Type", JSON).split(";", 1)[0].strip()
    try:
        if content_type in ("application/yaml", "application/x-yaml"):
            return yaml.safe_load(raw)
        if content_type == protobuf.CONTENT_TYPE:
            return _protobuf(raw, rt)
        if opts is not None and opts.field_validation == "Strict":
            # only Strict reports duplicate fields; the slower decoder is paid only then
            try:
                tree = json.loads(raw, object_pairs_hook=_pairs)
            except ValueError as exc:
                raise errors.bad_request(f"the object provided is unrecognized: {exc}") from exc
            _duplicate_paths(tree, "", opts.duplicates)
            return tree
        return orjson.loads(raw)
    except (orjson.JSONDecodeError, yaml.YAMLError) as exc:
        raise errors.bad_request(f"the object provided is unrecognized: {exc}") from exc


def _protobuf(raw: bytes, rt: ResourceType | None = None) -> dict[str, Any]:
    """kubectl's typed clients send protobuf; decoded to the dict its JSON form would have been."""
    try:
        if rt is None:
            return protobuf.decode_body(raw)
        return protobuf.decode_body(raw, default_api_version=rt.api_version, default_kind=rt.kind)
    except protobuf.UnknownKindError as exc:
        raise errors.unsupported_media_type(f"{protobuf.CONTENT_TYPE}: {exc}") from exc
    except (protobuf.ProtobufError, UnicodeDecodeError) as exc:
        raise errors.bad_request(f"the object provided is unrecognized: {exc}") from exc


async def _optional_body(request: web.Request) -> dict[str, Any]:
    if not request.can_read_body:
        return {}
    raw = await request.read()
    if not raw.strip():
        return {}
    if request.headers.get("Content-Type", "").split(";", 1)[0].strip() == protobuf.CONTENT_TYPE:
        return _protobuf(raw)
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise errors.bad_request(f"invalid DeleteOptions: {exc}") from exc
    return body if isinstance(body, dict) else {}
