"""What the eviction responder wrote, counted.

`aiokcm_eviction_responder_actions_total{action}`: every write, by step (`mark`, `withdraw`,
`report`, `complete`, `final-message`). `aiokcm_eviction_responder_completions_total{outcome}`:
how its turns ended (`replaced`: the pod went after its replacement was available; `removed`: the
pod went otherwise; `handed-over`: the next responder takes over, the surge could not or did not).
"""

from __future__ import annotations

from prometheus_client import Counter

ACTIONS = Counter(
    "aiokcm_eviction_responder_actions_total",
    "Writes of the surge-first eviction responder, by step.",
    ["action"],
)
COMPLETIONS = Counter(
    "aiokcm_eviction_responder_completions_total",
    "Turns of the surge-first eviction responder that ended, by outcome.",
    ["outcome"],
)
