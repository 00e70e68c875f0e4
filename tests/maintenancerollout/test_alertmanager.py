"""The Alertmanager gate's client against a real Alertmanager fed by a real Prometheus
(tests/support/monitoring.py), and its matcher parser."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from hypothesis import given
from hypothesis import strategies as st

from maintenancerollout.alertmanager import Check, Matcher, MatcherError, check, parse_matcher
from tests.support.monitoring import (
    ALERT,
    INHIBITOR_SIGNAL,
    ON_SHARED_LOOP,
    SIGNAL,
    Monitoring,
    closed_port,
)
from tests.support.waiting import eventually

pytestmark = ON_SHARED_LOOP


async def _firing(monitoring: Monitoring, case: str) -> None:
    monitoring.signal.set(SIGNAL, 1.0, case=case)
    await monitoring.wait_alert_firing(ALERT, case=case)


@pytest_asyncio.fixture(loop_scope="session")
async def firing(monitoring: Monitoring) -> AsyncIterator[str]:
    """TestSignalHigh firing for case="firing"; its matchers' case label."""
    await _firing(monitoring, "firing")
    yield 'case="firing"'


async def test_a_firing_alert_is_seen(monitoring: Monitoring, firing: str) -> None:
    c = await check(monitoring.alertmanager_url, [f'alertname="{ALERT}"', firing])
    assert c.error == ""
    assert not c.clear
    [alert] = c.firing
    assert alert.name == ALERT
    assert alert.labels["severity"] == "critical"
    assert alert.labels["case"] == "firing"
    assert alert.starts_at.startswith("20")


@pytest.mark.parametrize(
    "matchers",
    [
        ['severity="critical"', 'case="firing"'],
        ["severity=critical", "case = firing"],
        ['severity=~"crit.*"', 'case="firing"'],
        ['severity!="warning"', 'case=~"fir.+"'],
        ['severity!~"warn.*|info"', 'case="firing"', 'alertname!=""'],
    ],
)
async def test_the_matchers_alertmanager_matches(
    monitoring: Monitoring, firing: str, matchers: list[str]
) -> None:
    c = await check(monitoring.alertmanager_url, matchers)
    assert [a.labels["case"] for a in c.firing] == ["firing"], c


@pytest.mark.parametrize(
    "matchers",
    [
        ['severity="warning"', 'case="firing"'],
        ['case="firing"', 'alertname="SomethingElse"'],
        ['case="firing"', 'severity!~"crit.*"'],
        ['case=~"fir"'],  # anchored, as Alertmanager anchors regexes
    ],
)
async def test_a_matcher_that_does_not_match(
    monitoring: Monitoring, firing: str, matchers: list[str]
) -> None:
    c = await check(monitoring.alertmanager_url, matchers)
    assert c == Check(firing=())
    assert c.clear


async def test_a_silenced_alert_is_not_seen_and_is_again_once_the_silence_expires(
    monitoring: Monitoring,
) -> None:
    await _firing(monitoring, "silenced")
    matchers = ['case="silenced"']
    assert len((await check(monitoring.alertmanager_url, matchers)).firing) == 1
    silence = await monitoring.silence(['case="silenced"', 'severity="critical"'], duration=600)
    await eventually(lambda: _clear(monitoring, matchers), "the alert silenced")
    await monitoring.expire_silence(silence)
    seen = await eventually(lambda: _firing_names(monitoring, matchers), "the alert seen again")
    assert seen == [ALERT]


async def test_an_inhibited_alert_is_not_seen(monitoring: Monitoring) -> None:
    """TestInhibitor inhibits TestSignalHigh of the same case (the Alertmanager's inhibit_rules)."""
    await _firing(monitoring, "inhibited")
    matchers = [f'alertname="{ALERT}"', 'case="inhibited"']
    monitoring.signal.set(INHIBITOR_SIGNAL, 1.0, case="inhibited")
    try:
        await eventually(lambda: _clear(monitoring, matchers), "the alert inhibited")
        # The inhibiting alert itself is active, and a gate matching it sees it.
        assert await _firing_names(monitoring, ['case="inhibited"']) == ["TestInhibitor"]
    finally:
        monitoring.signal.remove(INHIBITOR_SIGNAL, case="inhibited")
    assert await eventually(lambda: _firing_names(monitoring, matchers), "the alert seen again") == [ALERT]


async def test_a_resolved_alert_is_not_seen(monitoring: Monitoring) -> None:
    await _firing(monitoring, "resolved")
    monitoring.signal.set(SIGNAL, 0.0, case="resolved")
    await eventually(lambda: _clear(monitoring, ['case="resolved"']), "the alert resolved")


async def _firing_names(monitoring: Monitoring, matchers: list[str]) -> list[str]:
    c = await check(monitoring.alertmanager_url, matchers)
    assert c.error == "", c.error
    return [a.name for a in c.firing]


async def _clear(monitoring: Monitoring, matchers: list[str]) -> bool:
    c = await check(monitoring.alertmanager_url, matchers)
    assert c.error == "", c.error
    return c.clear


async def test_no_matchers_sees_every_active_alert(monitoring: Monitoring, firing: str) -> None:
    c = await check(monitoring.alertmanager_url, [])
    assert "firing" in {a.labels.get("case") for a in c.firing}


async def test_a_closed_port_is_an_error_at_once() -> None:
    address = f"http://127.0.0.1:{closed_port()}"
    started = time.monotonic()
    c = await check(address, ['severity="critical"'])
    assert time.monotonic() - started < 2.0
    assert c.firing == ()
    assert c.error.startswith(f"Alertmanager at {address} unreachable")
    assert not c.clear


async def test_a_matcher_alertmanager_refuses_is_an_error_with_its_message(monitoring: Monitoring) -> None:
    """Python's re takes a lookahead, Alertmanager's RE2 does not: Alertmanager has the last word."""
    c = await check(monitoring.alertmanager_url, ['severity=~"(?=crit)critical"'])
    assert "answered HTTP 400" in c.error
    assert "error parsing regexp" in c.error


async def test_an_invalid_matcher_is_an_error_without_asking() -> None:
    c = await check(f"http://127.0.0.1:{closed_port()}", ['severity=="critical"'])
    assert c.error.startswith("invalid matcher")


async def test_something_that_is_not_alertmanager_is_an_error(monitoring: Monitoring) -> None:
    c = await check(monitoring.prometheus_url, ['severity="critical"'])
    assert "answered HTTP 404" in c.error


async def test_credentials_never_show_in_an_error(monitoring: Monitoring) -> None:
    port = monitoring.prometheus_url.rsplit(":", 1)[1]
    for address in (
        f"http://aiokcm:s3cr3t-pw@127.0.0.1:{closed_port()}",
        f"http://aiokcm:s3cr3t-pw@127.0.0.1:{port}",
    ):
        c = await check(address, ['severity="critical"'])
        assert c.error
        assert "s3cr3t-pw" not in c.error
        assert "aiokcm:" not in c.error
        assert "http://127.0.0.1:" in c.error


async def test_the_alerts_are_asked_with_the_credentials(monitoring: Monitoring, firing: str) -> None:
    port = monitoring.alertmanager_url.rsplit(":", 1)[1]
    c = await check(f"http://aiokcm:s3cr3t-pw@127.0.0.1:{port}/", [firing])
    assert len(c.firing) == 1


# -- the matcher syntax (Alertmanager's pkg/labels/parse.go) ------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('severity="critical"', Matcher("severity", "=", "critical")),
        ("severity=critical", Matcher("severity", "=", "critical")),
        ("  severity =  critical  ", Matcher("severity", "=", "critical")),
        ('severity!="critical"', Matcher("severity", "!=", "critical")),
        ('severity=~"crit.*"', Matcher("severity", "=~", "crit.*")),
        ("severity!~warn.*", Matcher("severity", "!~", "warn.*")),
        ('team=""', Matcher("team", "=", "")),
        ("team=", Matcher("team", "=", "")),
        ('quote="She said: \\"Hi\\""', Matcher("quote", "=", 'She said: "Hi"')),
        ('path="a\\\\b"', Matcher("path", "=", "a\\b")),
        ('text="two\\nlines"', Matcher("text", "=", "two\nlines")),
        ('odd="\\d"', Matcher("odd", "=", "\\d")),  # a spurious escape is a literal backslash
        ("trailing=a\\", Matcher("trailing", "=", "a\\")),
        ("__name__=up", Matcher("__name__", "=", "up")),
        ("job:rate=1", Matcher("job:rate", "=", "1")),
        ('value="a, b {c}"', Matcher("value", "=", "a, b {c}")),
    ],
)
def test_parse_matcher(text: str, expected: Matcher) -> None:
    assert parse_matcher(text) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "bad matcher format"),
        ("severity", "bad matcher format"),
        ('="critical"', "bad matcher format"),
        ("1severity=critical", "bad matcher format"),
        ("sev-erity=critical", "bad matcher format"),
        ('severity=="critical"', "unescaped double quote"),
        ('severity="crit"ical"', "unescaped double quote"),
        ('severity="critical', "closing quote is missing"),
        ('severity=~"("', "invalid regular expression"),
        ("severity=~[", "invalid regular expression"),
        ("severity<critical", "bad matcher format"),
    ],
)
def test_parse_matcher_refuses(text: str, message: str) -> None:
    with pytest.raises(MatcherError) as caught:
        parse_matcher(text)
    assert message in str(caught.value)


_names = st.from_regex(r"[a-zA-Z_:][a-zA-Z0-9_:]{0,20}", fullmatch=True)


@given(_names, st.sampled_from(["=", "!="]), st.text(max_size=30))
def test_a_matcher_reads_back_as_itself(name: str, op: str, value: str) -> None:
    """What `check` sends (str(matcher)) means what was parsed, whatever the value holds."""
    m = Matcher(name, op, value)  # type: ignore[arg-type]
    assert parse_matcher(str(m)) == m


@given(_names, st.sampled_from(["=~", "!~"]), st.sampled_from(["a.*", "(x|y)+", "[0-9]{2}", "", ".*\\\\.*"]))
def test_a_regex_matcher_reads_back_as_itself(name: str, op: str, value: str) -> None:
    m = Matcher(name, op, value)  # type: ignore[arg-type]
    assert parse_matcher(str(m)) == m
