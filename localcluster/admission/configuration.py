"""`admissionregistration.k8s.io/v1` ValidatingWebhookConfiguration: defaults and validation.

Defaults are the v1 scheme's (`SetDefaults_ValidatingWebhook`, `SetDefaults_Rule`,
`SetDefaults_ServiceReference`): failurePolicy Fail, matchPolicy Equivalent, empty namespace and
object selectors, timeoutSeconds 10, rule scope "*", service port 443. Validation follows
`pkg/apis/admissionregistration/validation` in its order and wording, since `kubectl apply`
prints the 422 back to whoever wrote the manifest.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from localcluster.builtin.base import BuiltinStrategy, columns
from localcluster.builtin.validation import object_items, validate_label_selector
from localcluster.registry import FieldError, Obj, Registry, ResourceType, TableColumn

GROUP = "admissionregistration.k8s.io"
PLURAL = "validatingwebhookconfigurations"
STORAGE_KEY = f"{PLURAL}.{GROUP}"
OPERATIONS = ("*", "CONNECT", "CREATE", "DELETE", "UPDATE")
SCOPES = ("*", "Cluster", "Namespaced")
FAILURE_POLICIES = ("Fail", "Ignore")
MATCH_POLICIES = ("Equivalent", "Exact")
SIDE_EFFECTS = ("None", "NoneOnDryRun")
REVIEW_VERSIONS = ("v1", "v1beta1")
DEFAULT_TIMEOUT = 10


def default_webhook(hook: Obj) -> None:
    hook.setdefault("failurePolicy", "Fail")
    hook.setdefault("matchPolicy", "Equivalent")
    if hook.get("namespaceSelector") is None:
        hook["namespaceSelector"] = {}
    if hook.get("objectSelector") is None:
        hook["objectSelector"] = {}
    if hook.get("timeoutSeconds") is None:
        hook["timeoutSeconds"] = DEFAULT_TIMEOUT
    for rule in hook.get("rules") or ():
        if isinstance(rule, dict) and rule.get("scope") is None:
            rule["scope"] = "*"
    service = (hook.get("clientConfig") or {}).get("service")
    if isinstance(service, dict) and service.get("port") is None:
        service["port"] = 443


def _star_alone(values: list[Any], path: str, what: str) -> list[FieldError]:
    if "*" in values and len(values) > 1:
        return [FieldError.invalid(path, values, f"if '*' is present, must not specify other {what}")]
    return []


def _go_list(values: list[Any]) -> str:
    """How `field.Invalid` prints a `[]string` value."""
    return "[]string{" + ", ".join(f'"{v}"' for v in values) + "}"


def _rule_list(values: list[Any], path: str, what: str) -> list[FieldError]:
    """A rule's operations, groups and versions are each required and take `*` only alone;
    the value is printed as Go prints the `[]string` it validates."""
    if not values:
        return [FieldError.required(path)]
    if "*" in values and len(values) > 1:
        message = f"Invalid value: {_go_list(values)}: if '*' is present, must not specify other {what}"
        return [FieldError("FieldValueInvalid", path, message)]
    return []


def _validate_rule(rule: Obj, path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    operations = list(rule.get("operations") or [])
    errs.extend(_rule_list(operations, f"{path}.operations", "operations"))
    for i, op in enumerate(operations):
        if op not in OPERATIONS:
            errs.append(FieldError.not_supported(f"{path}.operations[{i}]", op, OPERATIONS))
    for key, what in (("apiGroups", "API groups"), ("apiVersions", "API versions")):
        values = list(rule.get(key) or [])
        errs.extend(_rule_list(values, f"{path}.{key}", what))
        if key == "apiVersions":
            errs.extend(
                FieldError.required(f"{path}.{key}[{i}]", "Required value: must not be empty")
                for i, v in enumerate(values)
                if v == ""
            )
    resources = list(rule.get("resources") or [])
    if not resources:
        errs.append(FieldError.required(f"{path}.resources"))
    for i, res in enumerate(resources):
        if res == "":
            errs.append(FieldError.required(f"{path}.resources[{i}]"))
    scope = rule.get("scope")
    if scope is not None and scope not in SCOPES:
        errs.append(FieldError.not_supported(f"{path}.scope", scope, SCOPES))
    return errs


def _validate_url(url: Any, path: str) -> list[FieldError]:
    if not isinstance(url, str):
        return [FieldError.invalid(path, url, "must be a string")]
    parts = urlsplit(url)
    errs: list[FieldError] = []
    if parts.scheme != "https":
        errs.append(FieldError.invalid(path, url, "'https' is the only allowed URL scheme"))
    if not parts.netloc:
        errs.append(FieldError.invalid(path, url, "host must be specified"))
    if parts.username is not None or parts.password is not None:
        errs.append(FieldError.invalid(path, url, "user information is not permitted in the URL"))
    if parts.fragment:
        errs.append(FieldError.invalid(path, url, "fragments are not permitted in the URL"))
    if parts.query:
        errs.append(FieldError.invalid(path, url, "query parameters are not permitted in the URL"))
    return errs


def _validate_service(service: Obj, path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    if not service.get("name"):
        errs.append(FieldError.required(f"{path}.name", "Required value: service name is required"))
    if not service.get("namespace"):
        errs.append(FieldError.required(f"{path}.namespace", "Required value: service namespace is required"))
    svc_path = service.get("path")
    if svc_path and not str(svc_path).startswith("/"):
        errs.append(FieldError.invalid(f"{path}.path", svc_path, "must start with a '/'"))
    port = service.get("port")
    if not isinstance(port, int) or not 1 <= port <= 65535:
        errs.append(
            FieldError.invalid(
                f"{path}.port", port, "port is not valid: must be between 1 and 65535, inclusive"
            )
        )
    return errs


def validate_webhook(hook: Obj, path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    name = str(hook.get("name") or "")
    if not name:
        errs.append(FieldError.required(f"{path}.name"))
    elif name.count(".") < 2:
        errs.append(
            FieldError.invalid(
                f"{path}.name", name, "should be a domain with at least three segments separated by dots"
            )
        )
    for i, rule in enumerate(hook.get("rules") or ()):
        errs.extend(_validate_rule(rule if isinstance(rule, dict) else {}, f"{path}.rules[{i}]"))
    if hook.get("failurePolicy") not in FAILURE_POLICIES:
        errs.append(
            FieldError.not_supported(f"{path}.failurePolicy", hook.get("failurePolicy"), FAILURE_POLICIES)
        )
    if hook.get("matchPolicy") not in MATCH_POLICIES:
        errs.append(FieldError.not_supported(f"{path}.matchPolicy", hook.get("matchPolicy"), MATCH_POLICIES))
    side_effects = hook.get("sideEffects")
    if side_effects is None:
        errs.append(
            FieldError.required(
                f"{path}.sideEffects", "Required value: must specify one of None, NoneOnDryRun"
            )
        )
    elif side_effects not in SIDE_EFFECTS:
        errs.append(FieldError.not_supported(f"{path}.sideEffects", side_effects, SIDE_EFFECTS))
    timeout = hook.get("timeoutSeconds")
    if not isinstance(timeout, int) or not 1 <= timeout <= 30:
        errs.append(
            FieldError.invalid(
                f"{path}.timeoutSeconds", timeout, "the timeout value must be between 1 and 30 seconds"
            )
        )
    for key in ("namespaceSelector", "objectSelector"):
        errs.extend(validate_label_selector(hook.get(key), f"{path}.{key}"))
    client = hook.get("clientConfig") or {}
    url, service = client.get("url"), client.get("service")
    if (url is None) == (service is None):
        errs.append(
            FieldError.required(
                f"{path}.clientConfig", "Required value: exactly one of url or service is required"
            )
        )
    elif url is not None:
        errs.extend(_validate_url(url, f"{path}.clientConfig.url"))
    else:
        errs.extend(
            _validate_service(service if isinstance(service, dict) else {}, f"{path}.clientConfig.service")
        )
    versions = list(hook.get("admissionReviewVersions") or [])
    if not versions:
        errs.append(
            FieldError.required(
                f"{path}.admissionReviewVersions",
                f"Required value: must specify one of {', '.join(REVIEW_VERSIONS)}",
            )
        )
    elif not any(v in REVIEW_VERSIONS for v in versions):
        errs.append(
            FieldError(
                "FieldValueInvalid",
                f"{path}.admissionReviewVersions",
                f"Invalid value: {_go_list(versions)}: must include at least one of {', '.join(REVIEW_VERSIONS)}",
            )
        )
    return errs


class ValidatingWebhookConfigurationStrategy(BuiltinStrategy):
    group = GROUP
    kind = "ValidatingWebhookConfiguration"
    allow_unconditional_update = False

    def default(self, obj: Obj) -> None:
        for hook in obj.get("webhooks") or ():
            if isinstance(hook, dict):
                default_webhook(hook)

    def validate(self, obj: Obj, old: Obj | None) -> list[FieldError]:
        errs: list[FieldError] = []
        seen: set[str] = set()
        for path, hook in object_items(obj.get("webhooks") or (), "webhooks", errs):
            name = hook.get("name")
            if name in seen:
                errs.append(FieldError.duplicate(f"{path}.name", name))
            seen.add(str(name))
            errs.extend(validate_webhook(hook, path))
        return errs

    def table(self, obj: Obj) -> tuple[list[TableColumn], list[Any]]:
        return columns(("Webhooks", "integer")), [len(obj.get("webhooks") or ())]


def register(registry: Registry) -> ResourceType:
    rt = ResourceType(
        GROUP,
        "v1",
        PLURAL,
        "ValidatingWebhookConfiguration",
        False,
        strategy=ValidatingWebhookConfigurationStrategy(),
        categories=("api-extensions",),
    )
    registry.register(rt)
    return rt
