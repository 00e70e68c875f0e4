"""API errors as the server reports them: a `Status` object with a reason and a code."""

from __future__ import annotations

from typing import Any


class ApiError(Exception):
    """A non-2xx answer from the API server.

    `reason` is the Status reason (`NotFound`, `Conflict`, `AlreadyExists`, `Invalid`,
    `TooManyRequests`, `Expired`, ...), which is what callers branch on, as client-go's
    `apierrors.IsNotFound` and friends do.
    """

    def __init__(
        self, status: int, body: dict[str, Any] | None = None, *, method: str = "", path: str = ""
    ) -> None:
        self.status = status
        self.body: dict[str, Any] = body or {}
        self.reason: str = str(self.body.get("reason", "")) or _reason_for(status)
        self.message: str = str(self.body.get("message", "")) or self.reason
        self.method = method
        self.path = path
        super().__init__(f"{method} {path}: {status} {self.reason}: {self.message}")

    @property
    def details(self) -> dict[str, Any]:
        details = self.body.get("details")
        return details if isinstance(details, dict) else {}

    @property
    def retry_after_seconds(self) -> float | None:
        value = self.details.get("retryAfterSeconds")
        return float(value) if isinstance(value, int | float) else None

    @property
    def not_found(self) -> bool:
        return self.status == 404

    @property
    def conflict(self) -> bool:
        return self.status == 409 and self.reason != "AlreadyExists"

    @property
    def already_exists(self) -> bool:
        return self.status == 409 and self.reason == "AlreadyExists"

    @property
    def too_many_requests(self) -> bool:
        return self.status == 429

    @property
    def gone(self) -> bool:
        """410: the requested resourceVersion is older than the server keeps (relist)."""
        return self.status == 410

    @property
    def invalid(self) -> bool:
        return self.status == 422


_REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    409: "Conflict",
    410: "Expired",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


def _reason_for(status: int) -> str:
    return _REASONS.get(status, "Unknown")
