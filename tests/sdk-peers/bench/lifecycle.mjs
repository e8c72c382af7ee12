// Benchmark driver for dsh-cli's bench (crates/cli/benches/exec_vs_sdks.rs): the official JS SDK
// (tests/sdk-peers/js, npm e2b 2.51.0), warm in one Node process, doing what one cold
// `dsh --config config/e2b-local.yaml exec -- true` does: create a sandbox, run `true` in it,
// kill it. Connects with E2B_API_URL / E2B_SANDBOX_URL / E2B_API_KEY.
//
//   node lifecycle.mjs once    one create → run → kill in a fresh process, then exit: what a cold
//                              JS program costs, process start and module loading included
//   node lifecycle.mjs steps [--without-command | --only-command] [--template NAME]
//                              reads one line per iteration on stdin; after each, prints the
//                              iteration's milliseconds on a line of its own (the bench
//                              interleaves these with its other contenders). Without the command
//                              an iteration is create and kill only: the part of dsh's cold start
//                              that no client can avoid. With only the command, the iteration
//                              still creates and kills, but prints the time of its
//                              `commands.run('true')` alone. With a template the sandboxes come
//                              from NAME instead of `base`.
//
// In steps mode one untimed iteration first warms the process (module loading, the first
// connections).
import { createInterface } from 'node:readline'
import { createRequire } from 'node:module'

const require = createRequire(new URL('../js/package.json', import.meta.url))
const { Sandbox } = require('e2b')

const usage = () => {
  console.error(
    'usage: node lifecycle.mjs once | steps [--without-command | --only-command] [--template NAME]',
  )
  process.exit(2)
}
const [mode, ...options] = process.argv.slice(2)
if (!['once', 'steps'].includes(mode) || (mode === 'once' && options.length > 0)) usage()
// What an iteration times: 'all', 'bare' (create and kill) or 'command' (the run alone).
let scope = 'all'
let template = 'base'
for (let i = 0; i < options.length; i++) {
  if (options[i] === '--without-command' && scope === 'all') scope = 'bare'
  else if (options[i] === '--only-command' && scope === 'all') scope = 'command'
  else if (options[i] === '--template' && i + 1 < options.length) template = options[++i]
  else usage()
}

// One create → run → kill; the milliseconds of what `scope` times.
const once = async () => {
  const start = performance.now()
  const sbx = await Sandbox.create(template)
  let command = 0
  if (scope !== 'bare') {
    const runStart = performance.now()
    const result = await sbx.commands.run('true')
    command = performance.now() - runStart
    if (result.exitCode !== 0) throw new Error(`true exited ${result.exitCode}`)
  }
  await sbx.kill()
  return scope === 'command' ? command : performance.now() - start
}

await once()
if (mode === 'once') process.exit(0)
console.log('ready')
for await (const _ of createInterface({ input: process.stdin })) {
  console.log((await once()).toFixed(3))
}
