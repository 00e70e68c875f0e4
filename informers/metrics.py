"""Informer metrics: client-go's reflector metric names, plus store size and events by type.

client-go once exported `reflector_*` metrics (lists, list durations, watches, short watches,
watch durations, items per list and per watch); their names are kept so dashboards written for
them keep working. Label `name` is the resource (`pods`, `replicasets.apps`).
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

_DURATION_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 600.0)

LISTS_TOTAL = Counter("reflector_lists_total", "Total number of API lists done by the reflectors", ["name"])
LIST_DURATION = Histogram(
    "reflector_list_duration_seconds",
    "How long an API list takes to return and decode for the reflectors",
    ["name"],
    buckets=_DURATION_BUCKETS,
)
ITEMS_PER_LIST = Gauge("reflector_items_per_list", "How many items the last API list returned", ["name"])
WATCHES_TOTAL = Counter(
    "reflector_watches_total", "Total number of API watches done by the reflectors", ["name"]
)
SHORT_WATCHES_TOTAL = Counter(
    "reflector_short_watches_total", "Total number of short API watches done by the reflectors", ["name"]
)
WATCH_DURATION = Histogram(
    "reflector_watch_duration_seconds",
    "How long an API watch takes to return and decode for the reflectors",
    ["name"],
    buckets=_DURATION_BUCKETS,
)
ERRORS_TOTAL = Counter(
    "reflector_errors_total",
    "List and watch failures by kind (gone, too_large_rv, api, network)",
    ["name", "kind"],
)
RELISTS_TOTAL = Counter(
    "reflector_relists_total", "Relists forced by 410 Gone or a too large resourceVersion", ["name"]
)
STORE_OBJECTS = Gauge("informer_store_objects", "Objects in the informer's cache", ["name"])
EVENTS_TOTAL = Counter("informer_events_total", "Watch events received, by type", ["name", "type"])
HANDLER_ERRORS = Counter("informer_handler_errors_total", "Exceptions raised by event handlers", ["name"])
