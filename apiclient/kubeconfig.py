"""Read kubeconfig files as client-go's `clientcmd` does, into one selected cluster and user.

Why not kubernetes_asyncio's loader: it writes inline certificates and keys to temporary files
(left behind when the process is killed), runs an exec plugin once and never again, reads a
`tokenFile` once, lets the last file's `current-context` win, and fails on a malformed file with
an assertion or a `TypeError`. Here, as in client-go:

- `$KUBECONFIG` may list several files: for clusters, users and contexts the first file that
  names an entry wins, and so does the first non-empty `current-context`; listed files that do
  not exist are skipped, an explicit `--kubeconfig` must exist.
- Relative paths (certificate-authority, client-certificate, client-key, tokenFile, and an exec
  command that contains a `/`) are resolved against the directory of the file that named them.
- `*-data` fields are base64 and stay in memory.
- Validation gives client-go's messages, so every mistake is one line a user can act on.
"""

from __future__ import annotations

import base64
import binascii
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import yaml

EXEC_API_VERSIONS = ("client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1")
INTERACTIVE_MODES = ("Never", "IfAvailable", "Always")


class KubeconfigError(ValueError):
    """The connection settings cannot work as written; the message is one line for the user."""


@dataclass(frozen=True)
class ExecConfig:
    """A user's `exec` stanza (client-go's `clientcmdapi.ExecConfig`)."""

    command: str
    api_version: str
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    interactive_mode: str = "IfAvailable"
    provide_cluster_info: bool = False
    install_hint: str = ""
    # The cluster's `extensions` entry named client.authentication.k8s.io/exec, passed on as spec.cluster.config.
    cluster_config: Any = None


@dataclass(frozen=True)
class ClusterInfo:
    server: str
    ca_data: bytes | None = None
    insecure_skip_tls_verify: bool = False
    tls_server_name: str | None = None
    proxy_url: str | None = None
    disable_compression: bool = False


@dataclass(frozen=True)
class UserInfo:
    token: str | None = None
    token_file: str | None = None
    cert_data: bytes | None = field(default=None, repr=False)
    key_data: bytes | None = field(default=None, repr=False)
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    exec: ExecConfig | None = None
    auth_provider: Mapping[str, Any] | None = field(default=None, repr=False)


@dataclass(frozen=True)
class Kubeconfig:
    """The selected context's cluster and user, every path resolved and every file read."""

    context: str
    cluster: ClusterInfo
    user: UserInfo
    namespace: str | None = None


def _yaml_error(exc: yaml.YAMLError) -> str:
    """Go's yaml error shape ("yaml: line 3: ..."), without PyYAML's snippet of the offending line:
    that line may hold a token or a key."""
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or type(exc).__name__
    return f"yaml: line {mark.line + 1}: {problem}" if mark is not None else f"yaml: {problem}"


def _read_yaml(path: str) -> dict[str, Any]:
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as exc:
        raise KubeconfigError(f"error loading config file {path!r}: {exc.strerror or exc}") from None
    if not data.strip():
        return {}
    try:
        loaded = yaml.safe_load(data)
    except yaml.YAMLError as exc:
        raise KubeconfigError(f"error loading config file {path!r}: {_yaml_error(exc)}") from None
    if loaded is None:
        return {}
    if not isinstance(loaded, dict):
        raise KubeconfigError(
            f"error loading config file {path!r}: a kubeconfig is a mapping (apiVersion, kind: Config, "
            f"clusters, users, contexts), not a {type(loaded).__name__}"
        )
    for key in ("clusters", "users", "contexts"):
        entries = loaded.get(key)
        if entries is not None and not isinstance(entries, list):
            raise KubeconfigError(f"error loading config file {path!r}: {key} must be a list")
        for entry in entries or []:
            if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
                raise KubeconfigError(
                    f"error loading config file {path!r}: every entry of {key} needs a name"
                )
            inner = entry.get(key[:-1])
            if inner is not None and not isinstance(inner, dict):
                raise KubeconfigError(
                    f"error loading config file {path!r}: {key[:-1]} {entry['name']!r} must be a mapping"
                )
    return loaded


@dataclass
class _Merged:
    clusters: dict[str, tuple[dict[str, Any], str]] = field(default_factory=dict)
    users: dict[str, tuple[dict[str, Any], str]] = field(default_factory=dict)
    contexts: dict[str, dict[str, Any]] = field(default_factory=dict)
    current_context: str = ""

    def add(self, doc: Mapping[str, Any], base: str) -> None:
        for key, target in (("clusters", self.clusters), ("users", self.users)):
            for entry in doc.get(key) or []:
                target.setdefault(entry["name"], (entry.get(key[:-1]) or {}, base))
        for entry in doc.get("contexts") or []:
            self.contexts.setdefault(entry["name"], entry.get("context") or {})
        if not self.current_context and isinstance(doc.get("current-context"), str):
            self.current_context = doc["current-context"]

    def empty(self) -> bool:
        return not (self.clusters or self.users or self.contexts or self.current_context)


def kubeconfig_paths(explicit: str | None) -> list[str]:
    """`--kubeconfig` alone, else every path in `$KUBECONFIG` that exists (none: empty list)."""
    if explicit:
        if not os.path.isfile(explicit):
            raise KubeconfigError(f"--kubeconfig {explicit}: no such file")
        return [explicit]
    listed = [p for p in os.environ.get("KUBECONFIG", "").split(os.pathsep) if p]
    return [os.path.expanduser(p) for p in listed if os.path.isfile(os.path.expanduser(p))]


def _resolve(path: Any, base: str) -> str:
    text = str(path)
    return text if os.path.isabs(text) else os.path.join(base, text)


def _b64(value: Any, what: str) -> bytes:
    try:
        return base64.b64decode(str(value), validate=True)
    except (binascii.Error, ValueError):
        raise KubeconfigError(f"{what} is not valid base64") from None


def _file_or_data(entry: Mapping[str, Any], name: str, base: str, owner: str) -> bytes | None:
    data, path = entry.get(f"{name}-data"), entry.get(name)
    if data:
        return _b64(data, f"{name}-data for {owner}")
    if path:
        resolved = _resolve(path, base)
        try:
            with open(resolved, "rb") as f:
                return f.read()
        except OSError as exc:
            raise KubeconfigError(
                f"unable to read {name} {resolved} for {owner} due to {exc.strerror or exc}"
            ) from None
    return None


def _exec_config(raw: Any, user: str, base: str, cluster_ext: Any) -> ExecConfig:
    if not isinstance(raw, dict):
        raise KubeconfigError(f"exec for {user} must be a mapping")
    command = str(raw.get("command") or "")
    api_version = str(raw.get("apiVersion") or "")
    if not command:
        raise KubeconfigError(f"command must be specified for {user} to use exec authentication plugin")
    if not api_version:
        raise KubeconfigError(f"apiVersion must be specified for {user} to use exec authentication plugin")
    if api_version not in EXEC_API_VERSIONS:
        raise KubeconfigError(f"exec plugin: invalid apiVersion {api_version!r}")
    mode = raw.get("interactiveMode") or ("IfAvailable" if api_version.endswith("v1beta1") else "")
    if not mode:
        raise KubeconfigError(
            f"interactiveMode must be specified for {user} to use exec authentication plugin"
        )
    if mode not in INTERACTIVE_MODES:
        raise KubeconfigError(f"invalid interactiveMode for {user}: {mode!r}")
    env: list[tuple[str, str]] = []
    for item in raw.get("env") or []:
        if not isinstance(item, dict) or not item.get("name"):
            raise KubeconfigError(
                f"env variable name must be specified for {user} to use exec authentication plugin"
            )
        env.append((str(item["name"]), str(item.get("value") or "")))
    args = raw.get("args") or []
    if not isinstance(args, list):
        raise KubeconfigError(f"exec args for {user} must be a list")
    if os.sep in command and not os.path.isabs(command):
        command = os.path.normpath(os.path.join(base, command))
    return ExecConfig(
        command=command,
        api_version=api_version,
        args=tuple(str(a) for a in args),
        env=tuple(env),
        interactive_mode=str(mode),
        provide_cluster_info=bool(raw.get("provideClusterInfo")),
        install_hint=str(raw.get("installHint") or ""),
        cluster_config=cluster_ext,
    )


def validate_server(server: str, *, tls: bool, what: str = "server") -> str:
    """client-go's `DefaultServerURL`: a URL, or a host:port that gets the default scheme."""
    text = server.strip()
    candidate = text if "://" in text else ("https://" if tls else "http://") + text
    try:
        parts = urlsplit(candidate)
        parts.port  # noqa: B018 - raises on a port that is not a number
    except ValueError:
        parts = None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname or " " in text:
        raise KubeconfigError(f"{what} must be a URL or a host:port pair: {server!r}")
    return candidate.rstrip("/")


def _cluster_extension(cluster: Mapping[str, Any]) -> Any:
    for ext in cluster.get("extensions") or []:
        if isinstance(ext, dict) and ext.get("name") == "client.authentication.k8s.io/exec":
            return ext.get("extension")
    return None


def load_kubeconfig(paths: list[str], *, context: str | None = None) -> Kubeconfig:
    merged = _Merged()
    for path in paths:
        merged.add(_read_yaml(path), os.path.dirname(os.path.abspath(path)))
    if merged.empty():
        raise KubeconfigError(
            "invalid configuration: no configuration has been provided, try setting KUBERNETES_MASTER environment variable"
        )
    name = context or merged.current_context
    if not name:
        raise KubeconfigError("invalid configuration: no context chosen (set current-context or --context)")
    ctx = merged.contexts.get(name)
    if ctx is None:
        raise KubeconfigError(f"context was not found for specified context: {name}")
    cluster_name = str(ctx.get("cluster") or "")
    if cluster_name not in merged.clusters:
        raise KubeconfigError(
            f"invalid configuration: context {name!r} names cluster {cluster_name!r}, which is not defined"
        )
    raw_cluster, cluster_base = merged.clusters[cluster_name]
    user_name = str(ctx.get("user") or "")
    raw_user, user_base = merged.users.get(user_name, ({}, cluster_base))
    if user_name and user_name not in merged.users:
        raise KubeconfigError(
            f"invalid configuration: context {name!r} names user {user_name!r}, which is not defined"
        )

    owner = f"cluster {cluster_name!r}"
    if not raw_cluster.get("server"):
        raise KubeconfigError(f"invalid configuration: no server found for cluster {cluster_name!r}")
    ca = _file_or_data(raw_cluster, "certificate-authority", cluster_base, owner)
    insecure = bool(raw_cluster.get("insecure-skip-tls-verify"))
    user = _user_info(raw_user, user_name or "<no user>", user_base, _cluster_extension(raw_cluster))
    server = validate_server(
        str(raw_cluster["server"]),
        tls=bool(ca or user.cert_data or insecure),
        what=f"server of cluster {cluster_name!r}",
    )
    cluster = ClusterInfo(
        server=server,
        ca_data=ca,
        insecure_skip_tls_verify=insecure,
        tls_server_name=raw_cluster.get("tls-server-name") or None,
        proxy_url=raw_cluster.get("proxy-url") or None,
        disable_compression=bool(raw_cluster.get("disable-compression")),
    )
    namespace = ctx.get("namespace")
    return Kubeconfig(
        context=name, cluster=cluster, user=user, namespace=str(namespace) if namespace else None
    )


def _user_info(raw: Mapping[str, Any], name: str, base: str, cluster_ext: Any) -> UserInfo:
    owner = f"user {name!r}"
    cert = _file_or_data(raw, "client-certificate", base, owner)
    key = _file_or_data(raw, "client-key", base, owner)
    if raw.get("client-key-data") and raw.get("client-key"):
        raise KubeconfigError(
            f"client-key-data and client-key are both specified for {name}; please specify only one"
        )
    if cert is not None and key is None:
        raise KubeconfigError(
            f"client-key-data or client-key must be specified for {name} to use the clientCert authentication method."
        )
    if key is not None and cert is None:
        raise KubeconfigError(
            f"client-cert-data or client-cert must be specified for {name} to use the clientCert authentication method."
        )
    token = raw.get("token") or None
    token_file = _resolve(raw["tokenFile"], base) if raw.get("tokenFile") else None
    methods = []
    if token or token_file:
        methods.append("token")
    if raw.get("username") or raw.get("password"):
        methods.append("basicAuth")
    if len(methods) > 1:
        raise KubeconfigError(
            f"more than one authentication method found for {name}; found {methods}, only one is allowed"
        )
    exec_config = _exec_config(raw["exec"], name, base, cluster_ext) if raw.get("exec") else None
    provider = raw.get("auth-provider")
    if exec_config is not None and provider:
        raise KubeconfigError(
            f"authProvider cannot be provided in combination with an exec plugin for {name}"
        )
    return UserInfo(
        token=str(token) if token else None,
        token_file=token_file,
        cert_data=cert,
        key_data=key,
        username=raw.get("username") or None,
        password=raw.get("password") or None,
        exec=exec_config,
        auth_provider=provider if isinstance(provider, dict) else None,
    )
