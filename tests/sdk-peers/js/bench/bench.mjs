// Benchmark driver: the official JS SDK against the server named by E2B_API_URL /
// E2B_SANDBOX_URL / E2B_API_KEY. Prints one JSON object of figures (milliseconds).
// Usage: node bench/bench.mjs [iterations] [concurrent sandboxes] [commands each]
import { Sandbox } from 'e2b'

const [iterations = 10, concurrent = 20, commandsEach = 5] = process.argv.slice(2).map(Number)

const stats = (xs) => {
  const s = [...xs].sort((a, b) => a - b)
  const at = (q) => s[Math.min(s.length - 1, Math.floor(q * s.length))]
  return { n: s.length, p50: +at(0.5).toFixed(2), p95: +at(0.95).toFixed(2), max: +s[s.length - 1].toFixed(2) }
}
const timed = async (f) => {
  const t = performance.now()
  await f()
  return performance.now() - t
}

const createToFirst = []
for (let i = 0; i < iterations; i++) {
  let sbx
  createToFirst.push(
    await timed(async () => {
      sbx = await Sandbox.create({ timeoutMs: 60_000 })
      await sbx.commands.run('true')
    }),
  )
  await sbx.kill()
}

const sbx = await Sandbox.create({ timeoutMs: 120_000 })
await sbx.commands.run('true')
const roundTrip = []
for (let i = 0; i < iterations * 5; i++) roundTrip.push(await timed(() => sbx.commands.run('true')))
await sbx.kill()

const perCommand = []
const wall = await timed(() =>
  Promise.all(
    Array.from({ length: concurrent }, async () => {
      const s = await Sandbox.create({ timeoutMs: 120_000 })
      try {
        for (let i = 0; i < commandsEach; i++) perCommand.push(await timed(() => s.commands.run('echo $RANDOM > /dev/null')))
      } finally {
        await s.kill()
      }
    }),
  ),
)

console.log(
  JSON.stringify({
    sdk: 'js e2b@2.51.0',
    create_to_first_command_ms: stats(createToFirst),
    true_round_trip_ms: stats(roundTrip),
    concurrent: { sandboxes: concurrent, commands_each: commandsEach, wall_ms: +wall.toFixed(1), per_command_ms: stats(perCommand) },
  }),
)
