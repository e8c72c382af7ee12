// The `dsh mcp` benchmark (issue 10): one MCP client — the official TypeScript SDK over stdio —
// drives `dsh mcp` and the peers as published on npm, and prints medians and ratios measured in
// the same run:
//
//   files     dsh (local composition) vs @modelcontextprotocol/server-filesystem
//             read 1 KiB, write 1 KiB, edit (one unique replacement), list 1,000 entries
//   commands  dsh (local composition) vs @wonderwhy-er/desktop-commander
//             start `true` and read its output; 100 MiB of command output read to the end
//             (with the peak RSS of the `dsh mcp` process)
//   toll      a tool doing no I/O (list_terminals) against an MCP ping of the same dsh mcp,
//             back to back and after 200 ms of think time (target ≤ 1.2×), the two calls
//             alternated call by call
//   e2b-local the same dsh scenario on a one-sandbox e2b-local composition, against local
//   code      the code runtime (issue 27) on both compositions: a binding call against a
//             direct MCP call, a session's cold start against the interpreter's, and an agent
//             task tool by tool against one code_run
//
// Usage: node bench.mjs [--rounds N] [--batch K] [--bulk-runs R] [--bulk-mib M] [--quick]
//                       [--only toll|peers|code] [--json FILE]
// Every leg runs by default; --only runs one (toll needs no peer and takes about 75 s).
// Environment: DSH_BIN (the dsh binary, required); for the e2b-local leg DSH_E2B_CONFIG (the
// manifest, e.g. config/e2b-local.yaml) and E2B_API_URL / E2B_SANDBOX_URL / E2B_API_KEY (the
// server's `export` lines) — without them that leg is skipped; DSH_BENCH_BOUNDARY_BIN (e2b-client's
// example boundary_round_trip) adds the sandbox boundary's own round trip to the code leg.
// tests/benches/mcp/run.sh sets it all up.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { execFileSync, spawn } from "node:child_process";
import { once } from "node:events";
import fs from "node:fs";
import os from "node:os";
import readline from "node:readline";
import { median, quantile } from "./stats.mjs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));

// ---------------------------------------------------------------------------------------------
// Options
// ---------------------------------------------------------------------------------------------

const LEGS = ["toll", "peers", "code"];

function parseArgs(argv) {
  const opts = { rounds: 20, batch: 10, bulkRuns: 3, bulkMiB: 100, json: null, only: null, quick: false };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    const value = () => {
      const v = argv[++i];
      if (v === undefined) throw new Error(`${arg} needs a value`);
      return v;
    };
    switch (arg) {
      case "--rounds": opts.rounds = Number(value()); break;
      case "--batch": opts.batch = Number(value()); break;
      case "--bulk-runs": opts.bulkRuns = Number(value()); break;
      case "--bulk-mib": opts.bulkMiB = Number(value()); break;
      case "--json": opts.json = value(); break;
      case "--only": opts.only = value(); break;
      case "--quick": Object.assign(opts, { rounds: 5, batch: 3, bulkRuns: 1, bulkMiB: 8, quick: true }); break;
      default:
        console.error(
          "usage: node bench.mjs [--rounds N] [--batch K] [--bulk-runs R] [--bulk-mib M] [--quick] [--only toll|peers|code] [--json FILE]",
        );
        process.exit(2);
    }
  }
  if (opts.only !== null && !LEGS.includes(opts.only)) throw new Error(`--only ${opts.only}: one of ${LEGS.join(", ")}`);
  for (const k of ["rounds", "batch", "bulkRuns", "bulkMiB"]) {
    if (!(Number.isInteger(opts[k]) && opts[k] > 0)) throw new Error(`--${k}: a positive integer`);
  }
  return opts;
}

const opts = parseArgs(process.argv.slice(2));
const DSH_BIN = process.env.DSH_BIN;
if (!DSH_BIN) throw new Error("set DSH_BIN to the dsh binary (tests/benches/mcp/run.sh does)");
const E2B_CONFIG = process.env.DSH_E2B_CONFIG;
const withE2b = Boolean(E2B_CONFIG && process.env.E2B_API_URL);
const BOUNDARY_BIN = process.env.DSH_BENCH_BOUNDARY_BIN;

const KiB = 1024;
const MiB = 1024 * KiB;
const BULK_BYTES = opts.bulkMiB * MiB;
// dsh's read_output cap (crates/consumers/src/commands/read.rs MAX_READ_BYTES): every page asks for it.
const DSH_PAGE_BYTES = MiB;
// The bulk output: lines of 99 'x' and a newline, like a chatty build log. Both servers run the
// same command line through their shell.
const BULK_LINE = 100;
const bulkCommand = (bytes) => `yes ${"x".repeat(BULK_LINE - 1)} | head -c ${bytes}`;
// desktop-commander pages by lines: this many lines is dsh's 1 MiB page.
const DC_PAGE_LINES = Math.ceil(DSH_PAGE_BYTES / BULK_LINE);
// Think time before each call in the "spaced" figures.
const SPACED_MS = 200;
// A peer that has not delivered the bulk output by then is stopped and reported as such.
const BULK_DEADLINE_MS = 120_000;

// ---------------------------------------------------------------------------------------------
// Statistics and printing
// ---------------------------------------------------------------------------------------------


function fmtTime(ms) {
  if (!Number.isFinite(ms)) return "—";
  if (ms >= 1000) return `${(ms / 1000).toPrecision(4)} s`;
  if (ms >= 1) return `${ms.toPrecision(4)} ms`;
  return `${(ms * 1000).toPrecision(4)} µs`;
}
const fmtMiB = (bytes) => (Number.isFinite(bytes) ? `${(bytes / MiB).toPrecision(4)} MiB` : "—");
function fmtRatio(ratios) {
  if (!ratios || ratios.length === 0) return "—";
  const f = (x) => x.toFixed(2);
  return `${median(ratios).toFixed(3)}x [${f(quantile(ratios, 0.25))}-${f(quantile(ratios, 0.75))}]`;
}
const pad = (s, n) => String(s).padStart(n);
// A median time with its interquartile range.
const fmtSpread = (v) => `${fmtTime(median(v))} [${fmtTime(quantile(v, 0.25))}-${fmtTime(quantile(v, 0.75))}]`;
const padEnd = (s, n) => String(s).padEnd(n);

function machine() {
  const load = os.loadavg().map((x) => x.toFixed(2)).join(" ");
  return { date: new Date().toISOString().replace("T", " ").replace(/\..*/, " UTC"), load };
}

// ---------------------------------------------------------------------------------------------
// Servers
// ---------------------------------------------------------------------------------------------

function procStatus(pid) {
  try {
    const text = fs.readFileSync(`/proc/${pid}/status`, "utf8");
    const kib = (key) => {
      const m = text.match(new RegExp(`^${key}:\\s+(\\d+) kB`, "m"));
      return m ? Number(m[1]) * KiB : NaN;
    };
    return { rss: kib("VmRSS"), hwm: kib("VmHWM") };
  } catch {
    return { rss: NaN, hwm: NaN };
  }
}

async function start(name, command, args, { cwd, env }) {
  const client = new Client({ name: "dsh-bench-mcp", version: "1.0.0" });
  const transport = new StdioClientTransport({ command, args, cwd, env, stderr: "pipe" });
  let stderr = "";
  transport.stderr?.on("data", (chunk) => {
    stderr = (stderr + chunk).slice(-8192);
  });
  await client.connect(transport);
  const tools = (await client.listTools()).tools.map((t) => t.name);
  return {
    name,
    client,
    transport,
    tools,
    pid: transport.pid,
    stderr: () => stderr,
    async call(tool, args) {
      const result = await client.callTool(
        { name: tool, arguments: args },
        undefined,
        { timeout: 600_000, resetTimeoutOnProgress: true },
      );
      if (result.isError) {
        const text = result.content?.map((c) => c.text ?? "").join("\n") ?? "";
        throw new Error(`${name} ${tool}: tool error: ${text.slice(0, 500)}`);
      }
      return result;
    },
    async close() {
      await client.close().catch(() => {});
    },
  };
}

const textOf = (result) => result.content?.map((c) => c.text ?? "").join("\n") ?? "";

function requireTools(server, names) {
  const missing = names.filter((n) => !server.tools.includes(n));
  if (missing.length) throw new Error(`${server.name} has no tool ${missing.join(", ")} (it has ${server.tools.join(", ")})`);
}

// ---------------------------------------------------------------------------------------------
// Fixtures
// ---------------------------------------------------------------------------------------------

// 1 KiB of text: 16 lines of 63 characters and a newline.
const KIB_TEXT = Array.from({ length: 16 }, (_, i) => `${String(i).padStart(2, "0")} ${"lorem ipsum ".repeat(5)}`.slice(0, 63) + "\n").join("");
if (KIB_TEXT.length !== KiB) throw new Error("fixture is not 1 KiB");
// A small file for the edit: the token line is unique; each edit swaps it between two values.
const EDIT_TEXT = KIB_TEXT.slice(0, 512) + "token: alpha\n" + KIB_TEXT.slice(512);
const EDIT_FROM = ["token: alpha", "token: omega"];
const LIST_ENTRIES = 1000;

// Through dsh's own tools, so the e2b-local leg gets its fixtures in the sandbox.
async function dshFixtures(dsh) {
  await dsh.call("make_dir", { path: "bench" });
  await dsh.call("write_file", { path: "bench/read-1k.txt", content: KIB_TEXT });
  await dsh.call("write_file", { path: "bench/edit.txt", content: EDIT_TEXT });
  const made = await dsh.call("run", {
    command: `rm -rf bench/list && mkdir -p bench/list && cd bench/list && seq -f 'entry-%04g.txt' 0 ${LIST_ENTRIES - 1} | xargs touch`,
  });
  if (made.structuredContent?.exit_code !== 0) throw new Error(`${dsh.name}: fixture command failed: ${textOf(made)}`);
}

function peerFixtures(dir) {
  fs.mkdirSync(path.join(dir, "list"), { recursive: true });
  fs.writeFileSync(path.join(dir, "read-1k.txt"), KIB_TEXT);
  fs.writeFileSync(path.join(dir, "edit.txt"), EDIT_TEXT);
  for (let i = 0; i < LIST_ENTRIES; i++) {
    fs.writeFileSync(path.join(dir, "list", `entry-${String(i).padStart(4, "0")}.txt`), "");
  }
}

// ---------------------------------------------------------------------------------------------
// Operations: for each contender, one round trip (or a fixed pair) as an async function
// ---------------------------------------------------------------------------------------------

function dshFileOps(dsh) {
  let edits = 0;
  return {
    read: async () => {
      const r = await dsh.call("read_file", { path: "bench/read-1k.txt" });
      if (r.structuredContent.content.length !== KiB) throw new Error(`${dsh.name} read: ${r.structuredContent.content.length} chars`);
    },
    write: async () => {
      const r = await dsh.call("write_file", { path: "bench/write-1k.txt", content: KIB_TEXT });
      if (r.structuredContent.bytes !== KiB) throw new Error(`${dsh.name} write: ${JSON.stringify(r.structuredContent)}`);
    },
    edit: async () => {
      const from = EDIT_FROM[edits % 2];
      const to = EDIT_FROM[(edits + 1) % 2];
      edits++;
      const r = await dsh.call("edit_file", { path: "bench/edit.txt", old_string: from, new_string: to });
      if (r.structuredContent.replacements !== 1) throw new Error(`${dsh.name} edit: ${JSON.stringify(r.structuredContent)}`);
    },
    list: async () => {
      const r = await dsh.call("list_dir", { path: "bench/list", max_entries: LIST_ENTRIES });
      if (r.structuredContent.entries.length !== LIST_ENTRIES) throw new Error(`${dsh.name} list: ${r.structuredContent.entries.length} entries`);
    },
  };
}

function peerFileOps(peer, dir) {
  let edits = 0;
  const p = (name) => path.join(dir, name);
  return {
    read: async () => {
      const r = await peer.call("read_text_file", { path: p("read-1k.txt") });
      if (textOf(r).length !== KiB) throw new Error(`${peer.name} read: ${textOf(r).length} chars`);
    },
    write: async () => {
      await peer.call("write_file", { path: p("write-1k.txt"), content: KIB_TEXT });
    },
    edit: async () => {
      const from = EDIT_FROM[edits % 2];
      const to = EDIT_FROM[(edits + 1) % 2];
      edits++;
      const r = await peer.call("edit_file", { path: p("edit.txt"), edits: [{ oldText: from, newText: to }] });
      if (!textOf(r).includes(`+${to}`)) throw new Error(`${peer.name} edit: ${textOf(r).slice(0, 300)}`);
    },
    list: async () => {
      const r = await peer.call("list_directory", { path: p("list") });
      const n = textOf(r).split("\n").filter(Boolean).length;
      if (n !== LIST_ENTRIES) throw new Error(`${peer.name} list: ${n} entries`);
    },
    listSizes: async () => {
      const r = await peer.call("list_directory_with_sizes", { path: p("list") });
      const n = textOf(r).split("\n").filter((l) => l.startsWith("[FILE]")).length;
      if (n !== LIST_ENTRIES) throw new Error(`${peer.name} list with sizes: ${n} entries`);
    },
  };
}

function dshCommandOps(dsh) {
  return {
    // One round trip: a foreground run returns the exit and the output.
    trueForeground: async () => {
      const r = await dsh.call("run", { command: "true" });
      const s = r.structuredContent;
      if (s.status !== "exited" || s.exit_code !== 0 || s.output !== "") throw new Error(`${dsh.name} run true: ${JSON.stringify(s)}`);
    },
    // Two round trips: start in the background, then read the output until it exits.
    trueBackground: async () => {
      const started = await dsh.call("run", { command: "true", background: true });
      const id = started.structuredContent.id;
      const r = await dsh.call("read_output", { id, until: "exit", wait_ms: 10_000 });
      const s = r.structuredContent;
      if (s.status !== "exited" || s.exit_code !== 0 || s.total_bytes !== 0) throw new Error(`${dsh.name} read_output true: ${JSON.stringify(s)}`);
    },
  };
}

const dcPid = (text) => {
  const m = text.match(/Process started with PID (-?\d+)/);
  if (!m) throw new Error(`desktop-commander start_process: no PID in ${JSON.stringify(text.slice(0, 300))}`);
  return Number(m[1]);
};

function dcCommandOps(dc) {
  return {
    // One round trip: start_process waits (up to timeout_ms) for the process to finish or to
    // prompt, and returns its output so far.
    trueForeground: async () => {
      const r = await dc.call("start_process", { command: "true", timeout_ms: 10_000 });
      const text = textOf(r);
      dcPid(text);
      if (!/Process (finished|completed)|exit code 0/i.test(text) && text.includes("Process is running")) {
        throw new Error(`desktop-commander start true: still running: ${text.slice(0, 300)}`);
      }
    },
    // Two round trips: start, then read the output (the peer's read of a finished session).
    trueBackground: async () => {
      const r = await dc.call("start_process", { command: "true", timeout_ms: 10_000 });
      const pid = dcPid(textOf(r));
      const out = textOf(await dc.call("read_process_output", { pid, timeout_ms: 10_000 }));
      if (!/completed with exit code 0/.test(out)) throw new Error(`desktop-commander read true: ${out.slice(0, 300)}`);
    },
  };
}

// ---------------------------------------------------------------------------------------------
// Interleaved rounds
// ---------------------------------------------------------------------------------------------

// Runs `contenders` ({key: fn}) for `rounds` rounds after one untimed warm-up round; each round
// every contender runs `batch` sequential calls, in an order rotated each round. Returns the
// per-round time per call (ms) of each contender. With `gapMs`, every call is preceded by an
// untimed pause (an agent's think time between calls), and only the calls are timed. A contender
// that returns a number has timed itself: that is its call's time in ms (a program's own timing
// of its calls, a figure that leaves an untimed clean-up out).
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
async function interleaved(contenders, rounds, batch, gapMs = 0) {
  const keys = Object.keys(contenders);
  const times = Object.fromEntries(keys.map((k) => [k, []]));
  for (const k of keys) for (let i = 0; i < batch; i++) await contenders[k]();
  for (let round = 0; round < rounds; round++) {
    for (let j = 0; j < keys.length; j++) {
      const k = keys[(round + j) % keys.length];
      let spent = 0;
      for (let i = 0; i < batch; i++) {
        if (gapMs) await sleep(gapMs);
        const t0 = performance.now();
        const own = await contenders[k]();
        spent += typeof own === "number" ? own : performance.now() - t0;
      }
      times[k].push(spent / batch);
    }
  }
  return times;
}

const paired = (a, b) => a.map((x, i) => x / b[i]);

// Two contenders alternated call by call: each round runs `pairs` pairs of calls, the first of a
// pair switching from one pair to the next (and from one round to the next), each call preceded by
// `gapMs` of untimed think time. One untimed warm-up round first. Returns each contender's
// per-round time per call (ms): the median of its calls in the round, so one call that met a
// busy CPU does not move the round.
async function alternated(a, b, rounds, pairs, gapMs = 0) {
  const times = { a: [], b: [] };
  const fns = { a, b };
  for (let round = -1; round < rounds; round++) {
    const calls = { a: [], b: [] };
    for (let i = 0; i < pairs; i++) {
      for (const k of (round + i) % 2 ? ["a", "b"] : ["b", "a"]) {
        if (gapMs) await sleep(gapMs);
        const t0 = performance.now();
        await fns[k]();
        calls[k].push(performance.now() - t0);
      }
    }
    if (round < 0) continue;
    times.a.push(median(calls.a));
    times.b.push(median(calls.b));
  }
  return times;
}

// ---------------------------------------------------------------------------------------------
// Bulk output: 100 MiB read to the end
// ---------------------------------------------------------------------------------------------

// `afterExit`: wait for the command to exit before reading (informational: the read path alone,
// on a spill file that no longer grows).
async function dshBulk(dsh, bytes, { afterExit = false } = {}) {
  const t0 = performance.now();
  const started = await dsh.call("run", { command: bulkCommand(bytes), background: true });
  const id = started.structuredContent.id;
  let cursor = 0;
  let calls = 1;
  let s;
  if (afterExit) {
    do {
      s = (await dsh.call("read_output", { id, cursor: 0, max_bytes: 1, until: "exit", wait_ms: 50_000 })).structuredContent;
      calls++;
    } while (s.status === "running");
  }
  try {
    for (;;) {
      const r = await dsh.call("read_output", { id, cursor, max_bytes: DSH_PAGE_BYTES, until: "output", wait_ms: 10_000 });
      calls++;
      s = r.structuredContent;
      if (s.dropped) throw new Error(`${s.dropped} bytes dropped`);
      if (s.cursor - cursor !== Buffer.byteLength(s.output)) throw new Error(`cursor moved ${s.cursor - cursor} for ${Buffer.byteLength(s.output)} bytes`);
      cursor = s.cursor;
      if (s.status !== "running" && cursor >= s.total_bytes) break;
      if (performance.now() - t0 > BULK_DEADLINE_MS) throw new Error(`not done after ${BULK_DEADLINE_MS} ms`);
    }
  } catch (err) {
    const where = `read_output call ${calls} at cursor ${cursor}, ${(performance.now() - t0).toFixed(0)} ms in`;
    throw new Error(`${where}${s ? ` (last status ${s.status}, ${s.total_bytes} bytes written)` : ""}: ${err.message}`);
  }
  const ms = performance.now() - t0;
  if (s.exit_code !== 0 || cursor !== bytes) throw new Error(`${dsh.name} bulk: read ${cursor} of ${bytes} bytes, ${JSON.stringify({ ...s, output: undefined })}`);
  return { ms, delivered: cursor, calls, complete: true, note: "" };
}

// dsh keeps a finished command's whole output (its spill file) until COMMANDS_KEPT newer commands
// push it out; untimed, after each bulk run, so the runs do not pile up 100 MiB files on the disk.
const COMMANDS_KEPT = 64;
async function pushOut(dsh) {
  for (let i = 0; i < COMMANDS_KEPT; i++) await dsh.call("run", { command: "true" });
}

// desktop-commander pages its output by lines: `offset` 0 reads the lines new since the last
// read while the process runs (waiting up to timeout_ms for some), but restarts at line 0 once the
// session has finished, so a finished session is read with absolute offsets. It keeps at most 50 M
// characters of a session's output, evicting the oldest lines (numbers shift by as many).
function dcPage(text) {
  const head = text.match(/^\[Reading (\d+) (?:new )?lines(?: from line (\d+))? \(total: (\d+) lines(?:, (\d+) remaining)?\)\]/);
  if (!head) throw new Error(`desktop-commander read_process_output: unexpected ${JSON.stringify(text.slice(0, 300))}`);
  const readCount = Number(head[1]);
  const total = Number(head[3]);
  const remaining = Number(head[4] ?? 0);
  // "from line" is only printed when lines remain; otherwise the page ends at the total.
  const readFrom = head[2] === undefined ? total - remaining - readCount : Number(head[2]);
  const evicted = Number(text.match(/the (\d+) earliest lines were evicted/)?.[1] ?? 0);
  const done = text.match(/Process completed with exit code (-?\d+|null)/);
  // The page: after the status line(s) and a blank line, up to the process-state suffix.
  let body = text.slice(text.indexOf("\n\n") + 2);
  const suffix = body.search(/\n(✅|🔄) /);
  if (suffix >= 0) body = body.slice(0, suffix);
  if (body === "(No output in requested range)") body = "";
  // Bytes of command output the page carries: a whole line is its 99 characters and its newline;
  // a partial line (cut by a read while the process runs, or the empty fragment after the final
  // newline) counts its characters only.
  let bytes = 0;
  let partial = 0;
  if (readCount > 0) {
    for (const l of body.split("\n")) {
      if (l.length === BULK_LINE - 1) bytes += BULK_LINE;
      else if (l.length > 0) {
        bytes += l.length;
        partial++;
      }
    }
  }
  return { readCount, readFrom, total, remaining, evicted, done: done ? done[1] : null, bytes, partial };
}

async function dcBulk(dc, bytes) {
  const t0 = performance.now();
  const r = await dc.call("start_process", { command: bulkCommand(bytes), timeout_ms: 1000 });
  const pid = dcPid(textOf(r));
  let calls = 1;
  let pos = 0; // the next line to read, in the retained buffer's numbering
  let evicted = 0;
  let delivered = 0;
  let partial = 0;
  let finished = false;
  let exitCode = null;
  let stopped = false;
  for (;;) {
    const res = await dc.call("read_process_output", { pid, offset: finished ? pos : 0, length: DC_PAGE_LINES, timeout_ms: 10_000 });
    calls++;
    const p = dcPage(textOf(res));
    // Evictions since the last page shift the numbering down.
    pos -= p.evicted - evicted;
    evicted = p.evicted;
    if (!finished && p.done !== null) {
      finished = true;
      exitCode = p.done;
      if (p.readFrom !== Math.max(pos, 0)) continue; // the finished session restarted at line 0: read on from pos
    }
    delivered += p.bytes;
    partial += p.partial;
    pos = p.readFrom + p.readCount;
    if (finished && p.remaining === 0) break;
    if (performance.now() - t0 > BULK_DEADLINE_MS) {
      await dc.call("force_terminate", { pid }).catch(() => {});
      stopped = true;
      break;
    }
  }
  const ms = performance.now() - t0;
  const complete = !stopped && delivered === bytes && evicted === 0;
  const notes = [];
  if (stopped) notes.push(`stopped after ${BULK_DEADLINE_MS / 1000} s`);
  if (!complete) notes.push(`delivered ${fmtMiB(delivered)} of ${fmtMiB(bytes)}`);
  if (evicted) notes.push(`${evicted} lines (${fmtMiB(evicted * BULK_LINE)}) evicted by its 50 M-character cap`);
  if (partial > 1) notes.push(`${partial} lines cut by reads while running`);
  if (exitCode === null) notes.push("the command had not finished as far as the peer could tell");
  else if (exitCode !== "0") notes.push(`exit code ${exitCode}`);
  return { ms, delivered, calls, complete, note: notes.join("; ") };
}

// ---------------------------------------------------------------------------------------------
// The code runtime (issue 27): bindings, cold start, an agent task two ways
// ---------------------------------------------------------------------------------------------

// Binding calls one program makes in a round, sequentially (each awaited before the next).
const BINDING_CALLS = 1000;
// Direct MCP read_file calls a round makes, sequentially.
const MCP_READS = 100;

// A code session opened and closed: `code_session` with `op` where the catalog groups the
// session operations in one tool, else the tools `code_session_open` / `code_session_close`.
async function sessionOpen(dsh, language) {
  const r = dsh.tools.includes("code_session")
    ? await dsh.call("code_session", { op: "open", language })
    : await dsh.call("code_session_open", { language });
  return r.structuredContent.session;
}
async function sessionClose(dsh, session) {
  if (dsh.tools.includes("code_session")) await dsh.call("code_session", { op: "close", session });
  else await dsh.call("code_session_close", { session });
}

// Runs `code` in `language` (or in `session`) and returns the program's value; a program that
// did not return is this bench's error.
async function codeRun(dsh, args) {
  const r = await dsh.call("code_run", args);
  const s = r.structuredContent;
  if (!s.ok) throw new Error(`${dsh.name} code_run: ${s.error?.message ?? JSON.stringify(s)}`);
  return { value: s.value, result: r };
}

// The binding round trip: one program reads the 1 KiB file BINDING_CALLS times through its
// `dsh.read_file` binding, timing the calls itself (so the figure is a call, not the run around
// it); the peer is the same read as a direct MCP tool call of the same server, timed by the client.
const bindingPrograms = {
  javascript: `const t0 = performance.now();
for (let i = 0; i < ${BINDING_CALLS}; i++) {
  const r = await dsh.read_file({ path: "bench/read-1k.txt" });
  if (r.content.length !== ${KiB}) throw new Error("read " + r.content.length + " characters");
}
return (performance.now() - t0) / ${BINDING_CALLS};`,
  python: `import time
t0 = time.perf_counter()
for _ in range(${BINDING_CALLS}):
    r = dsh.read_file(path="bench/read-1k.txt")
    if len(r["content"]) != ${KiB}:
        raise ValueError(f"read {len(r['content'])} characters")
(time.perf_counter() - t0) * 1000 / ${BINDING_CALLS}`,
};

// The layers alone: the same call refused on the host before any world I/O (read_file without
// its path), as a binding and as a direct MCP call — the runner's channel against the model
// protocol's layer, which is what the binding figure's ratio comes down to (its read is the same).
const refusedPrograms = {
  javascript: `const t0 = performance.now();
for (let i = 0; i < ${BINDING_CALLS}; i++) {
  try { await dsh.read_file({}); throw new Error("read_file without a path was not refused"); }
  catch (e) { if (!String(e.message).includes("missing field")) throw e; }
}
return (performance.now() - t0) / ${BINDING_CALLS};`,
  python: `import time
t0 = time.perf_counter()
for _ in range(${BINDING_CALLS}):
    try:
        dsh.read_file()
    except Exception as e:
        if "missing field" not in str(e):
            raise
    else:
        raise ValueError("read_file without a path was not refused")
(time.perf_counter() - t0) * 1000 / ${BINDING_CALLS}`,
};

async function mcpRefused(dsh) {
  try {
    await dsh.call("read_file", {});
  } catch (e) {
    if (String(e.message).includes("missing field")) return;
    throw e;
  }
  throw new Error(`${dsh.name} read_file without a path was not refused`);
}

// `own` (which returns its own time per call, in ms) against `mcpCall`, a direct MCP call made
// MCP_READS times a round, interleaved.
async function againstMcp(own, mcpCall, rounds) {
  const t = await interleaved(
    {
      own,
      mcp: async () => {
        const t0 = performance.now();
        for (let i = 0; i < MCP_READS; i++) await mcpCall();
        return (performance.now() - t0) / MCP_READS;
      },
    },
    rounds,
    1,
  );
  return { dsh: median(t.own), other: median(t.mcp), ratio: paired(t.own, t.mcp) };
}

// One binding against one direct MCP call; `program` times its calls itself.
async function bindingAgainstMcp(dsh, session, program, mcpCall, rounds) {
  return againstMcp(async () => (await codeRun(dsh, { session, code: program })).value, mcpCall, rounds);
}

// The sandbox boundary's own round trip, with no dsh code on the way: a line written to `cat` in a
// sandbox of the same e2b-local and read back through e2b-client alone (its example
// boundary_round_trip, which makes its own sandbox and answers each count N on its stdin with the
// mean of N round trips, in µs). A binding call on e2b-local crosses this boundary there and back
// on top of the read a direct MCP call makes too, so this row against the MCP layer shows whether
// any binding there could be ≤ 1× (tests/benches/README.md).
function boundaryProbe(bin, version) {
  const child = spawn(bin, [version], { stdio: ["pipe", "pipe", "inherit"], env: process.env });
  const waiting = [];
  let ended = null;
  readline.createInterface({ input: child.stdout }).on("line", (l) => waiting.shift()?.resolve(Number(l) / 1000));
  child.on("exit", (code, signal) => {
    ended = new Error(`${bin} ended (${signal ?? `exit ${code}`})`);
    for (const w of waiting.splice(0)) w.reject(ended);
  });
  return {
    // The mean of `count` round trips, in ms.
    roundTrip(count) {
      if (ended) return Promise.reject(ended);
      return new Promise((resolve, reject) => {
        waiting.push({ resolve, reject });
        child.stdin.write(`${count}\n`);
      });
    },
    async close() {
      if (ended) return;
      child.stdin.end();
      await once(child, "exit");
    },
  };
}

// The boundary's round trip over each HTTP version against the MCP layer (a call refused on the
// host), each probe started for its figure (its warm-up round waits for its sandbox) and ended
// after it. HTTP/1.1 is what dsh's owner speaks to e2b-local; h2c is the cheaper one the front
// offers.
async function boundaryFigures(dsh, rounds) {
  const figures = {};
  for (const [version, arg] of [["HTTP/1.1", "http1"], ["h2c", "h2c"]]) {
    const probe = boundaryProbe(BOUNDARY_BIN, arg);
    try {
      figures[version] = await againstMcp(() => probe.roundTrip(MCP_READS), () => mcpRefused(dsh), rounds);
    } finally {
      await probe.close();
    }
  }
  return figures;
}

async function bindingFigure(dsh, language, rounds) {
  const session = await sessionOpen(dsh, language);
  const dshF = dshFileOps(dsh);
  try {
    const read = await bindingAgainstMcp(dsh, session, bindingPrograms[language], () => dshF.read(), rounds);
    const layers = await bindingAgainstMcp(dsh, session, refusedPrograms[language], () => mcpRefused(dsh), rounds);
    return { ...read, layers };
  } finally {
    await sessionClose(dsh, session);
  }
}

// Cold start: a new session (a runner started in the world) and its first result, timed from the
// client's code_session_open to code_run's answer (the close is untimed); the peer is the same
// interpreter started cold by one MCP `run` printing the same value.
const coldPrograms = {
  python: { code: "1 + 1", peer: ["python3", "-c", "print(1 + 1)"] },
  javascript: { code: "return 1 + 1;", peer: ["node", "-e", "console.log(1 + 1)"] },
  typescript: { code: "const x: number = 1;\nreturn x + 1;", peer: ["node", "-e", "console.log(1 + 1)"] },
};

async function coldFigure(dsh, language, rounds) {
  const { code, peer } = coldPrograms[language];
  const t = await interleaved(
    {
      session: async () => {
        const t0 = performance.now();
        const session = await sessionOpen(dsh, language);
        const { value } = await codeRun(dsh, { session, code });
        const ms = performance.now() - t0;
        await sessionClose(dsh, session);
        if (value !== 2) throw new Error(`${dsh.name} ${language} first result: ${JSON.stringify(value)}`);
        return ms;
      },
      oneShot: async () => {
        const { value } = await codeRun(dsh, { language, code });
        if (value !== 2) throw new Error(`${dsh.name} ${language} one-shot result: ${JSON.stringify(value)}`);
      },
      peer: async () => {
        const r = await dsh.call("run", { argv: peer });
        const s = r.structuredContent;
        if (s.exit_code !== 0 || s.output.trim() !== "2") throw new Error(`${dsh.name} ${peer[0]}: ${JSON.stringify(s)}`);
      },
    },
    rounds,
    1,
  );
  return {
    session: median(t.session),
    oneShot: median(t.oneShot),
    peer: median(t.peer),
    ratio: paired(t.session, t.peer),
    oneShotRatio: paired(t.oneShot, t.peer),
  };
}

// The agent task: find the files with TODO markers, read each, and summarise them (per file its
// line count, exported functions and TODO lines). Tool by tool, a model makes one grep and one
// read_file per file and reads every result; in code mode it makes one code_run whose program does
// the same and returns the summary. Both summaries must be equal.
const TASK_FILES = 40;
function taskFile(i) {
  const lines = [`// module ${i}: generated for the dsh code bench`, `import { helper } from "./mod-${(i + 1) % TASK_FILES}";`, ""];
  for (let f = 0; f < 12; f++) {
    lines.push(`export function fn${i}_${f}(input: number): number {`);
    lines.push(`  const scaled = helper(input) * ${f + 1};`);
    if (i % 4 === 0 && f % 5 === 1) lines.push(`  // TODO(owner${f}): bound the scaling of fn${i}_${f} before release`);
    lines.push(`  return scaled + ${i};`, "}", "");
  }
  return lines.join("\n");
}

const summarise = (path, content, totalLines) => {
  const lines = content.split("\n");
  return {
    path,
    lines: totalLines,
    exports: lines.filter((l) => l.startsWith("export function")).length,
    todos: lines.filter((l) => l.includes("TODO(")).map((l) => l.trim()),
  };
};

const TASK_PROGRAM = `type Summary = { path: string; lines: number; exports: number; todos: string[] };
const found = await dsh.grep({ pattern: "TODO\\\\(", path: "bench/task" });
const paths: string[] = [...new Set(found.matches.map((m) => m.path))];
const files: Summary[] = await Promise.all(paths.map(async (path: string) => {
  const file = await dsh.read_file({ path });
  const lines = file.content.split("\\n");
  return {
    path,
    lines: file.total_lines,
    exports: lines.filter((l: string) => l.startsWith("export function")).length,
    todos: lines.filter((l: string) => l.includes("TODO(")).map((l: string) => l.trim()),
  };
}));
return { files: files.length, todos: files.reduce((n, f) => n + f.todos.length, 0), by_file: files };`;

async function taskFixtures(dsh) {
  await dsh.call("remove_path", { path: "bench/task", recursive: true }).catch(() => {});
  for (let i = 0; i < TASK_FILES; i++) {
    await dsh.call("write_file", { path: `bench/task/mod-${String(i).padStart(2, "0")}.ts`, content: taskFile(i) });
  }
}

// Characters the model reads: the text content of every result (what an MCP client puts in its
// context); the structured results' JSON is counted beside it for clients that pass those instead.
const modelChars = (results) => results.reduce((n, r) => n + textOf(r).length, 0);
const structuredChars = (results) => results.reduce((n, r) => n + JSON.stringify(r.structuredContent ?? null).length, 0);

async function taskFigure(dsh) {
  await taskFixtures(dsh);
  // Tool by tool.
  const t0 = performance.now();
  const results = [];
  const grep = await dsh.call("grep", { pattern: "TODO\\(", path: "bench/task" });
  results.push(grep);
  const paths = [...new Set(grep.structuredContent.matches.map((m) => m.path))];
  const files = [];
  for (const p of paths) {
    const r = await dsh.call("read_file", { path: p });
    results.push(r);
    files.push(summarise(p, r.structuredContent.content, r.structuredContent.total_lines));
  }
  const byTool = { ms: performance.now() - t0, calls: results.length, chars: modelChars(results), structured: structuredChars(results) };
  const expected = { files: files.length, todos: files.reduce((n, f) => n + f.todos.length, 0), by_file: files };
  // One code_run.
  const t1 = performance.now();
  const { value, result } = await codeRun(dsh, { language: "typescript", code: TASK_PROGRAM });
  const byCode = { ms: performance.now() - t1, calls: 1, chars: modelChars([result]), structured: structuredChars([result]), bindingCalls: result.structuredContent.binding_calls };
  // Key order aside: the server's JSON has its objects' keys sorted.
  const canonical = (v) => JSON.stringify(v, (_, x) => (x && typeof x === "object" && !Array.isArray(x) ? Object.fromEntries(Object.entries(x).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) : x));
  if (canonical(value) !== canonical(expected)) {
    throw new Error(`${dsh.name} agent task: code_run's summary ${JSON.stringify(value).slice(0, 300)} differs from the tool-by-tool one ${JSON.stringify(expected).slice(0, 300)}`);
  }
  if (expected.files !== TASK_FILES / 4) throw new Error(`${dsh.name} agent task: ${expected.files} files with TODOs, ${TASK_FILES / 4} written`);
  await dsh.call("remove_path", { path: "bench/task", recursive: true });
  return { byTool, byCode, files: expected.files, todos: expected.todos };
}

async function codeFigures(worlds) {
  const rounds = opts.quick ? 3 : Math.max(3, Math.round(opts.rounds / 2));
  const out = [];
  for (const [world, dsh, remote] of worlds) {
    requireTools(dsh, ["code_run", "read_file", "grep", "run", "write_file", "remove_path"]);
    const row = { world, binding: {}, cold: {}, task: null };
    for (const language of ["javascript", "python"]) {
      row.binding[language] = await bindingFigure(dsh, language, rounds);
      const b = row.binding[language];
      console.log(`#   ${world} ${language}: binding read_file ${fmtTime(b.dsh)} a call, MCP read_file ${fmtTime(b.other)}, ${fmtRatio(b.ratio)}; refused on the host: binding ${fmtTime(b.layers.dsh)}, MCP ${fmtTime(b.layers.other)}`);
    }
    for (const language of ["python", "javascript", "typescript"]) {
      row.cold[language] = await coldFigure(dsh, language, rounds);
      const c = row.cold[language];
      console.log(`#   ${world} ${language}: session start + first result ${fmtTime(c.session)}, one-shot code_run ${fmtTime(c.oneShot)}, interpreter via run ${fmtTime(c.peer)}`);
    }
    if (remote && BOUNDARY_BIN) {
      row.boundary = await boundaryFigures(dsh, rounds);
      for (const [version, b] of Object.entries(row.boundary)) {
        console.log(`#   ${world} sandbox boundary over ${version} (cat, no dsh code): ${fmtTime(b.dsh)} a round trip, MCP call refused on the host ${fmtTime(b.other)}, ${fmtRatio(b.ratio)}`);
      }
    }
    row.task = await taskFigure(dsh);
    const k = row.task;
    console.log(`#   ${world} agent task: tool by tool ${k.byTool.calls} calls, ${k.byTool.chars} characters; code_run 1 call (${k.byCode.bindingCalls} binding calls), ${k.byCode.chars} characters`);
    out.push(row);
  }
  return out;
}

function printCode(rows, count, verdict, W, line) {
  console.log("");
  console.log(`${padEnd("figure (the code runtime: dsh's code tools vs the peer named)", W)}${pad("code", 11)}${pad("peer", 11)}${pad("code/peer [p25-p75]", 22)}${pad("target", 9)} verdict`);
  console.log(line);
  for (const r of rows) {
    console.log(`${r.world}`);
    for (const [language, b] of Object.entries(r.binding)) {
      const v = count(verdict(median(b.ratio), 1));
      console.log(`  ${padEnd(`read_file 1 KiB: ${language} binding (${BINDING_CALLS} sequential calls, in-program) vs direct MCP read_file`, W - 2)}${pad(fmtTime(b.dsh), 11)}${pad(fmtTime(b.other), 11)}${pad(fmtRatio(b.ratio), 22)}${pad("≤ 1.00x", 9)} ${v}`);
      console.log(`    ${padEnd(`the layers alone: ${language} binding vs MCP call, refused on the host (no world I/O)`, W - 4)}${pad(fmtTime(b.layers.dsh), 11)}${pad(fmtTime(b.layers.other), 11)}${pad(fmtRatio(b.layers.ratio), 22)}${pad("—", 9)} —`);
    }
    for (const [version, b] of Object.entries(r.boundary ?? {})) {
      console.log(`    ${padEnd(`the sandbox boundary alone over ${version}: a line through cat and back (no dsh code) vs the MCP call`, W - 4)}${pad(fmtTime(b.dsh), 11)}${pad(fmtTime(b.other), 11)}${pad(fmtRatio(b.ratio), 22)}${pad("—", 9)} —`);
    }
    for (const [language, c] of Object.entries(r.cold)) {
      const peerName = coldPrograms[language].peer.slice(0, 2).join(" ");
      console.log(`  ${padEnd(`cold: ${language} session open + first result vs run \`${peerName} …\``, W - 2)}${pad(fmtTime(c.session), 11)}${pad(fmtTime(c.peer), 11)}${pad(fmtRatio(c.ratio), 22)}${pad("—", 9)} —`);
      console.log(`  ${padEnd(`cold: ${language} one-shot code_run (runner started and ended) vs the same`, W - 2)}${pad(fmtTime(c.oneShot), 11)}${pad(fmtTime(c.peer), 11)}${pad(fmtRatio(c.oneShotRatio), 22)}${pad("—", 9)} —`);
    }
    const k = r.task;
    const ratio = k.byTool.chars / k.byCode.chars;
    const v = count(ratio >= 5 ? "met" : "MISSED");
    console.log(`  agent task: grep → read the ${k.files} matching files → summarise (${k.todos} TODOs)`);
    console.log(`    ${padEnd("tool by tool (MCP calls)", W - 4)}${pad(`${k.byTool.calls} calls`, 11)}${pad(`${k.byTool.chars} ch`, 11)}${pad(`structured ${k.byTool.structured} ch`, 22)}${pad(fmtTime(k.byTool.ms), 9)}`);
    console.log(`    ${padEnd(`one code_run (TypeScript; ${k.byCode.bindingCalls} binding calls)`, W - 4)}${pad("1 call", 11)}${pad(`${k.byCode.chars} ch`, 11)}${pad(`structured ${k.byCode.structured} ch`, 22)}${pad(fmtTime(k.byCode.ms), 9)}`);
    console.log(`    ${padEnd("characters returned to the model, tool by tool / code_run", W - 4)}${pad("", 11)}${pad("", 11)}${pad(`${ratio.toFixed(2)}x fewer`, 22)}${pad("≥ 5.00x", 9)} ${v}`);
  }
  console.log(line);
}

// The per-call toll (issue 26, item 7): a tool doing no I/O (list_terminals) against an MCP ping
// of the same dsh mcp (local), back to back and with think time before each call, and
// list_commands beside them (informational: it lists the world's durable commands, which the
// local provider asks of a dsh-supervisor process it starts). The two calls of a figure alternate
// call by call, the first of each pair switching every pair, so both meet the same machine state;
// each round gives a time per call of each (the median of its calls) and their ratio, and the
// figure is the median of the rounds with its interquartile range. The wake-up line is what think time adds to each call (the
// spaced median less the back-to-back one): the transport's thread wake-ups, which a tool call and
// a ping share.
async function tollLeg(dsh, { count, verdict, W, line }) {
  const tool = () => dsh.call("list_terminals", {});
  const ping = () => dsh.client.ping();
  // Spaced: each call's wake-up varies far more than the calls differ, so a round takes the
  // median of 8 pairs; --rounds of them (64 s by default).
  const figures = [
    { label: "a tool doing no I/O: list_terminals vs ping, back to back", a: tool, rounds: opts.rounds * 3, pairs: opts.batch, gapMs: 0, target: 1.2 },
    { label: `the same, ${SPACED_MS} ms of think time before each call`, a: tool, rounds: opts.rounds, pairs: 8, gapMs: SPACED_MS, target: 1.2 },
    { label: "list_commands (asks the world for its durable commands) vs ping", a: () => dsh.call("list_commands", {}), rounds: opts.rounds, pairs: opts.batch, gapMs: 0, target: null },
  ];
  const rows = [];
  for (const f of figures) {
    const t = await alternated(f.a, ping, f.rounds, f.pairs, f.gapMs);
    const row = { label: f.label, tool: t.a, ping: t.b, ratio: paired(t.a, t.b), target: f.target, rounds: f.rounds, pairs: f.pairs, gapMs: f.gapMs };
    rows.push(row);
    console.log(`#   ${f.label}: ${fmtSpread(row.tool)} vs ${fmtSpread(row.ping)}, ${fmtRatio(row.ratio)} (${f.rounds} rounds of ${f.pairs} pairs)`);
  }
  results.toll = rows;
  console.log("");
  console.log(`${padEnd("the per-call toll — a tool call against an MCP ping of the same dsh mcp (local)", W)}${pad("tool", 11)}${pad("ping", 11)}${pad("tool/ping [p25-p75]", 22)}${pad("target", 9)} verdict`);
  console.log(line);
  for (const r of rows) {
    const v = count(verdict(median(r.ratio), r.target));
    console.log(`  ${padEnd(r.label, W - 2)}${pad(fmtTime(median(r.tool)), 11)}${pad(fmtTime(median(r.ping)), 11)}${pad(fmtRatio(r.ratio), 22)}${pad(r.target === null ? "—" : `≤ ${r.target.toFixed(2)}x`, 9)} ${v}`);
  }
  const [b2b, spaced] = rows;
  const wake = (k) => fmtTime(median(spaced[k]) - median(b2b[k]));
  console.log(`  ${padEnd(`what ${SPACED_MS} ms of think time adds to a call (wake-ups): list_terminals ${wake("tool")}, ping ${wake("ping")}`, W - 2)}`);
  console.log(`  ${padEnd(`per-round times, p25-p75: back to back ${fmtSpread(b2b.tool)} / ${fmtSpread(b2b.ping)}; spaced ${fmtSpread(spaced.tool)} / ${fmtSpread(spaced.ping)}`, W - 2)}`);
  console.log(line);
}

// The peers leg: dsh local against the npm peers, then dsh on e2b-local against dsh local (when
// `e2b` is given). Verdicts are counted with `tally.count`.
async function peerLeg(dsh, e2b, { count, verdict, W, line }) {
  const fsPeer = await start("server-filesystem", node, [path.join(here, "node_modules/@modelcontextprotocol/server-filesystem/dist/index.js"), dirs.fsPeer], { cwd: dirs.fsPeer, env: baseEnv });
  servers.push(fsPeer);
  const dc = await start("desktop-commander", node, [path.join(here, "node_modules/@wonderwhy-er/desktop-commander/dist/index.js"), "--no-onboarding"], {
    cwd: dirs.dcCwd,
    env: {
      ...baseEnv,
      HOME: dirs.dcHome,
      DESKTOP_COMMANDER_DISABLE_TELEMETRY: "1",
      // Its feature flags are fetched from the network at start; a closed local port fails fast.
      DC_FLAG_URL: "http://127.0.0.1:9/flags.json",
    },
  });
  servers.push(dc);

  requireTools(fsPeer, ["read_text_file", "write_file", "edit_file", "list_directory", "list_directory_with_sizes"]);
  requireTools(dc, ["start_process", "read_process_output", "force_terminate", "list_sessions"]);

  const dshF = dshFileOps(dsh);
  const peerF = peerFileOps(fsPeer, dirs.fsPeer);
  const e2bF = e2b ? dshFileOps(e2b) : null;
  const dshC = dshCommandOps(dsh);
  const dcC = dcCommandOps(dc);
  const e2bC = e2b ? dshCommandOps(e2b) : null;

  const figures = [
    { group: "protocol", label: "MCP ping (no tool): ping vs ping", peer: "server-filesystem", dsh: () => dsh.client.ping(), other: () => fsPeer.client.ping(), e2b: null, target: null },
    { group: "protocol", label: "a tool doing no I/O: list_terminals vs list_allowed_directories", peer: "server-filesystem", dsh: () => dsh.call("list_terminals", {}), other: () => fsPeer.call("list_allowed_directories", {}), e2b: null, target: null },
    { group: "protocol-dc", label: "a tool doing no I/O: list_terminals vs list_sessions", peer: "desktop-commander", dsh: () => dsh.call("list_terminals", {}), other: () => dc.call("list_sessions", {}), e2b: null, target: null },
    { label: "read 1 KiB: read_file vs read_text_file", peer: "server-filesystem", dsh: dshF.read, other: peerF.read, e2b: e2bF?.read, target: 0.5 },
    { label: "write 1 KiB: write_file vs write_file", peer: "server-filesystem", dsh: dshF.write, other: peerF.write, e2b: e2bF?.write, target: 0.5 },
    { label: "edit, one unique replacement: edit_file vs edit_file", peer: "server-filesystem", dsh: dshF.edit, other: peerF.edit, e2b: e2bF?.edit, target: 0.5 },
    { label: "list 1,000 entries: list_dir vs list_directory", peer: "server-filesystem", dsh: dshF.list, other: peerF.list, e2b: e2bF?.list, target: 0.5 },
    { label: "list 1,000 entries: list_dir vs list_directory_with_sizes", peer: "server-filesystem", dsh: dshF.list, other: peerF.listSizes, e2b: null, target: null },
    { label: "start `true`, output: run vs start_process (1 call each)", peer: "desktop-commander", dsh: dshC.trueForeground, other: dcC.trueForeground, e2b: e2bC?.trueForeground, target: 0.5 },
    { label: "start `true` + read output: run bg + read_output vs start_process + read_process_output", peer: "desktop-commander", dsh: dshC.trueBackground, other: dcC.trueBackground, e2b: e2bC?.trueBackground, target: 0.5 },
    // desktop-commander finishes per-call work in the background for ~100 ms after it answers
    // (usage statistics persisted to its config) and a call arriving meanwhile waits: the same
    // figures with 200 ms of think time before each call, as an agent makes them.
    { group: "spaced", label: "a tool doing no I/O: list_terminals vs list_sessions", peer: "desktop-commander", dsh: () => dsh.call("list_terminals", {}), other: () => dc.call("list_sessions", {}), e2b: null, target: null, gapMs: SPACED_MS },
    { group: "spaced", label: "start `true`, output: run vs start_process (1 call each)", peer: "desktop-commander", dsh: dshC.trueForeground, other: dcC.trueForeground, e2b: null, target: 0.5, gapMs: SPACED_MS },
    { group: "spaced", label: "start `true` + read output: run bg + read_output vs start_process + read_process_output", peer: "desktop-commander", dsh: dshC.trueBackground, other: dcC.trueBackground, e2b: null, target: 0.5, gapMs: SPACED_MS },
  ];

  for (const f of figures) {
    const contenders = { dsh: f.dsh, peer: f.other };
    if (f.e2b) contenders.e2b = f.e2b;
    const t = await interleaved(contenders, opts.rounds, f.gapMs ? Math.max(1, Math.ceil(opts.batch / 3)) : opts.batch, f.gapMs ?? 0);
    const row = {
      label: f.label,
      group: f.group ?? f.peer,
      peer: f.peer,
      dsh: median(t.dsh),
      other: median(t.peer),
      ratio: paired(t.dsh, t.peer),
      target: f.target,
      e2b: t.e2b ? median(t.e2b) : null,
      e2bRatio: t.e2b ? paired(t.e2b, t.dsh) : null,
    };
    results.rows.push(row);
    console.log(`#   ${f.label}: dsh ${fmtTime(row.dsh)}, ${f.peer} ${fmtTime(row.other)}, ${fmtRatio(row.ratio)}${row.e2b !== null ? `; e2b-local ${fmtTime(row.e2b)}, ${fmtRatio(row.e2bRatio)}` : ""}`);
  }

  // Bulk output. RSS: the kernel's high-water mark of each server process over its whole life (no
  // reset), read after its runs.
  const bulk = { dsh: [], dc: [], e2b: [], rssBefore: {}, hwm: {} };
  bulk.rssBefore.dsh = procStatus(dsh.pid).rss;
  bulk.rssBefore.dc = procStatus(dc.pid).rss;
  if (e2b) bulk.rssBefore.e2b = procStatus(e2b.pid).rss;
  const report = (k, run, r) =>
    console.log(`#   ${opts.bulkMiB} MiB run ${run + 1}, ${k}: ${fmtTime(r.ms)}, ${r.calls} calls, ${fmtMiB(r.delivered)} delivered${r.note ? ` (${r.note})` : ""}`);
  const attempt = async (f, server) => {
    let r;
    try {
      r = await f();
    } catch (err) {
      // A failed run is reported, not fatal: the other contenders' figures still stand.
      r = { ms: NaN, delivered: NaN, calls: NaN, complete: false, failed: true, note: `FAILED: ${err.message}` };
    }
    if (server) await pushOut(server).catch(() => {});
    return r;
  };
  // dsh local and e2b-local first, interleaved; desktop-commander last, because a run it cannot
  // finish keeps its process busy (and the machine loaded) after it is stopped. It runs again
  // only while it completes.
  const dshContenders = [["dsh", dsh], ...(e2b ? [["e2b", e2b]] : [])];
  for (let run = 0; run < opts.bulkRuns; run++) {
    for (let j = 0; j < dshContenders.length; j++) {
      const [k, server] = dshContenders[(run + j) % dshContenders.length];
      const r = await attempt(() => dshBulk(server, BULK_BYTES), server);
      bulk[k].push(r);
      report(k, run, r);
    }
  }
  // The same, reading only once the command has exited (informational, both compositions).
  const afterExit = { dsh: [], e2b: [] };
  if (e2b) {
    for (let run = 0; run < opts.bulkRuns; run++) {
      for (let j = 0; j < 2; j++) {
        const [k, server] = [["dsh", dsh], ["e2b", e2b]][(run + j) % 2];
        const r = await attempt(() => dshBulk(server, BULK_BYTES, { afterExit: true }), server);
        afterExit[k].push(r);
        report(`${k}, read after exit`, run, r);
      }
    }
  }
  bulk.afterExit = afterExit;
  bulk.hwm.dsh = procStatus(dsh.pid).hwm;
  if (e2b) bulk.hwm.e2b = procStatus(e2b.pid).hwm;
  for (let run = 0; run < opts.bulkRuns; run++) {
    const r = await attempt(() => dcBulk(dc, BULK_BYTES));
    bulk.dc.push(r);
    report("desktop-commander", run, r);
    if (!r.complete) break;
  }
  bulk.hwm.dc = procStatus(dc.pid).hwm;
  results.bulk = bulk;

  // -------------------------------------------------------------------------------------------
  // The tables
  // -------------------------------------------------------------------------------------------

  console.log("");
  console.log(`${padEnd("figure (dsh local vs the peer; ratio < 1: dsh faster)", W)}${pad("dsh", 11)}${pad("peer", 11)}${pad("dsh/peer [p25-p75]", 22)}${pad("target", 9)} verdict`);
  console.log(line);
  let lastPeer = null;
  for (const r of results.rows) {
    if (r.group !== lastPeer) {
      console.log(
        {
          protocol: `protocol floor (informational) — vs @modelcontextprotocol/server-filesystem ${versions.fsPeer}`,
          "protocol-dc": `protocol floor (informational) — vs @wonderwhy-er/desktop-commander ${versions.dc}`,
          "server-filesystem": `files — @modelcontextprotocol/server-filesystem ${versions.fsPeer}, one round trip each`,
          "desktop-commander": `commands — @wonderwhy-er/desktop-commander ${versions.dc}`,
          spaced: `commands, ${SPACED_MS} ms of think time before each call (untimed) — @wonderwhy-er/desktop-commander ${versions.dc}`,
        }[r.group],
      );
      lastPeer = r.group;
    }
    const v = count(verdict(median(r.ratio), r.target));
    console.log(`  ${padEnd(r.label, W - 2)}${pad(fmtTime(r.dsh), 11)}${pad(fmtTime(r.other), 11)}${pad(fmtRatio(r.ratio), 22)}${pad(r.target === null ? "—" : `≤ ${r.target.toFixed(2)}x`, 9)} ${v}`);
  }
  // Bulk: medians over the runs that succeeded; ratios over the runs where both sides did.
  const ok = (runs) => runs.filter((r) => !r.failed);
  const med = (runs) => (ok(runs).length ? median(ok(runs).map((r) => r.ms)) : NaN);
  const pairedRuns = (a, b) => a.slice(0, b.length).map((r, i) => r.ms / b[i].ms).filter(Number.isFinite);
  const failures = (name, runs) => {
    for (const n of [...new Set(runs.filter((r) => r.note).map((r) => r.note))]) console.log(`    ${name}: ${n}`);
  };
  const bulkVerdict = (ratios, target, sidesOk) => {
    if (!ratios.length) return count("MISSED") + " (no complete run)";
    return sidesOk ? count(verdict(median(ratios), target)) : "—";
  };
  const dcComplete = bulk.dc.every((r) => r.complete);
  const bulkRatio = pairedRuns(bulk.dsh, bulk.dc);
  const dshFailed = bulk.dsh.some((r) => r.failed);
  console.log(`bulk output and memory — @wonderwhy-er/desktop-commander ${versions.dc}`);
  console.log(`  ${padEnd(`${opts.bulkMiB} MiB of output read to the end: run bg + read_output vs start_process + read_process_output`, W - 2)}${pad(fmtTime(med(bulk.dsh)), 11)}${pad(fmtTime(med(bulk.dc)), 11)}${pad(fmtRatio(bulkRatio), 22)}${pad("≤ 0.50x", 9)} ${dshFailed ? count("MISSED") + " (dsh failed)" : dcComplete ? bulkVerdict(bulkRatio, 0.5, true) : "— (peer incomplete)"}`);
  failures("dsh", bulk.dsh);
  failures("desktop-commander", bulk.dc);
  const calls = (runs) => ok(runs)[0]?.calls ?? "—";
  console.log(`    calls per run: dsh ${calls(bulk.dsh)} (pages of ${DSH_PAGE_BYTES / MiB} MiB), desktop-commander ${calls(bulk.dc)} (pages of ${DC_PAGE_LINES} lines of ${BULK_LINE} bytes)`);
  const rssTarget = 64 * MiB;
  console.log(`  ${padEnd(`peak RSS of the server process, whole session incl. ${opts.bulkRuns} x ${opts.bulkMiB} MiB`, W - 2)}${pad(fmtMiB(bulk.hwm.dsh), 11)}${pad(fmtMiB(bulk.hwm.dc), 11)}${pad(`${(bulk.hwm.dsh / bulk.hwm.dc).toFixed(3)}x`, 22)}${pad("≤ 64 MiB", 9)} ${count(verdict(bulk.hwm.dsh, rssTarget))}`);
  console.log(`    RSS before the bulk runs: dsh ${fmtMiB(bulk.rssBefore.dsh)}, desktop-commander ${fmtMiB(bulk.rssBefore.dc)}`);
  console.log(line);

  if (e2b) {
    console.log("");
    console.log(`${padEnd("figure (dsh on e2b-local vs dsh local)", W)}${pad("e2b-local", 11)}${pad("local", 11)}${pad("e2b/local [p25-p75]", 22)}${pad("target", 9)} verdict`);
    console.log(line);
    for (const r of results.rows) {
      if (r.e2b === null) continue;
      const v = count(verdict(median(r.e2bRatio), 2));
      console.log(`  ${padEnd(r.label.replace(/:.*/, ""), W - 2)}${pad(fmtTime(r.e2b), 11)}${pad(fmtTime(r.dsh), 11)}${pad(fmtRatio(r.e2bRatio), 22)}${pad("≤ 2.00x", 9)} ${v}`);
    }
    const e2bBulk = pairedRuns(bulk.e2b, bulk.dsh);
    const e2bFailed = bulk.e2b.some((r) => r.failed);
    console.log(`  ${padEnd(`${opts.bulkMiB} MiB of output read to the end`, W - 2)}${pad(fmtTime(med(bulk.e2b)), 11)}${pad(fmtTime(med(bulk.dsh)), 11)}${pad(fmtRatio(e2bBulk), 22)}${pad("≤ 2.00x", 9)} ${e2bFailed ? count("MISSED") + ` (${bulk.e2b.filter((r) => r.failed).length} of ${bulk.e2b.length} runs failed)` : bulkVerdict(e2bBulk, 2, true)}`);
    failures("dsh (e2b-local)", bulk.e2b);
    const ae = pairedRuns(bulk.afterExit.e2b, bulk.afterExit.dsh);
    console.log(`  ${padEnd(`${opts.bulkMiB} MiB, read only once the command exited (informational)`, W - 2)}${pad(fmtTime(med(bulk.afterExit.e2b)), 11)}${pad(fmtTime(med(bulk.afterExit.dsh)), 11)}${pad(fmtRatio(ae), 22)}${pad("—", 9)} —`);
    failures("dsh (e2b-local), after exit", bulk.afterExit.e2b);
    failures("dsh (local), after exit", bulk.afterExit.dsh);
    console.log(`  ${padEnd("peak RSS of the dsh mcp process, whole session", W - 2)}${pad(fmtMiB(bulk.hwm.e2b), 11)}${pad(fmtMiB(bulk.hwm.dsh), 11)}${pad(`${(bulk.hwm.e2b / bulk.hwm.dsh).toFixed(3)}x`, 22)}${pad("≤ 64 MiB", 9)} ${count(verdict(bulk.hwm.e2b, rssTarget))}`);
    console.log(line);
  }
}

// ---------------------------------------------------------------------------------------------
// Main
// ---------------------------------------------------------------------------------------------

const started = machine();
const scratch = fs.mkdtempSync(path.join(process.env.DSH_BENCH_DIR || os.tmpdir(), "dsh-bench-mcp-"));
const dirs = {
  dsh: path.join(scratch, "dsh"),
  fsPeer: path.join(scratch, "server-filesystem"),
  dcCwd: path.join(scratch, "desktop-commander"),
  dcHome: path.join(scratch, "desktop-commander-home"),
};
for (const d of Object.values(dirs)) fs.mkdirSync(d, { recursive: true });
peerFixtures(dirs.fsPeer);

// desktop-commander keeps its config, tool-call log and browser cache under $HOME: give it a
// scratch HOME with telemetry off and a placeholder browser in its puppeteer cache, so it does not
// download Chrome in the background (it does at start when none is found) while it is measured.
const dcConfigDir = path.join(dirs.dcHome, ".claude-server-commander");
fs.mkdirSync(path.join(dcConfigDir, "puppeteer-cache/chrome/linux64-0/chrome-linux64"), { recursive: true });
fs.writeFileSync(path.join(dcConfigDir, "puppeteer-cache/chrome/linux64-0/chrome-linux64/chrome"), "#!/bin/sh\nexit 1\n", { mode: 0o755 });
fs.writeFileSync(
  path.join(dcConfigDir, "config.json"),
  JSON.stringify({ telemetryEnabled: false, pendingWelcomeOnboarding: false, welcomeOnboardingEligible: false }, null, 2),
);

const node = process.execPath;
const baseEnv = { ...process.env };
for (const k of ["E2B_API_URL", "E2B_SANDBOX_URL", "E2B_API_KEY", "E2B_DOMAIN", "E2B_ACCESS_TOKEN"]) delete baseEnv[k];
const versions = {
  sdk: JSON.parse(fs.readFileSync(path.join(here, "node_modules/@modelcontextprotocol/sdk/package.json"))).version,
  fsPeer: JSON.parse(fs.readFileSync(path.join(here, "node_modules/@modelcontextprotocol/server-filesystem/package.json"))).version,
  dc: JSON.parse(fs.readFileSync(path.join(here, "node_modules/@wonderwhy-er/desktop-commander/package.json"))).version,
};
let dshVersion = "?";
try {
  dshVersion = execFileSync(DSH_BIN, ["--version"], { encoding: "utf8" }).trim();
} catch {}

const servers = [];
const cleanup = async () => {
  for (const s of servers) await s.close();
};

const results = { machine: { started, cpus: os.cpus().length, kernel: os.release() }, versions, opts, rows: [], bulk: null };

try {
  const dsh = await start("dsh (local)", DSH_BIN, ["mcp"], { cwd: dirs.dsh, env: baseEnv });
  servers.push(dsh);
  let e2b = null;
  if (withE2b && opts.only !== "toll") {
    e2b = await start("dsh (e2b-local)", DSH_BIN, ["mcp", "--config", E2B_CONFIG], { cwd: dirs.dsh, env: { ...process.env } });
    servers.push(e2b);
  }

  requireTools(dsh, ["read_file", "write_file", "edit_file", "list_dir", "make_dir", "run", "read_output"]);

  await dshFixtures(dsh);
  if (e2b) await dshFixtures(e2b);

  console.log(`# dsh mcp benchmark — ${started.date}, Linux ${os.release()}, ${os.cpus().length} CPUs, load average ${started.load}`);
  console.log(`# ${dshVersion}; client @modelcontextprotocol/sdk ${versions.sdk} over stdio; peers @modelcontextprotocol/server-filesystem ${versions.fsPeer}, @wonderwhy-er/desktop-commander ${versions.dc}`);
  console.log(`# ${opts.rounds} interleaved rounds of ${opts.batch} calls per contender after a warm-up round; bulk: ${opts.bulkRuns} run(s) of ${opts.bulkMiB} MiB; e2b-local leg: ${withE2b ? `dsh mcp --config ${E2B_CONFIG}` : "skipped (no DSH_E2B_CONFIG / E2B_API_URL)"}`);
  console.log(`# files in ${scratch}`);

  const W = 88;
  const line = "-".repeat(W + 78);
  const verdict = (value, target) => (target === null ? "—" : value <= target ? "met" : "MISSED");
  let met = 0;
  let missed = 0;
  const count = (v) => {
    if (v === "met") met++;
    else if (v === "MISSED") missed++;
    return v;
  };
  const runs = (leg) => opts.only === null || opts.only === leg;
  if (runs("toll")) await tollLeg(dsh, { count, verdict, W, line });
  if (runs("peers")) await peerLeg(dsh, e2b, { count, verdict, W, line });
  if (runs("code")) {
    console.log("# code runtime");
    results.code = await codeFigures([["dsh (local)", dsh, false], ...(e2b ? [["dsh (e2b-local)", e2b, true]] : [])]);
    printCode(results.code, count, verdict, W, line);
  }
  const finished = machine();
  results.machine.finished = finished;
  console.log(`targets met: ${met}, missed: ${missed}`);
  console.log(`# finished ${finished.date}, load average ${finished.load}`);
  if (opts.json) fs.writeFileSync(opts.json, JSON.stringify(results, null, 2));
} catch (err) {
  for (const s of servers) {
    const e = s.stderr();
    if (e) console.error(`--- ${s.name} stderr (tail) ---\n${e}`);
  }
  throw err;
} finally {
  await cleanup();
  fs.rmSync(scratch, { recursive: true, force: true });
}
