'use strict';
// Runs jobs for one library: builds its pattern stack (per virtual user, or one per key for
// share: client) and loops as the paper's clients do, returning raw observations.

const { PROTOCOL_VERSION, MAX_JOBS, JOB_ROUTES, ONE_CALL_STOP, CallLog, JobError } = require('./protocol');
const { CutShort, JobGuard } = require('./guard');
const { Target, callPool } = require('./target');
const { LIBRARIES, FALLBACK, callEnding, libraryVersion } = require('./strategies');

const SHARED_INSTANCES_KEPT = 256;

function sortedJson(value) {
  if (Array.isArray(value)) return `[${value.map(sortedJson).join(',')}]`;
  if (value && typeof value === 'object') {
    return `{${Object.keys(value).sort().map(k => `${JSON.stringify(k)}:${sortedJson(value[k])}`).join(',')}}`;
  }
  return JSON.stringify(value);
}

/** Lets go of a job's own instances (not the shared ones, kept for the next job). */
function disposeOwned(instances) {
  for (const [instance, owned] of instances) if (owned && instance.dispose) instance.dispose();
}

class ClientService {
  constructor(library, target) {
    if (!(library in LIBRARIES)) throw new Error(`unknown library ${library}; known: ${Object.keys(LIBRARIES).join(', ')}`);
    this.library = library;
    this.target = target;
    this.version = libraryVersion(library);
    this.patterns = LIBRARIES[library];
    this.shared = new Map();            // insertion order: the oldest is dropped first
    this.calls = callPool(MAX_JOBS);    // the /calls' connections to the target
  }

  health() {
    return { protocol: PROTOCOL_VERSION, library: this.library, version: this.version, patterns: Object.keys(this.patterns), endpoints: JOB_ROUTES };
  }

  /** The instances a job runs through, outermost first; [instance, ownedByTheJob]. A step refused
   * disposes of the job's own instances built before it (an opossum breaker's interval timer would
   * otherwise run for ever). */
  instances(job) {
    const built = [];
    try {
      job.strategy.forEach((step, position) => built.push(this.instance(job, step, position)));
    } catch (error) {
      disposeOwned(built);
      throw error;
    }
    return built;
  }

  instance(job, step, position) {
    const build = Object.prototype.hasOwnProperty.call(this.patterns, step.pattern) ? this.patterns[step.pattern] : null;
    if (!build) {
      throw new JobError(`${this.library} has no pattern ${JSON.stringify(step.pattern.slice(0, 40))}; it has ${Object.keys(this.patterns).join(', ')}`);
    }
    if (job.share === 'user') return [build(step.params), true];
    const key = sortedJson([job.instance, position, step.pattern, step.params]);
    let instance = this.shared.get(key);
    if (!instance) {
      instance = build(step.params);
      this.shared.set(key, instance);
      if (this.shared.size > SHARED_INSTANCES_KEPT) {
        const [oldest, dropped] = this.shared.entries().next().value;
        this.shared.delete(oldest);
        if (dropped.dispose) dropped.dispose();
      }
    }
    return [instance, false];
  }

  /** A /run job, or with maxCalls 1 a /call: the same loop, ended after one call. */
  async run(job, connection, maxCalls = 0) {
    const instances = this.instances(job);
    const log = new CallLog();
    let guard = null;
    let target = null;
    const gone = () => guard.fire('disconnected');
    let stoppedBy;
    try {
      guard = new JobGuard(job.maxDurationMs, job.maxRequests, () => log.requests + target.sent.length);
      target = new Target(job, guard, maxCalls === 1 ? this.calls : null);
      guard.onCut.push(() => target.abort());
      connection.on('end', gone);
      connection.on('close', gone);
      // the innermost call: the request, which honours the abort signal the innermost policy hands it
      // (a cockatiel timeout's); a retry tops up its waits itself (strategies.js)
      let call = context => target.send(context.signal, context.rbl);
      for (const [instance] of [...instances].reverse()) call = instance(guard)(call);   // wrap inside-out
      stoppedBy = await this.loop(job, call, target, log, guard, maxCalls);
    } finally {
      if (guard) guard.close();
      if (target) target.close();
      connection.off('end', gone);
      connection.off('close', gone);
      disposeOwned(instances);
    }
    if (maxCalls === 1 && !log.calls.length) log.add(false, [], true);   // the deadline or the caller went first
    return {
      protocol: PROTOCOL_VERSION, library: this.library, version: this.version, vu: job.vu,
      total_us: guard.sinceStartUs(), stopped_by: stoppedBy, calls: log.calls,
    };
  }

  async loop(job, call, target, log, guard, maxCalls) {
    for (let made = 0; ; made++) {
      if (maxCalls > 0 && made === maxCalls) return ONE_CALL_STOP;
      if (log.successfulCalls >= job.successes) return 'successes';
      if (log.requests >= job.maxRequests) return 'max_requests';
      if (guard.cut) return guard.cut.reason;
      if (guard.expired()) return 'max_duration';
      target.sent = [];
      // the call's state, handed down the policies in their context (see strategies.js): `over` once
      // the loop is done with it, so a policy still running then (after an aggressive timeout) sends
      // nothing more; `waitUntil` for the retry's waits
      const pending = { guard, started: process.hrtime.bigint(), waitUntil: 0n, over: false };
      let ok = false;
      let ending = null;
      try {
        // a synchronous throw (a limit before any request) lands below too
        const value = await guard.race(call({ signal: guard.abort.signal, rbl: pending }));
        if (value === FALLBACK) ending = { fallback: true };     // not a success of the target
        else ok = true;
      } catch (error) {
        if (error instanceof CutShort) {
          pending.over = true;
          target.abort();
          log.add(false, target.sent, true);
          return error.reason;
        }
        ending = callEnding(error, pending.started);
      }
      pending.over = true;
      target.abort();                   // a request a library gave up on (opossum's timeout) ends with its call
      log.add(ok, target.sent, false, ending);
      // a call rejected without a request (open breaker) takes microseconds: let I/O in between
      if (!target.sent.length) await new Promise(resolve => setImmediate(resolve));
    }
  }
}

module.exports = { ClientService };
