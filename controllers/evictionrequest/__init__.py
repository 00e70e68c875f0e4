"""The evictionrequest controller (KEP-4563): Evictions for EvictionRequests, and their responders.

A port of Kubernetes' `pkg/controller/evictionrequest` as of the KEP author's branch
(atiratree/kubernetes@27bf4c51ef0bd9b98680d695264fe067fec436d7, the version written against the
merged `lifecycle/v1alpha1` types; its unit tests as of bcee4d5966804d78dd6032485ba457521d5306cc).
For each pod some EvictionRequest asks to evict, it keeps one live Eviction (`pod-<n>-<pod>`),
owned by every request of the pod and labelled with every participant's role; it activates the
pod's responders one at a time, highest priority first (the default
`imperative-eviction.k8s.io/evictor` at 100 last), interrupts one that does not heartbeat within
20 minutes, cancels the work when no request wants the eviction any more (Failed,
CanceledDueToNoRequesters), and reports the pod deleted or terminal (TargetEvicted), giving the
Active responder 5 s after the pod's deletion to report its completion. Every EvictionRequest of
the pod carries the Eviction's TargetEvicted and Failed conditions. Evictions are removed by the
garbage collector through their owner references; upstream deletes nothing itself, nor does this.

`target.py` (upstream's target_info.go), `rules.py` (evictionrequest_utils.go), `progression.py`
(eviction_utils.go) and `status.py` (the computing half of the controller) are pure; the three
loops are `evictionsync.py`, `requestsync.py`, `metasync.py`; `controller.py` wires them.

Differences from upstream, and why:

- Writes are merge patches carrying the cached resourceVersion, not server-side applies with
  `force`. aiokcm's CRDs (and v1.24 servers) cannot be relied on to merge `status.responders` by
  name, and a forced apply of a stale list would drop a responder's fresh heartbeat; with the
  resourceVersion a concurrent write becomes a conflict and a retry. Fields of other writers are
  kept: conditions of other types, `status.responders` entries and fields (only `startTime` is
  ours), labels that are not participants', owner references of other kinds.
- An Eviction is created with a POST, not an apply: an apply onto a name some other Eviction
  already has would rewrite it; a POST fails and the sync is retried once the cache has caught up.
- Writes are skipped when nothing changed (upstream's later revision does the same), and the
  resync asked for by the responder progression is a `Result(requeue_after=...)`.
- Label removal: besides adding labels, a requester label whose request is gone is removed; a
  responder label never is (upstream's apply removes its own labels implicitly).
- The owner references' apiVersion is that of the served group (`lifecycle.aiokcm.io/v1alpha1` on
  clusters without the built-in API), since the garbage collector resolves owners by it.
- A pod's responders come from `evictionapi.responders.pod_responders`: `spec.evictionResponders`
  or, on servers without that field, the `lifecycle.aiokcm.io/eviction-responders` annotation,
  plus the implicit responders of `EvictionRequestConfig` (aiokcm's own), plus the default evictor.
  Upstream's API validation makes an invalid list impossible; an annotation can hold anything, so
  an unusable list fails the request (and a new Eviction) with `EvictionInvalid` and the reader's
  field errors as the message, before any Eviction exists.
- The list is returned sorted (upstream returns the pod's order and sorts afterwards): the
  Eviction's targetResponders are the same.
- Metrics keep upstream's names, types and labels; `target_responders` (from an earlier upstream
  revision, dropped later) is kept as the brief asks, with that revision's `evictionrequest` label
  holding the Eviction's name. Upstream's `DeletePartialMatch` is emulated by remembering the
  series set. `aiokcm_evictionrequest_actions_total{action}` counts every write.
- Events (upstream posts none): `EvictionCreated`, `ResponderActivated`, `ResponderCompleted`,
  `ResponderInterrupted`, `ResponderCanceled`, the final condition's reason, and
  `EvictionInvalid` (on the Eviction, or on the request for a request's validation).
- The deletion of a target pod is remembered by UID for a minute (`terminaltimes.py`, the
  role of the later revision's terminal-time cache), so the 5 s grace still holds once the pod
  has left the cache: otherwise a sync between the pod's removal and the imperative evictor's
  report marks the evictor Interrupted instead of Completed. The grace runs from the moment the
  pod is seen gone, and while it terminates from the later of its deletionTimestamp and the
  moment this controller saw the deletion: a manager whose clock runs ahead of the API server's
  would otherwise give no grace at all. A pod that turns terminal without being deleted gets no grace, as in
  27bf4c51 (the later controller that times it is not available to port from).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from controllers.lazy import lazy_exports

if TYPE_CHECKING:
    from controllers.evictionrequest.controller import EvictionRequestController

__getattr__ = lazy_exports(__name__, {"EvictionRequestController": "controllers.evictionrequest.controller"})
__all__ = ["EvictionRequestController"]
