"""Names and priorities: the cases of upstream's tables for pod responders and requesters."""

from __future__ import annotations

import random

import pytest

from evictionapi import names
from evictionapi.validation import (
    RESERVED_DOMAIN_MSG,
    RESERVED_PRIORITY_MSG,
    domain_prefixed_key_errors,
    requester_name_error,
    responder_name_error,
    responder_order_key,
    responder_priority_error,
)

LONG_SUBDOMAINS = "a" * 63 + "." + "b" * 63 + "." + "c" * 63 + "." + "d" * 49 + ".example.com/bar"


# RunDeclarativeValidateEvictionRespondersTestCases (pkg/registry/core/pod): the name cases.
@pytest.mark.parametrize(
    "name",
    [
        pytest.param("foo.example.com/bar", id="RunDeclarativeValidateEvictionResponders/correct"),
        pytest.param(
            "a.b.c.d.e.f.g.h.i.foo.example.com/bar", id="RunDeclarativeValidateEvictionResponders/long"
        ),
        pytest.param(LONG_SUBDOMAINS, id="RunDeclarativeValidateEvictionResponders/long subdomains"),
        pytest.param("5.3.5.9/bar", id="RunDeclarativeValidateEvictionResponders/numbers"),
    ],
)
def test_valid_responder_names(name: str) -> None:
    assert responder_name_error(name) is None
    assert requester_name_error(name) is None


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        pytest.param("", "Required value", id="RunDeclarativeValidateEvictionResponders/empty name"),
        pytest.param(
            "invalid", "domain-prefixed key", id="RunDeclarativeValidateEvictionResponders/one segment"
        ),
        pytest.param(
            "underscores_are_bad.example.com/bar",
            "prefix part a lowercase RFC 1123 subdomain",
            id="RunDeclarativeValidateEvictionResponders/underscores",
        ),
        pytest.param(
            "k8s.io/key", RESERVED_DOMAIN_MSG, id="RunDeclarativeValidateEvictionResponders/reserved k8s.io"
        ),
        pytest.param(
            "dev.kubernetes.io/key",
            RESERVED_DOMAIN_MSG,
            id="RunDeclarativeValidateEvictionResponders/reserved kubernetes.io",
        ),
        pytest.param("a/b/c", "a qualified name must consist of", id="three segments"),
        pytest.param("acme.io/" + "x" * 64, "name part must be no more than 63 characters", id="long key"),
        pytest.param("a" * 254 + "/x", "prefix part must be no more than 253 characters", id="long prefix"),
        pytest.param("/foo", "prefix part must be non-empty", id="empty prefix"),
        pytest.param("acme.io/", "name part must be non-empty", id="empty key"),
    ],
)
def test_invalid_responder_names(name: str, expected: str) -> None:
    error = responder_name_error(name)
    assert error is not None and expected in error
    requester_error = requester_name_error(name)
    assert requester_error is not None and expected in requester_error


def test_reserved_domains_are_allowed_where_kubernetes_adds_them() -> None:
    assert responder_name_error(names.IMPERATIVE_EVICTOR) == RESERVED_DOMAIN_MSG
    assert responder_name_error(names.IMPERATIVE_EVICTOR, allow_reserved=True) is None
    assert requester_name_error("evictor.k8s.io/x") == RESERVED_DOMAIN_MSG
    # Only the domains themselves and their subdomains are reserved.
    assert requester_name_error("notk8s.io/x") is None
    assert requester_name_error("k8s.io.example.com/x") is None


def test_message_wording_matches_apimachinery() -> None:
    assert domain_prefixed_key_errors("Bad.example.com/x") == [
        "prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, "
        "'-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used "
        "for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
    ]
    assert domain_prefixed_key_errors("acme.io/-x") == [
        "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
        "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
        "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
    ]


# RunDeclarativeValidateEvictionRespondersTestCases: the priority cases.
@pytest.mark.parametrize(
    ("name", "priority", "expected"),
    [
        pytest.param(
            "foo.example.com/bar", 1000, None, id="RunDeclarativeValidateEvictionResponders/correct"
        ),
        pytest.param(
            "foo.example.com/bar",
            None,
            "Required value",
            id="RunDeclarativeValidateEvictionResponders/priority required",
        ),
        pytest.param(
            "foo.example.com/bar",
            -1,
            "greater than or equal to 0",
            id="RunDeclarativeValidateEvictionResponders/negative priority",
        ),
        pytest.param(
            "foo.example.com/bar",
            100001,
            "less than or equal to 100000",
            id="RunDeclarativeValidateEvictionResponders/priority over maximum",
        ),
        pytest.param(
            "foo.example.com/bar",
            999,
            RESERVED_PRIORITY_MSG,
            id="RunDeclarativeValidateEvictionResponders/reserved priority - end",
        ),
        pytest.param(
            "dev.kubernetes.io/key",
            0,
            RESERVED_PRIORITY_MSG,
            id="RunDeclarativeValidateEvictionResponders/reserved priority triggers unknown k8s responders",
        ),
        pytest.param(names.IMPERATIVE_EVICTOR, 100, None, id="the imperative evictor's own slot"),
        pytest.param("foo.example.com/bar", True, "must be an integer", id="a JSON boolean"),
        pytest.param("foo.example.com/bar", 1000.0, "must be an integer", id="a JSON float"),
    ],
)
def test_responder_priority(name: str, priority: object, expected: str | None) -> None:
    error = responder_priority_error(name, priority)
    if expected is None:
        assert error is None
    else:
        assert error is not None and expected in error


def _responder_name(i: int) -> str:
    return f"responder.example.com/bar{i}"


# TestSortTargetResponders (pkg/apis/lifecycle/validation): the expected orders, shuffled.
SORT_CASES = {
    "TestSortTargetResponders/sorts by priority": [
        (_responder_name(1), 100000),
        (_responder_name(9), 99999),
        (_responder_name(10), 10001),
        (_responder_name(2), 10000),
        (_responder_name(13), 5),
        (_responder_name(4), 4),
        (_responder_name(12), 3),
        (_responder_name(6), 3),
        (_responder_name(11), 2),
        (_responder_name(8), 1),
        (_responder_name(7), 0),
        (_responder_name(3), -1),
        (_responder_name(14), -1000),
        (_responder_name(5), None),
    ],
    "TestSortTargetResponders/sorts by domain name prefix and key when priority is the same": [
        ("responder-x.example.com/bar", 16),
        ("responder-c.fooexample.com/bar", 16),
        ("example.com/bar", 15),
        ("example.com/baz", 15),
        ("responder-y.example.com/bar", 15),
        ("responder-y.example.com/baz", 15),
        ("responder-z.example.com/bar", 15),
        ("responder-z.example.com/baz", 15),
        ("fooexample.com/bar", 15),
        ("responder-a.fooexample.com/bar", 15),
        ("responder-b.fooexample.com/bar", 15),
        ("responder-b.fooexample.com/baz", 15),
        ("responder-b.barexample.io/bar", 15),
        ("responder-b.fooexample.io/bar", 15),
        ("responder-b.fooexample.io/baz", 15),
        ("responder-k.kubernetes.io/y", 14),
        ("responder-k.kubernetes.io/y", 14),
        ("responder-k.kubernetes.io/z", 14),
        ("responder-k.kubernetes.io/x", 13),
    ],
}


@pytest.mark.parametrize("expected", list(SORT_CASES.values()), ids=list(SORT_CASES))
@pytest.mark.parametrize("seed", range(5))
def test_sort_order(expected: list[tuple[str, int | None]], seed: int) -> None:
    shuffled = list(expected)
    random.Random(seed).shuffle(shuffled)
    assert sorted(shuffled, key=lambda r: responder_order_key(*r)) == expected
