"""The API's vocabulary, spelt once: kinds, intents, states, condition types and reasons.

Every value is upstream's (`k8s.io/api/lifecycle/v1alpha1`), so an Eviction written by aiokcm
reads the same to a client built for the built-in API.
"""

from __future__ import annotations

from typing import Final

# Groups: Kubernetes' own, when the API server serves it, else aiokcm's CRDs.
BUILTIN_GROUP: Final = "lifecycle.k8s.io"
AIOKCM_GROUP: Final = "lifecycle.aiokcm.io"
VERSION: Final = "v1alpha1"

EVICTION_REQUEST_KIND: Final = "EvictionRequest"
EVICTION_KIND: Final = "Eviction"
EVICTION_REQUESTS: Final = "evictionrequests"
EVICTIONS: Final = "evictions"

# spec.intent of an EvictionRequest, status.requesters[].intent of an Eviction.
INTENT_EVICTION: Final = "Eviction"
INTENT_WITHDRAWN: Final = "Withdrawn"
INTENTS: Final = (INTENT_EVICTION, INTENT_WITHDRAWN)

# status.targetResponders[].state, assigned by the evictionrequest controller.
STATE_INACTIVE: Final = "Inactive"
STATE_ACTIVE: Final = "Active"
STATE_INTERRUPTED: Final = "Interrupted"
STATE_CANCELED: Final = "Canceled"
STATE_COMPLETED: Final = "Completed"
STATES: Final = (STATE_INACTIVE, STATE_ACTIVE, STATE_INTERRUPTED, STATE_CANCELED, STATE_COMPLETED)

# Condition types on Evictions, copied to every EvictionRequest of the target.
CONDITION_FAILED: Final = "Failed"
CONDITION_TARGET_EVICTED: Final = "TargetEvicted"

# Condition reasons.
REASON_AWAITING_EVICTION: Final = "AwaitingEviction"
REASON_EVICTION_INVALID: Final = "EvictionInvalid"
REASON_CANCELED_DUE_TO_NO_REQUESTERS: Final = "CanceledDueToNoRequesters"
REASON_SUCCEEDED: Final = "Succeeded"
REASON_NO_FURTHER_RESPONDER: Final = "NoFurtherResponder"
REASON_POD_DELETED: Final = "PodDeleted"
REASON_POD_TERMINAL: Final = "PodTerminal"
REASON_EVICTION_FAILED: Final = "EvictionFailed"

# The default responder every pod gets, last: it calls pods/<name>/eviction with a backoff.
IMPERATIVE_EVICTOR: Final = "imperative-eviction.k8s.io/evictor"
IMPERATIVE_EVICTOR_PRIORITY: Final = 100

# Label values on an Eviction, under each participant's name as the key.
ROLE_REQUESTER: Final = "requester"
ROLE_RESPONDER: Final = "responder"
ROLE_REQUESTER_RESPONDER: Final = "requester-responder"

# Limits from the API's validation.
MAX_CONDITIONS: Final = 100
MAX_REQUESTERS: Final = 100
MAX_POD_RESPONDERS: Final = 10
MAX_TARGET_RESPONDERS: Final = MAX_POD_RESPONDERS + 1
MAX_MESSAGE_LENGTH: Final = 4000
MIN_PRIORITY: Final = 0
MAX_PRIORITY: Final = 100000
# Priorities 0-999 are reserved for responders in *.k8s.io; a pod's managing controller takes 10000.
RESERVED_PRIORITY_BELOW: Final = 1000
MANAGING_CONTROLLER_PRIORITY: Final = 10000
RESERVED_DOMAINS: Final = ("k8s.io", "kubernetes.io")

# How long an Active responder may go without a heartbeat before the next one takes over.
HEARTBEAT_TIMEOUT_SECONDS: Final = 20 * 60.0

# Where a pod's responders live on a server without `spec.evictionResponders`: a JSON list of
# {"name", "priority"}, set at creation and immutable as the field is.
POD_RESPONDERS_ANNOTATION: Final = "lifecycle.aiokcm.io/eviction-responders"
