'use strict';
// rbl client protocol v1: limits and the reply's call log (clients/protocol.py is the reference).

const PROTOCOL_VERSION = 1;
const SHARE_MODES = ['user', 'client'];
const JOB_ROUTES = ['/run', '/call'];   // GET /health's "endpoints"
const ONE_CALL_STOP = 'calls';          // a /call's stopped_by when its one call ended by itself
const MAX_BODY_BYTES = 1 << 20;
const MAX_HEADER_BYTES = 32 * 1024;
const READ_TIMEOUT_MS = 5000;
const MAX_JOBS = 512;
const MAX_COUNT = 1000000;
const MAX_DURATION_MS = 86400000;
const MAX_STEPS = 8;
const MAX_INSTANCE_CHARS = 1024;
const MAX_TARGET_PATH_CHARS = 2048;     // target_url's path and query: the compiler's MAX_TARGET_LENGTH
const MAX_URL_CHARS = MAX_TARGET_PATH_CHARS + 512;   // room for http:// and any HOST:PORT besides

class JobError extends Error {}                 // HTTP 400: malformed, or a job this service cannot run

const ENDING_KEYS = ['rejected', 'timed_out', 'fallback'];   // how a pattern ended a call

/** Calls as the protocol reports them; request-less calls are run-length encoded (only those that
 * ended alike: the same ok, rejected, timed_out and fallback; their wait_us summed). */
class CallLog {
  constructor() {
    this.calls = [];
    this.successfulCalls = 0;
    this.requests = 0;
  }

  /** ending: how a library pattern ended the call ({rejected, wait_us}, {timed_out: true},
   * {fallback: true}), null when the target's answers decided. */
  add(ok, requests, cutShort = false, ending = null) {
    this.requests += requests.length;
    if (ok) this.successfulCalls += 1;
    const end = ending || {};
    if (cutShort) {
      this.calls.push({ ok, requests, ...end, cut_short: true });
      return;
    }
    const last = this.calls[this.calls.length - 1];
    if (!requests.length && last && !last.requests.length && last.ok === ok && !last.cut_short
        && ENDING_KEYS.every(key => last[key] === end[key])) {
      last.repeat = (last.repeat || 1) + 1;
      if (end.wait_us !== undefined) last.wait_us += end.wait_us;
      return;
    }
    this.calls.push({ ok, requests, ...end });
  }
}

module.exports = {
  PROTOCOL_VERSION, SHARE_MODES, JOB_ROUTES, ONE_CALL_STOP, MAX_BODY_BYTES, MAX_HEADER_BYTES, READ_TIMEOUT_MS, MAX_JOBS, MAX_COUNT,
  MAX_DURATION_MS, MAX_STEPS, MAX_INSTANCE_CHARS, MAX_TARGET_PATH_CHARS, MAX_URL_CHARS, JobError, CallLog,
};
