// The dsh code runner for JavaScript (docs/design.md §11, the code runtime): started by the host through the
// `subprocess` seam as `node runner.js controller MAX_FRAME_BYTES`.
//
// Two processes. The controller keeps the host's channel — frames in on its stdin, out on its
// stdout, one frame a line: base64 of a UTF-8 JSON object — and starts the worker, which runs
// the programs in one realm whose globals persist from run to run. The worker talks to the
// controller on descriptor 3 (a socket pair); its descriptors 1 and 2 are pipes the controller
// reads and turns into "out" frames, so what the program's children write to stdout or stderr
// is the program's output, never a frame. The worker's own `process.stdout` and
// `process.stderr` send "out" frames on descriptor 3, in order with its other frames.
'use strict';

const role = process.argv[2];

function frame(message) {
  return Buffer.from(JSON.stringify(message), 'utf8').toString('base64') + '\n';
}

// Splits a byte stream into lines, refusing a line longer than `limit`.
function lines(stream, limit, onLine, onOverflow) {
  let pending = '';
  stream.setEncoding('latin1');
  stream.on('data', (chunk) => {
    pending += chunk;
    let end;
    while ((end = pending.indexOf('\n')) >= 0) {
      onLine(pending.slice(0, end));
      pending = pending.slice(end + 1);
    }
    if (pending.length > limit) onOverflow(pending.length);
  });
}

function controller() {
  const limit = Number(process.argv[3]);
  const { spawn } = require('child_process');
  const worker = spawn(process.execPath, [__filename, 'worker'], {
    stdio: ['ignore', 'pipe', 'pipe', 'pipe'],
  });
  const send = (line) => process.stdout.write(line);
  const fatal = (message) => {
    send(frame({ t: 'fatal', message }));
    worker.kill('SIGKILL');
    process.exit(1);
  };
  for (const [name, stream] of [['stdout', worker.stdout], ['stderr', worker.stderr]]) {
    stream.on('data', (bytes) => send(frame({ t: 'out', s: name, b: bytes.toString('base64') })));
  }
  // The worker's frames go to the host as they are: the host validates every frame.
  lines(worker.stdio[3], limit, (line) => send(line + '\n'), (length) =>
    fatal(`the worker wrote a frame of over ${length} bytes without an end (limit ${limit})`));
  lines(process.stdin, limit, (line) => worker.stdio[3].write(line + '\n'), (length) =>
    fatal(`the host sent a frame of over ${length} bytes (limit ${limit})`));
  process.stdin.on('end', () => {
    worker.kill('SIGKILL');
    process.exit(0);
  });
  worker.on('exit', (code, signal) =>
    fatal(`the worker exited (${signal ? 'signal ' + signal : 'code ' + code})`));
}

function worker() {
  const net = require('net');
  const vm = require('vm');
  const channel = new net.Socket({ fd: 3, readable: true, writable: true });
  const send = (message) => channel.write(frame(message));

  for (const name of ['stdout', 'stderr']) {
    process[name].write = function write(chunk, encoding, callback) {
      const bytes = typeof chunk === 'string'
        ? Buffer.from(chunk, typeof encoding === 'string' ? encoding : 'utf8')
        : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
      if (bytes.length > 0) send({ t: 'out', s: name, b: bytes.toString('base64') });
      const done = typeof encoding === 'function' ? encoding : callback;
      if (typeof done === 'function') process.nextTick(done);
      return true;
    };
  }
  // A promise nobody awaited must not end the session: it is reported on stderr.
  process.on('unhandledRejection', (reason) =>
    process.stderr.write(`unhandled rejection: ${reason && reason.stack ? reason.stack : reason}\n`));
  process.on('uncaughtException', (error) =>
    process.stderr.write(`uncaught exception: ${error && error.stack ? error.stack : error}\n`));

  const pending = new Map();
  let nextCall = 1;
  class BindingError extends Error {
    constructor(kind, message) {
      super(message);
      this.name = 'BindingError';
      this.kind = kind;
    }
  }
  const dsh = Object.create(null);
  Object.defineProperty(dsh, 'BindingError', { value: BindingError });
  globalThis.dsh = dsh;
  const bind = (names) => {
    for (const name of names) {
      dsh[name] = (args = {}) => new Promise((resolve, reject) => {
        const id = nextCall++;
        pending.set(id, { resolve, reject });
        send({ t: 'call', id, name, args });
      });
    }
  };

  const sources = new Map();
  // The program is the body of an async function; HEADER shares its first line, so its lines
  // are the program's lines and only the first line's columns shift.
  const HEADER = '(async function (dsh, require) {';
  const frames = (error) => {
    const stack = typeof error?.stack === 'string' ? error.stack.split('\n') : [];
    const found = [];
    for (const entry of stack) {
      const match = /^\s*at (?:(.*?) \()?(.*?):(\d+):(\d+)\)?$/.exec(entry);
      if (!match || !sources.has(match[2])) continue;
      const line = Number(match[3]);
      const column = line === 1 ? Number(match[4]) - HEADER.length : Number(match[4]);
      const text = (sources.get(match[2])[line - 1] || '').trim();
      found.push({ file: match[2], line, column, function: match[1] || '<program>', text });
    }
    return found;
  };
  const describe = (error) => {
    if (error instanceof Error) {
      const detail = `${error.name}: ${error.message}`;
      return { type: error.name, message: detail, frames: frames(error) };
    }
    return { type: typeof error, message: `thrown: ${String(error)}`, frames: [] };
  };

  const execute = async (message) => {
    sources.set(message.filename, message.source.split('\n'));
    bind(message.bindings);
    let encoded;
    try {
      const program = vm.runInThisContext(`${HEADER}${message.code}\n})`, {
        filename: message.filename,
      });
      const value = await program(dsh, require);
      encoded = JSON.stringify(value === undefined ? null : value);
      if (encoded === undefined) encoded = 'null';
      const size = Buffer.byteLength(encoded, 'utf8');
      if (size > message.max_result_bytes) {
        throw new RangeError(`the program's result is ${size} bytes of JSON, over the limit of ${message.max_result_bytes}`);
      }
    } catch (error) {
      send({ t: 'done', ok: false, error: describe(error) });
      return;
    }
    channel.write(Buffer.from(`{"t":"done","ok":true,"value":${encoded}}`, 'utf8').toString('base64') + '\n');
  };

  let queue = Promise.resolve();
  lines(channel, Infinity, (line) => {
    const message = JSON.parse(Buffer.from(line, 'base64').toString('utf8'));
    if (message.t === 'run') {
      queue = queue.then(() => execute(message));
    } else if (message.t === 'reply') {
      const call = pending.get(message.id);
      if (!call) return;
      pending.delete(message.id);
      if (message.error) call.reject(new BindingError(message.error.kind, message.error.message));
      else call.resolve(message.value);
    }
  }, () => {});
  send({ t: 'ready', version: process.version });
}

if (role === 'worker') worker();
else controller();
