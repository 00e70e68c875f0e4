"""What makes a requester or responder name, or a responder priority, valid.

The same rules as Kubernetes' validation of `lifecycle/v1alpha1` and of a pod's
`spec.evictionResponders`, with the same messages, so a name the CLI or a controller refuses
reads the same as the API server's refusal of it. aiokcm's CRDs enforce the same rules with
OpenAPI patterns and CEL (`deploy/crds/`); this module is what code checks before it writes.

A name is a domain-prefixed key (`acme.io/foo`): a label key whose prefix is mandatory. Requesters
and a pod's own responders may not use Kubernetes' domains (`k8s.io`, `kubernetes.io` and their
subdomains); the responders Kubernetes adds itself (`imperative-eviction.k8s.io/evictor`) do,
which is why an Eviction's status accepts them.
"""

from __future__ import annotations

import re
from typing import Final

from evictionapi import names

DNS1123_SUBDOMAIN_MAX_LENGTH: Final = 253
QUALIFIED_NAME_MAX_LENGTH: Final = 63

_DNS1123_LABEL_FMT: Final = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN_FMT: Final = _DNS1123_LABEL_FMT + "(\\." + _DNS1123_LABEL_FMT + ")*"
_QUALIFIED_NAME_FMT: Final = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_DNS1123_SUBDOMAIN: Final = re.compile(f"^{_DNS1123_SUBDOMAIN_FMT}$")
_QUALIFIED_NAME: Final = re.compile(f"^{_QUALIFIED_NAME_FMT}$")

_DNS1123_SUBDOMAIN_MSG: Final = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
    "and must start and end with an alphanumeric character"
)
_QUALIFIED_NAME_MSG: Final = (
    "must consist of alphanumeric characters, '-', '_' or '.', "
    "and must start and end with an alphanumeric character"
)
DOMAIN_PREFIXED_KEY_MSG: Final = 'must be a domain-prefixed key (such as "acme.io/foo")'
RESERVED_DOMAIN_MSG: Final = "domain names *.k8s.io, *.kubernetes.io are reserved"
RESERVED_PRIORITY_MSG: Final = "priorities 0-999 are reserved for responders with *.k8s.io suffix"


def _regex_error(msg: str, fmt: str, *examples: str) -> str:
    """apimachinery's RegexError wording, examples and all."""
    if not examples:
        return f"{msg} (regex used for validation is '{fmt}')"
    shown = " or ".join(f"'{e}', " for e in examples)
    return f"{msg} (e.g. {shown}regex used for validation is '{fmt}')"


def _dns1123_subdomain_errors(value: str) -> list[str]:
    errors = []
    if len(value) > DNS1123_SUBDOMAIN_MAX_LENGTH:
        errors.append(f"must be no more than {DNS1123_SUBDOMAIN_MAX_LENGTH} characters")
    if not _DNS1123_SUBDOMAIN.match(value):
        errors.append(_regex_error(_DNS1123_SUBDOMAIN_MSG, _DNS1123_SUBDOMAIN_FMT, "example.com"))
    return errors


def qualified_name_errors(value: str) -> list[str]:
    """A label key's errors (`IsQualifiedName`): an optional DNS-subdomain prefix, then a name."""
    parts = value.split("/")
    if len(parts) > 2:
        return [
            "a qualified name "
            + _regex_error(_QUALIFIED_NAME_MSG, _QUALIFIED_NAME_FMT, "MyName", "my.name", "123-abc")
            + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ]
    errors: list[str] = []
    name = parts[-1]
    if len(parts) == 2:
        prefix = parts[0]
        if not prefix:
            errors.append("prefix part must be non-empty")
        else:
            errors.extend(f"prefix part {e}" for e in _dns1123_subdomain_errors(prefix))
    if not name:
        errors.append("name part must be non-empty")
    elif len(name) > QUALIFIED_NAME_MAX_LENGTH:
        errors.append(f"name part must be no more than {QUALIFIED_NAME_MAX_LENGTH} characters")
    if not _QUALIFIED_NAME.match(name):
        errors.append(
            "name part "
            + _regex_error(_QUALIFIED_NAME_MSG, _QUALIFIED_NAME_FMT, "MyName", "my.name", "123-abc")
        )
    return errors


def domain_prefixed_key_errors(key: str) -> list[str]:
    """`IsDomainPrefixedKey`: a qualified name whose domain prefix is not optional."""
    if not key:
        return ["Required value"]
    errors = qualified_name_errors(key)
    if errors:
        return errors
    if "/" not in key:
        return [DOMAIN_PREFIXED_KEY_MSG]
    return []


def domain_of(name: str) -> str:
    """The domain prefix of `acme.io/foo` (`acme.io`); "" for a name without one."""
    domain, slash, _ = name.partition("/")
    return domain if slash else ""


def is_reserved_domain(domain: str) -> bool:
    """`k8s.io`, `kubernetes.io` or a subdomain of either: Kubernetes' own names."""
    return any(domain == d or domain.endswith("." + d) for d in names.RESERVED_DOMAINS)


def _join(errors: list[str]) -> str | None:
    return "; ".join(errors) if errors else None


def requester_name_error(name: str) -> str | None:
    """Why `name` cannot be an EvictionRequest's requester, or None when it can."""
    errors = domain_prefixed_key_errors(name)
    if not errors and is_reserved_domain(domain_of(name)):
        errors = [RESERVED_DOMAIN_MSG]
    return _join(errors)


def responder_name_error(name: str, *, allow_reserved: bool = False) -> str | None:
    """Why `name` cannot be a responder, or None when it can.

    A pod may not declare a responder in Kubernetes' domains; an Eviction's status lists the ones
    Kubernetes adds (the imperative evictor), so its readers pass `allow_reserved=True`.
    """
    errors = domain_prefixed_key_errors(name)
    if not errors and not allow_reserved and is_reserved_domain(domain_of(name)):
        errors = [RESERVED_DOMAIN_MSG]
    return _join(errors)


def responder_priority_error(name: str, priority: object) -> str | None:
    """Why `priority` is not a valid priority for responder `name`, or None when it is.

    0-999 belong to responders in `*.k8s.io`: the imperative evictor's 100 runs after every
    responder a pod can declare.
    """
    if isinstance(priority, bool) or not isinstance(priority, int):
        return "Required value" if priority is None else f"must be an integer, not {priority!r}"
    if priority < names.MIN_PRIORITY:
        return f"should be greater than or equal to {names.MIN_PRIORITY}"
    if priority > names.MAX_PRIORITY:
        return f"should be less than or equal to {names.MAX_PRIORITY}"
    domain = domain_of(name)
    if priority < names.RESERVED_PRIORITY_BELOW and not (domain == "k8s.io" or domain.endswith(".k8s.io")):
        return RESERVED_PRIORITY_MSG
    return None


def responder_order_key(name: str, priority: int | None) -> tuple[int, int, list[str], str]:
    """Sort key of a responder: highest priority first, then by domain, then by key.

    Equal priorities are ordered by the domain's labels read from the top (`com`, then `example`,
    then `responder`), so `example.com/x` comes before `a.example.com/x` and every `.com` before
    any `.io`; the part after the slash breaks the last tie. A responder without a priority (which
    validation refuses) sorts last.
    """
    domain, slash, key = name.partition("/")
    if not slash:
        domain, key = "", name
    labels = domain.split(".")[::-1] if domain else []
    if priority is None:
        return (1, 0, labels, key)
    return (0, -priority, labels, key)
