"""Protobuf request bodies: the wire decoder and schemas on hand-built bytes, then the real kubectl.

The hand-built inputs come from a tiny encoder below (field number + value, as Go's generator writes
them: every non-pointer field present, zero or not), so the decoder is checked against the wire
format rather than against itself. The kubectl tests are the point of the feature: `kubectl create
<kind>` sends protobuf, and what it created is read back as JSON and compared.
"""

from __future__ import annotations

import asyncio
import base64
import shutil
from pathlib import Path

import pytest
from aiohttp import ClientSession

from apiclient import KubeClient
from apiclient import resources as R
from localcluster.cluster import LocalCluster
from localcluster.protobuf import MAGIC, ProtobufError, UnknownKindError, decode_body, encode_body
from localcluster.protobuf.wire import read_varint, signed64

# -- a tiny encoder for the inputs ----------------------------------------------------------------------


def varint(n: int) -> bytes:
    n &= (1 << 64) - 1  # negatives as 64-bit two's complement, like Go's int32/int64 fields
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def vi(num: int, value: int) -> bytes:
    return varint(num << 3) + varint(value)


def ld(num: int, value: bytes | str) -> bytes:
    data = value.encode() if isinstance(value, str) else value
    return varint(num << 3 | 2) + varint(len(data)) + data


def msg(num: int, *parts: bytes) -> bytes:
    return ld(num, b"".join(parts))


def entry(num: int, key: str, value: bytes | str) -> bytes:
    return msg(num, ld(1, key), ld(2, value))


def go_meta(name: str = "", namespace: str = "", *extra: bytes) -> bytes:
    """ObjectMeta as Go writes it: all non-pointer fields present, mostly empty."""
    return b"".join(
        [
            ld(1, name),
            ld(2, ""),
            ld(3, namespace),
            ld(4, ""),
            ld(5, ""),
            ld(6, ""),
            vi(7, 0),
            ld(8, b""),
            *extra,
        ]
    )


def envelope(api_version: str, kind: str, body: bytes) -> bytes:
    return MAGIC + msg(1, ld(1, api_version), ld(2, kind)) + ld(2, body) + ld(3, "") + ld(4, "")


# -- wire format ----------------------------------------------------------------------------------------


def test_varints_round_trip_including_negative_ints() -> None:
    for n in (0, 1, 127, 128, 300, 2**31 - 1, 2**63 - 1):
        assert read_varint(varint(n), 0) == (n, len(varint(n)))
    raw, _ = read_varint(varint(-5), 0)
    assert len(varint(-5)) == 10 and signed64(raw) == -5


def test_truncated_and_garbage_bodies_are_protobuf_errors() -> None:
    good = envelope("v1", "ConfigMap", msg(1, go_meta("x")))
    for bad in (
        good[:-3],
        MAGIC + b"\x0a\xff",
        b"not-magic" + good,
        MAGIC + b"\x0b",
    ):  # 0x0b: wire type 3 (group)
        with pytest.raises(ProtobufError):
            decode_body(bad)
    with pytest.raises(UnknownKindError):
        decode_body(envelope("example.com/v1", "Widget", b""))


def test_unknown_fields_are_skipped_in_every_wire_type() -> None:
    unknown = vi(90, 7) + ld(91, "junk") + varint(92 << 3 | 1) + bytes(8) + varint(93 << 3 | 5) + bytes(4)
    body = msg(1, go_meta("cm", "", unknown)) + entry(2, "a", "b") + unknown
    assert decode_body(envelope("v1", "ConfigMap", body)) == {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "cm", "creationTimestamp": None},
        "data": {"a": "b"},
    }


# -- schemas --------------------------------------------------------------------------------------------


def test_object_meta_fields() -> None:
    owner = msg(13, ld(1, "ReplicaSet"), ld(3, "rs"), ld(4, "u-1"), ld(5, "apps/v1"), vi(6, 1), vi(7, 0))
    meta = b"".join(
        [
            ld(1, ""),
            ld(2, "web-"),
            ld(3, "ns"),
            ld(5, "uid-9"),
            ld(6, "42"),
            vi(7, 3),
            msg(8, vi(1, 1_700_000_000)),
            msg(9, vi(1, 1_700_000_060), vi(2, 5)),
            vi(10, 0),
            entry(11, "app", "web"),
            entry(12, "note", ""),
            owner,
            ld(14, "a/b"),
            ld(14, "c/d"),
        ]
    )
    obj = decode_body(envelope("v1", "ConfigMap", msg(1, meta)))
    assert obj["metadata"] == {
        "generateName": "web-",
        "namespace": "ns",
        "uid": "uid-9",
        "resourceVersion": "42",
        "generation": 3,
        "creationTimestamp": "2023-11-14T22:13:20Z",
        "deletionTimestamp": "2023-11-14T22:14:20Z",
        "deletionGracePeriodSeconds": 0,  # a pointer: a sent zero stays
        "labels": {"app": "web"},
        "annotations": {"note": ""},
        "ownerReferences": [
            {
                "kind": "ReplicaSet",
                "name": "rs",
                "uid": "u-1",
                "apiVersion": "apps/v1",
                "controller": True,
                "blockOwnerDeletion": False,
            }
        ],
        "finalizers": ["a/b", "c/d"],
    }


def test_configmap_secret_and_namespace() -> None:
    cm = decode_body(
        envelope(
            "v1",
            "ConfigMap",
            msg(1, go_meta("cm")) + entry(2, "k", "v") + entry(3, "bin", b"\x00\xff") + vi(4, 1),
        )
    )
    assert cm == {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "cm", "creationTimestamp": None},
        "data": {"k": "v"},
        "binaryData": {"bin": "AP8="},
        "immutable": True,
    }
    secret = decode_body(
        envelope(
            "v1",
            "Secret",
            msg(1, go_meta("s"))
            + entry(2, "user", b"admin")
            + ld(3, "Opaque")
            + entry(4, "plain", "text")
            + entry(2, "empty", b""),
        )
    )
    assert secret["data"] == {"user": base64.b64encode(b"admin").decode(), "empty": ""}
    assert (
        secret["type"] == "Opaque" and secret["stringData"] == {"plain": "text"} and "immutable" not in secret
    )
    ns = decode_body(
        envelope("v1", "Namespace", msg(1, go_meta("team")) + msg(2, ld(1, "kubernetes")) + msg(3, ld(1, "")))
    )
    assert ns == {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": "team", "creationTimestamp": None},
        "spec": {"finalizers": ["kubernetes"]},
        "status": {},
    }


def test_service_ports_with_int_and_named_target_ports() -> None:
    port_a = msg(
        1, ld(1, "http"), ld(2, "TCP"), vi(3, 80), msg(4, vi(1, 0), vi(2, 8080), ld(3, "")), vi(5, 0)
    )
    port_b = msg(
        1,
        ld(1, "metrics"),
        ld(2, "TCP"),
        vi(3, 9090),
        msg(4, vi(1, 1), vi(2, 0), ld(3, "metrics")),
        vi(5, 30001),
    )
    spec = (
        port_a + port_b + entry(2, "app", "web") + ld(3, "None") + ld(4, "ClusterIP") + ld(7, "") + vi(13, 0)
    )
    svc = decode_body(envelope("v1", "Service", msg(1, go_meta("web")) + msg(2, spec)))
    assert svc["spec"] == {
        "ports": [
            {"name": "http", "protocol": "TCP", "port": 80, "targetPort": 8080},
            {"name": "metrics", "protocol": "TCP", "port": 9090, "targetPort": "metrics", "nodePort": 30001},
        ],
        "selector": {"app": "web"},
        "clusterIP": "None",
        "type": "ClusterIP",
    }


def _container() -> bytes:
    env = msg(7, ld(1, "FROM_CM"), msg(3, msg(3, msg(1, ld(1, "cfg")), ld(2, "key"), vi(3, 1))))
    resources = msg(
        8, msg(1, ld(1, "cpu"), msg(2, ld(1, "500m"))), msg(2, ld(1, "memory"), msg(2, ld(1, "64Mi")))
    )
    return msg(
        2,
        ld(1, "app"),
        ld(2, "nginx:1.25"),
        ld(3, "sh"),
        ld(3, "-c"),
        ld(4, "sleep 1"),
        ld(5, ""),
        msg(6, ld(1, "http"), vi(2, 0), vi(3, 80), ld(4, "TCP"), ld(5, "")),
        msg(7, ld(1, "MODE"), ld(2, "prod")),
        env,
        resources,
        ld(14, "IfNotPresent"),
        vi(16, 0),
        vi(18, 0),
    )


def test_deployment_with_pod_template_and_strategy() -> None:
    template = msg(
        3,
        msg(1, go_meta("", "", entry(11, "app", "web"))),
        msg(
            2,
            _container(),
            ld(3, "Always"),
            vi(4, 30),
            ld(6, "ClusterFirst"),
            entry(7, "disk", "ssd"),
            msg(
                22,
                ld(1, "node.kubernetes.io/not-ready"),
                ld(2, "Exists"),
                ld(3, ""),
                ld(4, "NoExecute"),
                vi(5, 300),
            ),
        ),
    )
    strategy = msg(
        4, ld(1, "RollingUpdate"), msg(2, msg(1, vi(1, 1), ld(3, "25%")), msg(2, vi(1, 0), vi(2, 1)))
    )
    spec = msg(
        2,
        vi(1, 0),
        msg(2, entry(1, "app", "web"), msg(2, ld(1, "tier"), ld(2, "In"), ld(3, "a"), ld(3, "b"))),
        template,
        strategy,
        vi(5, 0),
        vi(6, 10),
        vi(7, 0),
        vi(9, 600),
    )
    dep = decode_body(
        envelope("apps/v1", "Deployment", msg(1, go_meta("web", "default")) + spec + msg(3, vi(1, 0)))
    )
    assert dep["apiVersion"] == "apps/v1" and dep["metadata"] == {
        "name": "web",
        "namespace": "default",
        "creationTimestamp": None,
    }
    assert dep["status"] == {}
    pod_spec = dep["spec"]["template"]["spec"]
    assert dep["spec"] == {
        "replicas": 0,  # a pointer: scale-to-zero survives
        "selector": {
            "matchLabels": {"app": "web"},
            "matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]}],
        },
        "template": {"metadata": {"labels": {"app": "web"}, "creationTimestamp": None}, "spec": pod_spec},
        "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": 1}},
        "revisionHistoryLimit": 10,
        "progressDeadlineSeconds": 600,
    }
    assert pod_spec == {
        "containers": [
            {
                "name": "app",
                "image": "nginx:1.25",
                "command": ["sh", "-c"],
                "args": ["sleep 1"],
                "ports": [{"name": "http", "containerPort": 80, "protocol": "TCP"}],
                "env": [
                    {"name": "MODE", "value": "prod"},
                    {
                        "name": "FROM_CM",
                        "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "key", "optional": True}},
                    },
                ],
                "resources": {"limits": {"cpu": "500m"}, "requests": {"memory": "64Mi"}},
                "imagePullPolicy": "IfNotPresent",
            }
        ],
        "restartPolicy": "Always",
        "terminationGracePeriodSeconds": 30,
        "dnsPolicy": "ClusterFirst",
        "nodeSelector": {"disk": "ssd"},
        "tolerations": [
            {
                "key": "node.kubernetes.io/not-ready",
                "operator": "Exists",
                "effect": "NoExecute",
                "tolerationSeconds": 300,
            }
        ],
    }


def test_pod_eviction_and_delete_options() -> None:
    pod = decode_body(
        envelope("v1", "Pod", msg(1, go_meta("p", "default")) + msg(2, _container(), ld(10, "node-1")))
    )
    assert pod["spec"]["nodeName"] == "node-1" and pod["spec"]["containers"][0]["name"] == "app"
    options = msg(2, vi(1, 0), msg(2, ld(1, "uid-1"), ld(2, "7")), ld(4, "Foreground"), ld(5, "All"))
    eviction = decode_body(envelope("policy/v1", "Eviction", msg(1, go_meta("p", "default")) + options))
    assert eviction == {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": "p", "namespace": "default", "creationTimestamp": None},
        "deleteOptions": {
            "gracePeriodSeconds": 0,
            "preconditions": {"uid": "uid-1", "resourceVersion": "7"},
            "propagationPolicy": "Foreground",
            "dryRun": ["All"],
        },
    }
    delete = decode_body(envelope("meta.k8s.io/v1", "DeleteOptions", vi(1, 2**64 - 1) + vi(3, 1)))
    assert delete == {
        "apiVersion": "meta.k8s.io/v1",
        "kind": "DeleteOptions",
        "gracePeriodSeconds": -1,
        "orphanDependents": True,
    }


# -- over HTTP and with the real kubectl ----------------------------------------------------------------

PROTOBUF = {"Content-Type": "application/vnd.kubernetes.protobuf"}


async def test_http_create_and_delete_with_protobuf_bodies(cluster: LocalCluster, kube: KubeClient) -> None:
    server = cluster.url
    async with ClientSession() as http:
        body = envelope("v1", "ConfigMap", msg(1, go_meta("pb")) + entry(2, "a", "b"))
        async with http.post(
            f"{server}/api/v1/namespaces/default/configmaps", data=body, headers=PROTOBUF
        ) as resp:
            assert resp.status == 201, await resp.text()
            assert (await resp.json())["data"] == {"a": "b"}
        async with http.post(
            f"{server}/api/v1/namespaces/default/configmaps", data=MAGIC + b"\x0a\xff", headers=PROTOBUF
        ) as resp:
            assert resp.status == 400 and (await resp.json())["reason"] == "BadRequest"
        widget = envelope("example.com/v1", "Widget", b"")
        async with http.post(
            f"{server}/api/v1/namespaces/default/configmaps", data=widget, headers=PROTOBUF
        ) as resp:
            assert resp.status == 415
        stale = envelope("meta.k8s.io/v1", "DeleteOptions", msg(2, ld(1, "not-the-uid")))
        async with http.delete(
            f"{server}/api/v1/namespaces/default/configmaps/pb", data=stale, headers=PROTOBUF
        ) as resp:
            assert resp.status == 409, await resp.text()  # the precondition was read from the protobuf body
    assert (await kube.get(R.CONFIGMAPS, "pb", namespace="default"))["data"] == {"a": "b"}


async def _kubectl(cluster: LocalCluster, cache: Path, *args: str) -> str:
    proc = await asyncio.create_subprocess_exec(
        "kubectl",
        "--kubeconfig",
        cluster.kubeconfig_path,
        "--cache-dir",
        str(cache),
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await proc.communicate()
    assert proc.returncode == 0, f"kubectl {' '.join(args)}: {out.decode()}"
    return out.decode()


@pytest.mark.kubectl
@pytest.mark.skipif(shutil.which("kubectl") is None, reason="needs the kubectl binary")
async def test_kubectl_create_subcommands_send_protobuf_and_it_lands(
    cluster: LocalCluster, kube: KubeClient, tmp_path: Path
) -> None:
    await _kubectl(cluster, tmp_path, "create", "namespace", "team")
    assert (await kube.get(R.NAMESPACES, "team"))["status"]["phase"] == "Active"

    await _kubectl(
        cluster,
        tmp_path,
        "create",
        "configmap",
        "cfg",
        "-n",
        "team",
        "--from-literal=a=b",
        "--from-literal=c=d",
    )
    assert (await kube.get(R.CONFIGMAPS, "cfg", namespace="team"))["data"] == {"a": "b", "c": "d"}

    await _kubectl(
        cluster,
        tmp_path,
        "create",
        "deployment",
        "web",
        "-n",
        "team",
        "--image=nginx:1.25",
        "--replicas=2",
        "--port=80",
    )
    dep = await kube.get(R.DEPLOYMENTS, "web", namespace="team")
    assert dep["spec"]["replicas"] == 2
    assert dep["spec"]["selector"] == {"matchLabels": {"app": "web"}}
    assert dep["spec"]["template"]["metadata"]["labels"] == {"app": "web"}
    [container] = dep["spec"]["template"]["spec"]["containers"]
    assert container["image"] == "nginx:1.25" and container["ports"][0]["containerPort"] == 80
    assert dep["spec"]["strategy"]["rollingUpdate"] == {
        "maxUnavailable": "25%",
        "maxSurge": "25%",
    }  # server defaults still apply

    await _kubectl(
        cluster,
        tmp_path,
        "create",
        "service",
        "clusterip",
        "web",
        "-n",
        "team",
        "--tcp=80:8080",
        "--tcp=443:https",
    )
    svc = await kube.get(R.SERVICES, "web", namespace="team")
    assert [(p["port"], p["targetPort"]) for p in svc["spec"]["ports"]] == [(80, 8080), (443, "https")]
    assert svc["spec"]["selector"] == {"app": "web"} and svc["spec"]["type"] == "ClusterIP"

    await _kubectl(
        cluster, tmp_path, "create", "secret", "generic", "creds", "-n", "team", "--from-literal=user=admin"
    )
    got = await kube.get(R.Resource("", "v1", "secrets", "Secret", True), "creds", namespace="team")
    assert base64.b64decode(got["data"]["user"]) == b"admin"

    await _kubectl(
        cluster, tmp_path, "create", "pdb", "web", "-n", "team", "--selector=app=web", "--min-available=1"
    )
    pdb = await kube.get(
        R.Resource("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", True),
        "web",
        namespace="team",
    )
    assert pdb["spec"] == {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}}
    await _kubectl(
        cluster,
        tmp_path,
        "create",
        "pdb",
        "half",
        "-n",
        "team",
        "--selector=app=web",
        "--max-unavailable=50%",
    )
    half = await kube.get(
        R.Resource("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", True),
        "half",
        namespace="team",
    )
    assert half["spec"]["maxUnavailable"] == "50%"

    await _kubectl(cluster, tmp_path, "create", "serviceaccount", "robot", "-n", "team")
    assert (
        await kube.get(
            R.Resource("", "v1", "serviceaccounts", "ServiceAccount", True), "robot", namespace="team"
        )
    )["metadata"]["name"] == "robot"

    kubectl_creates = [
        w for w in cluster.requests.writes if w.method == "POST" and w.user_agent.startswith("kubectl")
    ]
    assert {w.resource for w in kubectl_creates} >= {
        "namespaces",
        "configmaps",
        "deployments",
        "services",
        "secrets",
        "poddisruptionbudgets",
        "serviceaccounts",
    }
    assert all(
        w.succeeded and w.content_type == "application/vnd.kubernetes.protobuf" for w in kubectl_creates
    )


async def test_every_served_built_in_kind_has_a_protobuf_form(cluster: LocalCluster) -> None:
    """Go clients send any built-in kind as protobuf, so each one the server serves must decode;
    custom resources have no protobuf form and answer 415, as on the real server."""
    built_in = [rt for rt in cluster.registry.all() if not rt.strategy.requires_type_meta]
    assert len(built_in) >= 20
    for rt in built_in:
        api_version = f"{rt.group}/{rt.version}" if rt.group else rt.version
        obj = {"apiVersion": api_version, "kind": rt.kind, "metadata": {"name": "x", "labels": {"a": "b"}}}
        decoded = decode_body(encode_body(obj))
        assert (decoded["kind"], decoded["metadata"]["labels"]) == (rt.kind, {"a": "b"}), rt.kind


async def test_a_large_list_answers_protobuf_in_batches_with_every_item(
    cluster: LocalCluster, kube: KubeClient
) -> None:
    for i in range(120):
        await kube.create(
            R.CONFIGMAPS, {"metadata": {"name": f"cm-{i:03d}"}, "data": {"i": str(i)}}, namespace="default"
        )
    async with ClientSession() as http:
        async with http.get(
            f"{cluster.url}/api/v1/namespaces/default/configmaps",
            headers={"Accept": "application/vnd.kubernetes.protobuf"},
        ) as resp:
            assert resp.headers["Content-Type"] == "application/vnd.kubernetes.protobuf"
            listed = decode_body(await resp.read())
    assert listed["kind"] == "ConfigMapList" and int(listed["metadata"]["resourceVersion"]) > 0
    names = [cm["metadata"]["name"] for cm in listed["items"] if cm["metadata"]["name"].startswith("cm-")]
    assert names == [f"cm-{i:03d}" for i in range(120)]
    assert [cm["data"]["i"] for cm in listed["items"] if cm["metadata"]["name"].startswith("cm-")] == [
        str(i) for i in range(120)
    ]
