"""`parse_int` refuses what Go's `strconv.ParseInt(s, 10, bits)` refuses."""

from __future__ import annotations

import pytest

from kubeutil.strconv import parse_int


@pytest.mark.parametrize(
    ("text", "bits", "expected"),
    [
        ("0", 64, 0),
        ("+7", 64, 7),
        ("-9223372036854775808", 64, -(2**63)),
        ("9223372036854775807", 64, 2**63 - 1),
        ("9223372036854775808", 64, None),
        ("2147483647", 32, 2**31 - 1),
        ("2147483648", 32, None),
        ("-2147483649", 32, None),
        ("1_0", 64, None),
        (" 5", 64, None),
        ("5\n", 64, None),
        ("", 64, None),
        ("0x10", 64, None),
    ],
)
def test_parse_int(text: str, bits: int, expected: int | None) -> None:
    assert parse_int(text, bits) == expected
