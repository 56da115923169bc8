"""The names an open-loop round's data uses: its requests' response classes and its row's metric
columns. Apart from store/open_metrics.py (which computes them with pyarrow and numpy), so the row
checks and the report's tables know them without importing either."""

from __future__ import annotations

RESPONSE_CLASSES = ("success", "failed", "circuit_broken", "timed_out", "rejected")
SHARE_COLUMNS = {"success": "successShare", "failed": "failedShare", "circuit_broken": "circuitBrokenShare",
                 "timed_out": "timedOutShare", "rejected": "rejectedShare"}
OPEN_LOOP_COLUMNS = ("offeredRequests", "measuredSeconds", "offeredRate", "carriedRate", "carriedThroughput",
                     *SHARE_COLUMNS.values(), "successP50Ms", "successP95Ms", "successP99Ms", "p95UnderSloShare",
                     "lagP99Ms", "requestsPerCall", "windowP50Ms", "windowP95Ms")
# columns added after runs were written without them: such a run's rows lack them (read as unmeasured)
ADDED_LATER = frozenset({"windowP50Ms", "windowP95Ms"})
