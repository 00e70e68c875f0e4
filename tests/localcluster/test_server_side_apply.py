"""Server-side apply through the real kubectl, on both backends: field ownership in
`metadata.managedFields`, conflicts with another manager, `--force-conflicts`, and removal of a
field the applier stops applying."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from apiclient import ApiError
from tests.localcluster.helpers import bare_cluster

cluster = pytest.fixture(bare_cluster)
pytestmark = [
    pytest.mark.backends("local", "real"),
    pytest.mark.kubectl,
    pytest.mark.skipif(shutil.which("kubectl") is None, reason="needs the kubectl binary"),
]


def deployment(replicas: int, labels: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default", "labels": labels},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {
                    "containers": [{"name": "nginx", "image": "nginx:1.25", "ports": [{"containerPort": 80}]}]
                },
            },
        },
    }


class Kubectl:
    def __init__(self, kubeconfig: str, workdir: Path) -> None:
        self.base = ["kubectl", "--kubeconfig", kubeconfig, "--cache-dir", str(workdir / "cache")]
        self.workdir = workdir

    async def run(self, *args: str) -> tuple[int, str, str]:
        proc = await asyncio.create_subprocess_exec(
            *self.base,
            *args,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await proc.communicate()
        return proc.returncode or 0, out.decode(), err.decode()

    async def ok(self, *args: str) -> str:
        rc, out, err = await self.run(*args)
        assert rc == 0, f"kubectl {' '.join(args)} failed: {err}"
        return out

    def manifest(self, doc: Any) -> str:
        path = self.workdir / "manifest.yaml"
        path.write_text(yaml.safe_dump(doc))
        return str(path)


def in_server_order(entries: list[dict[str, Any]]) -> bool:
    """managedFields in the API server's order (`sortEncodedManagedFields`): by operation, then
    time in whole seconds, then manager."""
    keys = [(e["operation"], (e.get("time") or "")[:19], e["manager"]) for e in entries]
    return keys == sorted(keys)


def owners(obj: dict[str, Any]) -> dict[tuple[str, str], Any]:
    """managedFields by (manager, operation), times checked for shape and dropped."""
    out = {}
    for entry in obj["metadata"].get("managedFields") or []:
        assert entry.pop("time", "Z").endswith("Z")
        assert entry.pop("fieldsType") == "FieldsV1"
        out[(entry.pop("manager"), entry.pop("operation"))] = entry
    return out


APPLIED_FIELDS = {
    "f:metadata": {"f:labels": {"f:app": {}, "f:tier": {}}},
    "f:spec": {
        "f:replicas": {},
        "f:selector": {},
        "f:template": {
            "f:metadata": {"f:labels": {"f:app": {}}},
            "f:spec": {
                "f:containers": {
                    'k:{"name":"nginx"}': {
                        ".": {},
                        "f:image": {},
                        "f:name": {},
                        "f:ports": {
                            'k:{"containerPort":80,"protocol":"TCP"}': {".": {}, "f:containerPort": {}}
                        },
                    }
                }
            },
        },
    },
}


async def test_apply_conflict_force_and_removed_field(cluster: Any, tmp_path: Path) -> None:
    kubectl = Kubectl(cluster.kubeconfig_path, tmp_path)
    await kubectl.ok(
        "apply", "--server-side", "-f", kubectl.manifest(deployment(2, {"app": "web", "tier": "front"}))
    )
    shown = yaml.safe_load(
        await kubectl.ok("get", "deployment", "web", "-o", "yaml", "--show-managed-fields")
    )
    entries = owners(shown)
    assert list(entries) == [("kubectl", "Apply")]
    assert entries["kubectl", "Apply"] == {"apiVersion": "apps/v1", "fieldsV1": APPLIED_FIELDS}

    # another manager changes a field the applier owns: an Update entry takes it over
    await kubectl.ok("patch", "deployment", "web", "--type", "merge", "-p", '{"spec":{"replicas":3}}')
    entries = owners(
        json.loads(await kubectl.ok("get", "deployment", "web", "-o", "json", "--show-managed-fields"))
    )
    assert entries["kubectl-patch", "Update"] == {
        "apiVersion": "apps/v1",
        "fieldsV1": {"f:spec": {"f:replicas": {}}},
    }
    assert "f:replicas" not in entries["kubectl", "Apply"]["fieldsV1"]["f:spec"]

    # applying the old value again conflicts, and nothing changes
    manifest = kubectl.manifest(deployment(2, {"app": "web"}))
    rc, _, err = await kubectl.run("apply", "--server-side", "-f", manifest)
    assert rc != 0
    assert 'Apply failed with 1 conflict: conflict with "kubectl-patch" using apps/v1: .spec.replicas' in err
    live = json.loads(await kubectl.ok("get", "deployment", "web", "-o", "json"))
    assert live["spec"]["replicas"] == 3 and live["metadata"]["labels"] == {"app": "web", "tier": "front"}

    # forced: the applier takes replicas back, and the label it no longer applies is removed
    await kubectl.ok("apply", "--server-side", "--force-conflicts", "-f", manifest)
    live = json.loads(await kubectl.ok("get", "deployment", "web", "-o", "json", "--show-managed-fields"))
    assert live["spec"]["replicas"] == 2
    assert live["metadata"]["labels"] == {"app": "web"}
    entries = owners(live)
    assert list(entries) == [("kubectl", "Apply")]
    expected = json.loads(json.dumps(APPLIED_FIELDS))
    del expected["f:metadata"]["f:labels"]["f:tier"]
    assert entries["kubectl", "Apply"]["fieldsV1"] == expected


CREATED_FIELDS = {
    "f:metadata": {"f:labels": {".": {}, "f:app": {}, "f:tier": {}}},
    "f:spec": {
        "f:progressDeadlineSeconds": {},
        "f:replicas": {},
        "f:revisionHistoryLimit": {},
        "f:selector": {},
        "f:strategy": {"f:rollingUpdate": {".": {}, "f:maxSurge": {}, "f:maxUnavailable": {}}, "f:type": {}},
        "f:template": {
            "f:metadata": {"f:labels": {".": {}, "f:app": {}}},
            "f:spec": {
                "f:containers": {
                    'k:{"name":"nginx"}': {
                        ".": {},
                        "f:image": {},
                        "f:imagePullPolicy": {},
                        "f:name": {},
                        "f:ports": {
                            ".": {},
                            'k:{"containerPort":80,"protocol":"TCP"}': {
                                ".": {},
                                "f:containerPort": {},
                                "f:protocol": {},
                            },
                        },
                        "f:resources": {},
                        "f:terminationMessagePath": {},
                        "f:terminationMessagePolicy": {},
                    }
                },
                "f:dnsPolicy": {},
                "f:restartPolicy": {},
                "f:schedulerName": {},
                "f:securityContext": {},
                "f:terminationGracePeriodSeconds": {},
            },
        },
    },
}


async def test_updates_record_their_manager(cluster: Any, tmp_path: Path) -> None:
    """Create, label, patch, scale and a /status write each leave an Update entry naming the
    fields that writer set, defaults included; kubectl's managers are named after its
    subcommand (`kubectl scale` sends none: the User-Agent's product, "kubectl")."""
    kubectl = Kubectl(cluster.kubeconfig_path, tmp_path)
    await kubectl.ok("create", "-f", kubectl.manifest(deployment(2, {"app": "web", "tier": "front"})))
    await kubectl.ok("label", "deployment", "web", "x=y")
    await kubectl.ok(
        "patch",
        "deployment",
        "web",
        "-p",
        '{"spec":{"template":{"spec":{"containers":[{"name":"nginx","env":[{"name":"A","value":"1"}]}]}}}}',
    )
    await kubectl.ok("scale", "deployment", "web", "--replicas", "4")
    async with await cluster.client() as kube:
        await kube.request(
            "PATCH",
            "/apis/apps/v1/namespaces/default/deployments/web/status",
            body={"status": {"replicas": 5}},
            content_type="application/merge-patch+json",
            query={"fieldManager": "st"},
        )
    live = json.loads(await kubectl.ok("get", "deployment", "web", "-o", "json", "--show-managed-fields"))
    # a /scale write's entry has no time, so it sorts first
    assert "time" not in live["metadata"]["managedFields"][0]
    assert [
        (e["manager"], e["operation"], e.get("subresource")) for e in live["metadata"]["managedFields"]
    ] == [
        ("kubectl", "Update", "scale"),
        ("kubectl-create", "Update", None),
        ("kubectl-label", "Update", None),
        ("kubectl-patch", "Update", None),
        ("st", "Update", "status"),
    ]
    entries = owners(live)
    assert entries["kubectl", "Update"] == {
        "apiVersion": "apps/v1",
        "subresource": "scale",
        "fieldsV1": {"f:spec": {"f:replicas": {}}},
    }
    created = json.loads(json.dumps(CREATED_FIELDS))
    del created["f:spec"]["f:replicas"]  # taken by the scale
    assert entries["kubectl-create", "Update"] == {"apiVersion": "apps/v1", "fieldsV1": created}
    assert entries["kubectl-label", "Update"]["fieldsV1"] == {"f:metadata": {"f:labels": {"f:x": {}}}}
    assert entries["kubectl-patch", "Update"]["fieldsV1"] == {
        "f:spec": {
            "f:template": {
                "f:spec": {
                    "f:containers": {
                        'k:{"name":"nginx"}': {
                            "f:env": {".": {}, 'k:{"name":"A"}': {".": {}, "f:name": {}, "f:value": {}}}
                        }
                    }
                }
            }
        }
    }
    assert entries["st", "Update"] == {
        "apiVersion": "apps/v1",
        "subresource": "status",
        "fieldsV1": {"f:status": {"f:replicas": {}}},
    }


async def test_apply_options_conflicts_and_shared_ownership(cluster: Any) -> None:
    path = "/api/v1/namespaces/default/configmaps/c"
    apply = "application/apply-patch+yaml"
    config: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "c"},
        "data": {"x": "1", "y": "2"},
    }
    async with await cluster.client() as kube:

        async def status_of(
            method: str, body: Any, content_type: str, query: dict[str, Any]
        ) -> dict[str, Any]:
            with pytest.raises(ApiError) as caught:
                await kube.request(method, path, body=body, content_type=content_type, query=query)
            answer = dict(caught.value.body)
            assert answer.pop("code") == caught.value.status
            return answer

        assert await status_of("PATCH", config, apply, {}) == {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "reason": "Invalid",
            "message": 'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is required for apply patch',
            "details": {
                "group": "meta.k8s.io",
                "kind": "PatchOptions",
                "causes": [
                    {
                        "reason": "FieldValueRequired",
                        "message": "Required value: is required for apply patch",
                        "field": "fieldManager",
                    }
                ],
            },
        }
        bad_version = await status_of("PATCH", {**config, "apiVersion": "v2"}, apply, {"fieldManager": "a"})
        assert (bad_version["reason"], bad_version["message"]) == (
            "BadRequest",
            "Incorrect version specified in apply patch. Specified patch version: v2, expected: v1",
        )
        with_owners = {
            **config,
            "metadata": {"name": "c", "managedFields": [{"manager": "x", "operation": "Apply"}]},
        }
        assert (await status_of("PATCH", with_owners, apply, {"fieldManager": "a"}))[
            "message"
        ] == "metadata.managedFields must be nil"
        too_long = await status_of("PATCH", config, apply, {"fieldManager": "m" * 129})
        assert (
            too_long["message"]
            == 'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Too long: must have at most 128 bytes'
        )
        created = await kube.request(
            "PATCH", path, body=config, content_type=apply, query={"fieldManager": "a"}
        )
        assert created["data"] == {"x": "1", "y": "2"}
        forced = await status_of(
            "PATCH",
            {"data": {"z": "3"}},
            "application/merge-patch+json",
            {"fieldManager": "m", "force": "true"},
        )
        assert (
            forced["message"]
            == 'PatchOptions.meta.k8s.io "" is invalid: force: Forbidden: may not be specified for non-apply patch'
        )

        other = {**config, "data": {"x": "3", "y": "4"}}
        assert await status_of("PATCH", other, apply, {"fieldManager": "b"}) == {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "reason": "Conflict",
            "message": 'Apply failed with 2 conflicts: conflicts with "a":\n- .data.x\n- .data.y',
            "details": {
                "causes": [
                    {"reason": "FieldManagerConflict", "message": 'conflict with "a"', "field": ".data.x"},
                    {"reason": "FieldManagerConflict", "message": 'conflict with "a"', "field": ".data.y"},
                ]
            },
        }
        # the same values: no conflict, both own them; a field one stops applying stays while the other owns it
        await kube.request("PATCH", path, body=config, content_type=apply, query={"fieldManager": "b"})
        shared = await kube.request(
            "PATCH",
            path,
            body={**config, "data": {"y": "2"}},
            content_type=apply,
            query={"fieldManager": "a"},
        )
        assert shared["data"] == {"x": "1", "y": "2"}
        assert {k[0]: v["fieldsV1"] for k, v in owners(shared).items()} == {
            "a": {"f:data": {"f:y": {}}},
            "b": {"f:data": {"f:x": {}, "f:y": {}}},
        }

        # no fieldManager on an update: the User-Agent's product name
        await kube.request(
            "PATCH", path, body={"data": {"w": "1"}}, content_type="application/merge-patch+json"
        )
        live = await kube.request("GET", path)
        agent = next(e["manager"] for e in live["metadata"]["managedFields"] if e["operation"] == "Update")
        assert agent and "/" not in agent

        # managedFields: [] in an update clears ownership
        live["metadata"]["managedFields"] = []
        live["data"]["v"] = "2"
        cleared = await kube.request("PUT", path, body=live, query={"fieldManager": "r"})
        assert "managedFields" not in cleared["metadata"]


async def test_apply_dropping_the_last_label_removes_the_map(cluster: Any) -> None:
    path = "/api/v1/namespaces/default/configmaps/labelled"
    config: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "labelled", "labels": {"l": "1"}},
        "data": {"k": "v"},
    }
    async with await cluster.client() as kube:
        await kube.request(
            "PATCH",
            path,
            body=config,
            content_type="application/apply-patch+yaml",
            query={"fieldManager": "a"},
        )
        config["metadata"] = {"name": "labelled"}
        after = await kube.request(
            "PATCH",
            path,
            body=config,
            content_type="application/apply-patch+yaml",
            query={"fieldManager": "a"},
        )
    assert "labels" not in after["metadata"]
    assert after["data"] == {"k": "v"}
    assert [e["fieldsV1"] for e in after["metadata"]["managedFields"]] == [{"f:data": {"f:k": {}}}]


async def test_client_side_apply_upgrades_to_server_side_then_two_appliers_share(
    cluster: Any, tmp_path: Path
) -> None:
    """`kubectl apply` then `kubectl apply --server-side`: the server lets the fields of the
    last-applied annotation go to "kubectl" without a conflict (and kubectl then moves the
    client-side entry over). A second applier conflicts on the image only, and forced, merges
    its container into the list next to the existing one."""
    kubectl = Kubectl(cluster.kubeconfig_path, tmp_path)
    first = deployment(2, {"app": "web"})
    await kubectl.ok("apply", "-f", kubectl.manifest(first))
    first["spec"]["replicas"] = 3
    first["spec"]["template"]["spec"]["containers"][0]["image"] = "nginx:2"
    await kubectl.ok("apply", "--server-side", "-f", kubectl.manifest(first))
    live = json.loads(await kubectl.ok("get", "deployment", "web", "-o", "json", "--show-managed-fields"))
    # Both are Apply entries; the server orders them by time (in seconds), then by manager, so
    # which comes first depends on whether the two applies fell in the same second.
    assert in_server_order(live["metadata"]["managedFields"])
    assert sorted(owners(live)) == [("kubectl", "Apply"), ("kubectl-last-applied", "Apply")]
    assert live["spec"]["replicas"] == 3

    second = deployment(2, {"app": "web"})
    del second["spec"]["replicas"]
    second["spec"]["template"]["spec"]["containers"] = [
        {"name": "nginx", "image": "nginx:3"},
        {"name": "side", "image": "busybox"},
    ]
    manifest = kubectl.manifest(second)
    rc, _, err = await kubectl.run("apply", "--server-side", "--field-manager", "other", "-f", manifest)
    assert rc != 0
    assert (
        'Apply failed with 1 conflict: conflict with "kubectl": .spec.template.spec.containers[name="nginx"].image'
        in err
    )
    await kubectl.ok(
        "apply", "--server-side", "--force-conflicts", "--field-manager", "other", "-f", manifest
    )
    live = json.loads(await kubectl.ok("get", "deployment", "web", "-o", "json", "--show-managed-fields"))
    containers = live["spec"]["template"]["spec"]["containers"]
    assert [(c["name"], c["image"], c.get("ports")) for c in containers] == [
        ("nginx", "nginx:3", [{"containerPort": 80, "protocol": "TCP"}]),
        ("side", "busybox", None),
    ]
    assert owners(live)["other", "Apply"]["fieldsV1"]["f:spec"]["f:template"]["f:spec"] == {
        "f:containers": {
            'k:{"name":"nginx"}': {".": {}, "f:image": {}, "f:name": {}},
            'k:{"name":"side"}': {".": {}, "f:image": {}, "f:name": {}},
        }
    }


async def test_eleven_updaters_leave_ten_entries(cluster: Any) -> None:
    """Past ten Update managers the two oldest share an `ancient-changes` entry. (The create
    sets data: an object created with no fields has no entries, and updates never start them.)"""
    path = "/api/v1/namespaces/default/configmaps/busy"
    async with await cluster.client() as kube:
        await kube.request(
            "POST",
            "/api/v1/namespaces/default/configmaps",
            body={
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "busy"},
                "data": {"init": "v"},
            },
            query={"fieldManager": "m00"},
        )
        for i in range(11):
            await kube.request(
                "PATCH",
                path,
                body={"data": {f"k{i}": "v"}},
                content_type="application/merge-patch+json",
                query={"fieldManager": f"m{i:02}"},
            )
        live = await kube.request("GET", path)
    entries = owners(live)
    assert len(entries) == 10
    assert entries["ancient-changes", "Update"]["fieldsV1"] == {
        "f:data": {".": {}, "f:init": {}, "f:k0": {}, "f:k1": {}}
    }
    assert (
        ("m00", "Update") not in entries and ("m01", "Update") not in entries and ("m10", "Update") in entries
    )


async def test_updates_do_not_start_tracking_on_an_object_without_entries(cluster: Any) -> None:
    path = "/api/v1/namespaces/default/configmaps/bare"
    async with await cluster.client() as kube:
        await kube.request(
            "POST",
            "/api/v1/namespaces/default/configmaps",
            body={"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "bare"}},
            query={"fieldManager": "c"},
        )
        patched = await kube.request(
            "PATCH",
            path,
            body={"data": {"k": "v"}},
            content_type="application/merge-patch+json",
            query={"fieldManager": "u"},
        )
        assert "managedFields" not in patched["metadata"]
        applied = await kube.request(
            "PATCH",
            path,
            body={"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "bare"}, "data": {"a": "1"}},
            content_type="application/apply-patch+yaml",
            query={"fieldManager": "a"},
        )
    # the first apply hands what the object had to "before-first-apply"
    assert owners(applied) == {
        ("a", "Apply"): {"apiVersion": "v1", "fieldsV1": {"f:data": {"f:a": {}}}},
        ("before-first-apply", "Update"): {"apiVersion": "v1", "fieldsV1": {"f:data": {".": {}, "f:k": {}}}},
    }


async def test_apply_to_status_and_status_in_a_main_apply(cluster: Any) -> None:
    """A main-resource apply neither sets nor owns status; an apply to /status owns only status."""
    base = "/apis/apps/v1/namespaces/default/deployments/web"
    apply = "application/apply-patch+yaml"
    config = deployment(2, {"app": "web"})
    async with await cluster.client() as kube:
        created = await kube.request(
            "PATCH",
            base,
            body={**config, "status": {"replicas": 7}},
            content_type=apply,
            query={"fieldManager": "main"},
        )
        assert created.get("status", {}).get("replicas") is None
        assert "f:status" not in owners(created)["main", "Apply"]["fieldsV1"]
        status = await kube.request(
            "PATCH",
            base + "/status",
            content_type=apply,
            query={"fieldManager": "st"},
            body={
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {"name": "web"},
                "spec": {"replicas": 9},
                "status": {"replicas": 4},
            },
        )
        assert status["status"]["replicas"] == 4 and status["spec"]["replicas"] == 2
        assert owners(status)["st", "Apply"] == {
            "apiVersion": "apps/v1",
            "subresource": "status",
            "fieldsV1": {"f:status": {"f:replicas": {}}},
        }
        dry = await kube.request(
            "PATCH",
            base,
            body={**config, "spec": {**config["spec"], "replicas": 5}},
            content_type=apply,
            query={"fieldManager": "main", "dryRun": "All"},
        )
        assert dry["spec"]["replicas"] == 5
        assert (await kube.request("GET", base))["spec"]["replicas"] == 2
