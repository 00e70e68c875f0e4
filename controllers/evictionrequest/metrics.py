"""Upstream's evictionrequest controller metrics, under upstream's names and labels.

`evictionrequest_controller_responder_state{namespace, eviction, target_name, target_type,
responder, state}`: 1 for each responder of each Eviction in its current state (the series of a
former state is removed, so a stuck eviction shows one Active responder and its age).
`evictionrequest_controller_requester_intent{namespace, evictionrequest, target_name,
target_type, requester, intent}`: 1 per live EvictionRequest and its intent.
`evictionrequest_controller_target_responders{namespace, evictionrequest, target_name,
target_type}`: how many responders the target has; upstream names the Eviction's label
`evictionrequest` here (an earlier revision of its metrics), and so does this.
`aiokcm_evictionrequest_actions_total{action}`: every write, by what it did.
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge

SUBSYSTEM = "evictionrequest_controller"

_RESPONDER_STATE_LABELS = ("namespace", "eviction", "target_name", "target_type", "responder", "state")
_REQUESTER_INTENT_LABELS = (
    "namespace",
    "evictionrequest",
    "target_name",
    "target_type",
    "requester",
    "intent",
)
_TARGET_RESPONDERS_LABELS = ("namespace", "evictionrequest", "target_name", "target_type")

RESPONDER_STATE = Gauge(
    f"{SUBSYSTEM}_responder_state", "The state of each responder for the Eviction.", _RESPONDER_STATE_LABELS
)
REQUESTER_INTENT = Gauge(
    f"{SUBSYSTEM}_requester_intent", "The intent and target of the EvictionRequest.", _REQUESTER_INTENT_LABELS
)
TARGET_RESPONDERS = Gauge(
    f"{SUBSYSTEM}_target_responders",
    "The number of available responders for the target",
    _TARGET_RESPONDERS_LABELS,
)
ACTIONS = Counter(
    "aiokcm_evictionrequest_actions_total",
    "Writes of the evictionrequest controller, by what they did.",
    ["action"],
)


# The label values of every series set here, per gauge: prometheus_client has no partial delete.
_SERIES: dict[str, set[tuple[str, ...]]] = {}


def _set(gauge: Gauge, name: str, values: tuple[str, ...], value: float) -> None:
    gauge.labels(*values).set(value)
    _SERIES.setdefault(name, set()).add(values)


def _remove_matching(gauge: Gauge, name: str, labelnames: tuple[str, ...], match: dict[str, str]) -> None:
    """client_golang's `DeletePartialMatch`: drop every series whose labels include `match`."""
    series = _SERIES.get(name, set())
    for values in list(series):
        labels = dict(zip(labelnames, values, strict=True))
        if all(labels.get(k) == v for k, v in match.items()):
            series.discard(values)
            try:
                gauge.remove(*values)
            except KeyError:
                pass


def set_responder_states(
    namespace: str, eviction: str, target_name: str, target_type: str, responders: list[dict[str, object]]
) -> None:
    _remove_matching(
        RESPONDER_STATE,
        "state",
        _RESPONDER_STATE_LABELS,
        {
            "namespace": namespace,
            "eviction": eviction,
            "target_name": target_name,
            "target_type": target_type,
        },
    )
    for r in responders:
        values = (namespace, eviction, target_name, target_type, str(r.get("name")), str(r.get("state")))
        _set(RESPONDER_STATE, "state", values, 1)
    _set(TARGET_RESPONDERS, "targets", (namespace, eviction, target_name, target_type), len(responders))


def forget_eviction(namespace: str, eviction: str) -> None:
    _remove_matching(
        RESPONDER_STATE, "state", _RESPONDER_STATE_LABELS, {"namespace": namespace, "eviction": eviction}
    )
    match = {"namespace": namespace, "evictionrequest": eviction}
    _remove_matching(TARGET_RESPONDERS, "targets", _TARGET_RESPONDERS_LABELS, match)


def set_requester_intent(
    namespace: str, request: str, target_name: str, target_type: str, requester: str, intent: str | None
) -> None:
    """The request's one series; none while it is being deleted (it counts as withdrawn)."""
    match = {
        "namespace": namespace,
        "evictionrequest": request,
        "target_name": target_name,
        "target_type": target_type,
        "requester": requester,
    }
    _remove_matching(REQUESTER_INTENT, "intent", _REQUESTER_INTENT_LABELS, match)
    if intent is not None:
        _set(REQUESTER_INTENT, "intent", (namespace, request, target_name, target_type, requester, intent), 1)


def forget_request(namespace: str, request: str) -> None:
    match = {"namespace": namespace, "evictionrequest": request}
    _remove_matching(REQUESTER_INTENT, "intent", _REQUESTER_INTENT_LABELS, match)
