"""JSON patches guarded by `test` operations: a failed guard is a lost race, not an error.

A controller that plans from its cache and writes a JSON patch whose `test` operations check what
the plan assumed (a condition's reason, an entry's name at an index) learns of a stale plan from
the server's bare 422 "the server rejected our request due to an error in our request". To the
worker engine that is an optimistic-concurrency loss like a 409: requeued and counted
`result="conflict"`, never logged as a failure.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Final

from apiclient import ApiError

# What the API server answers (422, no details) when a JSON patch cannot be applied to the object as
# it is now, a failed `test` above all; a schema violation is worded `<kind> "<name>" is invalid: ...`.
PATCH_NOT_APPLICABLE: Final = "the server rejected our request due to an error in our request"


@contextmanager
def stale_plan_is_conflict() -> Iterator[None]:
    """Around a guarded JSON patch: a failed guard is raised as a 409 Conflict."""
    try:
        yield
    except ApiError as exc:
        if exc.invalid and exc.message.startswith(PATCH_NOT_APPLICABLE):
            raise ApiError(
                409,
                {"reason": "Conflict", "message": f"stale plan, the object changed: {exc.message}"},
                method=exc.method,
                path=exc.path,
            ) from exc
        raise
