'use strict';
// Resilience patterns built from the real cockatiel and opossum libraries.
//
// A pattern turns "one call" into "one call through the library": build(params, guard) returns
// wrap(fn) -> () => Promise. Parameters arrive library-native, named and in the units of the
// catalogue (rbl/libraries/prelude.rbl; durations in milliseconds), exactly as the plan holds them.
// A parameter the library does not have is a 400, never ignored.

const fs = require('fs');
const path = require('path');
const cockatiel = require('cockatiel');
const CircuitBreaker = require('opossum');
const { JobError } = require('./protocol');
const { RequestFailed } = require('./target');
const { writtenAsFloat } = require('./job');

const MAX_MS = 1e12;                    // far beyond any useful duration; max_duration_ms bounds a job
const MAX_FACTOR = 1e9;
const TIMER_MAX_MS = 2 ** 31 - 1;       // Node's setTimeout runs a longer delay after 1 ms

function check(params, allowed) {
  // own properties only: `toString` or `__proto__` in a job is an unknown parameter, not Object's
  const unknown = Object.keys(params).filter(name => !Object.prototype.hasOwnProperty.call(allowed, name)).sort();
  if (unknown.length) {
    throw new JobError(`unknown parameter(s) ${unknown.join(', ').slice(0, 200)}; expected ${Object.keys(allowed).join(', ')}`);
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

const number = (low, high) => ({ kind: 'number', low, high });
const COUNT = { kind: 'int', low: 0, high: Number.MAX_SAFE_INTEGER };
const POSITIVE_COUNT = { kind: 'int', low: 1, high: Number.MAX_SAFE_INTEGER };
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

/** The library's backoff, its waits handed to the job: a wait ends at the job's limits (the client
 * tops up a Node timer that fired early, so a wait is never shorter than the library's duration). */
function guardedBackoff(factory, guard) {
  const wrap = backoff => ({
    get duration() { return guard.plannedWait(backoff.duration); },
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
  return guard => {
    const policy = cockatiel.retry(cockatiel.handleType(RequestFailed), { maxAttempts, backoff: guardedBackoff(factory, guard) });
    return fn => () => policy.execute(fn, guard.abort.signal);
  };
}

const COCKATIEL_BREAKER = { exceptionsAllowedBeforeBreaking: POSITIVE_COUNT, halfOpenAfter: MS };

function cockatielBreaker(params) {
  const p = check(params, COCKATIEL_BREAKER);
  const policy = cockatiel.circuitBreaker(cockatiel.handleType(RequestFailed), {
    halfOpenAfter: p.halfOpenAfter ?? 10000,
    breaker: new cockatiel.ConsecutiveBreaker(p.exceptionsAllowedBeforeBreaking ?? 5),
  });
  return () => fn => () => policy.execute(fn);
}

// -- opossum --------------------------------------------------------------------------------------
const OPOSSUM_BREAKER = {
  errorThresholdPercentage: number(0, 100), resetTimeout: MS, volumeThreshold: COUNT,
  rollingCountTimeout: number(1, MAX_MS), rollingCountBuckets: POSITIVE_COUNT, timeout: MS,
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
  const built = () => fn => () => breaker.fire(fn);
  built.dispose = () => breaker.shutdown();               // its rolling window runs on an interval timer
  return built;
}

function baseline(params) {
  check(params, {});
  return () => fn => fn;
}

const LIBRARIES = {
  cockatiel: { baseline, retry: cockatielRetry, circuit_breaker: cockatielBreaker },
  opossum: { baseline, circuit_breaker: opossumBreaker },
};

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

module.exports = { LIBRARIES, libraryVersion };
