"""A real Prometheus and Alertmanager for the gate tests, fed by gauges the test sets.

    async with running_monitoring(tmp_path, monitoring_binaries_or_skip()) as mon:
        mon.signal.set("aiokcm_test_signal", 1.0, case="silenced")
        await mon.wait_alert_firing("TestSignalHigh", case="silenced")

Three things run, on free ports, with their files in one folder:
- a /metrics endpoint served by aiohttp in the test's event loop, exposing `mon.signal`'s gauges;
- Debian's `prometheus`, scraping it and evaluating its rules every second, with the alert
  `TestSignalHigh` (`aiokcm_test_signal > 0`, `for: 0s`, `severity="critical"`) and
  `TestInhibitor` (`aiokcm_test_inhibitor > 0`), sending to
- `prometheus-alertmanager`, clustering off, routing everything to a receiver that sends nothing,
  where `TestInhibitor` inhibits `TestSignalHigh` of the same `case`.

A `case` label on a gauge becomes a label of the series and of its alert, so tests that share one
stack (it takes a second or two to start) keep apart by giving each its own `case`.

The servers are processes (anyio.open_process, their output in log files beside their data), waited
for on `/-/ready` and stopped with SIGTERM, then SIGKILL after a grace. Without the binaries a
test is skipped, or failed when AIOKCM_REQUIRE_REAL=1 (CI installs them with
tests/support/install-monitoring.sh).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import aiohttp
import anyio
import pytest
from aiohttp import web
from anyio.abc import Process

from maintenancerollout.alertmanager import parse_matcher
from realcluster.ports import free_port
from tests.backends import REQUIRE_REAL

ALERT = "TestSignalHigh"
INHIBITOR = "TestInhibitor"
SIGNAL = "aiokcm_test_signal"
INHIBITOR_SIGNAL = "aiokcm_test_inhibitor"
READY_TIMEOUT = 30.0
STOP_GRACE = 10.0

#: The marks of a test module that uses the `monitoring` fixture (tests/maintenancerollout/conftest.py):
#: its loop, the worker it shares with the other such modules, and the task-leak guard on that loop.
#: pytest-asyncio warns about the module's plain functions carrying the loop's mark; they ignore it.
ON_SHARED_LOOP = [
    pytest.mark.asyncio(loop_scope="session"),
    pytest.mark.xdist_group("monitoring"),
    pytest.mark.usefixtures("no_leaked_tasks_on_shared_loop"),
    pytest.mark.filterwarnings(
        "ignore:The test <Function .* but it is not an async function:pytest.PytestWarning"
    ),
]


@dataclass(frozen=True)
class Binaries:
    prometheus: str
    alertmanager: str


def monitoring_binaries_or_skip() -> Binaries:
    """Prometheus's and Alertmanager's binaries; without them skip, or fail when the run requires them."""
    prometheus = shutil.which("prometheus")
    alertmanager = shutil.which("prometheus-alertmanager") or shutil.which("alertmanager")
    if prometheus and alertmanager:
        return Binaries(prometheus, alertmanager)
    missing = " and ".join(
        n for n, p in (("prometheus", prometheus), ("prometheus-alertmanager", alertmanager)) if not p
    )
    reason = f"{missing} not on PATH (tests/support/install-monitoring.sh installs them)"
    if os.environ.get(REQUIRE_REAL) == "1":
        pytest.fail(reason)
    pytest.skip(reason)


@dataclass
class Signals:
    """The gauges the /metrics endpoint serves, by name and labels."""

    values: dict[tuple[str, tuple[tuple[str, str], ...]], float] = field(default_factory=dict)

    def set(self, name: str, value: float, **labels: str) -> None:
        self.values[name, tuple(sorted(labels.items()))] = value

    def remove(self, name: str, **labels: str) -> None:
        self.values.pop((name, tuple(sorted(labels.items()))), None)

    def exposition(self) -> str:
        """Prometheus's text format, written by hand: gauges are all there is."""
        lines: list[str] = []
        for name in sorted({n for n, _ in self.values}):
            lines.append(f"# TYPE {name} gauge")
            for (n, labels), value in sorted(self.values.items()):
                if n == name:
                    inner = ",".join(f'{k}="{_escape(v)}"' for k, v in labels)
                    lines.append(f"{name}{{{inner}}} {_sample(value)}")
        return "\n".join(lines) + "\n"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _sample(value: float) -> str:
    if value != value:
        return "NaN"
    if value in (float("inf"), float("-inf")):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value))


@dataclass
class Monitoring:
    """The running stack: its addresses, the gauges, and what tests ask of Alertmanager."""

    prometheus_url: str
    alertmanager_url: str
    signal: Signals
    directory: Path

    async def query(self, promql: str) -> list[tuple[dict[str, str], float]]:
        """An instant vector straight from Prometheus's API: each series' labels and value."""
        doc = await _json("GET", f"{self.prometheus_url}/api/v1/query", params={"query": promql})
        return [(s["metric"], float(s["value"][1])) for s in doc["data"]["result"]]

    async def wait_value(self, promql: str, value: float, *, timeout: float = 20.0) -> None:
        """Until Prometheus answers `promql` with one series of `value` (the gauge was scraped)."""
        last: Any = None
        with anyio.move_on_after(timeout):
            while True:
                last = await self.query(promql)
                if [v for _, v in last] == [value]:
                    return
                await anyio.sleep(0.2)
        raise AssertionError(f"{promql} is not {value} after {timeout}s: {last}")

    async def alerts(self, *matchers: str) -> list[dict[str, Any]]:
        """The active, unsilenced, uninhibited alerts matching all `matchers`, as Alertmanager has them."""
        params = [("active", "true"), ("silenced", "false"), ("inhibited", "false")]
        params += [("filter", m) for m in matchers]
        doc = await _json("GET", f"{self.alertmanager_url}/api/v2/alerts", params=params)
        assert isinstance(doc, list)
        return doc

    async def wait_alert_firing(self, name: str, *, timeout: float = 30.0, **labels: str) -> dict[str, Any]:
        """Until Alertmanager has `name` (with these labels) active; the alert as it reports it."""
        matchers = [f'alertname="{name}"', *(f'{k}="{v}"' for k, v in labels.items())]
        with anyio.move_on_after(timeout):
            while True:
                found = await self.alerts(*matchers)
                if found:
                    return found[0]
                await anyio.sleep(0.2)
        raise AssertionError(f"{matchers} not firing after {timeout}s; logs in {self.directory}")

    async def wait_alert_resolved(self, name: str, *, timeout: float = 30.0, **labels: str) -> None:
        """Until Alertmanager has no active `name` with these labels (silenced and inhibited count too)."""
        params = [("active", "true"), ("filter", f'alertname="{name}"')]
        params += [("filter", f'{k}="{v}"') for k, v in labels.items()]
        found: Any = None
        with anyio.move_on_after(timeout):
            while True:
                found = await _json("GET", f"{self.alertmanager_url}/api/v2/alerts", params=params)
                if not found:
                    return
                await anyio.sleep(0.2)
        raise AssertionError(f"{name} {labels} still active after {timeout}s: {found}")

    async def silence(self, matchers: Sequence[str], duration: float = 600.0) -> str:
        """A silence of `matchers` (Alertmanager's syntax) for `duration` seconds; its id."""
        now = datetime.now(UTC)
        body = {
            "matchers": [_silence_matcher(m) for m in matchers],
            "startsAt": now.isoformat(),
            "endsAt": (now + timedelta(seconds=duration)).isoformat(),
            "createdBy": "aiokcm tests",
            "comment": "silenced by a test",
        }
        doc = await _json("POST", f"{self.alertmanager_url}/api/v2/silences", json_body=body)
        return str(doc["silenceID"])

    async def expire_silence(self, silence_id: str) -> None:
        await _json("DELETE", f"{self.alertmanager_url}/api/v2/silence/{silence_id}")


def _silence_matcher(text: str) -> dict[str, Any]:
    m = parse_matcher(text)
    return {"name": m.name, "value": m.value, "isRegex": "~" in m.op, "isEqual": not m.op.startswith("!")}


async def _json(method: str, url: str, *, params: Any = None, json_body: Any = None) -> Any:
    async with (
        aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as session,
        session.request(method, url, params=params, json=json_body) as resp,
    ):
        text = await resp.text()
        if resp.status >= 400:
            raise AssertionError(f"{method} {url}: HTTP {resp.status}: {text}")
        return json.loads(text) if text.strip() else None


# -- starting and stopping ---------------------------------------------------------------------


@asynccontextmanager
async def running_monitoring(directory: Path, binaries: Binaries) -> AsyncIterator[Monitoring]:
    """The exporter, Alertmanager and Prometheus, started in that order and stopped in reverse."""
    signal = Signals()
    async with AsyncExitStack() as stack:
        metrics_port = await stack.enter_async_context(_exporter(signal))
        am_port = await stack.enter_async_context(_alertmanager(directory, binaries.alertmanager))
        prom_port = await stack.enter_async_context(
            _prometheus(directory, binaries.prometheus, metrics_port=metrics_port, am_port=am_port)
        )
        mon = Monitoring(
            prometheus_url=f"http://127.0.0.1:{prom_port}",
            alertmanager_url=f"http://127.0.0.1:{am_port}",
            signal=signal,
            directory=directory,
        )
        # Prometheus applies its targets a few seconds after it starts: wait for the first scrape
        # here, once, rather than in whichever test comes first.
        await mon.wait_value('up{job="aiokcm-test"}', 1.0, timeout=READY_TIMEOUT)
        yield mon


@asynccontextmanager
async def _exporter(signal: Signals) -> AsyncIterator[int]:
    async def metrics(request: web.Request) -> web.Response:
        resp = web.Response(text=signal.exposition(), content_type="text/plain", charset="utf-8")
        resp.force_close()  # one connection per scrape: no handler task outlives a test
        return resp

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    try:
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        yield int(runner.addresses[0][1])
    finally:
        with anyio.CancelScope(shield=True):
            await runner.cleanup()


@asynccontextmanager
async def _alertmanager(directory: Path, binary: str) -> AsyncIterator[int]:
    config = {
        "route": {
            "receiver": "null",
            "group_by": ["alertname", "case"],
            "group_wait": "0s",
            "group_interval": "1s",
            "repeat_interval": "1h",
        },
        "receivers": [{"name": "null"}],
        "inhibit_rules": [
            {
                "source_matchers": [f'alertname="{INHIBITOR}"'],
                "target_matchers": [f'alertname="{ALERT}"'],
                "equal": ["case"],
            }
        ],
    }
    path = directory / "alertmanager.yml"
    path.write_text(json.dumps(config, indent=2))
    storage = directory / "alertmanager-data"
    storage.mkdir(exist_ok=True)

    def argv(port: int) -> list[str]:
        return [
            binary,
            f"--config.file={path}",
            f"--storage.path={storage}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--cluster.listen-address=",
            "--log.level=warn",
        ]

    async with _server("alertmanager", argv, directory) as port:
        yield port


@asynccontextmanager
async def _prometheus(directory: Path, binary: str, *, metrics_port: int, am_port: int) -> AsyncIterator[int]:
    rules = {
        "groups": [
            {
                "name": "aiokcm-test",
                "interval": "1s",
                "rules": [
                    {
                        "alert": ALERT,
                        "expr": f"{SIGNAL} > 0",
                        "for": "0s",
                        "labels": {"severity": "critical"},
                    },
                    {"alert": INHIBITOR, "expr": f"{INHIBITOR_SIGNAL} > 0", "labels": {"severity": "none"}},
                ],
            }
        ]
    }
    rules_path = directory / "rules.yml"
    rules_path.write_text(json.dumps(rules, indent=2))
    config = {
        "global": {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(rules_path)],
        "alerting": {"alertmanagers": [{"static_configs": [{"targets": [f"127.0.0.1:{am_port}"]}]}]},
        "scrape_configs": [
            {"job_name": "aiokcm-test", "static_configs": [{"targets": [f"127.0.0.1:{metrics_port}"]}]}
        ],
    }
    path = directory / "prometheus.yml"
    path.write_text(json.dumps(config, indent=2))

    def argv(port: int) -> list[str]:
        return [
            binary,
            f"--config.file={path}",
            f"--storage.tsdb.path={directory / 'prometheus-data'}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--rules.alert.resend-delay=1s",
            "--log.level=warn",
        ]

    async with _server("prometheus", argv, directory) as port:
        yield port


@asynccontextmanager
async def _server(name: str, argv: Callable[[int], list[str]], directory: Path) -> AsyncIterator[int]:
    """`argv(port)` started on a free port and ready; a port someone took meanwhile is tried again."""
    log_path = directory / f"{name}.log"
    for attempt in range(3):
        port = free_port()
        with log_path.open("ab") as log:
            process = await anyio.open_process(
                argv(port), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT
            )
        try:
            ready = await _wait_ready(process, f"http://127.0.0.1:{port}/-/ready")
        except BaseException:
            await _stop(process)
            raise
        if ready:
            break
        await _stop(process)
        if attempt == 2:
            raise RuntimeError(f"{name} exited with {process.returncode}; its log:\n{_tail(log_path)}")
    try:
        yield port
    finally:
        await _stop(process)


async def _wait_ready(process: Process, url: str) -> bool:
    """True once `url` answers 200, False when the process exits first."""
    with anyio.fail_after(READY_TIMEOUT):
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2)) as session:
            while process.returncode is None:
                try:
                    async with session.get(url) as resp:
                        if resp.status == 200:
                            return True
                except (aiohttp.ClientError, TimeoutError):
                    pass
                await anyio.sleep(0.05)
    return False


async def _stop(process: Process) -> None:
    """SIGTERM, and SIGKILL when it has not exited within the grace; shielded, so cancellation waits."""
    with anyio.CancelScope(shield=True):
        if process.returncode is None:
            process.terminate()
            with anyio.move_on_after(STOP_GRACE):
                await process.wait()
            if process.returncode is None:
                process.kill()
                await process.wait()
        await process.aclose()


def closed_port() -> int:
    """A port nothing listens on (as far as anything can tell): connecting to it is refused at once."""
    return free_port()


def _tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"
