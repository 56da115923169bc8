package dev.rbl.client;

/**
 * Ends the call in progress at once (protocol.py: a call cut short). Retry and circuit breaker
 * ignore it (neither retried nor recorded), and the fallback lets it through, so the job's loop
 * decides what it means.
 */
final class CutShort extends RuntimeException {
    // max_duration | max_requests | disconnected; or abandoned: only on a timeout's worker after its
    // call was cancelled (TimedCall), whose outcome nobody reads, so never a job's stopped_by
    final String reason;

    CutShort(String reason) {
        super(reason, null, false, false);
        this.reason = reason;
    }
}
