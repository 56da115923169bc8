'use strict';
// One job's limits (deadline, request budget, caller still there), checked before each request and
// ending a call in progress: a pending wait or request is cut the moment a limit is reached.

const TIMER_MAX_MS = 2 ** 31 - 1;       // Node's setTimeout runs a longer delay after 1 ms

class CutShort extends Error {
  constructor(reason) {                 // max_duration | max_requests | disconnected
    super(reason);
    this.reason = reason;
  }
}

class JobGuard {
  constructor(maxDurationMs, maxRequests, sent) {
    this.started = process.hrtime.bigint();
    this.deadline = this.started + BigInt(maxDurationMs) * 1000000n;
    this.maxRequests = maxRequests;
    this.sent = sent;                   // () -> requests sent so far (logged calls and the call in progress)
    this.cut = null;
    this.onCut = [];
    this.cutPromise = new Promise((_, reject) => { this.rejectCut = reject; });
    this.cutPromise.catch(() => {});
    this.abort = new AbortController();
    this._armDeadline();
  }

  _armDeadline() {
    // Node's timers run on a millisecond loop clock and may fire up to 1 ms early: re-arm until
    // the deadline has really passed
    const left = this.remainingMs();
    if (left <= 0) {
      this.fire('max_duration');
      return;
    }
    this.timer = setTimeout(() => this._armDeadline(), Math.ceil(left));
  }

  remainingMs() {
    return Number(this.deadline - process.hrtime.bigint()) / 1e6;
  }

  expired() {
    return process.hrtime.bigint() >= this.deadline;
  }

  sinceStartUs(time = process.hrtime.bigint()) {
    return Number((time - this.started) / 1000n);
  }

  /** A limit was reached: ends the call in progress at once. */
  fire(reason) {
    if (this.cut) return;
    this.cut = new CutShort(reason);
    clearTimeout(this.timer);
    for (const hook of this.onCut) hook();
    this.abort.abort();
    this.rejectCut(this.cut);
  }

  budgetSpent() {
    return this.sent() >= this.maxRequests;
  }

  beforeRequest() {
    if (this.cut) throw this.cut;
    if (this.budgetSpent()) throw new CutShort('max_requests');
    if (this.expired()) {
      this.fire('max_duration');
      throw this.cut;
    }
  }

  /** The wait a library is about to start (ms) in the call `pending` (the loop's per-call state):
   * bounded by the job's limits, and remembered there so that settleWait() can top up a timer that
   * fired early. A wait no request can follow ends at once. */
  plannedWait(ms, pending) {
    if (this.cut || this.budgetSpent()) return 0;
    const bounded = Math.min(ms, Math.max(0, this.remainingMs()) + 1, TIMER_MAX_MS);
    pending.waitUntil = process.hrtime.bigint() + BigInt(Math.round(bounded * 1e6));
    return bounded;
  }

  /** Before a request that follows a library's wait in the call `pending`: the rest of it, if Node's
   * timer fired early (its loop clock counts whole milliseconds). */
  async settleWait(pending) {
    for (;;) {
      const left = Number(pending.waitUntil - process.hrtime.bigint()) / 1e6;
      if (left <= 0 || this.cut || pending.over) break;
      await new Promise(resolve => (left > 2 ? setTimeout(resolve, left - 1) : setImmediate(resolve)));
    }
    pending.waitUntil = 0n;
  }

  /** The call, ended early by a limit (the library's own pending timers are left to run out). */
  race(promise) {
    return Promise.race([promise, this.cutPromise]);
  }

  close() {
    clearTimeout(this.timer);
  }
}

module.exports = { CutShort, JobGuard };
