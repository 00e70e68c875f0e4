"""Everything the secure port needs before it listens: its certificate and who vouches for callers.

KCM's `SecureServingOptions` + `DelegatingAuthenticationOptions` + `DelegatingAuthorizationOptions`.
The reviewing clients come from `--authentication-kubeconfig` / `--authorization-kubeconfig`,
or, when those are empty, from the in-cluster service account; outside a cluster they are simply
absent (KCM's `RemoteKubeConfigFileOptional`): bearer tokens are then ignored and only the
always-allowed paths are served. `--kubeconfig` is never used for this, as in KCM.

Unless `--authentication-skip-lookup`, the client CA for client certificates comes from the
`kube-system/extension-apiserver-authentication` ConfigMap (key `client-ca-file`) when no
`--client-ca-file` is given; a missing ConfigMap is fine, any other failure stops the start unless
`--authentication-tolerate-lookup-failure`. The CA is read once, at start.
"""

from __future__ import annotations

import ssl
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path

import structlog

from apiclient import KubeClient
from apiclient.config import build_api_client, build_in_cluster_api_client, describe_config_error
from apiclient.errors import ApiError
from apiclient.resources import CONFIGMAPS
from controller_manager import servingcert
from controller_manager.delegation import (
    Delegation,
    PathAuthorizer,
    SubjectAccessReviewAuthorizer,
    TokenReviewAuthenticator,
)
from controller_manager.options import ManagerOptions, ServingOptions, UsageError

log = structlog.get_logger()

AUTH_CONFIGMAP_NAMESPACE = "kube-system"
AUTH_CONFIGMAP_NAME = "extension-apiserver-authentication"
AUTH_READER_ROLE = "extension-apiserver-authentication-reader"
# DelegatingAuthenticationOptions.getClient: the reviewing clients are generous and time out at 10 s.
REVIEW_QPS, REVIEW_BURST, REVIEW_TIMEOUT = 200.0, 400, 10.0


class ClusterLookupError(RuntimeError):
    """The cluster's authentication configuration could not be read: the manager does not start."""


@dataclass
class SecureServing:
    tls: ssl.SSLContext | None
    delegation: Delegation | None
    certificate: str
    # Warnings for the log once the port is bound, so a bad setting found then stays one line.
    notes: tuple[tuple[str, dict[str, str]], ...] = ()


async def _review_client(
    kubeconfig: str, purpose: str, stack: AsyncExitStack, notes: list[tuple[str, dict[str, str]]]
) -> KubeClient | None:
    try:
        if kubeconfig:
            api = await build_api_client(kubeconfig=kubeconfig)
        else:
            api = await build_in_cluster_api_client()
    except Exception as exc:
        reason = describe_config_error(exc)
        if reason is None:
            raise
        if kubeconfig:
            raise UsageError(f"aiokcm run: --{purpose}-kubeconfig: {reason}") from None
        notes.append(
            (
                "no review kubeconfig and not in a cluster: delegated review is off",
                {"review": purpose, "reason": reason},
            )
        )
        return None
    client = KubeClient(
        api,
        qps=REVIEW_QPS,
        burst=REVIEW_BURST,
        request_timeout=REVIEW_TIMEOUT,
        component=f"delegated-{purpose}",
    )
    stack.push_async_callback(client.close)
    return client


async def _client_ca(opts: ServingOptions, client: KubeClient | None) -> str | None:
    if opts.client_ca_file:
        try:
            return Path(opts.client_ca_file).read_text()  # noqa: ASYNC240 - once, before serving
        except OSError as exc:
            raise UsageError(f"aiokcm run: --client-ca-file {opts.client_ca_file}: {exc.strerror}") from None
    if opts.authentication_skip_lookup or client is None:
        return None
    try:
        configmap = await client.get(CONFIGMAPS, AUTH_CONFIGMAP_NAME, namespace=AUTH_CONFIGMAP_NAMESPACE)
    except ApiError as exc:
        if exc.not_found:
            return None
        if exc.status == 403:
            log.warning(
                "unable to get the authentication configmap",
                configmap=AUTH_CONFIGMAP_NAME,
                namespace=AUTH_CONFIGMAP_NAMESPACE,
                fix=f"kubectl create rolebinding -n {AUTH_CONFIGMAP_NAMESPACE} ROLEBINDING_NAME "
                f"--role={AUTH_READER_ROLE} --serviceaccount=YOUR_NS:YOUR_SA",
            )
        if opts.authentication_tolerate_lookup_failure:
            log.warning("continuing without the cluster's client CA", error=str(exc))
            return None
        raise ClusterLookupError(f"unable to load configmap based client-ca-file: {exc}") from None
    ca = (configmap.get("data") or {}).get("client-ca-file")
    return str(ca) if ca else None


async def prepare(opts: ManagerOptions, stack: AsyncExitStack) -> SecureServing:
    """The TLS context and delegation for `opts`; clients it opens are closed by `stack`."""
    serving = opts.serving
    try:
        pair, source = servingcert.resolve(
            cert_file=serving.tls_cert_file,
            key_file=serving.tls_private_key_file,
            cert_dir=serving.cert_dir,
            bind_address=opts.bind_address,
        )
    except servingcert.CertificateError as exc:
        raise UsageError(f"aiokcm run: {exc}") from None
    notes: list[tuple[str, dict[str, str]]] = []
    authn_client = await _review_client(serving.authentication_kubeconfig, "authentication", stack, notes)
    authz_client = await _review_client(serving.authorization_kubeconfig, "authorization", stack, notes)
    client_ca = await _client_ca(serving, authn_client)
    try:
        tls = servingcert.server_context(pair, client_ca_pem=client_ca)
    except servingcert.CertificateError as exc:
        raise UsageError(f"aiokcm run: {exc}") from None
    delegation = Delegation(
        always_allow=PathAuthorizer(serving.authorization_always_allow_paths),
        authenticator=None
        if authn_client is None
        else TokenReviewAuthenticator(authn_client, cache_ttl=serving.authentication_token_webhook_cache_ttl),
        authorizer=None
        if authz_client is None
        else SubjectAccessReviewAuthorizer(
            authz_client,
            allow_ttl=serving.authorization_webhook_cache_authorized_ttl,
            deny_ttl=serving.authorization_webhook_cache_unauthorized_ttl,
        ),
    )
    return SecureServing(tls, delegation, source, tuple(notes))
