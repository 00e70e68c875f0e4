"""The admission webhook port: HTTPS verified against the CA bundle the API server gets, the chain
replaced in place on rotation, AdmissionReviews in and out; the certificate kept in a Secret and
its CA in the webhook configuration's caBundle (on the real API server: the local cluster serves
neither Secrets nor webhook configurations)."""

from __future__ import annotations

import base64
import copy
import datetime as dt
import ssl
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import anyio
import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from apiclient import ApiError, KubeClient
from apiclient.resources import SECRETS, VALIDATINGWEBHOOKCONFIGURATIONS
from controller_manager import servingcert, webhookcert, webhookserver
from tests.support.waiting import eventually

NAMES = webhookcert.Names.for_service("aiokcm-webhook", "kube-system", ("127.0.0.1",))
HOST = "aiokcm-webhook.kube-system.svc"


class Echo:
    webhook_path = "/validate-test"

    def review(self, body: Mapping[str, Any]) -> dict[str, Any]:
        return {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "response": {"uid": body["request"]["uid"], "allowed": True},
        }


def ca_of(pair: servingcert.CertKey) -> bytes:
    return b"".join(
        c.public_bytes(serialization.Encoding.PEM) for c in x509.load_pem_x509_certificates(pair.cert_pem)[1:]
    )


def client_context(bundle: bytes) -> ssl.SSLContext:
    """What kube-apiserver does with a caBundle: trust only it, check the Service's DNS name."""
    context = ssl.create_default_context(cadata=bundle.decode())
    return context


@asynccontextmanager
async def served() -> AsyncIterator[tuple[webhookcert.ReloadableContext, int]]:
    tls = webhookcert.ReloadableContext()
    async with anyio.create_task_group() as tg:
        first = servingcert.generate_self_signed(HOST, ips=NAMES.ips, dns=NAMES.dns)
        tls.load(first)
        port = await tg.start(
            lambda task_status: webhookserver.serve(
                [Echo()], host="127.0.0.1", port=0, tls=tls.context, task_status=task_status
            )
        )
        yield tls, port
        tg.cancel_scope.cancel()


async def post(port: int, bundle: bytes, body: bytes) -> tuple[int, bytes]:
    async with (
        aiohttp.ClientSession() as session,
        session.post(
            f"https://127.0.0.1:{port}/validate-test",
            data=body,
            ssl=client_context(bundle),
            server_hostname=HOST,
            headers={"Content-Type": "application/json"},
        ) as resp,
    ):
        return resp.status, await resp.read()


async def test_serves_reviews_over_tls_and_rotates_in_place() -> None:
    async with served() as (tls, port):
        await _serves_and_rotates(tls, port)


async def _serves_and_rotates(tls: webhookcert.ReloadableContext, port: int) -> None:
    first_ca = ca_of(servingcert.CertKey(tls.loaded, b""))
    review = b'{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"x"}}'
    status, body = await post(port, first_ca, review)
    assert status == 200 and b'"uid":"x"' in body and b'"allowed":true' in body
    assert (await post(port, first_ca, b"not json"))[0] == 400
    # A rotated pair is served to new connections without a restart; the old CA no longer verifies it.
    second = servingcert.generate_self_signed(HOST, ips=NAMES.ips, dns=NAMES.dns)
    assert tls.load(second) and not tls.load(second)
    assert (await post(port, ca_of(second), review))[0] == 200
    with pytest.raises(aiohttp.ClientConnectorCertificateError):
        await post(port, first_ca, review)


def test_renewal_is_due_in_the_last_third_of_the_validity_or_for_other_names() -> None:
    pair = servingcert.generate_self_signed(HOST, ips=NAMES.ips, dns=NAMES.dns)
    now = dt.datetime.now(dt.UTC)
    assert not webhookcert.needs_renewal(pair.cert_pem, NAMES, now)
    assert not webhookcert.needs_renewal(pair.cert_pem, NAMES, now + dt.timedelta(days=200))
    assert webhookcert.needs_renewal(pair.cert_pem, NAMES, now + dt.timedelta(days=250))
    other = webhookcert.Names.for_service("aiokcm-webhook", "other-ns", ())
    assert webhookcert.needs_renewal(pair.cert_pem, other, now)
    assert webhookcert.needs_renewal(b"garbage", NAMES, now)


def test_bundle_keeps_old_cas_until_they_expire() -> None:
    old = ca_of(servingcert.generate_self_signed(HOST))
    new = ca_of(servingcert.generate_self_signed(HOST))
    now = dt.datetime.now(dt.UTC)
    merged = webhookcert.merge_bundle(new, old, now)
    assert len(webhookcert.split_pem(merged)) == 2 and merged.startswith(new.strip())
    assert webhookcert.merge_bundle(new, merged, now) == merged  # each CA once
    later = webhookcert.merge_bundle(new, old, now + dt.timedelta(days=400))
    assert len(webhookcert.split_pem(later)) == 1


# -- on the real API server ------------------------------------------------------------------------

WEBHOOK = Path(__file__).resolve().parents[2] / "deploy" / "webhook.yaml"


def shipped_configuration() -> dict[str, Any]:
    docs = [d for d in yaml.safe_load_all(WEBHOOK.read_text()) if d]
    return copy.deepcopy(next(d for d in docs if d["kind"] == "ValidatingWebhookConfiguration"))


@pytest.mark.backends("real")
async def test_pair_kept_in_a_secret_and_its_ca_in_the_configuration(cluster: Any, kube: KubeClient) -> None:
    config = shipped_configuration()
    name = config["metadata"]["name"]
    secret = "aiokcm-webhook-cert-test"
    now = dt.datetime.now(dt.UTC)

    def keeper(at: dt.datetime) -> webhookcert.ManagedCertificate:
        return webhookcert.ManagedCertificate(
            kube, namespace="kube-system", secret=secret, configuration=name, names=NAMES, clock=lambda: at
        )

    await kube.create(VALIDATINGWEBHOOKCONFIGURATIONS, config)  # the shipped manifest, as is: valid
    try:
        first = keeper(now)
        await first.ensure()
        stored = await kube.get(SECRETS, secret, namespace="kube-system")
        assert stored["type"] == "kubernetes.io/tls"
        bundle = base64.b64decode(stored["data"]["ca.crt"])
        installed = await kube.get(VALIDATINGWEBHOOKCONFIGURATIONS, name)
        assert [base64.b64decode(h["clientConfig"]["caBundle"]) for h in installed["webhooks"]] == [bundle]
        # Another replica (or a restart) serves the same pair and writes nothing.
        second = keeper(now)
        await second.ensure()
        assert second.tls.loaded == first.tls.loaded
        assert (await kube.get(SECRETS, secret, namespace="kube-system"))["metadata"][
            "resourceVersion"
        ] == stored["metadata"]["resourceVersion"]
        # Two thirds into its life the pair is replaced; the caBundle trusts the old CA and the new one.
        later = keeper(now + dt.timedelta(days=250))
        await later.ensure()
        assert later.tls.loaded != first.tls.loaded
        rotated = base64.b64decode(
            (await kube.get(VALIDATINGWEBHOOKCONFIGURATIONS, name))["webhooks"][0]["clientConfig"]["caBundle"]
        )
        cas = webhookcert.split_pem(rotated)
        assert len(cas) == 2 and cas[1] == webhookcert.split_pem(bundle)[0]
        leaf = x509.load_pem_x509_certificates(later.tls.loaded)[0]
        assert leaf.issuer == cas[0].subject
    finally:
        await kube.delete(VALIDATINGWEBHOOKCONFIGURATIONS, name)
        try:
            await kube.delete(SECRETS, secret, namespace="kube-system")
        except ApiError as exc:
            if not exc.not_found:
                raise


@pytest.mark.backends("real")
async def test_the_leader_points_the_selectorless_service_at_itself(cluster: Any, kube: KubeClient) -> None:
    """Only the leader answers: it writes the Service's Endpoints, a new leader takes them over, and
    KCM mirrors them into the EndpointSlice kube-proxy routes by."""
    from apiclient.resources import ENDPOINTS, SERVICES, Resource
    from controller_manager import webhookendpoints

    slices = Resource("discovery.k8s.io", "v1", "endpointslices", "EndpointSlice", True)
    docs = [d for d in yaml.safe_load_all(WEBHOOK.read_text()) if d]
    service = copy.deepcopy(next(d for d in docs if d["kind"] == "Service"))
    service["metadata"]["namespace"] = "kube-system"
    name = service["metadata"]["name"]
    await kube.create(SERVICES, service, namespace="kube-system")
    try:
        await webhookendpoints.advertise(
            kube, namespace="kube-system", service=name, address="10.244.1.7", port=9443
        )
        first = await kube.get(ENDPOINTS, name, namespace="kube-system")
        await webhookendpoints.advertise(
            kube, namespace="kube-system", service=name, address="10.244.1.7", port=9443
        )
        again = await kube.get(ENDPOINTS, name, namespace="kube-system")
        assert again["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]  # no write
        await webhookendpoints.advertise(
            kube, namespace="kube-system", service=name, address="10.244.2.9", port=9443
        )

        async def mirrored() -> bool:
            found = await kube.list_all(
                slices, namespace="kube-system", label_selector=f"kubernetes.io/service-name={name}"
            )
            return [a for s in found for e in s.get("endpoints") or [] for a in e["addresses"]] == [
                "10.244.2.9"
            ] and [p["port"] for s in found for p in s.get("ports") or []] == [9443]

        await eventually(mirrored, "the Endpoints mirrored into an EndpointSlice", timeout=30)
    finally:
        await kube.delete(SERVICES, name, namespace="kube-system")
        try:
            await kube.delete(ENDPOINTS, name, namespace="kube-system")
        except ApiError as exc:
            if not exc.not_found:
                raise


def test_given_files_are_served_and_reloaded_when_they_change(tmp_path: Path) -> None:
    """cert-manager renews the mounted Secret in place: the new pair is served without a restart."""
    import os

    crt, key = tmp_path / "tls.crt", tmp_path / "tls.key"
    first = servingcert.generate_self_signed(HOST, ips=NAMES.ips, dns=NAMES.dns)
    crt.write_bytes(first.cert_pem)
    key.write_bytes(first.key_pem)
    given = webhookcert.FileCertificate(str(crt), str(key))
    given.reload()
    assert given.tls.loaded == first.cert_pem and given.tls.ready.is_set()
    renewed = servingcert.generate_self_signed(HOST, ips=NAMES.ips, dns=NAMES.dns)
    crt.write_bytes(renewed.cert_pem)
    key.write_bytes(renewed.key_pem)
    later = os.stat(crt).st_mtime + 60
    os.utime(crt, (later, later))
    given.reload()
    assert given.tls.loaded == renewed.cert_pem
