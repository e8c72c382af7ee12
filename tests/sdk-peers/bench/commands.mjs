// Benchmark driver for dsh-subprocess-e2b's bench
// (plugins/subprocess-e2b/benches/commands_vs_sdks): the official JS SDK (tests/sdk-peers/js, npm e2b
// 2.51.0) running the same commands on the same sandbox of the same e2b-local. Connects with
// E2B_API_URL / E2B_SANDBOX_URL / E2B_API_KEY and prints one JSON object on stdout; the bench
// computes medians and ratios.
//
//   node commands.mjs roundtrip  <sandboxId> <iterations>       -> {samples_ms}   commands.run('true')
//   node commands.mjs throughput <sandboxId> <bytes> <runs>     -> {samples_ms, bytes}
//   node commands.mjs collect    <sandboxId> <bytes>            -> {bytes, error?} (the bench measures peak RSS)
//   node commands.mjs concurrent <sandboxId> <count> <rounds>   -> {samples_ms}   wall time of <count> at once
import { createRequire } from 'node:module'

// The SDK is installed in tests/sdk-peers/js (scripts/install-sdk-peers.sh), not beside this file.
const require = createRequire(new URL('../js/package.json', import.meta.url))
const { Sandbox } = require('e2b')

const [mode, sandboxId, first, second] = process.argv.slice(2)
const modes = ['roundtrip', 'throughput', 'collect', 'concurrent']
if (!modes.includes(mode) || !sandboxId || first === undefined) {
  console.error(`usage: node commands.mjs ${modes.join('|')} <sandboxId> <n> [m]`)
  process.exit(2)
}

const timed = async (f) => {
  const start = performance.now()
  await f()
  return performance.now() - start
}

const sbx = await Sandbox.connect(sandboxId)
// No SDK lifetime limit on the long commands (its default is 60 s).
const long = { timeoutMs: 0 }

if (mode === 'roundtrip') {
  const samples = []
  await sbx.commands.run('true')
  for (let i = 0; i < Number(first); i++) samples.push(await timed(() => sbx.commands.run('true')))
  console.log(JSON.stringify({ samples_ms: samples }))
} else if (mode === 'throughput') {
  const bytes = Number(first)
  const samples = []
  for (let i = 0; i < Number(second); i++) {
    let seen = 0
    samples.push(
      await timed(() =>
        sbx.commands.run(`head -c ${bytes} /dev/zero`, {
          ...long,
          onStdout: (data) => {
            seen += data.length
          },
        }),
      ),
    )
    if (seen !== bytes) throw new Error(`received ${seen} bytes, expected ${bytes}`)
  }
  console.log(JSON.stringify({ samples_ms: samples, bytes }))
} else if (mode === 'collect') {
  // The SDK keeps the whole output in the command handle; that is what is measured.
  try {
    const result = await sbx.commands.run(`head -c ${Number(first)} /dev/zero`, long)
    console.log(JSON.stringify({ bytes: result.stdout.length }))
  } catch (err) {
    console.log(JSON.stringify({ bytes: 0, error: String(err) }))
  }
} else {
  const count = Number(first)
  const samples = []
  await sbx.commands.run('true')
  for (let round = 0; round < Number(second); round++) {
    samples.push(
      await timed(() =>
        Promise.all(
          Array.from({ length: count }, async (_, i) => {
            const result = await sbx.commands.run(`echo ${i}`)
            if (result.stdout !== `${i}\n`) throw new Error(`command ${i} printed ${result.stdout}`)
          }),
        ),
      ),
    )
  }
  console.log(JSON.stringify({ samples_ms: samples }))
}
