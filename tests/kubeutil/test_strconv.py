"""`parse_int` refuses what Go's `strconv.ParseInt(s, 10, bits)` refuses."""

from __future__ import annotations

import pytest

from kubeutil.strconv import atoi, go_quote, parse_int


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


@pytest.mark.parametrize(
    ("text", "expected"),
    [("12", 12), ("+7", 7), ("-3", -3), ("0012", 12)],
)
def test_atoi(text: str, expected: int) -> None:
    assert atoi(text) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", 'strconv.Atoi: parsing "": invalid syntax'),
        ("a", 'strconv.Atoi: parsing "a": invalid syntax'),
        (" 1", 'strconv.Atoi: parsing " 1": invalid syntax'),
        ("9223372036854775808", 'strconv.Atoi: parsing "9223372036854775808": value out of range'),
    ],
)
def test_atoi_errors_are_go_s(text: str, message: str) -> None:
    with pytest.raises(ValueError) as err:
        atoi(text)
    assert str(err.value) == message


@pytest.mark.parametrize(
    ("text", "quoted"),
    [
        ("of-gone", '"of-gone"'),
        ('say "hi"', '"say \\"hi\\""'),
        ("back\\slash", '"back\\\\slash"'),
        ("tab\tnew\n", '"tab\\tnew\\n"'),
        ("\x01", '"\\x01"'),
        ("é", '"é"'),
        ("\u00a0", '"\\u00a0"'),
    ],
)
def test_go_quote(text: str, quoted: str) -> None:
    """`strconv.Quote`, as `%q` prints a string."""
    assert go_quote(text) == quoted
