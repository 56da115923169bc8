package dev.rbl.client;

/**
 * Ends the call in progress at once (protocol.py: a call cut short). Retry and circuit breaker
 * ignore it (neither retried nor recorded), so the job's loop decides what it means.
 */
final class CutShort extends RuntimeException {
    final String reason;     // max_duration | max_requests | disconnected

    CutShort(String reason) {
        super(reason, null, false, false);
        this.reason = reason;
    }
}
