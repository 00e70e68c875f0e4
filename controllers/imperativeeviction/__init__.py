"""The imperative eviction responder: the last responder of every pod's Eviction (KEP-4563).

Every pod's Eviction lists `imperative-eviction.k8s.io/evictor` (priority 100) among its target
responders. When the evictionrequest controller makes it the Active one (every responder before
it finished, was interrupted or never answered), this controller calls the pod's `/eviction`
subresource, which PodDisruptionBudgets guard, and retries a refusal with a backoff from 5 s
doubling to 10 min, reporting each try and the attempt count in its entry of
`status.responders`, with a heartbeat at least every 3 min. It sets completionTime once the pod
is gone or terminal. A port of kube-controller-manager's `pkg/controller/imperativeevictionresponder`
(kubernetes/kubernetes at 127a4dea56311defa100d12e4416bbbf3c5b4b77, the version on the merged
`lifecycle/v1alpha1` types).

`controller.py` wires the caches and the queue, `sync.py` is the reconcile, `plan.py` holds the
decisions (upstream's `utils.go` and its messages), `state.py` the time of each pod's last failed
call, `metrics.py` the counters.

Where this differs from upstream, and why:

- The API group is the one the cluster serves (`ctx.eviction_api`): aiokcm's
  `lifecycle.aiokcm.io` CustomResourceDefinitions unless the server serves `lifecycle.k8s.io`.
- The status write is a JSON patch of this responder's entry alone (`test` its name at its
  index, `replace` the entry), where upstream applies the entry server-side with force. An apply
  merges into `status.responders` by name only if the schema says the list is a map; on a CRD
  that does not, it would replace the whole list and erase the other responders' entries. The
  JSON patch touches one entry on every server (the embedded one, a v1.24 kube-apiserver, the
  built-in API), needs no resourceVersion, as the apply does not, and a reordered list fails its
  `test` instead of writing the wrong entry. CRDs take no strategic merge patch, and a merge
  patch replaces lists whole. The entry is recorded under aiokcm's field manager, not applied
  under the controller's name.
- Upstream records no events and has no metrics. Here each action (an accepted `/eviction` call,
  a refused one, the completion) is an event on the Eviction and an info log with its key, every
  write is counted (`metrics.py`), and failed calls are counted by reason in
  `imperative_eviction_responder_controller_failed_evictions`. Heartbeat and progress writes are
  logged and counted, without an event (one every 3 min per Eviction would flood the events).
- Timestamps are compared as the API stores them (whole seconds): an expected completion time
  already written to the second is not written again, where upstream compares Go times and
  rewrites a clamped-to-now value on every heartbeat.
- Messages are cut at 4000 characters (the API's limit counts characters) where upstream cuts
  4000 bytes; Go's `%q` is rendered as a JSON string, the same text for pod names and phases.
- `should_handle` leaves out upstream's test of the Failed and TargetEvicted conditions: it sits
  after a `return true` for both responder roles and never decides anything. The evictor stops on
  a finished Eviction because its state is no longer Active, as upstream's does.
- A sync that runs before the Eviction cache has seen this controller's own last status write
  waits for it (`controllers.common.written`). Upstream reads the entry it replaced, so when the
  pod's deletion wakes it right after it reported the eviction, it loses the "via the /eviction
  subresource" of its next message (the tests here hit that race on every run), and a stale
  attempt count could shorten a backoff.
- A call that gets no answer (a dropped connection, a timeout) is reported and backed off like a
  refusal, as upstream's `err != nil` branch does; a bug in our code raises instead.
- Upstream's controller config holds only the number of workers (default 5): that is the registry
  row's worker count and `--concurrent-imperative-eviction-responder-syncs`, so there is no config
  class.

- DaemonSet pods and mirror pods are left alone: the evictor completes with the reason in its
  message, so the Eviction ends `Failed` (`NoFurtherResponder`) and the requester reads why.
  Upstream calls `/eviction` on them like any other pod; but a DaemonSet's controller puts its
  pod straight back on the node (it tolerates `unschedulable`) and the kubelet recreates a
  mirror pod at once, so the eviction only opens a gap in what the daemon serves, and every
  drainer (`kubectl drain --ignore-daemonsets`, aiokcm's NodeMaintenance) skips them already.

Not differences, though one might expect them: it never calls `/eviction` on a pod already
terminating, and the attempt count lives in the message while the time of the last failure
lives in memory, as upstream's.
"""

from controllers.imperativeeviction.controller import ImperativeEvictionResponderController

__all__ = ["ImperativeEvictionResponderController"]
