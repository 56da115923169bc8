"""Istio's facts that more than one part of rbl relies on, written once: the default retry policy
the sidecar runs, the retry conditions Istio's validation accepts, and its unset pool limit
(docs/library-semantics.md, section istio)."""

from __future__ import annotations

# Istio's default retry policy, for a route without `retries` (and the conditions of a retry
# without retryOn): since Istio 1.24 without 503, so over HTTP/1.1 it retries failed connections only
DEFAULT_ATTEMPTS = 2
DEFAULT_RETRY_ON = "connect-failure,refused-stream,unavailable,cancelled,retriable-status-codes"
# the conditions Istio's validation accepts in retryOn: Envoy's and gRPC's (besides HTTP statuses)
RETRY_CONDITIONS = ("5xx", "gateway-error", "reset", "reset-before-request", "connect-failure", "retriable-4xx",
                    "refused-stream", "retriable-status-codes", "retriable-headers", "envoy-ratelimited",
                    "http3-post-connect-failure", "cancelled", "deadline-exceeded", "internal",
                    "resource-exhausted", "unavailable")
# the conditions under which Envoy retries an upstream 5xx answer (an abort fault's)
CONDITIONS_RETRYING_5XX = ("5xx", "gateway-error", "retriable-status-codes")
UNLIMITED = 4294967295           # Istio's threshold for a connection-pool limit left unset (2^32-1)
