"""The Prometheus gate's client against a real Prometheus (tests/support/monitoring.py)."""

from __future__ import annotations

import socket
import time
from collections.abc import AsyncIterator, Iterator

import pytest
import pytest_asyncio
from aiohttp import web

from maintenancerollout.analysis import Result
from maintenancerollout.prometheus import measure, redact
from tests.support.monitoring import ON_SHARED_LOOP, SIGNAL, Monitoring, closed_port

pytestmark = ON_SHARED_LOOP


@pytest_asyncio.fixture(loop_scope="session")
async def error_rate(monitoring: Monitoring) -> AsyncIterator[str]:
    """Two series of the signal, 0.31 and 0.2, scraped: the query that returns them, biggest first."""
    monitoring.signal.set(SIGNAL, 0.31, case="prometheus", series="a")
    monitoring.signal.set(SIGNAL, 0.2, case="prometheus", series="b")
    query = f'sort_desc({SIGNAL}{{case="prometheus"}})'
    await monitoring.wait_value(f'count({SIGNAL}{{case="prometheus"}})', 2.0)
    await monitoring.wait_value(f'sum({SIGNAL}{{case="prometheus"}})', 0.51)
    yield query
    monitoring.signal.remove(SIGNAL, case="prometheus", series="a")
    monitoring.signal.remove(SIGNAL, case="prometheus", series="b")


async def test_a_vector_is_a_list_of_its_values(monitoring: Monitoring, error_rate: str) -> None:
    m = await measure(
        monitoring.prometheus_url,
        error_rate,
        success="len(result) == 2 && result[0] < 0.5",
        failure="result[0] >= 0.5",
    )
    assert (m.result, m.value, m.message) == (Result.SUCCESSFUL, "[0.31, 0.2]", "")


async def test_a_failure_condition_that_holds(monitoring: Monitoring, error_rate: str) -> None:
    """The design's example gate: result[0] >= 0.2 fails the node."""
    m = await measure(
        monitoring.prometheus_url, error_rate, success="result[0] < 0.05", failure="result[0] >= 0.2"
    )
    assert m.result is Result.FAILED
    assert m.value == "[0.31, 0.2]"
    assert 'failureCondition "result[0] >= 0.2"' in m.message


async def test_neither_condition_is_inconclusive(monitoring: Monitoring, error_rate: str) -> None:
    m = await measure(
        monitoring.prometheus_url, error_rate, success="result[0] < 0.05", failure="result[0] >= 0.9"
    )
    assert m.result is Result.INCONCLUSIVE


async def test_a_scalar_is_a_float(monitoring: Monitoring, error_rate: str) -> None:
    m = await measure(
        monitoring.prometheus_url,
        f'scalar({SIGNAL}{{case="prometheus", series="a"}})',
        success="result == 0.31",
        failure=None,
    )
    assert (m.result, m.value) == (Result.SUCCESSFUL, "0.31")


async def test_an_empty_vector_is_an_empty_list(monitoring: Monitoring) -> None:
    query = f'{SIGNAL}{{case="never-set"}}'
    m = await measure(monitoring.prometheus_url, query, success="len(result) == 0", failure=None)
    assert (m.result, m.value) == (Result.SUCCESSFUL, "[]")
    m = await measure(monitoring.prometheus_url, query, success="result[0] < 0.05", failure=None)
    assert m.result is Result.ERROR
    assert "no data" in m.message


async def test_nan_reaches_the_condition(monitoring: Monitoring) -> None:
    monitoring.signal.set(SIGNAL, float("nan"), case="nan")
    try:
        query = f'{SIGNAL}{{case="nan"}}'
        await monitoring.wait_value(f"count({query})", 1.0)
        m = await measure(monitoring.prometheus_url, query, success="!isNaN(result[0])", failure=None)
        assert (m.result, m.value) == (Result.FAILED, "[NaN]")
    finally:
        monitoring.signal.remove(SIGNAL, case="nan")


async def test_a_query_prometheus_refuses_is_an_error_with_its_message(monitoring: Monitoring) -> None:
    m = await measure(
        monitoring.prometheus_url, "sum(rate(http_errors_total[5m])", success="true", failure=None
    )
    assert m.result is Result.ERROR
    assert "refused the query (HTTP 400, bad_data)" in m.message
    assert "parse error" in m.message  # Prometheus's own words


@pytest.mark.parametrize(
    ("query", "kind"), [(f"{SIGNAL}[1m]", "range vector"), ('"a string"', "string")], ids=["matrix", "string"]
)
async def test_results_a_gate_cannot_judge_are_errors(monitoring: Monitoring, query: str, kind: str) -> None:
    m = await measure(monitoring.prometheus_url, query, success="true", failure=None)
    assert m.result is Result.ERROR
    assert f"returned a {kind}" in m.message


async def test_a_closed_port_is_an_error_at_once() -> None:
    address = f"http://127.0.0.1:{closed_port()}"
    started = time.monotonic()
    m = await measure(address, "up", success="true", failure=None)
    assert time.monotonic() - started < 2.0
    assert m.result is Result.ERROR
    assert f"Prometheus at {address} unreachable" in m.message


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port that accepts connections (the kernel does, from its backlog) but never answers."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        s.listen(8)
        yield int(s.getsockname()[1])


async def test_a_server_that_never_answers_times_out(silent_port: int) -> None:
    started = time.monotonic()
    m = await measure(f"http://127.0.0.1:{silent_port}", "up", success="true", failure=None, timeout=0.5)
    assert 0.4 < time.monotonic() - started < 3.0
    assert m.result is Result.ERROR
    assert "did not answer within 0.5s" in m.message


async def test_an_http_error_is_an_error(monitoring: Monitoring) -> None:
    """Alertmanager is not Prometheus: its 404 page is quoted."""
    m = await measure(monitoring.alertmanager_url, "up", success="true", failure=None)
    assert m.result is Result.ERROR
    assert "answered HTTP 404" in m.message


@pytest_asyncio.fixture(loop_scope="session")
async def not_prometheus() -> AsyncIterator[str]:
    """A server that answers every query with 200 and a body that is not Prometheus's JSON."""

    async def answer(request: web.Request) -> web.Response:
        resp = web.Response(text="<html>a login page</html>", content_type="text/html")
        resp.force_close()
        return resp

    app = web.Application()
    app.router.add_get("/api/v1/query", answer)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}"
    finally:
        await runner.cleanup()


async def test_a_body_that_is_not_json_is_an_error(not_prometheus: str) -> None:
    m = await measure(not_prometheus, "up", success="true", failure=None)
    assert m.result is Result.ERROR
    assert "not its API's JSON" in m.message
    assert "a login page" in m.message


async def test_credentials_never_show_in_a_message(monitoring: Monitoring) -> None:
    """Basic auth in the address is sent, but neither the user nor the password is ever written out."""
    port = monitoring.prometheus_url.rsplit(":", 1)[1]
    for address in (
        f"http://aiokcm:s3cr3t-pw@127.0.0.1:{port}",
        f"http://aiokcm:s3cr3t-pw@127.0.0.1:{closed_port()}",
        f"http://aiokcm:s3cr3t-pw@127.0.0.1:{port}/no-such-prefix",
    ):
        for query in ("up", "sum(", '"s3cr3t-pw"'):
            m = await measure(address, query, success="result[0] > 1", failure=None)
            assert "s3cr3t-pw" not in m.message + m.value, m
            assert "aiokcm:" not in m.message, m
    m = await measure(f"http://aiokcm:s3cr3t-pw@127.0.0.1:{closed_port()}", "up", success=None, failure=None)
    assert "http://127.0.0.1:" in m.message


async def test_the_query_is_sent_with_the_credentials(monitoring: Monitoring, error_rate: str) -> None:
    port = monitoring.prometheus_url.rsplit(":", 1)[1]
    m = await measure(
        f"http://aiokcm:s3cr3t-pw@127.0.0.1:{port}/", error_rate, success="len(result) == 2", failure=None
    )
    assert m.result is Result.SUCCESSFUL


@pytest.mark.parametrize(
    ("address", "shown"),
    [
        ("http://user:pass@host:9090", "http://host:9090"),
        ("https://user@host:9090/prometheus", "https://host:9090/prometheus"),
        ("http://u:p@ss:w@rd@host:9090/x?y=@z", "http://host:9090/x?y=@z"),
        ("http://host:9090", "http://host:9090"),
        ("http://host:9090/path@v1", "http://host:9090/path@v1"),
        ("user:pass@host:9090", "host:9090"),
        ("", ""),
    ],
)
def test_redact(address: str, shown: str) -> None:
    assert redact(address) == shown


@pytest.mark.parametrize("address", ["prometheus:9090", "ftp://host/x", "http://", "not a url at all"])
async def test_an_address_that_is_no_http_url_is_an_error(address: str) -> None:
    m = await measure(address, "up", success="true", failure=None)
    assert m.result is Result.ERROR
    assert "invalid Prometheus address" in m.message
