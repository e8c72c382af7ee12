// Benchmark driver for dsh-fs-e2b's bench (plugins/fs-e2b/benches/fs_vs_sdks.rs): the official
// JS SDK (tests/sdk-peers/js, npm e2b 2.51.0) doing the same file operations on the same sandbox of
// the same e2b-local. Connects with E2B_API_URL / E2B_SANDBOX_URL / E2B_API_KEY and prints one
// JSON object of raw samples (milliseconds) on stdout; the bench computes medians and ratios.
//
//   node fs.mjs latency    <sandboxId> <small file> <iterations>  -> {stat_ms, read_small_ms, write_small_ms, edit_small_ms}
//
// `edit_small_ms` is an agent's edit done with the SDK: read the file as text, replace one
// character, write it back.
//   node fs.mjs steps      <sandboxId> <large file>
//                          warms (one read, one write), prints `ready`, then reads one step a
//                          line on stdin — `read` the large file, or `write` its content to
//                          <large file>.js-write — and prints the step's milliseconds on a line
//                          of its own (the bench interleaves these with its other clients)
//   node fs.mjs stream     <sandboxId> <file>                     -> {bytes, vm_hwm_kib}
//
// `stream` reads the file as a stream and reports this process's peak RSS (VmHWM of
// /proc/self/status: the kernel's high-water mark of this program's own memory).
import { readFileSync } from 'node:fs'
import { createInterface } from 'node:readline'
import { createRequire } from 'node:module'

// The SDK is installed in tests/sdk-peers/js (scripts/install-sdk-peers.sh), not beside this file.
const require = createRequire(new URL('../js/package.json', import.meta.url))
const { Sandbox } = require('e2b')

const [mode, sandboxId, path, countArg] = process.argv.slice(2)
const count = Number(countArg ?? 0)
if (!['latency', 'steps', 'stream'].includes(mode) || !sandboxId || !path) {
  console.error('usage: node fs.mjs latency|steps|stream <sandboxId> <path> [count]')
  process.exit(2)
}

const timed = async (f) => {
  const start = performance.now()
  await f()
  return performance.now() - start
}

const sbx = await Sandbox.connect(sandboxId)

if (mode === 'latency') {
  const size = (await sbx.files.getInfo(path)).size
  const stat = []
  const read = []
  const write = []
  for (let i = 0; i < count; i++) {
    stat.push(await timed(() => sbx.files.getInfo(path)))
  }
  for (let i = 0; i < count; i++) {
    read.push(
      await timed(async () => {
        const bytes = await sbx.files.read(path, { format: 'bytes' })
        if (bytes.length !== size) throw new Error(`read ${bytes.length} bytes, expected ${size}`)
      }),
    )
  }
  const target = `${path}.js-write`
  for (let i = 0; i < count; i++) {
    const content = new Uint8Array(size).fill(48 + (i % 10))
    write.push(await timed(() => sbx.files.write(target, content)))
  }
  const edit = []
  for (let i = 0; i < count; i++) {
    edit.push(
      await timed(async () => {
        const text = await sbx.files.read(target)
        await sbx.files.write(target, String(i % 10) + text.slice(1))
      }),
    )
  }
  await sbx.files.remove(target)
  console.log(JSON.stringify({ stat_ms: stat, read_small_ms: read, write_small_ms: write, edit_small_ms: edit }))
} else if (mode === 'steps') {
  const size = (await sbx.files.getInfo(path)).size
  const target = `${path}.js-write`
  const read = async () => {
    const bytes = await sbx.files.read(path, { format: 'bytes' })
    if (bytes.length !== size) throw new Error(`read ${bytes.length} bytes, expected ${size}`)
    return bytes
  }
  // Warm: the first read, and the first write (which creates the target: every timed write
  // replaces it, as the bench's other clients do).
  const content = await read()
  await sbx.files.write(target, content)
  console.log('ready')
  for await (const line of createInterface({ input: process.stdin })) {
    const step = line.trim()
    if (step !== 'read' && step !== 'write') throw new Error(`unknown step ${JSON.stringify(step)}: read or write`)
    const ms = await timed(() => (step === 'read' ? read() : sbx.files.write(target, content)))
    console.log(ms.toFixed(3))
  }
  await sbx.files.remove(target)
} else {
  const stream = await sbx.files.read(path, { format: 'stream' })
  let bytes = 0
  for await (const chunk of stream) bytes += chunk.length
  const hwm = /^VmHWM:\s+(\d+) kB$/m.exec(readFileSync('/proc/self/status', 'utf8'))
  console.log(JSON.stringify({ bytes, vm_hwm_kib: Number(hwm[1]) }))
}
