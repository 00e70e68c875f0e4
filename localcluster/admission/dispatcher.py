"""`ValidatingAdmission`: the validating webhook dispatcher the REST layer calls.

The configurations are read from storage when a request needs them and parsed once per stored
version, so a new or changed configuration applies from the next request on; with none stored
`active()` is one dictionary lookup and requests pay nothing else. Matching webhooks are called
at once, each within its own timeout, and the first error in the order they finish decides
(`validating.dispatcher`): a denial as the webhook worded it, a call that failed either ignored
(failurePolicy Ignore: the request goes on as if the webhook were not there) or a 500
`failed calling webhook`. Requests on the webhook configurations themselves are never sent to
webhooks, so a broken webhook can always be removed.
"""

from __future__ import annotations

from typing import Any

import anyio
import structlog

from localcluster import errors
from localcluster.admission import review
from localcluster.admission.caller import Caller, CallError, ServiceResolver
from localcluster.admission.configuration import GROUP, STORAGE_KEY
from localcluster.admission.matching import Invocation, Request, Webhook, match_rules, match_selectors
from localcluster.registry import Registry
from localcluster.storage import Storage

log = structlog.get_logger("localcluster.admission")
_EXEMPT = frozenset({(GROUP, "validatingwebhookconfigurations"), (GROUP, "mutatingwebhookconfigurations")})


def _calling_failed(name: str, reason: str) -> errors.StatusError:
    """`apierrors.NewInternalError(ErrCallingWebhook)`: a 500 with the error as its one cause."""
    text = f'failed calling webhook "{name}": {reason}'
    return errors.StatusError(
        500, "InternalError", f"Internal error occurred: {text}", {"causes": [{"message": text}]}
    )


class ValidatingAdmission:
    def __init__(self, registry: Registry, storage: Storage, resolve_service: ServiceResolver) -> None:
        self.registry = registry
        self.storage = storage
        self.caller = Caller(resolve_service)
        self._versions: tuple[tuple[str, int], ...] = ()
        self._webhooks: tuple[Webhook, ...] = ()
        #: (group, resource) -> every (version, kind) it is served at; forgotten when a CRD changes
        self._served: dict[tuple[str, str], list[tuple[str, str]]] = {}
        registry.subscribe(lambda _event, _rt: self._served.clear())

    # -- configurations ------------------------------------------------------------------
    def active(self) -> bool:
        return self.storage.count(STORAGE_KEY) > 0

    def webhooks(self) -> tuple[Webhook, ...]:
        """Every webhook, configurations in name order, webhooks in their order within each."""
        entries = list(self.storage.iter_entries(STORAGE_KEY))
        versions = tuple((e.name, e.rv) for e in entries)
        if versions != self._versions:
            hooks: list[Webhook] = []
            for entry in entries:
                for hook in entry.load().get("webhooks") or ():
                    if isinstance(hook, dict):
                        hooks.append(Webhook.parse(entry.name, hook))
            self._versions, self._webhooks = versions, tuple(hooks)
        return self._webhooks

    def candidates(self, request: Request) -> list[Invocation]:
        """Webhooks whose rules match the request (the object is not needed yet)."""
        if not self.active() or (request.group, request.resource) in _EXEMPT:
            return []
        equivalents: list[tuple[str, str]] = []
        if not request.subresource:
            equivalents = [
                (v, k)
                for v, k in self._served_versions(request.group, request.resource)
                if v != request.version
            ]
        found: list[Invocation] = []
        for hook in self.webhooks():
            invocation = match_rules(hook, request, equivalents)
            if invocation is not None:
                found.append(invocation)
        return found

    def _served_versions(self, group: str, resource: str) -> list[tuple[str, str]]:
        served = self._served.get((group, resource))
        if served is None:
            served = self._served[(group, resource)] = [
                (rt.version, rt.kind) for rt in self.registry.by_group_resource(group, resource)
            ]
        return served

    # -- dispatch ------------------------------------------------------------------------
    async def validate(self, request: Request, candidates: list[Invocation], warnings: list[str]) -> None:
        """Call the webhooks that match `request` fully; raise the `StatusError` the client gets."""
        namespace_labels = self._namespace_labels(request.namespace) if request.namespace else {}
        invocations = [inv for inv in candidates if match_selectors(inv.webhook, request, namespace_labels)]
        if not invocations:
            return
        failures: list[errors.StatusError] = []
        async with anyio.create_task_group() as tg:
            for invocation in invocations:
                tg.start_soon(self._call, invocation, request, warnings, failures)
        if failures:
            raise failures[0]

    def _namespace_labels(self, namespace: str) -> dict[str, str] | None:
        entry = self.storage.get("namespaces", "", namespace)
        return None if entry is None else dict(entry.labels)

    async def _call(
        self,
        invocation: Invocation,
        request: Request,
        warnings: list[str],
        failures: list[errors.StatusError],
    ) -> None:
        hook = invocation.webhook
        if request.dry_run and hook.side_effects not in ("None", "NoneOnDryRun"):
            failures.append(errors.bad_request(f'admission webhook "{hook.name}" does not support dry run'))
            return
        uid, body = review.build(invocation, request)
        try:
            answer = await self.caller.post(hook, body)
            response = review.verify(uid, answer, body["apiVersion"])
        except (CallError, review.UndecodableResponse, review.InvalidResponse) as exc:
            reason = (
                f"received invalid webhook response: {exc}"
                if isinstance(exc, review.InvalidResponse)
                else f"failed to call webhook: {exc}"
            )
            if hook.failure_policy == "Ignore":
                log.warning("failed calling webhook, failing open", webhook=hook.name, error=reason)
                return
            log.warning("failed calling webhook, failing closed", webhook=hook.name, error=reason)
            failures.append(_calling_failed(hook.name, reason))
            return
        warnings.extend(str(w) for w in response.get("warnings") or () if w)
        if response.get("allowed") is True:
            return
        denial = review.denial(hook.name, response.get("status"))
        log.info("rejected by webhook", webhook=hook.name, code=denial.code)
        failures.append(denial)

    async def close(self) -> None:
        await self.caller.close()


def user_info(user: Any) -> dict[str, Any]:
    """`authentication/v1` UserInfo of the requesting user (as the review carries it)."""
    out: dict[str, Any] = {"username": user.name}
    if user.uid:
        out["uid"] = user.uid
    out["groups"] = list(user.groups)
    if user.extra:
        out["extra"] = {k: list(v) for k, v in user.extra.items()}
    return out
