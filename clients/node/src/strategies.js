'use strict';
// Resilience patterns built from the real cockatiel and opossum libraries.
//
// A pattern turns "one call" into "one call through the library": build(params) returns
// (guard) => wrap(fn), fn and the result both `context => Promise`. Parameters arrive library-native,
// named and in the units of the catalogue (rbl/libraries/prelude.rbl; durations in milliseconds),
// exactly as the plan holds them. A parameter the library does not have is a 400, never ignored.
//
// Composition: the job's strategy is outermost first, and each cockatiel pattern calls
// policy.execute(next => fn({...context, ...next}), context.signal), which is exactly what
// cockatiel's own wrap(...) does (dist/Policy.js): a policy gets the signal its outer policy handed
// down (a timeout's, a retry's), and the call inside gets the context this policy hands it. The
// context also carries `rbl`, the loop's state of the call (guard, start, waits, whether it is over).

const fs = require('fs');
const path = require('path');
const cockatiel = require('cockatiel');
const CircuitBreaker = require('opossum');
const { JobError } = require('./protocol');
const { RequestFailed } = require('./target');
const { CutShort } = require('./guard');
const { writtenAsFloat } = require('./job');

// The largest value a parameter may have, as rbl's catalogue bounds it (rbl/libraries/catalogue.py
// CEILINGS and prelude.rbl; tests/test_parameter_bounds.py checks they agree): a duration (ms), a
// factor, a count, and opossum's buckets (each an object, rotated on a timer).
const MAX_MS = 1e9;
const MAX_FACTOR = 1e9;
const MAX_INT = 2 ** 31 - 1;
const MAX_BUCKETS = 1000;
const TIMER_MAX_MS = 2 ** 31 - 1;       // Node's setTimeout runs a longer delay after 1 ms
const FALLBACK = Symbol('rbl fallback'); // a fallback policy's value: the call failed and was replaced

function check(params, allowed) {
  // own properties only: `toString` or `__proto__` in a job is an unknown parameter, not Object's
  const unknown = Object.keys(params).filter(name => !Object.prototype.hasOwnProperty.call(allowed, name)).sort();
  if (unknown.length) {
    throw new JobError(`unknown parameter(s) ${unknown.join(', ').slice(0, 200)}; expected ${Object.keys(allowed).join(', ') || 'none'}`);
  }
  for (const [name, value] of Object.entries(params)) {
    const rule = allowed[name];
    if (rule.oneOf) {                                       // an enum
      const choices = rule.oneOf;
      if (typeof value !== 'string' || !choices.includes(value)) {
        throw new JobError(`\`${name}\` must be one of ${choices.join(', ')}, got ${JSON.stringify(value).slice(0, 60)}`);
      }
    } else if (rule === 'bool') {
      if (typeof value !== 'boolean') throw new JobError(`\`${name}\` must be true or false`);
    } else {
      const { kind, low, high } = rule;
      const isInt = kind === 'int';
      if (typeof value !== 'number' || (isInt && (!Number.isSafeInteger(value) || writtenAsFloat(params, name)))) {
        throw new JobError(`\`${name}\` must be ${isInt ? 'an integer' : 'a number'}, got ${JSON.stringify(value).slice(0, 60)}`);
      }
      if (!(value >= low && value <= high)) throw new JobError(`\`${name}\` must be between ${low} and ${high}, got ${value}`);
    }
  }
  return params;
}

/** A parameter without a default in the library: absent, the job is a 400. */
function required(params, ...names) {
  const missing = names.filter(name => params[name] === undefined);
  if (missing.length) throw new JobError(`missing parameter(s) ${missing.join(', ')}: they have no default`);
  return params;
}

const number = (low, high) => ({ kind: 'number', low, high });
const COUNT = { kind: 'int', low: 0, high: MAX_INT };
const POSITIVE_COUNT = { kind: 'int', low: 1, high: MAX_INT };
const MS = number(0, MAX_MS);
const oneOf = (...choices) => ({ oneOf: choices });
const timerMs = ms => Math.min(ms, TIMER_MAX_MS);         // a job ends long before 2^31 ms (24.8 days)

// -- cockatiel ------------------------------------------------------------------------------------
const GENERATORS = {
  DECORRELATED_JITTER: cockatiel.decorrelatedJitterGenerator,
  NO_JITTER: cockatiel.noJitterGenerator,
  FULL_JITTER: cockatiel.fullJitterGenerator,
  HALF_JITTER: cockatiel.halfJitterGenerator,
};
const COCKATIEL_RETRY = {
  maxAttempts: COUNT, backoff: oneOf('CONSTANT', 'EXPONENTIAL'), generator: oneOf(...Object.keys(GENERATORS)),
  exponent: number(Number.MIN_VALUE, MAX_FACTOR), initialDelay: MS, maxDelay: MS,
};

// What rbl's cockatiel policies handle (their filters), as handleAll would in a real service: a failed
// request (RequestFailed), a timeout (TaskCancelledError: a timeout policy's own, or the one rbl's
// request raises when a timeout's signal aborts it) and a refusal (BrokenCircuitError and its subclass
// IsolatedCircuitError, BulkheadRejectedError): so a retry around a breaker retries its refusals, and
// a breaker around a bulkhead counts them, as with every library rbl composes. A call the job's limits
// cut short fails with CutShort (the wrappers turn any error of a call whose job was cut into it): no
// policy handles it, so it is neither retried, counted by a breaker, nor replaced by a fallback.
// `instanceof`, not cockatiel's isTaskCancelledError, which 3.2.1 gets wrong (it tests
// isBulkheadRejectedError).
const isTimeout = error => error instanceof cockatiel.TaskCancelledError;
const isRefusal = error => error instanceof cockatiel.BrokenCircuitError || error instanceof cockatiel.BulkheadRejectedError;
const isFailure = error => error instanceof RequestFailed || isTimeout(error);
const HANDLED = cockatiel.handleWhen(error => isFailure(error) || isRefusal(error));

/** An error leaving a pattern of the call `context`: the job's CutShort once the job is cut (a
 * cancellation its abort caused is not a timeout), and a refusal stamped with when it happened. */
function leaving(error, context) {
  const { guard } = context.rbl;
  if (guard.cut) return guard.cut;
  if (error !== null && typeof error === 'object' && error.rblRefusedAt === undefined && refusalKind(error)) {
    error.rblRefusedAt = process.hrtime.bigint();
  }
  return error;
}

/** One cockatiel policy around fn, as cockatiel's wrap(...) nests them. */
function nest(policy, fn, context) {
  let result;
  try {
    result = policy.execute(next => fn({ ...context, ...next }), context.signal);
  } catch (error) {
    return Promise.reject(leaving(error, context));
  }
  return result.catch(error => { throw leaving(error, context); });
}

/** The library's backoff, its waits handed to the job: a wait ends at the job's limits (the client
 * tops up a Node timer that fired early, so a wait is never shorter than the library's duration). */
function guardedBackoff(factory, guard, pending) {
  const wrap = backoff => ({
    get duration() { return guard.plannedWait(backoff.duration, pending); },
    next(context) { return wrap(backoff.next(context)); },
  });
  return { next(context) { return wrap(factory.next(context)); } };
}

function cockatielRetry(params) {
  const p = check(params, COCKATIEL_RETRY);
  const initialDelay = p.initialDelay ?? 128;
  const factory = (p.backoff ?? 'EXPONENTIAL') === 'CONSTANT'
    ? new cockatiel.ConstantBackoff(initialDelay)
    : new cockatiel.ExponentialBackoff({
      generator: GENERATORS[p.generator ?? 'DECORRELATED_JITTER'], exponent: p.exponent ?? 2,
      initialDelay, maxDelay: p.maxDelay ?? 30000,
    });
  const maxAttempts = p.maxAttempts ?? 3;
  // a RetryPolicy keeps no state between executions: one per call, whose backoff records its waits
  // in that call's state (a retry an aggressive timeout left running must not touch the next call's);
  // each attempt first tops up the wait before it, outside the patterns the retry wraps (a timeout
  // inside it starts with the attempt)
  return guard => fn => context => {
    const pending = context.rbl;
    const attempt = inner => (pending.waitUntil ? guard.settleWait(pending).then(() => fn(inner)) : fn(inner));
    return nest(cockatiel.retry(HANDLED, { maxAttempts, backoff: guardedBackoff(factory, guard, pending) }), attempt, context);
  };
}

const COCKATIEL_BREAKER = { exceptionsAllowedBeforeBreaking: POSITIVE_COUNT, halfOpenAfter: MS };

function cockatielBreaker(params) {
  const p = check(params, COCKATIEL_BREAKER);
  const policy = cockatiel.circuitBreaker(HANDLED, {
    halfOpenAfter: p.halfOpenAfter ?? 10000,
    breaker: new cockatiel.ConsecutiveBreaker(p.exceptionsAllowedBeforeBreaking ?? 5),
  });
  return () => fn => context => nest(policy, fn, context);
}

const TIMEOUT_STRATEGIES = { COOPERATIVE: cockatiel.TimeoutStrategy.Cooperative, AGGRESSIVE: cockatiel.TimeoutStrategy.Aggressive };
const COCKATIEL_TIMEOUT = { duration: MS, strategy: oneOf(...Object.keys(TIMEOUT_STRATEGIES)) };

function cockatielTimeout(params) {
  const p = required(check(params, COCKATIEL_TIMEOUT), 'duration', 'strategy');
  const policy = cockatiel.timeout(timerMs(p.duration), TIMEOUT_STRATEGIES[p.strategy]);
  return () => fn => context => nest(policy, fn, context);
}

const COCKATIEL_BULKHEAD = { limit: POSITIVE_COUNT, queue: COUNT };

function cockatielBulkhead(params) {
  const p = required(check(params, COCKATIEL_BULKHEAD), 'limit');
  const policy = cockatiel.bulkhead(p.limit, p.queue ?? 0);     // one per instance: shared with share "client"
  return () => fn => context => nest(policy, fn, context);
}

function cockatielFallback(params) {
  check(params, {});
  const policy = cockatiel.fallback(HANDLED, FALLBACK);
  return () => fn => context => nest(policy, fn, context);
}

// -- opossum --------------------------------------------------------------------------------------
const OPOSSUM_BREAKER = {
  errorThresholdPercentage: number(0, 100), resetTimeout: MS, volumeThreshold: COUNT,
  rollingCountTimeout: number(1, MAX_MS), rollingCountBuckets: { kind: 'int', low: 1, high: MAX_BUCKETS }, timeout: MS,
  allowWarmUp: 'bool', capacity: POSITIVE_COUNT,
};

function opossumBreaker(params) {
  const p = check(params, OPOSSUM_BREAKER);
  const options = {
    errorThresholdPercentage: p.errorThresholdPercentage ?? 50,
    resetTimeout: timerMs(p.resetTimeout ?? 30000),
    volumeThreshold: p.volumeThreshold ?? 0,
    rollingCountTimeout: timerMs(p.rollingCountTimeout ?? 10000),
    rollingCountBuckets: p.rollingCountBuckets ?? 10,
    timeout: p.timeout === 0 ? false : timerMs(p.timeout ?? 10000),      // 0: no timeout (opossum's `false`)
    allowWarmUp: p.allowWarmUp ?? false,
  };
  if (options.rollingCountTimeout % options.rollingCountBuckets !== 0) {
    throw new JobError('`rollingCountTimeout` must be a multiple of `rollingCountBuckets` (opossum rotates one bucket per '
      + 'rollingCountTimeout / rollingCountBuckets ms)');
  }
  if (p.capacity !== undefined) options.capacity = p.capacity;
  const breaker = new CircuitBreaker(fn => fn(), options);
  const built = () => fn => context => breaker.fire(() => fn(context)).catch(error => { throw leaving(error, context); });
  built.dispose = () => breaker.shutdown();               // its rolling window runs on an interval timer
  return built;
}

function baseline(params) {
  check(params, {});
  return () => fn => fn;
}

const LIBRARIES = {
  cockatiel: {
    baseline, retry: cockatielRetry, circuit_breaker: cockatielBreaker, timeout: cockatielTimeout,
    bulkhead: cockatielBulkhead, fallback: cockatielFallback,
  },
  opossum: { baseline, circuit_breaker: opossumBreaker },
};

// opossum's errors (lib/circuit.js buildError): an open breaker's fast failure, its semaphore's
// (capacity) refusal, its own timeout
const OPOSSUM_OPEN = 'EOPENBREAKER';
const OPOSSUM_FULL = 'ESEMLOCKED';
const OPOSSUM_TIMEOUT = 'ETIMEDOUT';

function refusalKind(error) {
  if (error instanceof cockatiel.BrokenCircuitError) return 'circuit_breaker';     // IsolatedCircuitError too
  if (error instanceof cockatiel.BulkheadRejectedError) return 'bulkhead';
  if (error instanceof RequestFailed || error instanceof CutShort) return null;
  if (error && error.code === OPOSSUM_OPEN) return 'circuit_breaker';
  if (error && error.code === OPOSSUM_FULL) return 'bulkhead';
  return null;
}

/** How a library pattern ended a failed call that started at `started` (hrtime), as the protocol
 * reports it, or null when the target's answers did. */
function callEnding(error, started) {
  const kind = refusalKind(error);
  if (kind) {
    const at = error.rblRefusedAt ?? process.hrtime.bigint();
    return { rejected: kind, wait_us: Math.max(0, Number((at - started) / 1000n)) };
  }
  if (isTimeout(error) || (error && !(error instanceof RequestFailed) && error.code === OPOSSUM_TIMEOUT)) return { timed_out: true };
  return null;
}

function libraryVersion(name) {
  try {
    const main = require.resolve(name);
    let dir = path.dirname(main);
    while (!fs.existsSync(path.join(dir, 'package.json')) || path.basename(dir) === 'dist') dir = path.dirname(dir);
    return JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8')).version;
  } catch (error) {
    return 'unknown';
  }
}

module.exports = { LIBRARIES, FALLBACK, callEnding, libraryVersion };
