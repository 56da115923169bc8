'use strict';
// A POST /run body -> a job, refusing everything the protocol does not allow (as job_request.py does).

const P = require('./protocol');

// protocol v1's TARGET_URL (clients/protocol.py), the one rule every runtime applies: http://HOST[:PORT]
// and a target path by the compiler's rule (rbl/compiler/urlpath.py). No `m` flag: `$` is the end.
const TARGET_URL = new RegExp("^http://([A-Za-z0-9.\\-]+|\\[[0-9A-Fa-f:.]+\\])(?::([0-9]{1,5}))?"
  + "((?:/(?!/)(?:[A-Za-z0-9._~!$&'()*+,;=:/\\-]|%[0-9A-Fa-f]{2})*"
  + "(?:\\?(?:[A-Za-z0-9._~!$&'()*+,;=:/?\\-]|%[0-9A-Fa-f]{2})*)?)?)$");
const MAX_DEPTH = 512;                  // nesting, as the Java client's parser allows

const FLOAT_KEYS = new WeakMap();       // decoded object or array -> its keys whose numbers were float literals

/** True when body[key] was written as a float literal (`1.0`, `1e3`): JSON.parse forgets, but the
 * protocol refuses them where an integer is due. */
function writtenAsFloat(body, key) {
  const keys = FLOAT_KEYS.get(body);
  return keys !== undefined && keys.has(String(key));
}

/** The shape of a JSON text JSON.parse accepted: each object a Map of its keys (a repeated key's
 * last value, as JSON.parse keeps it), each array a list, each number whether it was written with a
 * fraction or an exponent. Matching it to the parsed value by key, not by the order of a reviver's
 * visits (which puts integer-like keys first and sees a repeated key once), keeps `{"a": 1.0,
 * "0": 2}` and `{"a": 1, "a": 1, "b": 1.0}` straight. Iterative, so nesting is bounded by MAX_DEPTH
 * only. */
function shapeOf(text) {
  const stack = [];
  let root = null;
  const put = shape => {
    const top = stack[stack.length - 1];
    if (top === undefined) root = shape;
    else if (top.map) top.map.set(top.key, shape);
    else top.items.push(shape);
  };
  for (let i = 0; i < text.length;) {
    const c = text[i];
    const top = stack[stack.length - 1];
    if (c === '{' || c === '[') {
      const shape = c === '{' ? { map: new Map(), key: null, expectKey: true } : { items: [] };
      put(shape);
      stack.push(shape);
      if (stack.length > MAX_DEPTH) throw new P.JobError(`the body is not a job: JSON nested deeper than ${MAX_DEPTH}`);
      i++;
    } else if (c === '}' || c === ']') {
      stack.pop();
      i++;
    } else if (c === ',') {
      if (top && top.map) top.expectKey = true;
      i++;
    } else if (c === '"') {
      let j = i + 1;
      while (text[j] !== '"') j += text[j] === '\\' ? 2 : 1;
      if (top && top.map && top.expectKey) {
        top.key = JSON.parse(text.slice(i, j + 1));
        top.expectKey = false;
      } else {
        put(null);
      }
      i = j + 1;
    } else if (c === '-' || (c >= '0' && c <= '9')) {
      let j = i + 1;
      while (j < text.length && /[0-9eE.+-]/.test(text[j])) j++;
      put(/[.eE]/.test(text.slice(i, j)));
      i = j;
    } else if (c === 't' || c === 'f' || c === 'n') {
      put(null);
      i += c === 'f' ? 5 : 4;
    } else {
      i++;                              // whitespace and `:`
    }
  }
  return root;
}

/** Walks the parsed value with its shape: refuses numbers JSON.parse made infinite (1e400, 5000
 * digits) anywhere in the body, and records which were written as floats. */
function markNumbers(value, shape) {
  const pending = [[value, shape]];
  while (pending.length) {
    const [holder, holderShape] = pending.pop();
    const entries = holderShape.map ? [...holderShape.map] : holderShape.items.map((item, index) => [String(index), item]);
    for (const [key, childShape] of entries) {
      const child = holder[key];
      if (typeof child === 'number') {
        if (!Number.isFinite(child)) throw new P.JobError(`number out of range in ${key}`);
        if (childShape === true) {
          if (!FLOAT_KEYS.has(holder)) FLOAT_KEYS.set(holder, new Set());
          FLOAT_KEYS.get(holder).add(key);
        }
      } else if (child !== null && typeof child === 'object' && childShape) {
        pending.push([child, childShape]);
      }
    }
  }
}

function decodeBody(raw) {
  let text;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(raw);
  } catch (error) {
    throw new P.JobError('the body is not UTF-8');
  }
  if (text.charCodeAt(0) === 0xfeff) throw new P.JobError('the body is not JSON: a byte order mark');
  let value;
  try {
    value = JSON.parse(text || 'null');
  } catch (error) {
    throw new P.JobError(`the body is not JSON: ${String(error.message).slice(0, 120)}`);
  }
  if (typeof value === 'number' && !Number.isFinite(value)) throw new P.JobError('number out of range in the body');
  if (value !== null && typeof value === 'object') markNumbers(value, shapeOf(text));
  return value;
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
  if ([...url].length > P.MAX_URL_CHARS) throw new P.JobError(`\`target_url\` is longer than ${P.MAX_URL_CHARS} characters`);
  const match = TARGET_URL.exec(url);
  if (!match) throw new P.JobError(`\`target_url\` ${shown(url)} is not a URL this service can request: ${urlProblem(url)}`);
  const host = match[1].toLowerCase();
  const port = match[2] === undefined ? 80 : Number(match[2]);
  const path = match[3] || '/';
  if (path.length > P.MAX_TARGET_PATH_CHARS) {
    throw new P.JobError(`\`target_url\`'s path is ${path.length} characters long; at most ${P.MAX_TARGET_PATH_CHARS}`);
  }
  if (port > 65535) throw new P.JobError(`\`target_url\` has a port out of range: ${port}`);
  if (host !== allowed[0] || port !== allowed[1]) {
    throw new P.JobError(`\`target_url\` must be on ${allowed[0]}:${allowed[1]} (this service's --target), got ${host}:${port}`);
  }
  return { host, port, path };
}

/** Why `url` does not match TARGET_URL, for the error message. */
function urlProblem(url) {
  if (!url.startsWith('http://')) return 'it must be an http:// URL';
  const rest = url.slice('http://'.length);
  const cut = rest.search(/[/?#]/);
  const authority = cut < 0 ? rest : rest.slice(0, cut);
  const path = cut < 0 ? '' : rest.slice(cut);
  if (authority.includes('@')) return 'it must not have user info';
  if (!/^([A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\])(:[0-9]{1,5})?$/.test(authority)) {
    return 'it must be http://HOST:PORT/PATH with a host name or [IPv6] and a port of 1 to 5 digits';
  }
  if (!path.startsWith('/')) return 'its path must start with `/`';
  if (path.startsWith('//')) return 'its path starts with `//`, which names a host';
  if (/%(?![0-9A-Fa-f]{2})/.test(path)) return '`%` does not start a %XX escape';
  return 'its path has a character a target path cannot hold (write it as %XX)';
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
  // code points, as every runtime counts (length counts UTF-16 units: an emoji is two)
  if ([...instance].length > P.MAX_INSTANCE_CHARS) throw new P.JobError(`\`instance\` is longer than ${P.MAX_INSTANCE_CHARS} characters`);
  const vu = bounded(body, 'vu', 0, 2 ** 31 - 1, 0);
  const maxDurationMs = bounded(body, 'max_duration_ms', 1, P.MAX_DURATION_MS, P.MAX_DURATION_MS);
  return { strategy: steps, ...where, successes, maxRequests, share, instance, vu, maxDurationMs };
}

module.exports = { decodeBody, parseJob, parseTarget, writtenAsFloat };
