"""The command line as a user meets it: bad input is one line and exit 2; `--help` names every flag."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest

from controller_manager import embedded
from controller_manager.cli import main
from tests.manager.logcapture import restore_logging  # noqa: F401 - autouse: main() configures logging


def _aiokcm(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"} | {"COLUMNS": "400"}
    return subprocess.run(
        [sys.executable, "-m", "controller_manager", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=False,
    )


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["run", "--no-such-flag"], "unrecognized arguments: --no-such-flag"),
        (["run", "--feature-gates=Bogus=true"], "unrecognized feature gate: Bogus"),
        (
            ["run", "--feature-gates=DeclarativeNodeMaintenance=maybe"],
            "invalid value of DeclarativeNodeMaintenance",
        ),
        (["run", "--controllers=*,-nope"], "'-nope' is not in the list of known controllers"),
        (["run", "--kube-api-qps=fast"], "invalid number 'fast'"),
        (
            ["run", "--leader-elect-lease-duration=5s", "--leader-elect-renew-deadline=10s"],
            "lease-duration must be greater than --leader-elect-renew-deadline",
        ),
        (["run", "--leader-elect-retry-period=forever"], "invalid duration 'forever'"),
        (["run", "--log-format=xml"], "invalid choice: 'xml'"),
        (["frobnicate"], "unknown command 'frobnicate'"),
        (["cluster", "up"], "--kubeconfig"),
        (
            ["run", "--kubeconfig=/nonexistent/kubeconfig"],
            "--kubeconfig /nonexistent/kubeconfig: no such file",
        ),
        (["run", "--leader-elect=false"], "no --kubeconfig, --master or $KUBECONFIG, and no in-cluster"),
        (["drain", "node-1", "--bogus"], "unrecognized arguments: --bogus"),
        (["drain", "node-1", "--timeout=-5s"], "must not be negative"),
        (["drain", "node-1", "--kubeconfig=/nonexistent/kc"], "--kubeconfig /nonexistent/kc: no such file"),
        (["lease", "status", "--kubeconfig=/nonexistent/kc"], "--kubeconfig /nonexistent/kc: no such file"),
        (["run", "--secure-port=70000"], "70000 must be between 0 and 65535, inclusive"),
        (["run", "--bind-address=not-an-ip"], "failed to parse IP: 'not-an-ip'"),
        (["run", "--kube-api-qps=nan"], "must be a finite number, got 'nan'"),
        (
            ["run", "--leader-elect=false", "--master=not a url"],
            "must be a URL or a host:port pair: 'not a url'",
        ),
    ],
)
def test_bad_command_lines_exit_2_with_one_line(args: list[str], needle: str) -> None:
    result = _aiokcm(*args)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert needle in lines[0]
    assert "Traceback" not in result.stderr


_EXEC_USER = (
    "  user:\n    exec:\n      command: {command}\n      apiVersion: client.authentication.k8s.io/v1\n"
)


def _kubeconfig(*, server: str = "http://127.0.0.1:9", user: str = "  user: {token: t}\n") -> str:
    return (
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        f"clusters:\n- name: c\n  cluster: {{server: '{server}'}}\n"
        "contexts:\n- name: c\n  context: {cluster: c, user: u}\n"
        f"users:\n- name: u\n{user}"
    )


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        ("", "invalid configuration: no configuration has been provided"),
        ("\n# only a comment\n", "invalid configuration: no configuration has been provided"),
        ("this is not a kubeconfig", "a kubeconfig is a mapping"),
        (
            "- name: c\n- name: d\n",
            "a kubeconfig is a mapping (apiVersion, kind: Config, clusters, users, contexts), not a list",
        ),
        ("clusters: [\n  {name: c\n", "yaml: "),
        ("clusters:\n  - name: c\n   cluster: {}\n", "yaml: line 3: "),
        (
            "users:\n- name: u\n  user:\n    token: s3cr3t-t0ken: oops\n",
            "yaml: line 4: mapping values are not allowed here",
        ),
        ("\x00\x01\x02garbage", "yaml: "),
        ("clusters: {name: c}\n", "clusters must be a list"),
        (
            _kubeconfig().replace("current-context: c", "current-context: other"),
            "context was not found for specified context: other",
        ),
        (_kubeconfig(server="not a url"), "must be a URL or a host:port pair: 'not a url'"),
        (_kubeconfig(server="https://"), "must be a URL or a host:port pair"),
        (_kubeconfig(server=""), "no server found for cluster 'c'"),
        (
            _kubeconfig(
                user=_EXEC_USER.format(command="/nonexistent/aws-iam-authenticator")
                + "      interactiveMode: Never\n"
            ),
            "exec: executable /nonexistent/aws-iam-authenticator not found. It looks like you are trying to use a "
            "client-go credential plugin that is not installed.",
        ),
        (
            _kubeconfig(
                user=_EXEC_USER.format(command="no-such-credential-plugin")
                + "      installHint: brew install it\n"
                "      interactiveMode: Never\n"
            ),
            "executable no-such-credential-plugin not found",
        ),
        (
            _kubeconfig(
                user=_EXEC_USER.format(command="true").replace(
                    "/v1\n", "/v1\n      interactiveMode: Always\n"
                )
            ),
            "exec plugin cannot support interactive mode: standard input is not a terminal",
        ),
        (
            _kubeconfig(user=_EXEC_USER.format(command="true")),
            "interactiveMode must be specified for u to use exec authentication plugin",
        ),
        (
            _kubeconfig(user="  user:\n    exec: {command: get-token}\n"),
            "apiVersion must be specified for u to use exec authentication plugin",
        ),
        (
            _kubeconfig(
                user="  user:\n    exec: {command: get-token, apiVersion: client.authentication.k8s.io/v1alpha1}\n"
            ),
            "exec plugin: invalid apiVersion 'client.authentication.k8s.io/v1alpha1'",
        ),
        (
            _kubeconfig(user="  user: {tokenFile: /nonexistent/token}\n"),
            "failed to read token file '/nonexistent/token'",
        ),
        (
            _kubeconfig(user="  user: {client-certificate-data: bm90IGEgY2VydA==}\n"),
            "client-key-data or client-key must be specified for u",
        ),
        (
            _kubeconfig(
                user="  user: {client-certificate-data: bm90IGEgY2VydA==, client-key-data: bm90IGEga2V5}\n"
            ),
            "failed parsing client key/certificate",
        ),
        (
            _kubeconfig(user="  user: {token: t, username: a, password: b}\n"),
            "more than one authentication method found for u",
        ),
    ],
)
def test_bad_kubeconfigs_exit_2_with_one_line(
    tmp_path: Path, content: str, needle: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """In process, through the same `main` the console script calls: many cases, milliseconds each."""
    path = tmp_path / "kubeconfig"
    path.write_text(content)
    for args in (["run", "--leader-elect=false"], ["lease", "status"]):
        assert main([*args, f"--kubeconfig={path}"]) == 2
        lines = capsys.readouterr().err.strip().splitlines()
        assert len(lines) == 1, lines
        assert needle in lines[0]
        assert "s3cr3t" not in lines[0]  # an error near a token never quotes the line


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["run", "--secure-port=-1"], "-1 must be between 0 and 65535, inclusive"),
        (["run", "--bind-address=localhost"], "failed to parse IP: 'localhost'"),
        (["run", "--kube-api-qps=inf"], "must be a finite number, got 'inf'"),
        (["run", "--kube-api-qps=-1"], "must be >= 0, got -1"),
        (["run", "--node-eviction-rate=NaN"], "must be a finite number, got 'NaN'"),
        (["run", "--leader-elect=false", "--master=ftp://example.com"], "must be a URL or a host:port pair"),
        (
            ["run", "--leader-elect=false", "--master=http://127.0.0.1:99999"],
            "must be a URL or a host:port pair",
        ),
        (["drain", "node-1", "--server=http://"], "must be a URL or a host:port pair"),
        (
            ["run", "--webhook-tls-cert-file=/x.crt"],
            "--webhook-tls-cert-file and --webhook-tls-private-key-file",
        ),
        (["run", "--eviction-surge-timeout=0s"], "--eviction-surge-timeout must be positive"),
        (["run", "--webhook-port=70000"], "70000 must be between 0 and 65535"),
        (["run", "--webhook-advertise-address=my-pod"], "failed to parse IP: 'my-pod'"),
    ],
)
def test_more_bad_flags_exit_2_with_one_line(
    args: list[str], needle: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(args) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    assert needle in lines[0]


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        ("", "no configuration has been provided"),
        ("- a\n- b\n", "not a list"),
        (
            _kubeconfig(
                user=_EXEC_USER.format(command="/nonexistent/gke-gcloud-auth-plugin")
                + "      interactiveMode: Never\n"
            ),
            "exec: executable /nonexistent/gke-gcloud-auth-plugin not found",
        ),
    ],
)
def test_bad_kubeconfig_as_a_user_meets_it(tmp_path: Path, content: str, needle: str) -> None:
    path = tmp_path / "kubeconfig"
    path.write_text(content)
    result = _aiokcm("run", f"--kubeconfig={path}")
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert needle in lines[0]


def test_a_port_in_use_is_one_line_and_exit_2() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = _aiokcm(
            "run",
            "--master=http://127.0.0.1:9",
            "--bind-address=127.0.0.1",
            f"--secure-port={port}",
            "--controllers=",
            "--leader-elect=false",
        )
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().splitlines() == [
        f"aiokcm run: failed to create listener: failed to listen on 127.0.0.1:{port}: address already in use"
    ]


KCM_FLAGS = [
    "--kubeconfig", "--master", "--controllers", "--feature-gates", "--kube-api-qps", "--kube-api-burst",
    "--leader-elect", "--leader-elect-lease-duration", "--leader-elect-renew-deadline",
    "--leader-elect-retry-period", "--leader-elect-resource-namespace", "--leader-elect-resource-name",
    "--bind-address", "--secure-port", "--log-format", "--v", "--embedded",
    "--concurrent-replicaset-syncs", "--concurrent-deployment-syncs", "--concurrent-disruption-syncs",
    "--concurrent-nodemaintenance-syncs", "--node-monitor-grace-period", "--node-monitor-period",
    "--node-startup-grace-period",
    "--node-eviction-rate", "--secondary-node-eviction-rate", "--large-cluster-size-threshold",
    "--unhealthy-zone-threshold", "--cert-dir", "--tls-cert-file", "--tls-private-key-file",
    "--authentication-kubeconfig", "--authentication-skip-lookup", "--authentication-tolerate-lookup-failure",
    "--authentication-token-webhook-cache-ttl", "--client-ca-file", "--authorization-kubeconfig",
    "--authorization-always-allow-paths", "--authorization-webhook-cache-authorized-ttl",
    "--authorization-webhook-cache-unauthorized-ttl",
]  # fmt: skip


def test_help_documents_every_flag_with_its_default() -> None:
    result = _aiokcm("run", "--help")
    assert result.returncode == 0
    text = " ".join(result.stdout.split())
    for flag in KCM_FLAGS:
        assert f"{flag} " in text, flag
    assert "(default: 15s)" in text and "(default: 10257)" in text and "(default: kube-system)" in text
    assert "serve HTTPS with authentication and authorization" in text
    assert "(default: /healthz,/readyz,/livez)" in text
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
    assert opts.node_lifecycle.node_monitor_grace_period == 50.0
    assert opts.node_lifecycle.node_eviction_rate == 0.5
    assert opts.node_lifecycle.large_cluster_size_threshold == 50
    assert opts.controllers == ("*",)
    off = parse_run_args(
        ["--leader-elect=false", "--controllers=*,-replicaset-controller"], default_registry()
    )
    assert not off.leader_election.enabled
    assert off.controllers == ("*", "-replicaset")
    # The eviction webhook: on port 9443 once its gate is on (with --embedded it is), 5m bound, 1m window.
    assert (opts.webhook.port, opts.webhook.service, opts.webhook.namespace) == (
        9443,
        "aiokcm-webhook",
        "aiokcm-system",
    )
    assert (opts.eviction_surge.surge_timeout, opts.eviction_surge.retry_window) == (300.0, 60.0)
    assert not opts.gates.enabled("EvictionSurge")
    assert parse_run_args(["--embedded"], default_registry()).gates.enabled("EvictionSurge")


def test_missing_embedded_plugin_is_one_clear_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(embedded, "entry_points", lambda group: [])
    assert main(["cluster", "up", "--kubeconfig", "/tmp/kc"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no entry point aiokcm.embedded:cluster" in err[0]
    assert "pip install 'aiokcm[embedded]'" in err[0]


INSTALL_LINE = (
    "the embedded local cluster is not installed ({why}); install the embedded extra "
    "(pip install 'aiokcm[embedded]') or use the demo image (docker build --target demo)"
)


@pytest.mark.parametrize(
    ("installed", "why"),
    [
        ([], "no entry point aiokcm.embedded:cluster"),
        # The production image: the entry point is declared but `localcluster` was left out.
        (
            [EntryPoint("cluster", "no_such_localcluster.embedded", "aiokcm.embedded")],
            "no_such_localcluster.embedded cannot be imported: No module named 'no_such_localcluster'",
        ),
    ],
)
def test_run_embedded_without_the_extra_is_one_line_exit_2(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    installed: list[EntryPoint],
    why: str,
) -> None:
    monkeypatch.setattr(embedded, "entry_points", lambda group: installed)
    assert main(["run", "--embedded", "--secure-port", "0"]) == 2
    out, err = capsys.readouterr()
    assert err.splitlines() == [f"aiokcm run --embedded: {INSTALL_LINE.format(why=why)}"]
    assert out == ""


def test_run_embedded_without_the_extras_packages_is_one_line_exit_2() -> None:
    """`pip install aiokcm` (no extra): `localcluster` is there, its dependencies are not."""
    script = (
        "import sys\n"
        "sys.modules['celpy'] = None  # as if cel-python were not installed: importing it fails\n"
        "from controller_manager.cli import main\n"
        "sys.exit(main(['run', '--embedded', '--secure-port', '0']))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=Path(__file__).resolve().parents[2],
        check=False,
    )
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.splitlines()
    assert line.startswith("aiokcm run --embedded: the embedded local cluster is not installed ("), line
    assert "celpy" in line and "pip install 'aiokcm[embedded]'" in line, line
    assert done.stdout == ""


def test_delegated_subcommand_missing_is_exit_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from controller_manager import cli

    monkeypatch.setitem(cli._DELEGATES, "lease", "controller_manager.no_such_cli")
    assert main(["lease", "status"]) == 2
    assert "no controller_manager.no_such_cli module" in capsys.readouterr().err


def test_a_bad_flag_is_answered_without_loading_the_api_client() -> None:
    """The parser and the controllers' flag configuration load without the API client, so a
    mistyped command line is answered at once, not after a second of imports."""
    probe = (
        "import sys\n"
        "from controller_manager.cli import main\n"
        "code = main(['run', '--no-such-flag'])\n"
        "loaded = sorted(m for m in ('kubernetes_asyncio', 'apiclient', 'controller_manager.app') if m in sys.modules)\n"
        "print(code, loaded)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.stdout.strip() == "2 []", done.stdout + done.stderr
    assert "unrecognized arguments: --no-such-flag" in done.stderr
