'use strict';
// A POST /run body -> a job, refusing everything the protocol does not allow (as job_request.py does).

const P = require('./protocol');

const URL_CHARS = /^[A-Za-z0-9\-._~!$&'()*+,;=:@/?%[\]]*$/;

// Which numbers in a JSON text were written with a fraction or an exponent (`1.0`, `1e3`): JSON.parse
// forgets, but the protocol refuses them where an integer is due. In document order, as the reviver
// visits number leaves.
function floatLiterals(text) {
  const found = [];
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (c === '"') {
      for (i++; i < text.length && text[i] !== '"'; i++) if (text[i] === '\\') i++;
    } else if (c === '-' || (c >= '0' && c <= '9')) {
      let j = i + 1;
      while (j < text.length && /[0-9eE.+\-]/.test(text[j])) j++;
      found.push(/[.eE]/.test(text.slice(i, j)));
      i = j - 1;
    }
  }
  return found;
}

const FLOAT_KEYS = new WeakMap();       // decoded object -> its keys whose numbers were float literals

/** True when body[key] was written as a float literal. */
function writtenAsFloat(body, key) {
  const keys = FLOAT_KEYS.get(body);
  return keys !== undefined && keys.has(key);
}

function decodeBody(raw) {
  let text;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(raw);
  } catch (error) {
    throw new P.JobError('the body is not UTF-8');
  }
  if (text.charCodeAt(0) === 0xfeff) throw new P.JobError('the body is not JSON: a byte order mark');
  try {
    // numbers JSON.parse turns into Infinity (1e400, 5000 digits) are refused anywhere in the body
    const floats = floatLiterals(text);
    let index = 0;
    return JSON.parse(text || 'null', function (key, value) {
      if (typeof value === 'number') {
        if (!Number.isFinite(value)) throw new P.JobError(`number out of range in ${key || 'the body'}`);
        if (floats[index++]) {
          if (!FLOAT_KEYS.has(this)) FLOAT_KEYS.set(this, new Set());
          FLOAT_KEYS.get(this).add(key);
        }
      }
      return value;
    });
  } catch (error) {
    if (error instanceof P.JobError) throw error;
    throw new P.JobError(`the body is not JSON: ${String(error.message).slice(0, 120)}`);
  }
}

function shown(value) {
  let text;
  try { text = JSON.stringify(value); } catch (e) { text = String(value); }
  return String(text).slice(0, 60);
}

function field(body, key, kind, fallback) {
  let value = body[key];
  if (value === undefined || value === null) value = fallback;
  const ok = kind === 'int' ? Number.isSafeInteger(value) && !writtenAsFloat(body, key)
    : kind === 'array' ? Array.isArray(value)
      : kind === 'object' ? value !== null && typeof value === 'object' && !Array.isArray(value)
        : typeof value === kind;
  if (value === undefined || !ok) throw new P.JobError(`\`${key}\` must be ${kind}, got ${shown(value)}`);
  return value;
}

function bounded(body, key, low, high, fallback) {
  const value = field(body, key, 'int', fallback);
  if (value < low || value > high) throw new P.JobError(`\`${key}\` must be between ${low} and ${high}, got ${value}`);
  return value;
}

/** `--target HOST:PORT` -> [host, port]. */
function parseTarget(text) {
  const match = /^([A-Za-z0-9.\-]+|\[[0-9A-Fa-f:.]+\]):(\d{1,5})$/.exec(text || '');
  if (!match || Number(match[2]) > 65535) throw new Error(`--target must be HOST:PORT, got ${JSON.stringify(text)}`);
  return [match[1].toLowerCase(), Number(match[2])];
}

function target(body, allowed) {
  const url = field(body, 'target_url', 'string');
  if (url.length > P.MAX_URL_CHARS) throw new P.JobError(`\`target_url\` is longer than ${P.MAX_URL_CHARS} characters`);
  if (!URL_CHARS.test(url)) throw new P.JobError(`\`target_url\` has characters a URL cannot hold: ${shown(url)}`);
  if (!url.startsWith('http://')) throw new P.JobError(`\`target_url\` must be an http:// URL, got ${shown(url)}`);
  const rest = url.slice('http://'.length);
  const slash = rest.search(/[/?#]/);
  const authority = slash < 0 ? rest : rest.slice(0, slash);
  const path = slash < 0 ? '/' : rest.slice(slash);
  if (path.includes('#')) throw new P.JobError('`target_url` must not have a fragment');
  const match = /^([A-Za-z0-9.\-]+|\[[0-9A-Fa-f:.]+\])(?::(\d{1,5}))?$/.exec(authority);
  if (!match) throw new P.JobError(`\`target_url\` must be http://HOST:PORT/PATH, got ${shown(url)}`);
  const host = match[1].toLowerCase();
  const port = match[2] === undefined ? 80 : Number(match[2]);
  if (port > 65535) throw new P.JobError(`\`target_url\` has a port out of range: ${shown(url)}`);
  if (host !== allowed[0] || port !== allowed[1]) {
    throw new P.JobError(`\`target_url\` must be on ${allowed[0]}:${allowed[1]} (this service's --target), got ${host}:${port}`);
  }
  return { host, port, path: path.startsWith('/') ? path : '/' + path };
}

function strategy(body) {
  const items = field(body, 'strategy', 'array', []);
  if (items.length > P.MAX_STEPS) throw new P.JobError(`\`strategy\` has ${items.length} steps; at most ${P.MAX_STEPS}`);
  return items.map(item => {
    if (item === null || typeof item !== 'object' || Array.isArray(item) || typeof item.pattern !== 'string') {
      throw new P.JobError('each strategy step needs a `pattern` string');
    }
    const params = item.params === undefined || item.params === null ? {} : item.params;
    if (typeof params !== 'object' || Array.isArray(params)) throw new P.JobError('`params` must be an object');
    return { pattern: item.pattern, params };
  });
}

/** The job in a decoded body, whose target must be `allowed` ([host, port]). */
function parseJob(body, allowed) {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) throw new P.JobError('the job must be a JSON object');
  const steps = strategy(body);
  const where = target(body, allowed);
  const share = field(body, 'share', 'string', 'user');
  if (!P.SHARE_MODES.includes(share)) throw new P.JobError(`\`share\` must be one of ${P.SHARE_MODES.join(', ')}, got ${shown(share)}`);
  const successes = bounded(body, 'successes', 1, P.MAX_COUNT);
  const maxRequests = bounded(body, 'max_requests', 1, P.MAX_COUNT);
  const instance = field(body, 'instance', 'string', '');
  if (instance.length > P.MAX_INSTANCE_CHARS) throw new P.JobError(`\`instance\` is longer than ${P.MAX_INSTANCE_CHARS} characters`);
  const vu = bounded(body, 'vu', 0, 2 ** 31 - 1, 0);
  const maxDurationMs = bounded(body, 'max_duration_ms', 1, P.MAX_DURATION_MS, P.MAX_DURATION_MS);
  return { strategy: steps, ...where, successes, maxRequests, share, instance, vu, maxDurationMs };
}

module.exports = { decodeBody, parseJob, parseTarget, writtenAsFloat };
