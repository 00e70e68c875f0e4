"""Each install's RBAC on the local cluster with authorization enforced: overlays/replace-kcm's
(deploy/rbac.yaml and the overlay's rbac-extra.yaml) with every controller at work and every grant
in it used; deploy/'s alone with the controllers deploy/deployment.yaml runs, none of them refused.

The same check as tests/real/test_deploy_rbac.py, on the embedded cluster (`authz=True`), so it
runs on every machine: the manifests are applied with kubectl, two managers run as processes with
only their ServiceAccount's token (TokenRequest), their secure ports review callers through that
ServiceAccount, and a Prometheus-like ServiceAccount bound to `aiokcm-metrics-reader` scrapes them.

The first manager leads (every controller); the second, without the maintenance-lease controller,
stands by on the lock. The leader runs the demo drain (nodemaintenance with the maintenance Lease
gate, deployment, replicaset, disruption, events), repairs a maintenance Lease's owner, adopts an
orphan pod and an orphan ReplicaSet (and deletes the latter, out of history), clears a rollback
with no revision to go to, and counts a PodDisruptionBudget over a custom workload through its
`/scale`. Deleting the demo maintenance releases its node's Lease. Then the leader stops and the standby
takes the lock over; the new leader makes a node's missing
maintenance Lease (the gate alone, since no controller keeps them) and evicts a pod no owner
answers for (a bare pod, `force`); a kubelet stops (node lifecycle taints the node and marks its
pods not ready; taint eviction deletes the pod that does not tolerate it).

The cluster records each authorization decision. Any refusal of the ServiceAccount fails the test
(a grant the code needs and the overlay's manifests lack), and so does any grant of theirs the
managers never used (a grant nothing needs), but for the few this run cannot reach, each named with
its reason in `UNREACHED`. A scrape without a token gets 401, with the scraper's
token 200, `/healthz` answers without one: `curl -k`, as an operator would try it.
"""

from __future__ import annotations

import io
import json
import os
import signal
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import anyio
import pytest
import yaml
from anyio.abc import Process

from apiclient import ApiError, KubeClient
from apiclient.resources import (
    CUSTOMRESOURCEDEFINITIONS,
    DEPLOYMENTS,
    LEASES,
    NODEMAINTENANCES,
    NODES,
    PODDISRUPTIONBUDGETS,
    PODS,
    REPLICASETS,
    Resource,
)
from controller_manager import rbac
from evictionapi import names
from localcluster.cluster import LocalCluster
from localcluster.demo import APPS, drained, node_maintenance, run_demo
from nodemaintenancelease.lease import NAMESPACE as MAINTENANCE_LEASES
from realcluster.ports import free_port
from tests.real.test_deploy_rbac import (
    MANIFESTS,
    ROOT,
    _metric_total,
    _scraper_token,
    _service_account_token,
    manager_args,
)
from tests.support.manifests import kubectl_apply
from tests.support.waiting import eventually

# What overlays/replace-kcm applies for RBAC: deploy/'s manifests and what every controller needs beyond.
REPLACE_KCM_MANIFESTS = [*MANIFESTS, rbac.OVERLAY_MANIFEST]

SERVICE_ACCOUNT = f"system:serviceaccount:{rbac.NAMESPACE}:{rbac.NAME}"
FAST_NODE_LIFECYCLE = (
    "--node-monitor-grace-period=3s",
    "--node-startup-grace-period=5s",
    "--node-eviction-rate=10",
)
FAST_LEADER_ELECTION = (
    "--leader-elect-lease-duration=4s",
    "--leader-elect-renew-deadline=3s",
    "--leader-elect-retry-period=500ms",
)
UNREACHABLE = "node.kubernetes.io/unreachable"
# Naming the key keeps DefaultTolerationSeconds away; the value is one the taint never has.
UNTOLERATING = [
    {"key": k, "operator": "Equal", "value": "never", "effect": "NoExecute"}
    for k in (UNREACHABLE, "node.kubernetes.io/not-ready")
]
WIDGETS = Resource("test.aiokcm.io", "v1", "widgets", "Widget", True)
ROLLBACK_TO = "deprecated.deployment.rollback.to"
NS = "default"
WAIT = 60  # seconds; a bound only a broken manager reaches

Grant = tuple[
    str, str, str, str
]  # (verb, API group, resource[/subresource], namespace or "" for cluster-wide)


async def _absent(admin: KubeClient, res: Resource, name: str, namespace: str | None = None) -> bool:
    obj = await admin.get_or_none(res, name, namespace=namespace)
    return obj is None or bool(obj["metadata"].get("deletionTimestamp"))


async def _until(probe: Any, what: str) -> None:
    await eventually(probe, what, timeout=WAIT, interval=0.1)


async def _repair_a_lease_owner(admin: KubeClient, node: str) -> None:
    """maintenance-lease: a Lease whose owner reference was dropped gets it back (a JSON patch).

    The controller made this one at its start (or the drained node's maintenance, if first)."""
    await admin.patch(
        LEASES,
        node,
        [{"op": "remove", "path": "/metadata/ownerReferences"}],
        namespace=MAINTENANCE_LEASES,
        patch_type="json",
    )

    async def owned() -> bool:
        lease = await admin.get(LEASES, node, namespace=MAINTENANCE_LEASES)
        return any(ref.get("kind") == "Node" for ref in lease["metadata"].get("ownerReferences") or [])

    await _until(owned, "the lease's owner back")


async def _web_replicaset(admin: KubeClient) -> dict[str, Any]:
    items = (await admin.list(REPLICASETS, namespace=NS, label_selector="app=web"))["items"]
    return max(items, key=lambda rs: int(rs["spec"].get("replicas") or 0))


async def _adopt_an_orphan_pod(admin: KubeClient) -> None:
    """replicaset: a pod its selector matches and nobody owns is adopted (then one is too many)."""
    rs = await _web_replicaset(admin)
    labels = dict(rs["spec"]["selector"]["matchLabels"])
    await admin.create(
        PODS,
        {
            "metadata": {"name": "web-orphan", "labels": labels},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]},
        },
        namespace=NS,
    )

    async def adopted() -> bool:
        pod = await admin.get_or_none(PODS, "web-orphan", namespace=NS)
        if pod is None:
            return True  # adopted, then deleted as the surplus
        refs = pod["metadata"].get("ownerReferences") or []
        return any(ref.get("uid") == rs["metadata"]["uid"] for ref in refs)

    await _until(adopted, "the orphan pod adopted")


async def _adopt_and_clean_an_orphan_replicaset(admin: KubeClient) -> None:
    """deployment: a ReplicaSet its selector matches is adopted; with no history kept it is deleted."""
    await admin.patch(DEPLOYMENTS, "web", {"spec": {"revisionHistoryLimit": 0}}, namespace=NS)
    selector = {"app": "web", "generation": "orphan"}
    await admin.create(
        REPLICASETS,
        {
            "metadata": {"name": "web-orphan", "labels": {"app": "web"}},
            "spec": {
                "replicas": 0,
                "selector": {"matchLabels": selector},
                "template": {
                    "metadata": {"labels": selector},
                    "spec": {"containers": [{"name": "c", "image": "old"}]},
                },
            },
        },
        namespace=NS,
    )
    await _until(
        lambda: _absent(admin, REPLICASETS, "web-orphan", NS), "the orphan ReplicaSet adopted and deleted"
    )


async def _roll_back_to_nowhere(admin: KubeClient) -> None:
    """deployment: a rollback to a revision that does not exist is refused and its annotation cleared."""
    await admin.patch(DEPLOYMENTS, "web", {"metadata": {"annotations": {ROLLBACK_TO: "7"}}}, namespace=NS)

    async def cleared() -> bool:
        d = await admin.get(DEPLOYMENTS, "web", namespace=NS)
        return ROLLBACK_TO not in (d["metadata"].get("annotations") or {})

    await _until(cleared, "the rollback annotation cleared")


async def _budget_over_a_custom_workload(admin: KubeClient) -> None:
    """disruption: a budget over pods of a custom resource counts them through its `/scale`."""
    version = {
        "name": "v1",
        "served": True,
        "storage": True,
        "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
        "subresources": {
            "scale": {"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas"}
        },
    }
    await admin.create(
        CUSTOMRESOURCEDEFINITIONS,
        {
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.test.aiokcm.io"},
            "spec": {
                "group": "test.aiokcm.io",
                "scope": "Namespaced",
                "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
                "versions": [version],
            },
        },
    )

    async def served() -> bool:
        try:
            await admin.list(WIDGETS, namespace=NS, limit=1)
        except ApiError:
            return False
        return True

    await _until(served, "the Widget API")
    widget = await admin.create(
        WIDGETS,
        {
            "apiVersion": "test.aiokcm.io/v1",
            "kind": "Widget",
            "metadata": {"name": "w"},
            "spec": {"replicas": 4},
        },
        namespace=NS,
    )
    ref = {
        "apiVersion": "test.aiokcm.io/v1",
        "kind": "Widget",
        "name": "w",
        "uid": widget["metadata"]["uid"],
        "controller": True,
    }
    await admin.create(
        PODS,
        {
            "metadata": {"name": "widget-0", "labels": {"app": "widget"}, "ownerReferences": [ref]},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]},
        },
        namespace=NS,
    )
    await admin.create(
        PODDISRUPTIONBUDGETS,
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "widget"},
            "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "widget"}}},
        },
        namespace=NS,
    )

    async def counted() -> bool:
        pdb = await admin.get(PODDISRUPTIONBUDGETS, "widget", namespace=NS)
        return (pdb.get("status") or {}).get("expectedPods") == 4

    await _until(counted, "the budget's expected pods from the Widget's /scale")


async def _lock_holder(admin: KubeClient) -> str:
    lease = await admin.get(LEASES, "aiokcm", namespace="kube-system")
    return str((lease.get("spec") or {}).get("holderIdentity") or "")


async def _force_drain_a_bare_pod(admin: KubeClient, node: str, reason: str) -> None:
    """A bare pod on `node`, drained by a forced NodeMaintenance of that pod alone: evicted, Drained."""
    await admin.create(
        PODS,
        {
            "metadata": {"name": "bare", "labels": {"app": "bare"}},
            "spec": {"nodeName": node, "containers": [{"name": "c", "image": "busybox"}]},
        },
        namespace=NS,
    )
    nm = node_maintenance("evict-bare", node, reason)
    nm["spec"] |= {"force": True, "podSelector": "app=bare"}
    await admin.create(NODEMAINTENANCES, nm)

    async def evicted() -> bool:
        return drained(await admin.get(NODEMAINTENANCES, "evict-bare")) and await _absent(
            admin, PODS, "bare", NS
        )

    await _until(evicted, "the bare pod evicted and the node Drained")


async def _evict_a_pod_no_one_answers_for(admin: KubeClient, node: str) -> None:
    """nodemaintenance: with no controller keeping leases, the gate makes the node's Lease itself; a
    bare pod (nobody answers an EvacuationRequest for it) is evicted since the maintenance says `force`."""
    await admin.delete(NODEMAINTENANCES, f"demo-{node}")
    await _until(lambda: _absent(admin, NODEMAINTENANCES, f"demo-{node}"), "the demo maintenance gone")

    async def released() -> bool:
        lease = await admin.get(LEASES, node, namespace=MAINTENANCE_LEASES)
        return not (lease.get("spec") or {}).get("holderIdentity")

    await _until(released, "the node's lease released with its maintenance")
    await admin.delete(LEASES, node, namespace=MAINTENANCE_LEASES)
    await _force_drain_a_bare_pod(admin, node, "no owner answers")
    lease = await admin.get(LEASES, node, namespace=MAINTENANCE_LEASES)
    assert lease["spec"].get("holderIdentity"), lease  # made and taken by the gate


async def _lose_a_node(cluster: LocalCluster, admin: KubeClient) -> None:
    """node-lifecycle: a node whose kubelet stops is tainted; taint eviction deletes the pod that
    does not tolerate it."""
    node = "node-3"
    await admin.create(
        PODS,
        {
            "metadata": {"name": "victim", "namespace": NS},
            "spec": {
                "nodeName": node,
                "tolerations": UNTOLERATING,
                "containers": [{"name": "c", "image": "busybox"}],
            },
        },
        namespace=NS,
    )
    cluster.kubelets[node].stop()

    async def state() -> tuple[bool, bool]:
        taints = (await admin.get(NODES, node)).get("spec", {}).get("taints") or []
        # Deleted: terminating for good, as on a real cluster, since no kubelet is left to confirm it.
        return any(t.get("key") == UNREACHABLE for t in taints), await _absent(admin, PODS, "victim", NS)

    async def tainted_and_evicted() -> bool:
        return await state() == (True, True)

    await _until(tainted_and_evicted, f"{node} tainted {UNREACHABLE} and its untolerating pod deleted")


async def _curl(port: int, path: str, token: str = "") -> str:
    headers = ["-H", f"Authorization: Bearer {token}"] if token else []
    done = await anyio.run_process(
        [
            "curl",
            "-k",
            "-s",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            *headers,
            f"https://127.0.0.1:{port}{path}",
        ],
        check=False,
    )
    return done.stdout.decode()


def _granted(docs: Iterable[Mapping[str, Any]]) -> set[Grant]:
    """What the manifests grant aiokcm's ServiceAccount through the roles they write."""
    subject = {"kind": "ServiceAccount", "name": rbac.NAME, "namespace": rbac.NAMESPACE}
    roles = {
        (d["kind"], d["metadata"].get("namespace", ""), d["metadata"]["name"]): d
        for d in docs
        if d["kind"] in ("Role", "ClusterRole")
    }
    out: set[Grant] = set()
    for binding in docs:
        if binding["kind"] not in ("RoleBinding", "ClusterRoleBinding") or subject not in binding["subjects"]:
            continue
        namespace = binding["metadata"].get("namespace", "")
        role = roles.get(
            (
                binding["roleRef"]["kind"],
                namespace if binding["roleRef"]["kind"] == "Role" else "",
                binding["roleRef"]["name"],
            )
        )
        if role is None:
            continue  # a Role the API server bootstraps (extension-apiserver-authentication-reader)
        for rule in role["rules"]:
            out |= {
                (v, g, r, namespace)
                for v in rule["verbs"]
                for g in rule["apiGroups"]
                for r in rule["resources"]
            }
    return out


def _used(grant: Grant, decisions: set[Grant]) -> bool:
    verb, group, resource, namespace = grant
    for v, g, r, ns in decisions:
        if v != verb or (namespace and ns != namespace):
            continue
        if group == "*" and resource.startswith("*/") and r.endswith(resource[1:]):
            return True
        if (g, r) == (group, resource):
            return True
    return False


async def _stop(proc: Process | None) -> int | None:
    if proc is None:
        return None
    if proc.returncode is None:
        proc.send_signal(signal.SIGTERM)
        with anyio.move_on_after(30):
            await proc.wait()
    if proc.returncode is None:
        proc.kill()
        await proc.wait()
        return None
    return proc.returncode


@pytest.mark.timeout(240)
async def test_deploy_manifests_drive_every_controller_on_the_enforcing_local_cluster(tmp_path: Path) -> None:
    # Kubelets at ten times the real pace (a lease renewed every second, pods started in 0.2 s) so that
    # the 3 s grace period of FAST_NODE_LIFECYCLE keeps its real ratio to the renewals (40 s to 10 s):
    # only the kubelet that stops goes silent, never a healthy one between two renewals.
    async with LocalCluster(
        nodes=3, speed=10, pod_start_delay=2.0, termination_cap=5.0, authz=True
    ) as cluster:
        await kubectl_apply(cluster.kubeconfig_path, REPLACE_KCM_MANIFESTS)
        admin = await cluster.client()
        ports = (free_port(), free_port())
        logs = (tmp_path / "leader.log", tmp_path / "standby.log")
        first: Process | None = None
        second: Process | None = None
        codes: list[int | None] = []
        try:
            token = await _service_account_token(admin)
            kubeconfig = tmp_path / "aiokcm-sa.kubeconfig"
            kubeconfig.write_text(yaml.safe_dump(cluster.kubeconfig_for_token(token)))
            aiokcm = str(Path(sys.executable).with_name("aiokcm"))
            env = {**os.environ, "PYTHONUNBUFFERED": "1"}
            with logs[0].open("wb") as log:
                first = await anyio.open_process(
                    [
                        aiokcm,
                        *manager_args(ports[0], kubeconfig),
                        *FAST_NODE_LIFECYCLE,
                        *FAST_LEADER_ELECTION,
                    ],
                    stdout=log,
                    stderr=log,
                    cwd=ROOT,
                    env=env,
                )
            result = await run_demo(admin, out=io.StringIO())
            leader = await _lock_holder(admin)
            with logs[1].open("wb") as log:
                second = await anyio.open_process(
                    [
                        aiokcm,
                        *manager_args(ports[1], kubeconfig),
                        *FAST_NODE_LIFECYCLE,
                        *FAST_LEADER_ELECTION,
                        "--controllers=*,-maintenance-lease",
                    ],
                    stdout=log,
                    stderr=log,
                    cwd=ROOT,
                    env=env,
                )
            await _repair_a_lease_owner(admin, result.node)
            await _adopt_an_orphan_pod(admin)
            await _adopt_and_clean_an_orphan_replicaset(admin)
            await _roll_back_to_nowhere(admin)
            await _budget_over_a_custom_workload(admin)
            scraper = await _scraper_token(admin)
            assert await _metric_total(ports[0], "200", scraper) > 0  # it worked, as its ServiceAccount
            standby_watch = (SERVICE_ACCOUNT, "watch", "coordination.k8s.io", "leases", "kube-system", True)

            async def standing_by() -> bool:
                return standby_watch in cluster.auth.decisions

            await _until(standing_by, "the second manager watching the lock")
            codes.append(await _stop(first))  # releases the lock on its way out
            await _until(lambda: _new_holder(admin, leader), "the standby holding the lock")
            await _evict_a_pod_no_one_answers_for(admin, result.node)
            await _lose_a_node(cluster, admin)
            scrapes = (
                await _curl(ports[1], "/metrics"),
                await _curl(ports[1], "/metrics", scraper),
                await _curl(ports[1], "/healthz"),
            )
            codes.append(await _stop(second))
        except AssertionError as exc:  # a step that never finished: say which request was refused, if any
            refused = sorted(k for k in cluster.auth.decisions if k[0] == SERVICE_ACCOUNT and not k[5])
            raise AssertionError(f"{exc}; refused to the ServiceAccount: {refused}") from None
        finally:
            await _stop(first)
            await _stop(second)
            await admin.close()
        decisions = dict(cluster.auth.decisions)
    output = "\n".join(log.read_text(errors="replace") for log in logs)
    assert result.drained, output[-3000:]
    assert result.zero_downtime(APPS), f"least available while draining: {result.least_available}"
    refused = sorted(k for k in decisions if k[0] == SERVICE_ACCOUNT and not k[5])
    assert not refused, refused
    assert "Forbidden" not in output
    used = {
        (verb, group, resource, namespace)
        for user, verb, group, resource, namespace, allowed in decisions
        if user == SERVICE_ACCOUNT and allowed
    }
    overlay_rbac = (rbac.MANIFEST, rbac.OVERLAY_MANIFEST)
    granted = _granted([d for m in overlay_rbac for d in yaml.safe_load_all(m.read_text()) if d])
    unused = sorted(g for g in granted if not _used(g, used) and g not in TIMING_DEPENDENT)
    assert unused == sorted(UNREACHED), unused  # every other grant is needed by something done here
    assert scrapes == ("401", "200", "200")  # no token, the scraper's token, /healthz with none
    assert codes == [0, 0], output[-2000:]
    assert token not in output and scraper not in output


# Grants this run cannot reach, and why: the eviction webhook's certificate Secret, Endpoints and
# caBundle (gate EvictionSurge, off here as in deploy/; its own tests drive it), the EvictionRequest
# API's Evictions and EvictionRequests in either group (gate EvictionRequestAPI, off here as in
# deploy/: a role covers every controller the flag names, so turning the gate on needs no other
# RBAC; tests/e2e/test_eviction_requests.py and tests/real/test_eviction_request_drain.py drive
# them), and the lease namespace's creation (deploy/namespace.yaml makes it, and its Role lives in
# it, so the manager only creates it on a cluster installed without deploy/), and the ReplicaSets'
# finalizers, which only OwnerReferencesPermissionEnforcement asks for (when on) as the replacement
# surge's hand-over sets blockOwnerDeletion: a check on the pod patch, no request of its own.
# Grants this run reaches only when its timing allows: an event is patched (its count raised) only
# when the same event repeats within the broadcaster's aggregation window, which a drain step
# retried at the right moment does and a faster run may not. Whether the grant is needed is shown by
# tests/manager/test_events.py (identical events become one, patched); here it is neither required
# nor reported as unused.
TIMING_DEPENDENT = {("patch", "", "events", "")}
UNREACHED = {
    *(
        (verb, rule.group, rule.resource, rule.namespace)
        for rule in rbac.WEBHOOK_RULES
        for verb in rule.verbs
    ),
    *(
        (verb, rule.group, rule.resource, rule.namespace)
        for rule in rbac.rules_for(rbac.overlay_controllers())
        if rule.group in (names.AIOKCM_GROUP, names.BUILTIN_GROUP)
        for verb in rule.verbs
    ),
    ("create", "", "namespaces", ""),
    ("update", "apps", "replicasets/finalizers", ""),
}


async def _new_holder(admin: KubeClient, old: str) -> bool:
    holder = await _lock_holder(admin)
    return bool(holder) and holder != old


def _default_install_args(port: int, kubeconfig: Path) -> list[str]:
    """deploy/'s own arguments: the overlay's (which differ in `--controllers` only, as
    tests/e2e/test_install.py checks) with deploy/deployment.yaml's `--controllers`."""
    flag = rbac.CONTROLLERS_FLAG + ",".join(rbac.deployment_controllers_flag())
    return [flag if a.startswith(rbac.CONTROLLERS_FLAG) else a for a in manager_args(port, kubeconfig)]


@pytest.mark.timeout(120)
async def test_the_default_install_runs_under_deploy_rbac_alone(tmp_path: Path) -> None:
    """deploy/rbac.yaml holds only what deploy/'s controllers need: with nothing else applied, they
    start and sync (every informer of each, replacement-surge's included), take the lock, a forced
    maintenance cordons and drains a node through its maintenance Lease, and the maintenance-lease
    controller repairs that Lease's owner, with no request refused. The cluster runs no ReplicaSet
    or Deployment controller here, so replacement-surge has nothing to surge: its writes are checked
    against its rules by tests/manager/test_rbac.py only."""
    async with LocalCluster(
        nodes=2, speed=10, pod_start_delay=2.0, termination_cap=5.0, authz=True
    ) as cluster:
        await kubectl_apply(cluster.kubeconfig_path, MANIFESTS)
        admin = await cluster.client()
        port = free_port()
        log_path = tmp_path / "aiokcm.log"
        manager: Process | None = None
        code: int | None = None
        node = "node-1"
        try:
            token = await _service_account_token(admin)
            kubeconfig = tmp_path / "aiokcm-sa.kubeconfig"
            kubeconfig.write_text(yaml.safe_dump(cluster.kubeconfig_for_token(token)))
            with log_path.open("wb") as log:
                manager = await anyio.open_process(
                    [str(Path(sys.executable).with_name("aiokcm")), *_default_install_args(port, kubeconfig)],
                    stdout=log,
                    stderr=log,
                    cwd=ROOT,
                    env={**os.environ, "PYTHONUNBUFFERED": "1"},
                )

            async def ready() -> bool:
                return await _curl(port, "/readyz") == "200"

            await _until(ready, "the leader's caches synced")
            await _force_drain_a_bare_pod(admin, node, "the default install drains")
            await _repair_a_lease_owner(admin, node)
            code = await _stop(manager)
        except AssertionError as exc:
            refused = sorted(k for k in cluster.auth.decisions if k[0] == SERVICE_ACCOUNT and not k[5])
            raise AssertionError(f"{exc}; refused to the ServiceAccount: {refused}") from None
        finally:
            await _stop(manager)
            await admin.close()
        decisions = dict(cluster.auth.decisions)
    output = log_path.read_text(errors="replace")
    refused = sorted(k for k in decisions if k[0] == SERVICE_ACCOUNT and not k[5])
    assert not refused, refused
    assert "Forbidden" not in output
    started = {
        str(line["controller"])
        for line in map(json.loads, filter(None, output.splitlines()))
        if line.get("event") == "starting workers"
    }
    assert started == set(rbac.default_controllers()), output[-2000:]  # each ran, its caches synced
    assert code == 0, output[-2000:]
