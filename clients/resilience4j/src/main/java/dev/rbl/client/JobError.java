package dev.rbl.client;

/** A job that is malformed or asks for something this service cannot do (HTTP 400). */
final class JobError extends RuntimeException {
    JobError(String message) {
        super(message);
    }
}
