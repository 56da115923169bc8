'use strict';
// One virtual user's keep-alive connection to the target; records every request it sends.

const http = require('http');
const { TaskCancelledError } = require('cockatiel');

const REQUEST_TIMEOUT_MS = 60000;

class RequestFailed extends Error {               // a non-2xx or a connection error: what the patterns react to
  constructor(status) {
    super(`request failed with status ${status}`);
    this.status = status;
  }
}

/** The keep-alive connections to the target that /calls share, one call at a time each, as a production
 * client's pool: a connection per /call overflowed the target's listen queue at hundreds of calls a
 * second (a dropped SYN costs its request a second). */
function callPool(maxIdle) {
  // timeout: an idle pooled connection closes after 10 s (a request sets its own while it runs)
  return new http.Agent({ keepAlive: true, maxFreeSockets: maxIdle, scheduling: 'lifo', timeout: 10000 });
}

class Target {
  /** pool: the service's agent for a /call; without it the job has a connection of its own. */
  constructor(job, guard, pool = null) {
    this.job = job;
    this.guard = guard;
    this.owned = pool === null;
    this.agent = pool || new http.Agent({ keepAlive: true, maxSockets: 1 });
    this.sent = [];
    this.inFlight = null;
  }

  /** One request of the call `pending` (the loop's per-call state); resolves on 2xx, rejects with
   * RequestFailed (or the guard's CutShort). `signal` is the abort signal the innermost policy
   * handed the call (a cockatiel timeout's): aborted, the request ends at once (its socket destroyed,
   * reported with status 0 and its duration so far) and rejects with cockatiel's TaskCancelledError,
   * the error cockatiel's own policies raise for a cancelled signal; aborted before it starts, or
   * once its call is over (a policy still running after an aggressive timeout ended the call), no
   * request is sent. */
  send(signal = null, pending = null) {
    this.guard.beforeRequest();
    if ((signal && signal.aborted) || (pending && pending.over)) {
      return Promise.reject(new TaskCancelledError('the call was cancelled before its request'));
    }
    const began = process.hrtime.bigint();
    return new Promise((resolve, reject) => {
      const record = { settled: false, aborted: false };
      const onAbort = () => {
        record.aborted = true;
        finish(0);
        request.destroy();
      };
      const finish = status => {
        if (record.settled) return;
        record.settled = true;
        this.inFlight = null;
        if (signal) signal.removeEventListener('abort', onAbort);
        this.sent.push([this.guard.sinceStartUs(began), Number((process.hrtime.bigint() - began) / 1000n), status]);
        if (status === 0 && this.guard.cut) reject(this.guard.cut);
        else if (record.aborted) reject(new TaskCancelledError('the request was aborted by its signal'));
        else if (status >= 200 && status < 300) resolve(status);
        else reject(new RequestFailed(status));
      };
      const request = http.request({
        host: this.job.host, port: this.job.port, path: this.job.path, method: 'GET', agent: this.agent,
        timeout: Math.min(REQUEST_TIMEOUT_MS, this.guard.remainingMs() + 10),
      }, response => {
        response.on('data', () => {});
        response.on('end', () => finish(response.statusCode));
        response.on('error', () => finish(0));
        response.on('aborted', () => finish(0));
      });
      request.on('timeout', () => request.destroy(new Error('timeout')));
      request.on('error', () => finish(0));
      if (signal) signal.addEventListener('abort', onAbort, { once: true });
      request.end();
      this.inFlight = { request, finish };
    });
  }

  /** The job is over (deadline, caller gone, or the call ended): a request still running ends now, status 0. */
  abort() {
    const flight = this.inFlight;
    if (flight) {
      flight.finish(0);
      flight.request.destroy();
    }
  }

  close() {
    this.abort();
    if (this.owned) this.agent.destroy();
  }
}

module.exports = { Target, RequestFailed, callPool };
