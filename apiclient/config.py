"""Build a kubernetes_asyncio `ApiClient` the way KCM resolves its connection.

Order as client-go's `BuildConfigFromFlags`: `--kubeconfig` (or $KUBECONFIG), overridden by
`--master` when both are given; with neither, the in-cluster service account.

The kubeconfig is read by `apiclient.kubeconfig` (client-go's rules and messages), credentials
come from `apiclient.credentials` / `apiclient.execplugin` (refreshed as client-go refreshes
them), and TLS material is loaded from memory by `apiclient.tls`. Everything that can be wrong
with the settings is found here, before any work starts: an unreadable or malformed kubeconfig,
a server that is not a URL, a credential plugin that is not installed or fails. Each is a
`KubeconfigError` with one line for the user.
"""

from __future__ import annotations

import base64
import dataclasses
import os

from kubernetes_asyncio import client as k8s_client
from kubernetes_asyncio import config as k8s_config

from apiclient import tls
from apiclient.credentials import CredentialError, Credentials, StaticCredentials, TokenFileCredentials
from apiclient.execplugin import ExecCredentials, ExecResult
from apiclient.kubeconfig import (
    ClusterInfo,
    Kubeconfig,
    KubeconfigError,
    UserInfo,
    kubeconfig_paths,
    load_kubeconfig,
    validate_server,
)
from apiclient.proxy import proxy_from_environment
from apiclient.restclient import SessionApiClient

__all__ = ["KubeconfigError", "build_api_client", "describe_config_error", "resolve_kubeconfig"]

SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"


def _in_cluster() -> tuple[Kubeconfig, str]:
    """client-go's InClusterConfig: the service's address from the environment, the mounted token and CA."""
    host, port = os.environ.get("KUBERNETES_SERVICE_HOST", ""), os.environ.get("KUBERNETES_SERVICE_PORT", "")
    if not host or not port:
        raise KubeconfigError(
            "no --kubeconfig, --master or $KUBECONFIG, and no in-cluster service account "
            "(KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be defined)"
        )
    token_file = os.path.join(SERVICE_ACCOUNT_DIR, "token")
    ca_file = os.path.join(SERVICE_ACCOUNT_DIR, "ca.crt")
    try:
        with open(ca_file, "rb") as f:
            ca = f.read()
    except OSError as exc:
        raise KubeconfigError(
            f"in-cluster service account: cannot read {ca_file}: {exc.strerror or exc}"
        ) from None
    server = validate_server(
        f"https://[{host}]:{port}" if ":" in host else f"https://{host}:{port}",
        tls=True,
        what="in-cluster server",
    )
    return Kubeconfig(
        context="in-cluster",
        cluster=ClusterInfo(server=server, ca_data=ca),
        user=UserInfo(token_file=token_file),
    ), token_file


def resolve_kubeconfig(*, kubeconfig: str | None, master: str | None, context: str | None) -> Kubeconfig:
    """The cluster and user this process will use (files read, nothing contacted)."""
    paths = kubeconfig_paths(kubeconfig)
    if not paths and not kubeconfig and os.environ.get("KUBECONFIG"):
        raise KubeconfigError(f"$KUBECONFIG {os.environ['KUBECONFIG']}: no such file")
    if paths:
        resolved = load_kubeconfig(paths, context=context)
    elif master:
        resolved = Kubeconfig(
            context="",
            cluster=ClusterInfo(server=validate_server(master, tls=False, what="server address")),
            user=UserInfo(),
        )
    else:
        resolved, _ = _in_cluster()
    if master:
        tls_wanted = bool(
            resolved.cluster.ca_data or resolved.user.cert_data or resolved.cluster.insecure_skip_tls_verify
        )
        server = validate_server(master, tls=tls_wanted, what="server address")
        resolved = dataclasses.replace(resolved, cluster=dataclasses.replace(resolved.cluster, server=server))
    return resolved


async def _auth_provider_token(user: UserInfo) -> Credentials:
    """Legacy `auth-provider` (oidc, gcp): kubernetes_asyncio's loader, once, for the token only."""
    config = {
        "clusters": [{"name": "c", "cluster": {"server": "http://unused"}}],
        "users": [{"name": "u", "user": {"auth-provider": dict(user.auth_provider or {})}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "x",
    }
    scratch = k8s_client.Configuration()
    try:
        await k8s_config.load_kube_config_from_dict(config, client_configuration=scratch)
    except (k8s_config.ConfigException, ValueError, KeyError) as exc:
        raise KubeconfigError(f"auth-provider: {exc}") from None
    value = scratch.api_key.get("BearerToken")
    if not value:
        raise KubeconfigError("auth-provider gave no token")
    return StaticCredentials(str(value))


async def _credentials(kc: Kubeconfig) -> tuple[Credentials | None, ExecResult | None]:
    """client-go's precedence: a token (or tokenFile), else basic auth; an exec plugin only when
    neither they nor a client certificate are configured."""
    user = kc.user
    if user.token_file:
        source = TokenFileCredentials(user.token_file, initial=user.token)
        if not user.token:
            try:
                source.read_now()
            except CredentialError as exc:
                raise KubeconfigError(str(exc)) from None
        return source, None
    if user.token:
        return StaticCredentials(f"Bearer {user.token}"), None
    if user.username or user.password:
        basic = base64.b64encode(f"{user.username or ''}:{user.password or ''}".encode()).decode()
        return StaticCredentials(f"Basic {basic}"), None
    if user.cert_data:
        return None, None
    if user.exec is not None:
        plugin = ExecCredentials(user.exec, kc.cluster)
        try:
            first = await plugin.get()  # at start: a missing or failing plugin is a configuration error
        except CredentialError as exc:
            raise KubeconfigError(f"getting credentials: {exc}") from None
        return plugin, first
    if user.auth_provider:
        return await _auth_provider_token(user), None
    return None, None


async def build_api_client(
    *, kubeconfig: str | None = None, master: str | None = None, context: str | None = None
) -> k8s_client.ApiClient:
    return await _api_client_for(resolve_kubeconfig(kubeconfig=kubeconfig, master=master, context=context))


async def build_in_cluster_api_client() -> k8s_client.ApiClient:
    """The pod's own ServiceAccount, never a kubeconfig (KCM's review clients when none is named);
    its token is re-read as it rotates."""
    kc, _ = _in_cluster()
    return await _api_client_for(kc)


async def _api_client_for(kc: Kubeconfig) -> k8s_client.ApiClient:
    creds, first = await _credentials(kc)
    cert, key = kc.user.cert_data, kc.user.key_data
    if first is not None and first.cert_data:
        cert, key = first.cert_data, first.key_data
    try:
        context_ = tls.ssl_context(
            ca=kc.cluster.ca_data, cert=cert, key=key, verify=not kc.cluster.insecure_skip_tls_verify
        )
    except ValueError as exc:
        raise KubeconfigError(str(exc)) from None

    configuration = k8s_client.Configuration()
    configuration.host = kc.cluster.server
    configuration.verify_ssl = not kc.cluster.insecure_skip_tls_verify
    configuration.tls_server_name = kc.cluster.tls_server_name
    configuration.proxy = kc.cluster.proxy_url or proxy_from_environment(kc.cluster.server)
    if creds is not None:
        configuration.refresh_api_key_hook = creds
        await creds(configuration)
    api = SessionApiClient(configuration, tls.session(context_, limit=configuration.connection_pool_maxsize))
    if isinstance(creds, ExecCredentials):
        creds.on_rotated_certificate(lambda result: _rotate_certificate(api, kc, result))
    return api


async def _rotate_certificate(api: k8s_client.ApiClient, kc: Kubeconfig, result: ExecResult) -> None:
    """A plugin handed out a new client certificate: new connections use it, old ones are closed
    (client-go's connection tracker closes them all, watches included, so each reconnects)."""
    context_ = tls.ssl_context(
        ca=kc.cluster.ca_data,
        cert=result.cert_data,
        key=result.key_data,
        verify=not kc.cluster.insecure_skip_tls_verify,
    )
    rest = api.rest_client
    old = rest.pool_manager
    rest.pool_manager = tls.session(context_, limit=api.configuration.connection_pool_maxsize)
    await old.close()


def describe_config_error(exc: BaseException) -> str | None:
    """One line for a connection-settings error a user can fix, None for anything else.

    kubernetes_asyncio reports a bad kubeconfig or missing in-cluster credentials with its
    `ConfigException`; everything this module finds is a `KubeconfigError`.
    """
    if isinstance(exc, KubeconfigError | k8s_config.ConfigException):
        text = " ".join(str(exc).split())
        return text or type(exc).__name__
    return None
