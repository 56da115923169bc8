'use strict';
// The HTTP/1.1 front end on Node's own http module, bounded as protocol v1 says: sizes, read
// timeouts, connections; every error is a JSON {"error": ...} reply, never a dropped connection.

const http = require('http');
const P = require('./protocol');
const { decodeBody, parseJob } = require('./job');

const REASONS = { 400: 'Bad Request', 404: 'Not Found', 405: 'Method Not Allowed', 408: 'Request Timeout',
  411: 'Length Required', 413: 'Content Too Large', 431: 'Request Header Fields Too Large', 503: 'Service Unavailable', 500: 'Internal Server Error' };

/** A reply written straight to the socket, for requests Node's parser refused. */
function rawReply(socket, status, message) {
  if (!socket.writable || socket.rblAnswered) {
    socket.destroy();
    return;
  }
  socket.rblAnswered = true;
  const body = JSON.stringify({ error: message });
  socket.end(`HTTP/1.1 ${status} ${REASONS[status]}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n`
    + `connection: close\r\n\r\n${body}`);
  setTimeout(() => socket.destroy(), 1000).unref();
}

function send(response, status, body, close = false) {
  const data = JSON.stringify(body);
  const headers = { 'content-type': 'application/json', 'content-length': Buffer.byteLength(data) };
  if (close) headers.connection = 'close';
  if (response.socket) response.socket.rblAnswered = true;
  response.writeHead(status, REASONS[status] || 'OK', headers);
  response.end(data);
}

function clientErrorStatus(error) {
  switch (error.code) {
    case 'HPE_HEADER_OVERFLOW': return [431, 'request headers are too large'];
    case 'ERR_HTTP_REQUEST_TIMEOUT': return [408, 'the request did not arrive in time'];
    case 'HPE_INVALID_EOF_STATE': return [400, 'the connection ended inside the request'];
    case 'HPE_UNEXPECTED_CONTENT_LENGTH': return [400, 'conflicting Content-Length and Transfer-Encoding'];
    case 'HPE_INVALID_CONTENT_LENGTH': return [400, 'a bad Content-Length'];
    default: return [400, `malformed request (${error.code || error.message})`];
  }
}

/** Reads a request body of at most MAX_BODY_BYTES; calls done(error, buffer). */
function readBody(request, done) {
  const chunks = [];
  let size = 0;
  let finished = false;
  const finish = (error, body) => {
    if (!finished) {
      finished = true;
      done(error, body);
    }
  };
  request.on('data', chunk => {
    size += chunk.length;
    if (size > P.MAX_BODY_BYTES) finish([413, `the body is over ${P.MAX_BODY_BYTES} bytes`]);
    else chunks.push(chunk);
  });
  request.on('end', () => finish(null, Buffer.concat(chunks)));
  request.on('aborted', () => finish([400, 'the connection ended inside the body']));
  request.on('error', () => finish([400, 'the connection ended inside the body']));
}

function serve(listen, service, maxJobs, ready) {
  const server = http.createServer({
    maxHeaderSize: P.MAX_HEADER_BYTES, requestTimeout: P.READ_TIMEOUT_MS, headersTimeout: P.READ_TIMEOUT_MS,
    keepAliveTimeout: P.READ_TIMEOUT_MS, connectionsCheckingInterval: 500, noDelay: true, insecureHTTPParser: false,
    requireHostHeader: false,           // a Host-less request gets the protocol's own JSON replies
  });
  server.httpAllowHalfOpen = true;      // a caller that shuts its sending side still gets its reply
  let connections = 0;
  server.on('connection', socket => {
    connections += 1;
    socket.rblRefused = connections > maxJobs;
    socket.on('close', () => { connections -= 1; });
    socket.on('error', () => {});
  });
  server.on('clientError', (error, socket) => {
    const [status, message] = clientErrorStatus(error);
    rawReply(socket, status, message);
  });
  // Node hands CONNECT to this event and, with no listener, closes the connection without a word
  server.on('connect', (request, socket) => {
    const url = request.url;
    if (socket.rblRefused) return rawReply(socket, 503, `more than ${maxJobs} connections at once`);
    if (!url.startsWith('/')) return rawReply(socket, 400, 'the request target must be a path (origin form)');
    const route = routeOf(url);
    if (route === null) return rawReply(socket, 404, `no route ${url.slice(0, 60)}; there are GET /health, POST /run and POST /call`);
    return rawReply(socket, 405, `${route.path} takes ${route.method}`);
  });
  // An Expect other than 100-continue: Node would answer 417 with no JSON; the other runtimes ignore
  // it, and so does this one
  server.on('checkExpectation', (request, response) => server.emit('request', request, response));
  server.on('request', (request, response) => {
    response.on('error', () => {});
    try {
      answer(request, response);
    } catch (failure) {                 // a bug must not take the service down, nor drop the caller
      if (!response.headersSent) send(response, 500, { error: `internal error: ${String(failure).slice(0, 200)}` }, true);
      else response.destroy();
    }
  });

  function answer(request, response) {
    const url = request.url;
    const route = routeOf(url);
    const allowed = route === null ? 'POST' : route.method;
    if (request.socket.rblRefused) {
      request.resume();
      request.on('end', () => send(response, 503, { error: `more than ${maxJobs} connections at once` }, true));
      return;
    }
    if (!/^HTTP\/1\.[01]$/.test(`HTTP/${request.httpVersion}`)) return send(response, 400, { error: 'HTTP/1.0 or 1.1 only' }, true);
    if (!url.startsWith('/')) return send(response, 400, { error: 'the request target must be a path (origin form)' }, true);
    if (request.headers['transfer-encoding'] !== undefined) {
      return send(response, 411, { error: 'a body needs a Content-Length (no chunked transfer coding)' }, true);
    }
    const length = request.headers['content-length'];
    if (length !== undefined && Number(length) > P.MAX_BODY_BYTES) {
      return send(response, 413, { error: `the body is over ${P.MAX_BODY_BYTES} bytes` }, true);
    }
    readBody(request, (error, body) => {
      if (error) return send(response, error[0], { error: error[1] }, true);
      if (route === null) return send(response, 404, { error: `no route ${url.slice(0, 60)}; there are GET /health, POST /run and POST /call` });
      if (request.method !== allowed) return send(response, 405, { error: `${route.path} takes ${allowed}` });
      if (route.path === '/health') return send(response, 200, service.health());
      let job;
      try {
        job = parseJob(decodeBody(body), service.target);
      } catch (failure) {
        if (failure instanceof P.JobError) return send(response, 400, { error: failure.message });
        return send(response, 400, { error: `cannot run this job: ${failure.message}` });
      }
      service.run(job, request.socket, route.path === '/call' ? 1 : 0).then(reply => send(response, 200, reply), failure => {
        if (failure instanceof P.JobError) return send(response, 400, { error: failure.message });
        return send(response, 500, { error: `the job failed inside the client: ${failure && failure.message}` });
      });
    });
  }
  const [host, port] = listen;
  // hundreds of virtual users connect at once; Node's default backlog (511) dropped the SYNs of the
  // rest, which are retried only after a second or more
  server.listen({ port, host, backlog: Math.max(1024, 2 * maxJobs) }, () => ready(server.address().port));
  return server;
}

/** The route of a request target: its path (a query does not change it), or null. */
function routeOf(url) {
  const path = url.split('?', 1)[0];
  if (path === '/health') return { path, method: 'GET' };
  if (path === '/run' || path === '/call') return { path, method: 'POST' };
  return null;
}

module.exports = { serve };
