"""List and watch options as kube-apiserver reads them: validation and where a read is served.

`validate` is `ValidateListOptions` (apis/meta/internalversion/validation): a bad combination of
`resourceVersion`, `resourceVersionMatch` and `continue` is a 422 on `ListOptions.meta.k8s.io`,
causes and wording as the real server's. `parse_rv` is the versioner's `ParseResourceVersion`,
whose failure the real server passes through as a reasonless 500.

Where a list is served decides its semantics (the cacher's `shouldDelegateList`): no
resourceVersion, a continue token, a limit with an RV other than "0", or `Exact` go to "etcd"
(a consistent read, at the latest or at an RV); the rest are served by the watch cache: the
current objects once the cache has seen the RV (waiting up to 3 s, then 504), every object in
one page whatever the limit.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from localcluster import errors
from localcluster.registry import FieldError

EXACT = "Exact"
NOT_OLDER_THAN = "NotOlderThan"
#: The cacher's `blockTimeout`: how long a read waits for the watch cache to reach its RV.
FRESHNESS_TIMEOUT = 3.0


@dataclass(frozen=True, slots=True)
class ListOptions:
    resource_version: str = ""
    resource_version_match: str = ""
    continue_token: str = ""
    limit: int = 0

    @property
    def from_cache(self) -> bool:
        """Served by the watch cache rather than read from etcd (`!shouldDelegateList`)."""
        rv = self.resource_version
        return not (
            rv == ""
            or self.continue_token
            or (self.limit > 0 and rv != "0")
            or self.resource_version_match == EXACT
        )


def from_query(query: Mapping[str, str], *, watch: bool) -> ListOptions:
    """The options of a list or watch request, validated (422) as the real server does first."""
    limit_text = query.get("limit") or ""
    try:
        limit = int(limit_text) if limit_text else 0
    except ValueError as exc:
        raise errors.bad_request(f"invalid limit: {limit_text!r}") from exc
    opts = ListOptions(
        query.get("resourceVersion") or "",
        query.get("resourceVersionMatch") or "",
        query.get("continue") or "",
        limit,
    )
    if watch and "sendInitialEvents" in query:
        validate_watch_list(opts)
    else:
        validate(opts, watch=watch)
    return opts


def validate_watch_list(opts: ListOptions) -> None:
    """A watch with `sendInitialEvents` (the WatchList feature, served here though v1.24 has
    none) is checked as the servers that have it check it (`validateWatchOptions`)."""
    errs: list[FieldError] = []
    path, match = "resourceVersionMatch", opts.resource_version_match
    if match != NOT_OLDER_THAN:
        errs.append(
            FieldError.forbidden(
                path, f"sendInitialEvents requires setting resourceVersionMatch to {NOT_OLDER_THAN}"
            )
        )
    if match:
        if match != NOT_OLDER_THAN:
            errs.append(FieldError.not_supported(path, match, (NOT_OLDER_THAN,)))
        if opts.continue_token:
            errs.append(
                FieldError.forbidden(path, "resourceVersionMatch is forbidden when continue is provided")
            )
    if errs:
        raise errors.invalid("ListOptions", "", errs, group="meta.k8s.io")


def validate(opts: ListOptions, *, watch: bool) -> None:
    """`ValidateListOptions` of v1.24."""
    match = opts.resource_version_match
    if not match:
        return
    errs: list[FieldError] = []
    path = "resourceVersionMatch"
    if watch:
        errs.append(FieldError.forbidden(path, "resourceVersionMatch is forbidden for watch"))
    if not opts.resource_version:
        errs.append(
            FieldError.forbidden(path, "resourceVersionMatch is forbidden unless resourceVersion is provided")
        )
    if opts.continue_token:
        errs.append(FieldError.forbidden(path, "resourceVersionMatch is forbidden when continue is provided"))
    if match not in (EXACT, NOT_OLDER_THAN):
        errs.append(FieldError.not_supported(path, match, (EXACT, NOT_OLDER_THAN, "")))
    if match == EXACT and opts.resource_version == "0":
        errs.append(
            FieldError.forbidden(path, 'resourceVersionMatch "exact" is forbidden for resourceVersion "0"')
        )
    if errs:
        raise errors.invalid("ListOptions", "", errs, group="meta.k8s.io")


def parse_rv(text: str) -> int:
    """An RV as a number; "" is 0. Not a number: the reasonless 500 the real server answers."""
    if not text:
        return 0
    if text.isdigit():
        return int(text)
    raise errors.storage_failure(
        f'resourceVersion: Invalid value: "{text}": strconv.ParseUint: parsing "{text}": invalid syntax'
    )
