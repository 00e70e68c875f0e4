"""API errors as the real server reports them: a `meta/v1 Status` with a reason and a code.

Clients branch on `reason` and `code` (client-go's `apierrors.IsNotFound`, kubectl's messages),
so the constructors reproduce `k8s.io/apimachinery/pkg/api/errors` wording exactly.
"""

from __future__ import annotations

from typing import Any

from localcluster.registry import FieldError


class StatusError(Exception):
    """An error with its `Status` body; raised by the object API, rendered by the REST layer."""

    def __init__(
        self,
        code: int,
        reason: str,
        message: str,
        details: dict[str, Any] | None = None,
        *,
        metadata: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details
        #: The Status's ListMeta (a compacted continue hands out a new token there).
        self.metadata = metadata or {}

    def status(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": self.metadata,
            "status": "Failure",
            "message": self.message,
        }
        if self.reason:  # omitted when empty, as Go's `omitempty` does
            body["reason"] = self.reason
        if self.details is not None:
            body["details"] = self.details
        body["code"] = self.code
        return body


def _details(group: str, kind: str, name: str | None) -> dict[str, Any]:
    details: dict[str, Any] = {"kind": kind}
    if name:
        details["name"] = name
    if group:
        details["group"] = group
    return details


def _object_details(group_resource: str, name: str, group: str, kind: str) -> dict[str, Any]:
    """`details` of an error about one object: its `kind` is the resource's plural unless the
    caller names one, as `errors.NewNotFound(qualifiedResource, name)` fills it."""
    return _details(group, kind or group_resource.split(".")[0], name)


def not_found(group_resource: str, name: str, *, group: str = "", kind: str = "") -> StatusError:
    message = f'{group_resource} "{name}" not found'
    return StatusError(404, "NotFound", message, _object_details(group_resource, name, group, kind))


def resource_not_found() -> StatusError:
    """A path naming no served resource: `details` present and empty, as kube-apiserver sends it
    (`kubectl debug` reads `details` without checking it is there)."""
    return StatusError(404, "NotFound", "the server could not find the requested resource", {})


def already_exists(group_resource: str, name: str, *, group: str = "", kind: str = "") -> StatusError:
    message = f'{group_resource} "{name}" already exists'
    return StatusError(409, "AlreadyExists", message, _object_details(group_resource, name, group, kind))


def conflict(group_resource: str, name: str, why: str, *, group: str = "", kind: str = "") -> StatusError:
    message = f'Operation cannot be fulfilled on {group_resource} "{name}": {why}'
    return StatusError(409, "Conflict", message, _object_details(group_resource, name, group, kind))


STALE = "the object has been modified; please apply your changes to the latest version and try again"


def invalid(kind: str, name: str, errors: list[FieldError], *, group: str = "") -> StatusError:
    """422 with one cause per field error; the message as `errors.NewInvalid` words it."""
    causes = [{"reason": e.type, "message": e.message, "field": e.field} for e in errors]
    parts = [f"{e.field}: {e.message}" for e in errors]
    summary = parts[0] if len(parts) == 1 else "[" + ", ".join(parts) + "]"
    qualified = f"{kind}.{group}" if group else kind
    details = _details(group, kind, name)
    details["causes"] = causes
    return StatusError(422, "Invalid", f'{qualified} "{name}" is invalid: {summary}', details)


def bad_request(message: str) -> StatusError:
    return StatusError(400, "BadRequest", message)


def method_not_allowed(message: str) -> StatusError:
    return StatusError(405, "MethodNotAllowed", message)


def unsupported_media_type(content_type: str) -> StatusError:
    return StatusError(
        415,
        "UnsupportedMediaType",
        f"the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/merge-patch+json, application/strategic-merge-patch+json, application/json-patch+json (got {content_type})",
    )


def gone(message: str, *, continue_token: str | None = None) -> StatusError:
    """410 for a watch or read older than the history kept (`errors.NewResourceExpired`)."""
    return StatusError(
        410, "Expired", message, metadata={"continue": continue_token} if continue_token else None
    )


def too_large_resource_version(rv: int, current: int, retry_after: int) -> StatusError:
    """504 for a read at an RV the server has not reached (`storage.NewTooLargeResourceVersionError`
    through `interpretStorageError`): the watch cache asks to retry after 1 s, etcd says nothing."""
    details: dict[str, Any] = {
        "causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}]
    }
    if retry_after:
        details["retryAfterSeconds"] = retry_after
    return StatusError(
        504, "Timeout", f"Timeout: Too large resource version: {rv}, current: {current}", details
    )


def storage_failure(message: str) -> StatusError:
    """A 500 with no reason: an etcd or parse error the server passes through as it is."""
    return StatusError(500, "", message)


def forbidden(group_resource: str, name: str, why: str) -> StatusError:
    return StatusError(403, "Forbidden", f'{group_resource} "{name}" is forbidden: {why}')


def too_many_requests(message: str, retry_after: int | None = None) -> StatusError:
    details: dict[str, Any] | None = {"retryAfterSeconds": retry_after} if retry_after is not None else None
    return StatusError(429, "TooManyRequests", message, details)


def internal(message: str) -> StatusError:
    return StatusError(500, "InternalError", f"Internal error occurred: {message}")


def not_acceptable(message: str = "406: Not Acceptable") -> StatusError:
    """No encoding the client accepts can carry the answer (a custom resource to a protobuf-only
    client, a metadata-only form where the server has none)."""
    return StatusError(406, "NotAcceptable", message)
