'use strict';
// rbl's Node.js client service: rbl client protocol v1 (clients/protocol.py) over cockatiel or opossum.
//
// Run: node src/main.js --library cockatiel|opossum --target 127.0.0.1:PORT [--listen 127.0.0.1:0] [--max-jobs 512]
// It prints `listening PORT` on stdout once bound.

const http = require('http');
const { MAX_JOBS } = require('./protocol');
const { parseTarget } = require('./job');
const { ClientService } = require('./service');
const { serve } = require('./front');
const { LIBRARIES } = require('./strategies');

const USAGE = 'usage: node src/main.js --library cockatiel|opossum --target HOST:PORT [--listen HOST:PORT] [--max-jobs N]';

function fail(message) {
  process.stderr.write(`${USAGE}\nerror: ${message}\n`);
  process.exit(2);
}

function parseArgs(argv) {
  const args = { listen: '127.0.0.1:0', maxJobs: String(MAX_JOBS) };
  const names = { '--library': 'library', '--target': 'target', '--listen': 'listen', '--max-jobs': 'maxJobs' };
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--help' || argv[i] === '-h') {
      process.stdout.write(`${USAGE}\n`);
      process.exit(0);
    }
    const name = names[argv[i]];
    if (!name || i + 1 >= argv.length) fail(`unknown or incomplete argument ${argv[i]}`);
    args[name] = argv[++i];
  }
  return args;
}

function main() {
  const args = parseArgs(process.argv.slice(2));
  if (!(args.library in LIBRARIES)) fail(`--library must be one of ${Object.keys(LIBRARIES).join(', ')}`);
  const address = (flag, text) => {
    try {
      return parseTarget(text);
    } catch (error) {
      return fail(`${flag} must be HOST:PORT, got ${JSON.stringify(text)}`);
    }
  };
  const target = address('--target', args.target);
  const listen = address('--listen', args.listen.startsWith(':') ? `127.0.0.1${args.listen}` : args.listen);
  const maxJobs = Number(args.maxJobs);
  if (!Number.isSafeInteger(maxJobs) || maxJobs < 1) fail('--max-jobs must be a whole number of at least 1');
  const server = serve(listen, new ClientService(args.library, target), maxJobs, port => {
    // one request to its own /health first: the HTTP client and server paths are compiled and
    // initialised before the first job, whose first request would otherwise pay for it
    const warm = http.get({ host: listen[0] === '0.0.0.0' ? '127.0.0.1' : listen[0], port, path: '/health',
      agent: false }, response => {
      response.resume();
      response.on('end', () => process.stdout.write(`listening ${port}\n`));
    });
    warm.on('error', () => process.stdout.write(`listening ${port}\n`));
  });
  const stop = () => {
    server.close();
    server.closeAllConnections();
    setTimeout(() => process.exit(0), 200).unref();
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}

main();
