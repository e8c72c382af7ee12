// Benchmark driver for dsh-cli's bench (crates/cli/benches/exec_vs_sdks.rs): the official JS SDK
// (tests/sdk-peers/js, npm e2b 2.51.0), warm in one Node process, doing what one cold
// `dsh --config config/e2b-local.yaml exec -- true` does: create a sandbox, run `true` in it,
// kill it. Connects with E2B_API_URL / E2B_SANDBOX_URL / E2B_API_KEY.
//
//   node lifecycle.mjs once    one create → run → kill in a fresh process, then exit: what a cold
//                              JS program costs, process start and module loading included
//   node lifecycle.mjs steps [--without-command] [--template NAME]
//                              reads one line per iteration on stdin; after each, prints the
//                              iteration's milliseconds on a line of its own (the bench
//                              interleaves these with its other contenders). Without the command
//                              an iteration is create and kill only: the part of dsh's cold start
//                              that no client can avoid. With a template the sandboxes come from
//                              NAME instead of `base`.
//
// In steps mode one untimed iteration first warms the process (module loading, the first
// connections).
import { createInterface } from 'node:readline'
import { createRequire } from 'node:module'

const require = createRequire(new URL('../js/package.json', import.meta.url))
const { Sandbox } = require('e2b')

const usage = () => {
  console.error('usage: node lifecycle.mjs once | steps [--without-command] [--template NAME]')
  process.exit(2)
}
const [mode, ...options] = process.argv.slice(2)
if (!['once', 'steps'].includes(mode) || (mode === 'once' && options.length > 0)) usage()
let withoutCommand = false
let template = 'base'
for (let i = 0; i < options.length; i++) {
  if (options[i] === '--without-command' && !withoutCommand) withoutCommand = true
  else if (options[i] === '--template' && i + 1 < options.length) template = options[++i]
  else usage()
}

const once = async () => {
  const sbx = await Sandbox.create(template)
  if (!withoutCommand) {
    const result = await sbx.commands.run('true')
    if (result.exitCode !== 0) throw new Error(`true exited ${result.exitCode}`)
  }
  await sbx.kill()
}

await once()
if (mode === 'once') process.exit(0)
console.log('ready')
for await (const _ of createInterface({ input: process.stdin })) {
  const start = performance.now()
  await once()
  console.log((performance.now() - start).toFixed(3))
}
