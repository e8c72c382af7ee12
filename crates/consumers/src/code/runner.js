// The dsh code runner for JavaScript (docs/design.md §11, the code runtime): started by the host through the
// `subprocess` seam as `node runner.js controller MAX_FRAME_BYTES`.
//
// Two processes. The controller starts the worker, which runs the programs in one realm whose
// globals persist from run to run, and hands it the host's channel — frames one a line, each
// base64 of a UTF-8 JSON object: the worker writes them on its descriptor 3 (the controller's
// stdout) and reads the host's on descriptor 4 (the controller's stdin), so a binding call is
// one hop each way. The worker is the channel's only writer. Its descriptors 1 and 2 — where
// the program, its `console` and its children write — are pipes the controller reads and turns
// into "out" frames, sent to the worker on descriptor 5 (a socket pair) and forwarded by it, so
// what a program prints is its output, never a frame. Before a run's "done", the worker writes
// a marker the program cannot know on descriptors 1 and 2 and waits for the controller to find
// each: every byte written before the run ended precedes its "done".
//
// Ownership beyond the process group: the worker, and so every process a program starts,
// carries this runner's mark in its environment, also once it has left the group and session
// (setsid) and lost its parent. When the runner ends — the host closes the channel or
// terminates the group (SIGTERM), or the worker dies — the controller first kills every marked
// process and every descendant of its own.
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
    // Only the new chunk can hold the next newline: a long line is not searched again per chunk.
    let end = chunk.indexOf('\n');
    if (end >= 0) end += pending.length;
    pending += chunk;
    let start = 0;
    while (end >= 0) {
      onLine(pending.slice(start, end));
      start = end + 1;
      end = pending.indexOf('\n', start);
    }
    if (start > 0) pending = pending.slice(start);
    if (pending.length > limit) onOverflow(pending.length);
  });
}

const MARK = 'DSH_CODE_RUNNER';

// {pid: parent pid} of every process but this one that can still run (not a zombie).
function liveProcesses(fs) {
  const found = new Map();
  for (const name of fs.readdirSync('/proc')) {
    if (!/^[0-9]+$/.test(name) || Number(name) === process.pid) continue;
    let stat;
    try {
      stat = fs.readFileSync(`/proc/${name}/stat`, 'latin1');
    } catch {
      continue;
    }
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    if (fields[0] !== 'Z' && fields[0] !== 'X') found.set(Number(name), Number(fields[1]));
  }
  return found;
}

// SIGKILLs the processes marked with `token` and the descendants of this process and of them,
// pass after pass until a pass finds none (a process forking meanwhile is found by the next).
function sweep(token) {
  const fs = require('fs');
  const marked = Buffer.from(`${MARK}=${token}\0`);
  const isMarked = (pid) => {
    try {
      return fs.readFileSync(`/proc/${pid}/environ`).includes(marked);
    } catch {
      return false;
    }
  };
  for (let pass = 0; pass < 100; pass++) {
    const live = liveProcesses(fs);
    const children = new Map();
    for (const [pid, parent] of live) {
      if (!children.has(parent)) children.set(parent, []);
      children.get(parent).push(pid);
    }
    const doomed = new Set([...live.keys()].filter(isMarked));
    const stack = [process.pid, ...doomed];
    while (stack.length) {
      for (const child of children.get(stack.pop()) || []) {
        if (!doomed.has(child)) {
          doomed.add(child);
          stack.push(child);
        }
      }
    }
    if (doomed.size === 0) return;
    for (const pid of doomed) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {}
    }
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 1);
  }
}

function controller() {
  const fs = require('fs');
  const { spawn } = require('child_process');
  const crypto = require('crypto');
  const limit = process.argv[3];
  const token = crypto.randomBytes(16).toString('hex');
  const nonce = crypto.randomBytes(16).toString('hex');
  const worker = spawn(process.execPath, [__filename, 'worker', limit, nonce], {
    stdio: ['ignore', 'pipe', 'pipe', 1, 0, 'pipe'],
    env: { ...process.env, [MARK]: token },
  });
  const relay = worker.stdio[5];
  relay.on('error', () => {});
  let ended = false;
  const end = (code, message) => {
    if (ended) return;
    ended = true;
    // The worker is gone or going: the channel has no other writer now. A host gone (its end
    // of the channel closed) is not this runner's error.
    if (message) {
      try {
        fs.writeSync(1, frame({ t: 'fatal', message }));
      } catch {}
    }
    sweep(token);
    process.exit(code);
  };
  process.on('SIGTERM', () => end(0));
  // Exit code 0: the host closed the channel (or the program exited on purpose, which the host
  // sees as the channel's end); anything else is this runner's failure.
  worker.on('exit', (code, signal) =>
    code === 0 ? end(0) : end(1, `the worker exited (${signal ? 'signal ' + signal : 'code ' + code})`));
  const marker = Buffer.from(`\0dsh-code-sync-${nonce}\0`);
  for (const [name, stream] of [['stdout', worker.stdout], ['stderr', worker.stderr]]) {
    const out = (bytes) => {
      if (bytes.length > 0) relay.write(frame({ t: 'out', s: name, b: bytes.toString('base64') }));
    };
    let carry = Buffer.alloc(0);
    stream.on('data', (chunk) => {
      let data = carry.length > 0 ? Buffer.concat([carry, chunk]) : chunk;
      for (let at = data.indexOf(marker); at >= 0; at = data.indexOf(marker)) {
        out(data.subarray(0, at));
        relay.write(frame({ t: 'synced', s: name }));
        data = data.subarray(at + marker.length);
      }
      // A marker's beginning at the end waits for the rest of it.
      let keep = Math.min(marker.length - 1, data.length);
      while (keep > 0 && !data.subarray(data.length - keep).equals(marker.subarray(0, keep))) keep--;
      out(data.subarray(0, data.length - keep));
      carry = Buffer.from(data.subarray(data.length - keep));
    });
  }
}

function worker() {
  const fs = require('fs');
  const net = require('net');
  const vm = require('vm');
  const limit = Number(process.argv[3]);
  const channel = new net.Socket({ fd: 3, readable: false, writable: true });
  const hostIn = new net.Socket({ fd: 4, readable: true, writable: false });
  const relay = new net.Socket({ fd: 5, readable: true, writable: false });
  const send = (message) => channel.write(frame(message));
  const fatal = (message) => {
    send({ t: 'fatal', message });
    channel.end(() => process.exit(1));
  };

  // The program's output so far, all forwarded: a marker on descriptors 1 and 2, each found by
  // the controller in order with the bytes before it.
  const marker = `\0dsh-code-sync-${process.argv[4]}\0`;
  let synced = null;
  const flushOutput = () => new Promise((resolve) => {
    let left = 2;
    synced = () => {
      if (--left === 0) resolve();
    };
    fs.writeSync(1, marker);
    fs.writeSync(2, marker);
  });
  lines(relay, Infinity, (line) => {
    if (line.length < 64 && JSON.parse(Buffer.from(line, 'base64').toString('utf8')).t === 'synced') {
      if (synced) synced();
    } else {
      channel.write(line + '\n');
    }
  }, () => {});
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
      await flushOutput();
      send({ t: 'done', ok: false, error: describe(error) });
      return;
    }
    await flushOutput();
    channel.write(Buffer.from(`{"t":"done","ok":true,"value":${encoded}}`, 'utf8').toString('base64') + '\n');
  };

  let queue = Promise.resolve();
  // The host closed the channel: nothing more will be asked of this runner.
  hostIn.on('end', () => process.exit(0));
  lines(hostIn, limit, (line) => {
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
  }, (length) => fatal(`the host sent a frame of over ${length} bytes (limit ${limit})`));
  send({ t: 'ready', version: process.version });
}

if (role === 'worker') worker();
else controller();
