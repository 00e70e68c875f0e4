"""A real Kubernetes control plane on loopback: etcd, kube-apiserver, kube-scheduler and, optionally,
kube-controller-manager, started from the binaries in an envtest-style assets folder.

Why processes and not containers: the binaries are all a test needs, start in ~3 s and leave
nothing behind but a temporary folder. Every process runs in its own session so `stop()` can
kill it with whatever it spawned; ports are picked free at start, so several control planes
(the differential suite runs two side by side) never collide.

Fault controls (`kill`, `start`, `restart`) act on one component at a time and keep its data
and ports, so a killed kube-apiserver comes back at the same address and a restarted etcd keeps
its store: what a client sees during a real control-plane restart.

Users, from a static token file: `admin` (system:masters), `system:kube-controller-manager`,
`system:kube-scheduler`, and `kubelet` (system:masters, for the simulated kubelets). RBAC is
enforced, so a kubeconfig made by `kubeconfig_for_token` for a service account gets exactly
what its bindings grant.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import ssl
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from realcluster.assets import Assets
from realcluster.ports import free_port

# KCM's controllers that aiokcm replaces; the rest of KCM (garbage collector, namespaces,
# service accounts, ...) keeps running beside aiokcm as it would on a real cluster.
REPLACED_BY_AIOKCM = ("replicaset", "deployment", "disruption", "nodelifecycle")
KCM_BESIDE_AIOKCM = "*," + ",".join(f"-{name}" for name in REPLACED_BY_AIOKCM)

_USERS = {
    "admin": ("admin", "system:masters"),
    "kcm": ("system:kube-controller-manager", ""),
    "sched": ("system:kube-scheduler", ""),
    "kubelet": ("kubelet", "system:masters"),
}


_PORT_ATTEMPTS = 3


class ControlPlaneError(RuntimeError):
    """A component did not start or did not become ready; the message ends with its log's tail."""


def _scratch_folder() -> Path:
    """On tmpfs where there is one: etcd's fsyncs are most of a test's API latency on disk."""
    shm = "/dev/shm"
    return Path(tempfile.mkdtemp(prefix="realcluster-", dir=shm if os.path.isdir(shm) else None))


@dataclass
class _Component:
    name: str
    argv: list[str]
    log: Path
    process: subprocess.Popen[bytes] | None = None

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None


@dataclass
class ControlPlane:
    """Start with `start()` (or `with ControlPlane(...) as plane`), stop with `stop()`."""

    assets: Assets
    kcm_controllers: str | None = KCM_BESIDE_AIOKCM
    scheduler: bool = True
    apiserver_flags: Sequence[str] = ()
    # Extra kube-controller-manager flags (e.g. short node-monitor grace periods for a test).
    kcm_flags: Sequence[str] = ()
    # More token users, name -> group ("" for none); each gets `<name>.kubeconfig`.
    extra_users: dict[str, str] = field(default_factory=dict)
    # Write kube-apiserver's audit log (metadata level) to `audit.log`: who sent which request.
    audit: bool = False
    # Whether the audit log records reads too. A test that compares writes leaves them out: its
    # polls are most of the server's requests, and each logged event costs the server an encode
    # and the test a parse.
    audit_reads: bool = True
    workdir: Path = field(default_factory=lambda: _scratch_folder())
    api_port: int = field(default_factory=free_port)
    etcd_port: int = field(default_factory=free_port)
    etcd_peer_port: int = field(default_factory=free_port)
    _components: dict[str, _Component] = field(default_factory=dict)
    _tokens: dict[str, str] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.api_port}"

    @property
    def ca_file(self) -> Path:
        return self.workdir / "certs" / "apiserver.crt"

    def kubeconfig(self, user: str = "admin") -> Path:
        return self.workdir / f"{user}.kubeconfig"

    # -- lifecycle ----------------------------------------------------------------------

    def __enter__(self) -> ControlPlane:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self, *, timeout: float = 60.0) -> None:
        """Start the plane; a port another process took between its probe and our bind (see
        `realcluster.ports`) is given up for fresh ones, a few times, instead of failing the test."""
        for attempt in range(_PORT_ATTEMPTS):
            try:
                self._start_once(timeout)
                return
            except ControlPlaneError as exc:
                if "address already in use" not in str(exc) or attempt == _PORT_ATTEMPTS - 1:
                    raise
                self.api_port, self.etcd_port, self.etcd_peer_port = free_port(), free_port(), free_port()
                self._components.clear()

    def _start_once(self, timeout: float) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        try:
            self._prepare()
            self.start_component("etcd")
            self.start_component("kube-apiserver")
            self.wait_ready(timeout=timeout)
            if self.scheduler:
                self.start_component("kube-scheduler")
            if self.kcm_controllers:
                self.start_kcm(self.kcm_controllers, *self.kcm_flags)
        except BaseException:
            self.stop()
            raise

    def stop(self, *, remove: bool = True, grace: float = 2.0) -> None:
        """SIGTERM to every component at once, SIGKILL to what is still up `grace` seconds later.

        kube-scheduler 1.24 sits out a SIGTERM for 10 s; nothing a test reads is lost by not
        waiting for it, since the plane's data goes with it.
        """
        running = [c.process for c in reversed(list(self._components.values())) if c.process is not None]
        for proc in running:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        for proc in running:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        for name in reversed(list(self._components)):
            self.kill(name)
        if remove:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def _prepare(self) -> None:
        key = self.workdir / "sa.key"
        if not key.exists():
            subprocess.run(["openssl", "genrsa", "-out", str(key), "2048"], check=True, capture_output=True)
        lines = []
        users = dict(_USERS) | {user: (user, group) for user, group in self.extra_users.items()}
        for user, (name, group) in users.items():
            token = self._tokens.setdefault(user, secrets.token_hex(16))
            lines.append(f"{token},{name},{user}" + (f",{group}" if group else ""))
        (self.workdir / "tokens.csv").write_text("\n".join(lines) + "\n")
        self._define_components()

    def _define_components(self) -> None:
        a, d = self.assets, self.workdir
        self._define(
            "etcd",
            [
                str(a.etcd),
                "--data-dir",
                str(d / "etcd"),
                "--listen-client-urls",
                f"http://127.0.0.1:{self.etcd_port}",
                "--advertise-client-urls",
                f"http://127.0.0.1:{self.etcd_port}",
                "--listen-peer-urls",
                f"http://127.0.0.1:{self.etcd_peer_port}",
                "--initial-advertise-peer-urls",
                f"http://127.0.0.1:{self.etcd_peer_port}",
                "--initial-cluster",
                f"default=http://127.0.0.1:{self.etcd_peer_port}",
            ],
        )
        self._define(
            "kube-apiserver",
            [
                str(a.kube_apiserver),
                "--etcd-servers",
                f"http://127.0.0.1:{self.etcd_port}",
                "--bind-address",
                "127.0.0.1",
                "--advertise-address",
                "127.0.0.1",
                "--secure-port",
                str(self.api_port),
                "--cert-dir",
                str(d / "certs"),
                "--token-auth-file",
                str(d / "tokens.csv"),
                "--authorization-mode",
                "Node,RBAC",
                "--service-account-issuer",
                "https://kubernetes.default.svc",
                "--service-account-key-file",
                str(d / "sa.key"),
                "--service-account-signing-key-file",
                str(d / "sa.key"),
                "--service-cluster-ip-range",
                "10.96.0.0/16",
                "--feature-gates",
                "CustomResourceValidationExpressions=true",
                "--max-requests-inflight",
                "800",
                "--max-mutating-requests-inflight",
                "400",
                "--v",
                "1",
                *self._audit_flags(),
                *self.apiserver_flags,
            ],
        )
        if self.scheduler:
            if a.kube_scheduler is None:
                raise ControlPlaneError(f"no kube-scheduler in {a.folder}")
            self._define(
                "kube-scheduler",
                [
                    str(a.kube_scheduler),
                    "--kubeconfig",
                    str(self.kubeconfig("sched")),
                    "--authentication-kubeconfig",
                    str(self.kubeconfig("sched")),
                    "--authorization-kubeconfig",
                    str(self.kubeconfig("sched")),
                    "--leader-elect=false",
                    "--secure-port",
                    "0",
                    "--v",
                    "1",
                ],
            )
        for user in self._tokens:
            self.write_kubeconfig(self.kubeconfig(user), self._tokens[user])

    @property
    def audit_log(self) -> Path:
        return self.workdir / "audit.log"

    def _audit_flags(self) -> list[str]:
        if not self.audit:
            return []
        policy = self.workdir / "audit-policy.yaml"
        policy.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "audit.k8s.io/v1",
                    "kind": "Policy",
                    "omitStages": ["RequestReceived"],
                    "rules": [
                        *([] if self.audit_reads else [{"level": "None", "verbs": ["get", "list", "watch"]}]),
                        {"level": "Metadata"},
                    ],
                }
            )
        )
        return [
            "--audit-policy-file",
            str(policy),
            "--audit-log-path",
            str(self.audit_log),
            "--audit-log-format",
            "json",
            # Each event written before the request's answer: a batch still in memory when a
            # fault test SIGKILLs kube-apiserver would lose writes that were made.
            "--audit-log-mode",
            "blocking",
        ]

    def pid(self, name: str) -> int | None:
        comp = self._components.get(name)
        return comp.process.pid if comp is not None and comp.process is not None else None

    def _define(self, name: str, argv: list[str]) -> None:
        self._components[name] = _Component(name, argv, self.workdir / f"{name}.log")

    def start_kcm(self, controllers: str, *extra: str) -> None:
        """Start (or restart with another controller list) the real kube-controller-manager."""
        if self.assets.kube_controller_manager is None:
            raise ControlPlaneError(f"no kube-controller-manager in {self.assets.folder}")
        self.kill("kube-controller-manager")
        self._define(
            "kube-controller-manager",
            [
                str(self.assets.kube_controller_manager),
                "--kubeconfig",
                str(self.kubeconfig("kcm")),
                "--leader-elect=false",
                "--secure-port",
                "0",
                "--controllers",
                controllers,
                "--service-account-private-key-file",
                str(self.workdir / "sa.key"),
                "--root-ca-file",
                str(self.ca_file),
                "--use-service-account-credentials=true",
                "--kube-api-qps",
                "20",
                "--kube-api-burst",
                "30",
                "--v",
                "1",
                *extra,
            ],
        )
        self.start_component("kube-controller-manager")

    def apiserver_disabled_admission(self) -> set[str]:
        """Admission plugins switched off by `apiserver_flags`, lower-cased."""
        off: set[str] = set()
        for flag in self.apiserver_flags:
            if flag.startswith("--disable-admission-plugins="):
                off |= {name.strip().lower() for name in flag.split("=", 1)[1].split(",")}
        return off

    # -- components -----------------------------------------------------------------------

    def start_component(self, name: str) -> None:
        comp = self._components[name]
        if comp.running:
            return
        with comp.log.open("ab") as log:
            comp.process = subprocess.Popen(
                comp.argv,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                cwd=self.workdir,
            )

    def kill(self, name: str, *, sig: signal.Signals = signal.SIGKILL, timeout: float = 10.0) -> None:
        """Stop one component (SIGKILL by default: a crash, not a clean shutdown) and reap it."""
        comp = self._components.get(name)
        if comp is None or comp.process is None:
            return
        proc = comp.process
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, sig)
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=timeout)
        comp.process = None

    def restart(self, name: str, *, down_for: float = 0.0) -> None:
        self.kill(name)
        if down_for:
            time.sleep(down_for)
        self.start_component(name)

    def running(self, name: str) -> bool:
        comp = self._components.get(name)
        return comp is not None and comp.running

    def log_tail(self, name: str, lines: int = 20) -> str:
        comp = self._components.get(name)
        if comp is None or not comp.log.exists():
            return ""
        return "\n".join(comp.log.read_text(errors="replace").splitlines()[-lines:])

    # -- readiness ------------------------------------------------------------------------

    def ready(self) -> bool:
        """kube-apiserver's /readyz answers ok (its post-start hooks, RBAC bootstrap included, are done)."""
        if not self.ca_file.exists():
            return False
        context = ssl.create_default_context(cafile=str(self.ca_file))
        request = urllib.request.Request(
            self.url + "/readyz", headers={"Authorization": f"Bearer {self._tokens['admin']}"}
        )
        try:
            with urllib.request.urlopen(request, context=context, timeout=2) as response:
                return bool(response.status == 200)
        except (urllib.error.URLError, OSError, ssl.SSLError):
            return False

    def wait_ready(self, *, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.ready():
                return
            for name in ("etcd", "kube-apiserver"):
                comp = self._components.get(name)
                if comp is not None and comp.process is not None and comp.process.poll() is not None:
                    raise ControlPlaneError(
                        f"{name} exited with {comp.process.returncode}:\n{self.log_tail(name)}"
                    )
            time.sleep(0.2)
        raise ControlPlaneError(
            f"kube-apiserver not ready after {timeout:.0f} s:\n{self.log_tail('kube-apiserver')}"
        )

    # -- credentials ----------------------------------------------------------------------

    def write_kubeconfig(self, path: Path, token: str, *, namespace: str | None = None) -> Path:
        context: dict[str, str] = {"cluster": "real", "user": "user"}
        if namespace:
            context["namespace"] = namespace
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {"name": "real", "cluster": {"server": self.url, "certificate-authority": str(self.ca_file)}}
            ],
            "users": [{"name": "user", "user": {"token": token}}],
            "contexts": [{"name": "real", "context": context}],
            "current-context": "real",
        }
        path.write_text(yaml.safe_dump(config))
        path.chmod(0o600)
        return path

    def tokens(self) -> dict[str, str]:
        """The static users' bearer tokens, by user: what must never show up in a log."""
        return dict(self._tokens)

    def kubeconfig_for_token(self, name: str, token: str) -> Path:
        """A kubeconfig for another identity (e.g. a service account's token), in the work folder."""
        return self.write_kubeconfig(self.workdir / f"{name}.kubeconfig", token)
