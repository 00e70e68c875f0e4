"""Which webhooks a request goes to, as `generic.Webhook.ShouldCallHook` decides.

Rules first (they need only the request's operation, resource and scope, so a request no rule
names costs no object work), then the namespace selector (labels of the request's namespace,
or of the namespace itself when one is created or updated), then the object selector (labels of
the new or the old object). With matchPolicy Equivalent a rule naming another served version of
the same resource matches too, and the webhook is sent the request in that version.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass, field
from typing import Any

from kubeutil import selectors
from localcluster import errors
from localcluster.registry import Obj

NAMESPACES = "namespaces"


@dataclass(frozen=True, slots=True)
class Rule:
    operations: frozenset[str]
    groups: frozenset[str]
    versions: frozenset[str]
    resources: tuple[tuple[str, str], ...]  # (resource, subresource) pairs as split on the first "/"
    scope: str

    @staticmethod
    def parse(rule: Obj) -> Rule:
        def split(res: str) -> tuple[str, str]:
            head, _, tail = res.partition("/")
            return head, tail

        return Rule(
            frozenset(rule.get("operations") or ()),
            frozenset(rule.get("apiGroups") or ()),
            frozenset(rule.get("apiVersions") or ()),
            tuple(split(str(r)) for r in rule.get("resources") or ()),
            str(rule.get("scope") or "*"),
        )

    def matches(self, request: Request, group: str, version: str, resource: str) -> bool:
        """`rules.Matcher.Matches`: operation, group, version, resource/subresource and scope."""
        if "*" not in self.operations and request.operation not in self.operations:
            return False
        if "*" not in self.groups and group not in self.groups:
            return False
        if "*" not in self.versions and version not in self.versions:
            return False
        sub = request.subresource
        if not any((r == "*" or r == resource) and (s == "*" or s == sub) for r, s in self.resources):
            return False
        if self.scope == "Namespaced":
            return resource != NAMESPACES and bool(request.namespace)
        if self.scope == "Cluster":
            return resource == NAMESPACES or not request.namespace
        return True


@dataclass(frozen=True, slots=True)
class Webhook:
    """One entry of a ValidatingWebhookConfiguration, parsed once per stored version."""

    name: str
    configuration: str
    rules: tuple[Rule, ...]
    failure_policy: str
    match_policy: str
    namespace_selector: selectors.Selector
    object_selector: selectors.Selector
    timeout: int
    side_effects: str
    url: str | None
    service: Obj | None
    ca_bundle: bytes
    #: A selector that did not parse: every request the rules match fails with a 500, as upstream.
    selector_error: str = ""
    review_versions: tuple[str, ...] = field(default=("v1",))

    @staticmethod
    def parse(configuration: str, hook: Obj) -> Webhook:
        client = hook.get("clientConfig") or {}
        try:
            ca = base64.b64decode(client.get("caBundle") or "", validate=True)
        except (binascii.Error, ValueError):
            ca = b""
        problem = ""
        try:
            ns_sel = selectors.from_label_selector(hook.get("namespaceSelector") or {})
            obj_sel = selectors.from_label_selector(hook.get("objectSelector") or {})
        except (selectors.SelectorError, AttributeError) as exc:
            ns_sel = obj_sel = selectors.NOTHING
            problem = str(exc)
        return Webhook(
            name=str(hook.get("name", "")),
            configuration=configuration,
            rules=tuple(Rule.parse(r) for r in hook.get("rules") or () if isinstance(r, dict)),
            failure_policy=str(hook.get("failurePolicy") or "Fail"),
            match_policy=str(hook.get("matchPolicy") or "Equivalent"),
            namespace_selector=ns_sel,
            object_selector=obj_sel,
            timeout=int(hook.get("timeoutSeconds") or 10),
            side_effects=str(hook.get("sideEffects") or ""),
            url=client.get("url"),
            service=client.get("service"),
            ca_bundle=ca,
            selector_error=problem,
            review_versions=tuple(hook.get("admissionReviewVersions") or ()),
        )


@dataclass(slots=True)
class Request:
    """What the dispatcher knows of a request (`admission.Attributes`)."""

    operation: str
    group: str
    version: str
    resource: str
    subresource: str
    #: (group, version, kind) of the object sent (policy/v1 Eviction for pods/eviction)
    kind: tuple[str, str, str]
    #: The namespace of the request; for a Namespace object, its own name (as upstream).
    namespace: str
    name: str
    dry_run: bool
    user: dict[str, Any]
    options: Obj
    obj: Obj | None = None
    old: Obj | None = None


@dataclass(frozen=True, slots=True)
class Invocation:
    """A webhook to call and the group/version/resource/kind it is sent (another version under
    matchPolicy Equivalent)."""

    webhook: Webhook
    group: str
    version: str
    resource: str
    kind: tuple[str, str, str]


def match_rules(hook: Webhook, request: Request, equivalents: list[tuple[str, str]]) -> Invocation | None:
    """The rule stage of `ShouldCallHook`; `equivalents` are the other (version, kind) pairs the
    same group/resource is served at (main resources only: a subresource keeps its kind)."""
    group, resource = request.group, request.resource
    for rule in hook.rules:
        if rule.matches(request, group, request.version, resource):
            return Invocation(hook, group, request.version, resource, request.kind)
    if hook.match_policy == "Equivalent":
        for rule in hook.rules:
            for version, kind in equivalents:
                if rule.matches(request, group, version, resource):
                    return Invocation(hook, group, version, resource, (group, version, kind))
    return None


def match_selectors(hook: Webhook, request: Request, namespace_labels: dict[str, str] | None) -> bool:
    """The namespace and object selector stages; `namespace_labels` None means the request's
    namespace does not exist (a 404, as upstream, when the selector has to look at it)."""
    if hook.selector_error:
        raise errors.internal(hook.selector_error)
    if (request.namespace or request.resource == NAMESPACES) and not hook.namespace_selector.empty:
        labels = namespace_labels
        if (
            request.resource == NAMESPACES
            and not request.subresource
            and request.operation in ("CREATE", "UPDATE")
        ):
            labels = ((request.obj or {}).get("metadata") or {}).get("labels") or {}
        if labels is None:
            raise errors.not_found(NAMESPACES, request.namespace, kind=NAMESPACES)
        if not hook.namespace_selector.matches(labels):
            return False
    if hook.object_selector.empty:
        return True
    return any(o is not None and hook.object_selector.matches_obj(o) for o in (request.obj, request.old))
