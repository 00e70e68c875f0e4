"""The command line as a user meets it: bad input is one line and exit 2; `--help` names every flag."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from controller_manager import embedded
from controller_manager.cli import main


def _aiokcm(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"} | {"COLUMNS": "400"}
    return subprocess.run([sys.executable, "-m", "controller_manager", *args], capture_output=True, text=True,
                          timeout=60, env=env, check=False)


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["run", "--no-such-flag"], "unrecognized arguments: --no-such-flag"),
        (["run", "--feature-gates=Bogus=true"], "unrecognized feature gate: Bogus"),
        (["run", "--feature-gates=DeclarativeNodeMaintenance=maybe"], "invalid value of DeclarativeNodeMaintenance"),
        (["run", "--controllers=*,-nope"], "'-nope' is not in the list of known controllers"),
        (["run", "--kube-api-qps=fast"], "invalid number 'fast'"),
        (["run", "--leader-elect-lease-duration=5s", "--leader-elect-renew-deadline=10s"],
         "lease-duration must be greater than --leader-elect-renew-deadline"),
        (["run", "--leader-elect-retry-period=forever"], "invalid duration 'forever'"),
        (["run", "--log-format=xml"], "invalid choice: 'xml'"),
        (["frobnicate"], "unknown command 'frobnicate'"),
        (["cluster", "up"], "--kubeconfig"),
        (["run", "--kubeconfig=/nonexistent/kubeconfig"], "--kubeconfig /nonexistent/kubeconfig: no such file"),
        (["run", "--leader-elect=false"], "no --kubeconfig, --master or $KUBECONFIG, and no in-cluster"),
        (["drain", "node-1", "--bogus"], "unrecognized arguments: --bogus"),
        (["drain", "node-1", "--timeout=-5s"], "must not be negative"),
        (["drain", "node-1", "--kubeconfig=/nonexistent/kc"], "--kubeconfig /nonexistent/kc: no such file"),
        (["lease", "status", "--kubeconfig=/nonexistent/kc"], "--kubeconfig /nonexistent/kc: no such file"),
    ],
)
def test_bad_command_lines_exit_2_with_one_line(args: list[str], needle: str) -> None:
    result = _aiokcm(*args)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert needle in lines[0]
    assert "Traceback" not in result.stderr


KCM_FLAGS = [
    "--kubeconfig", "--master", "--controllers", "--feature-gates", "--kube-api-qps", "--kube-api-burst",
    "--leader-elect", "--leader-elect-lease-duration", "--leader-elect-renew-deadline",
    "--leader-elect-retry-period", "--leader-elect-resource-namespace", "--leader-elect-resource-name",
    "--bind-address", "--secure-port", "--log-format", "--v", "--embedded",
    "--concurrent-replicaset-syncs", "--concurrent-deployment-syncs", "--concurrent-disruption-syncs",
    "--concurrent-nodemaintenance-syncs", "--node-monitor-grace-period", "--node-monitor-period",
    "--node-startup-grace-period",
    "--node-eviction-rate", "--secondary-node-eviction-rate", "--large-cluster-size-threshold",
    "--unhealthy-zone-threshold",
]  # fmt: skip


def test_help_documents_every_flag_with_its_default() -> None:
    result = _aiokcm("run", "--help")
    assert result.returncode == 0
    text = " ".join(result.stdout.split())
    for flag in KCM_FLAGS:
        assert f"{flag} " in text, flag
    assert "(default: 15s)" in text and "(default: 10257)" in text and "(default: kube-system)" in text
    assert "plain HTTP" in text
    assert "DeclarativeNodeMaintenance=true|false (ALPHA - default=false)" in text
    assert "replicaset-controller=replicaset" in text


def test_parsed_options_carry_kcm_defaults() -> None:
    from controller_manager.options import parse_run_args
    from controller_manager.registry import default_registry

    opts = parse_run_args(["--concurrent-disruption-syncs=3", "--node-eviction-rate=0.5"], default_registry())
    assert (opts.kube_api_qps, opts.kube_api_burst, opts.secure_port) == (20.0, 30, 10257)
    le = opts.leader_election
    assert (le.enabled, le.lease_duration, le.renew_deadline, le.retry_period) == (True, 15.0, 10.0, 2.0)
    assert (le.namespace, le.name) == ("kube-system", "aiokcm")
    assert dict(opts.concurrent_syncs) == {"disruption": 3}  # unset flags leave the class default
    assert opts.extra["node_monitor_grace_period"] == 50.0
    assert opts.extra["node_eviction_rate"] == 0.5
    assert opts.extra["large_cluster_size_threshold"] == 50
    assert opts.controllers == ("*",)
    off = parse_run_args(["--leader-elect=false", "--controllers=*,-replicaset-controller"], default_registry())
    assert not off.leader_election.enabled
    assert off.controllers == ("*", "-replicaset")


def test_missing_embedded_plugin_is_one_clear_line(monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(embedded, "entry_points", lambda group: [])
    assert main(["cluster", "up", "--kubeconfig", "/tmp/kc"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "aiokcm.embedded:cluster is not installed" in err[0]


def test_delegated_subcommand_missing_is_exit_2(monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    from controller_manager import cli

    monkeypatch.setitem(cli._DELEGATES, "lease", "controller_manager.no_such_cli")
    assert main(["lease", "status"]) == 2
    assert "no controller_manager.no_such_cli module" in capsys.readouterr().err
