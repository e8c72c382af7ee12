// The world-side operations through `dsh mcp` (issue 25): the official MCP TypeScript SDK client
// drives `dsh mcp` on the local composition and, when configured, on a one-sandbox e2b-local
// composition, over the same fixtures made in each world, and prints medians and ratios measured
// in the same run against the targets:
//
//   grep over a 1,000-file tree   against `run grep -rn` in the same world (target ≤ 1.5×), and
//                                 on e2b-local against local (≤ 2×)
//   find_files of 1,000 entries   e2b-local against local (≤ 2×)
//   list_dir of 1,000 entries     e2b-local against local (≤ 2×)
//
// Usage: node world.mjs [--rounds N] [--batch K] [--quick] (other arguments are bench.mjs's and
// are ignored). Environment: as bench.mjs — DSH_BIN (required); DSH_E2B_CONFIG and the E2B_*
// variables for the e2b-local leg. tests/benches/mcp/run.sh runs it after bench.mjs.

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { median, quantile } from "./stats.mjs";

const opts = { rounds: 20, batch: 5 };
const argv = process.argv.slice(2);
for (let i = 0; i < argv.length; i++) {
  if (argv[i] === "--rounds") opts.rounds = Number(argv[++i]);
  else if (argv[i] === "--batch") opts.batch = Number(argv[++i]);
  else if (argv[i] === "--quick") Object.assign(opts, { rounds: 5, batch: 2 });
}
for (const [k, v] of Object.entries(opts)) {
  if (!Number.isInteger(v) || v < 1) throw new Error(`--${k} must be a positive integer, got ${v}`);
}
const DSH_BIN = process.env.DSH_BIN;
if (!DSH_BIN) throw new Error("DSH_BIN (the dsh binary) is required");
const E2B_CONFIG = process.env.DSH_E2B_CONFIG;
const withE2b = Boolean(E2B_CONFIG && process.env.E2B_API_URL);

const FILES = 1000;
const DIRS = 10;
const LINES = 20;
// One file in ten holds the needle on one line: 100 matches.
const NEEDLE = "needle_7f3a";

const fmtTime = (ms) => (ms >= 1000 ? `${(ms / 1000).toPrecision(4)} s` : `${ms.toPrecision(4)} ms`);
const fmtRatio = (r) => `${median(r).toFixed(3)}x [${quantile(r, 0.25).toFixed(2)}-${quantile(r, 0.75).toFixed(2)}]`;

async function start(name, args, env, cwd) {
  const client = new Client({ name: "dsh-bench-world", version: "1.0.0" });
  const transport = new StdioClientTransport({ command: DSH_BIN, args, cwd, env, stderr: "pipe" });
  await client.connect(transport);
  return {
    name,
    async call(tool, args) {
      const result = await client.callTool({ name: tool, arguments: args }, undefined, { timeout: 600_000 });
      if (result.isError) {
        const text = result.content?.map((c) => c.text ?? "").join("\n") ?? "";
        throw new Error(`${name} ${tool}: tool error: ${text.slice(0, 500)}`);
      }
      return result.structuredContent;
    },
    close: () => client.close().catch(() => {}),
  };
}

// The tree and the listed directory, made by a command in the world itself.
async function fixtures(dsh) {
  const body = Array.from({ length: LINES }, (_, i) => `line ${i} lorem ipsum dolor sit amet`).join("\\n");
  const made = await dsh.call("run", {
    command:
      `rm -rf bench-world && mkdir -p bench-world/list && cd bench-world && ` +
      `seq -f 'entry-%04g.txt' 0 ${FILES - 1} | (cd list && xargs touch) && ` +
      `for d in $(seq 0 ${DIRS - 1}); do mkdir -p tree/d$d; ` +
      `for f in $(seq 0 ${FILES / DIRS - 1}); do ` +
      `if [ $f -lt ${FILES / DIRS / 10} ]; then printf '${body}\\n${NEEDLE} here\\n' > tree/d$d/f$f.txt; ` +
      `else printf '${body}\\n' > tree/d$d/f$f.txt; fi; done; done`,
  });
  if (made.exit_code !== 0) throw new Error(`${dsh.name}: fixture command failed: ${JSON.stringify(made)}`);
}

const ops = (dsh) => ({
  grep: async () => {
    const found = await dsh.call("grep", { pattern: NEEDLE, path: "bench-world/tree", max_matches: 1000 });
    if (found.matches.length !== FILES / 10) throw new Error(`${dsh.name} grep: ${found.matches.length} matches`);
  },
  runGrep: async () => {
    const ran = await dsh.call("run", { command: `grep -rn ${NEEDLE} bench-world/tree` });
    if (ran.exit_code !== 0) throw new Error(`${dsh.name} run grep: ${JSON.stringify(ran).slice(0, 300)}`);
  },
  find: async () => {
    const found = await dsh.call("find_files", { path: "bench-world/tree", pattern: "*.txt", max_results: 2000 });
    if (found.matches.length !== FILES) throw new Error(`${dsh.name} find_files: ${found.matches.length} paths`);
  },
  list: async () => {
    const listed = await dsh.call("list_dir", { path: "bench-world/list", max_entries: 5000 });
    if (listed.entries.length !== FILES) throw new Error(`${dsh.name} list_dir: ${listed.entries.length} entries`);
  },
});

// Each round runs every contender's batch, in rotating order; per-round means.
async function interleaved(contenders) {
  const keys = Object.keys(contenders);
  const times = Object.fromEntries(keys.map((k) => [k, []]));
  for (const k of keys) await contenders[k]();
  for (let round = 0; round < opts.rounds; round++) {
    for (let j = 0; j < keys.length; j++) {
      const k = keys[(round + j) % keys.length];
      const t0 = performance.now();
      for (let i = 0; i < opts.batch; i++) await contenders[k]();
      times[k].push((performance.now() - t0) / opts.batch);
    }
  }
  return times;
}

const scratch = fs.mkdtempSync(path.join(process.env.DSH_BENCH_DIR || os.tmpdir(), "dsh-bench-world-"));
const localEnv = { ...process.env };
for (const k of ["E2B_API_URL", "E2B_SANDBOX_URL", "E2B_API_KEY", "E2B_DOMAIN", "E2B_ACCESS_TOKEN"]) delete localEnv[k];
const servers = [];
const rows = [];
try {
  const local = await start("dsh (local)", ["mcp"], localEnv, scratch);
  servers.push(local);
  const e2b = withE2b ? await start("dsh (e2b-local)", ["mcp", "--config", E2B_CONFIG], { ...process.env }, scratch) : null;
  if (e2b) servers.push(e2b);
  for (const dsh of servers) await fixtures(dsh);
  console.log(
    `# dsh mcp world-side operations — ${new Date().toISOString().replace("T", " ").replace(/\..*/, " UTC")}, ` +
      `${os.cpus().length} CPUs, load average ${os.loadavg().map((x) => x.toFixed(2)).join(" ")}`,
  );
  console.log(`# ${opts.rounds} interleaved rounds of ${opts.batch} calls per contender; ${FILES} files in ${DIRS} directories, ${FILES / 10} matches; e2b-local leg: ${e2b ? "yes" : "skipped (no DSH_E2B_CONFIG / E2B_API_URL)"}`);
  const L = ops(local);
  const E = e2b ? ops(e2b) : null;
  const pair = async (label, a, b, target) => {
    const t = await interleaved({ a, b });
    const ratios = t.a.map((x, i) => x / t.b[i]);
    const verdict = median(ratios) <= target ? "met" : "NOT met";
    rows.push({ label, a: median(t.a), b: median(t.b), ratios, target, verdict });
  };
  await pair("local: grep / run grep -rn", L.grep, L.runGrep, 1.5);
  if (E) {
    await pair("e2b-local: grep / run grep -rn", E.grep, E.runGrep, 1.5);
    await pair("grep: e2b-local / local", E.grep, L.grep, 2);
    await pair("find_files 1,000: e2b-local / local", E.find, L.find, 2);
    await pair("list_dir 1,000: e2b-local / local", E.list, L.list, 2);
  }
  const w = Math.max(...rows.map((r) => r.label.length));
  console.log(`${"figure".padEnd(w)}  ${"first".padStart(10)}  ${"second".padStart(10)}  ratio [IQR]              target  verdict`);
  for (const r of rows) {
    console.log(`${r.label.padEnd(w)}  ${fmtTime(r.a).padStart(10)}  ${fmtTime(r.b).padStart(10)}  ${fmtRatio(r.ratios).padEnd(23)}  ≤ ${r.target}×   ${r.verdict}`);
  }
} finally {
  for (const s of servers) await s.close();
  fs.rmSync(scratch, { recursive: true, force: true });
}
