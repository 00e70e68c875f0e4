"""The `pods/eviction` subresource, as `pkg/registry/core/pod/storage/eviction.go` serves it.

POST an `Eviction` (policy/v1; v1beta1 bodies are accepted too) to
`/api/v1/namespaces/<ns>/pods/<name>/eviction`:

1. The pod is read; a name in the body that differs from the URL is a 400.
2. Pods that are Succeeded, Failed, Pending or already terminating skip the budget: they are
   deleted at once (`canIgnorePDB`).
3. Otherwise the PDBs of the pod's namespace whose selector matches it are found (an empty
   selector matches nothing): more than one is a 500, none means delete.
4. An unready pod is let through when the PDB says `unhealthyPodEvictionPolicy: AlwaysAllow`, or
   (the default IfHealthyBudget) when `currentHealthy >= desiredHealthy > 0`.
5. Else `checkAndDecrement`: a PDB whose `status.observedGeneration` lags `metadata.generation` is a
   429 ("still being processed", Retry-After 10); `disruptionsAllowed` 0 is a 429 with the
   `DisruptionBudget` cause saying how many healthy pods the budget needs; otherwise the budget is
   decremented and `status.disruptedPods[pod]` records the eviction time, written with the PDB's
   resourceVersion and retried on conflict, so two evictions can never spend one disruption.
Validating webhooks whose rules name `pods/eviction` (CREATE) judge the Eviction first, right
after the name check and before the pod is read, as `EvictionREST.Create` runs its
`createValidation`; their denial is the answer (a webhook's 429 reaches `kubectl drain` as
kube-apiserver's does).

6. The pod gets the `DisruptionTarget` condition (reason `EvictionByEvictionAPI`) and is deleted
   with the eviction's `deleteOptions` (grace period, uid / resourceVersion preconditions); a
   dry run changes nothing. A Pending pod, and an unready pod let through in step 4, are deleted
   with the resourceVersion they were judged at (unless the caller gave one), so a pod that
   became ready meanwhile is not evicted blindly: that conflict is answered with a 429.
   As on the real server the budget is spent before the delete, so a delete that then fails its
   preconditions has still used one disruption (the disruption controller gives it back).
"""

from __future__ import annotations

from typing import Any

import orjson
from aiohttp import web

from kubeutil import selectors
from localcluster import errors, podstate
from localcluster.objects import ObjectAPI, now_rfc3339
from localcluster.rest import RestHandlers, Target, add_warnings, status_response

Obj = dict[str, Any]
MAX_DISRUPTED_POD_SIZE = 2000
CONFLICT_RETRIES = 5


def _too_many_requests(message: str, cause: str, retry_after: int) -> errors.StatusError:
    details: dict[str, Any] = {"causes": [{"reason": "DisruptionBudget", "message": cause}]}
    if retry_after:
        details["retryAfterSeconds"] = retry_after
    return errors.StatusError(429, "TooManyRequests", message, details)


def _is_ready(pod: Obj) -> bool:
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (pod.get("status") or {}).get("conditions") or []
    )


class Eviction:
    """Evicts pods through `ObjectAPI`; `handle` is the aiohttp handler for the subresource."""

    def __init__(self, objects: ObjectAPI, rest: RestHandlers | None = None) -> None:
        self.objects = objects
        self.rest = rest
        self.pod_rt = objects.registry.require("", "v1", "pods")
        self.pdb_rt = objects.registry.require("policy", "v1", "poddisruptionbudgets")

    async def handle(self, request: web.Request, target: Target) -> web.StreamResponse:
        if request.method != "POST":
            return status_response(
                errors.method_not_allowed(
                    f"the server does not allow this method on the requested resource ({request.method} pods/eviction)"
                )
            )
        try:
            body = orjson.loads(await request.read() or b"{}")
        except orjson.JSONDecodeError as exc:
            return status_response(errors.bad_request(f"the object provided is unrecognized: {exc}"))
        dry_run = request.query.get("dryRun") == "All"
        if target.name is None:
            return status_response(errors.bad_request("eviction needs a pod name"))
        warnings: list[str] = []
        try:
            await self._admit(request, target, body if isinstance(body, dict) else {}, warnings)
            self.evict(
                target.namespace or "", target.name, body if isinstance(body, dict) else {}, dry_run=dry_run
            )
        except errors.StatusError as exc:
            return add_warnings(status_response(exc), warnings)
        ok = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}
        return add_warnings(
            web.Response(status=201, body=orjson.dumps(ok), content_type="application/json"), warnings
        )

    async def _admit(self, request: web.Request, target: Target, eviction: Obj, warnings: list[str]) -> None:
        """The validating webhooks' say on this Eviction (the object as the webhooks get it:
        policy/v1, namespace from the URL)."""
        rest = self.rest
        if rest is None or rest.admission is None or not rest.admission.active():
            return
        assert target.name is not None
        raw_meta = eviction.get("metadata")
        body_meta: Obj = raw_meta if isinstance(raw_meta, dict) else {}
        if body_meta.get("name") and body_meta["name"] != target.name:
            raise errors.bad_request("name in URL does not match name in Eviction object")
        attrs = rest.admission_request(
            request, target, "CREATE", target.name, kind=("policy", "v1", "Eviction")
        )
        candidates = rest.admission.candidates(attrs)
        if not candidates:
            return
        meta = {**body_meta, "namespace": target.namespace or ""}
        meta.setdefault("creationTimestamp", None)
        obj: Obj = {"kind": "Eviction", "apiVersion": "policy/v1", "metadata": meta}
        if eviction.get("deleteOptions") is not None:
            obj["deleteOptions"] = eviction["deleteOptions"]
        attrs.obj = obj
        await rest.admission.validate(attrs, candidates, warnings)

    def evict(self, namespace: str, name: str, eviction: Obj, *, dry_run: bool = False) -> None:
        body_name = (eviction.get("metadata") or {}).get("name")
        if body_name and body_name != name:
            raise errors.bad_request("name in URL does not match name in Eviction object")
        options: Obj = dict(eviction.get("deleteOptions") or {})
        dry_run = dry_run or "All" in (options.get("dryRun") or [])
        pod = self.objects.get(self.pod_rt, namespace, name)
        meta = pod["metadata"]
        phase = (pod.get("status") or {}).get("phase")
        rv_given = bool((options.get("preconditions") or {}).get("resourceVersion"))
        if phase in ("Succeeded", "Failed", "Pending") or meta.get("deletionTimestamp"):
            # canIgnorePDB; shouldEnforceResourceVersion holds for a Pending pod only
            if phase == "Pending" and not meta.get("deletionTimestamp") and not rv_given:
                options = _with_resource_version(options, meta["resourceVersion"])
            self._condition_and_delete(pod, options, dry_run)
            return
        pdbs = self._pdbs_for(pod)
        if len(pdbs) > 1:
            raise errors.StatusError(
                500,
                "",
                "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
            )
        update_options = False
        if pdbs:
            pdb = pdbs[0]
            if not _is_ready(pod) and self._unhealthy_may_go(pdb):
                update_options = True  # an unready pod goes without spending the budget
            else:
                self._decrement_with_retries(name, pdb, dry_run)
        if update_options:
            options = _with_resource_version(options, meta["resourceVersion"])
        try:
            self._condition_and_delete(pod, options, dry_run)
        except errors.StatusError as exc:
            if exc.code == 409 and update_options and not rv_given:
                raise _too_many_requests(
                    "Cannot evict pod as it would violate the pod's disruption budget.",
                    f"The disruption budget {pdbs[0]['metadata']['name']} is still being processed by the server.",
                    10,
                ) from exc
            raise

    def _decrement_with_retries(self, pod_name: str, pdb: Obj, dry_run: bool) -> None:
        """`retry.RetryOnConflict` around checkAndDecrement, re-reading the PDB after a conflict."""
        for attempt in range(CONFLICT_RETRIES):
            if attempt:
                pdb = self.objects.get(self.pdb_rt, pdb["metadata"]["namespace"], pdb["metadata"]["name"])
            try:
                self._check_and_decrement(pod_name, pdb, dry_run)
                return
            except errors.StatusError as exc:
                if exc.code != 409:
                    raise
        raise errors.StatusError(
            504,
            "Timeout",
            f"couldn't update PodDisruptionBudget {pdb['metadata']['name']!r} due to conflicts",
            {"retryAfterSeconds": 10},
        )

    def _pdbs_for(self, pod: Obj) -> list[Obj]:
        labels = pod["metadata"].get("labels") or {}
        found = []
        for entry in self.objects.storage.iter_entries(self.pdb_rt.storage_key, pod["metadata"]["namespace"]):
            pdb = entry.load()
            raw_selector = (pdb.get("spec") or {}).get("selector")
            try:
                selector = selectors.from_label_selector(raw_selector)
            except (selectors.SelectorError, ValueError, TypeError):
                continue
            if not raw_selector or selector.empty:
                continue  # a nil or empty selector matches nothing here
            if selector.matches(labels):
                found.append(pdb)
        return found

    @staticmethod
    def _unhealthy_may_go(pdb: Obj) -> bool:
        if (pdb.get("spec") or {}).get("unhealthyPodEvictionPolicy") == "AlwaysAllow":
            return True
        status = pdb.get("status") or {}
        desired = int(status.get("desiredHealthy") or 0)
        return int(status.get("currentHealthy") or 0) >= desired > 0

    def _check_and_decrement(self, pod_name: str, pdb: Obj, dry_run: bool) -> None:
        meta, status = pdb["metadata"], pdb.setdefault("status", {})
        name = meta["name"]
        if int(status.get("observedGeneration") or 0) < int(meta.get("generation") or 0):
            raise _too_many_requests(
                "Cannot evict pod as it would violate the pod's disruption budget.",
                f"The disruption budget {name} is still being processed by the server.",
                10,
            )
        allowed = int(status.get("disruptionsAllowed") or 0)
        if allowed < 0:
            raise errors.forbidden("poddisruptionbudget.policy", name, "pdb disruptions allowed is negative")
        if len(status.get("disruptedPods") or {}) > MAX_DISRUPTED_POD_SIZE:
            raise errors.forbidden(
                "poddisruptionbudget.policy",
                name,
                "DisruptedPods map too big - too many evictions not confirmed by PDB controller",
            )
        if allowed == 0:
            raise _too_many_requests(
                "Cannot evict pod as it would violate the pod's disruption budget.",
                f"The disruption budget {name} needs {int(status.get('desiredHealthy') or 0)} healthy pods "
                f"and has {int(status.get('currentHealthy') or 0)} currently",
                0,
            )
        status["disruptionsAllowed"] = allowed - 1
        if allowed - 1 == 0:
            _set_disruption_allowed_false(status)
        if dry_run:
            return
        disrupted = status.setdefault("disruptedPods", {}) or {}
        status["disruptedPods"] = disrupted
        disrupted[pod_name] = now_rfc3339()
        # `pdb` carries the resourceVersion it was read at: a concurrent change is a 409 and a retry
        self.objects.update_status(self.pdb_rt, meta["namespace"], name, pdb)

    def _condition_and_delete(self, pod: Obj, options: Obj, dry_run: bool) -> None:
        meta = pod["metadata"]
        ns, name = meta["namespace"], meta["name"]
        preconditions = dict(options.get("preconditions") or {})
        if not dry_run:
            latest = self.objects.get(self.pod_rt, ns, name)
            lmeta = latest["metadata"]
            if preconditions.get("uid") and preconditions["uid"] != lmeta["uid"]:
                raise errors.conflict(
                    "Pod",
                    name,
                    f"the UID in the precondition ({preconditions['uid']}) does not match the UID in record "
                    f"({lmeta['uid']}). The object might have been deleted and then recreated",
                    kind="Pod",
                )
            if (
                preconditions.get("resourceVersion")
                and str(preconditions["resourceVersion"]) != lmeta["resourceVersion"]
            ):
                raise errors.conflict(
                    "Pod",
                    name,
                    f"the ResourceVersion in the precondition ({preconditions['resourceVersion']}) does not match the "
                    f"ResourceVersion in record ({lmeta['resourceVersion']}). The object might have been modified",
                    kind="Pod",
                )
            podstate.put_condition(
                latest.setdefault("status", {}),
                "DisruptionTarget",
                "True",
                reason="EvictionByEvictionAPI",
                message="Eviction API: evicting",
            )
            updated = self.objects.update_status(self.pod_rt, ns, name, latest)
            if preconditions.get("resourceVersion"):
                preconditions["resourceVersion"] = str(updated.rv)  # we made the change ourselves
        else:
            self.objects.get(self.pod_rt, ns, name)
            return
        grace = options.get("gracePeriodSeconds")
        self.objects.delete(
            self.pod_rt,
            ns,
            name,
            grace_period_seconds=int(grace) if grace is not None else None,
            propagation_policy=options.get("propagationPolicy"),
            preconditions=preconditions or None,
        )


def _with_resource_version(options: Obj, rv: str) -> Obj:
    return {**options, "preconditions": {**(options.get("preconditions") or {}), "resourceVersion": rv}}


def _set_disruption_allowed_false(status: Obj) -> None:
    """`pdbhelper.UpdateDisruptionAllowedCondition` once the budget reaches zero."""
    conditions = status.setdefault("conditions", []) or []
    status["conditions"] = conditions
    current = next((c for c in conditions if c.get("type") == "DisruptionAllowed"), None)
    if current is not None and current.get("status") == "False":
        return
    conditions[:] = [c for c in conditions if c.get("type") != "DisruptionAllowed"]
    conditions.append(
        {
            "type": "DisruptionAllowed",
            "status": "False",
            "reason": "InsufficientPods",
            "message": "",
            "lastTransitionTime": now_rfc3339(),
            "observedGeneration": status.get("observedGeneration", 0),
        }
    )


def install(rest: RestHandlers, objects: ObjectAPI) -> Eviction:
    """Serve `pods/eviction` from this module (`RestHandlers.subresource_handlers`)."""
    eviction = Eviction(objects, rest)
    rest.subresource_handlers[("pods", "eviction")] = eviction.handle
    return eviction
