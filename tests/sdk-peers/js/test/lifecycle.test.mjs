import { test } from 'node:test'
import assert from 'node:assert/strict'
import { Sandbox, SandboxNotFoundError, atLeast } from './sdk.mjs'
import { sandbox, sleep } from './helpers.mjs'

// Each boot of a world has a boot id of its own: a resume keeps it, a reboot changes it.
const BOOT_ID = '/proc/sys/kernel/random/boot_id'

test('create reports id, envd version and info; kill ends it', async (t) => {
  const sbx = await sandbox(t, { metadata: { suite: 'js-lifecycle' } })
  assert.match(sbx.sandboxId, /^[a-z0-9]+$/)
  const info = await sbx.getInfo()
  assert.equal(info.sandboxId, sbx.sandboxId)
  assert.equal(info.state, 'running')
  assert.equal(info.metadata.suite, 'js-lifecycle')
  assert.ok(info.endAt > info.startedAt)
  assert.equal(await sbx.isRunning(), true)
  // The instance's kill resolves to whether it killed (void in 2.29.1).
  assert.equal(await sbx.kill(), atLeast('2.51.0') ? true : undefined)
  assert.equal(await sbx.isRunning(), false)
  assert.equal(await Sandbox.kill(sbx.sandboxId), false, 'second kill reports not found')
  await assert.rejects(Sandbox.getInfo(sbx.sandboxId), SandboxNotFoundError)
})

test("a sandbox created with the SDK's defaults lives 5 minutes", async (t) => {
  // The newest SDKs send no timeout unless one is given (2.29.1 sends 300 s): the v2 create's
  // own default must then be E2B's 300 s, not v1's 15 s.
  const sbx = await Sandbox.create()
  t.after(async () => {
    await Sandbox.kill(sbx.sandboxId).catch(() => {})
  })
  const info = await sbx.getInfo()
  const lifetime = (info.endAt.getTime() - info.startedAt.getTime()) / 1000
  assert.ok(lifetime >= 299 && lifetime <= 302, `endAt is ${lifetime} s after start`)
})

test('timeout expiry stops the sandbox', async (t) => {
  const sbx = await sandbox(t, { timeoutMs: 2_000 })
  assert.equal(await sbx.isRunning(), true)
  await sleep(3_500)
  assert.equal(await sbx.isRunning(), false)
  await assert.rejects(sbx.getInfo(), SandboxNotFoundError)
})

test('setTimeout shortens and extends the lifetime', async (t) => {
  const sbx = await sandbox(t)
  await sbx.setTimeout(2_000)
  const info = await sbx.getInfo()
  assert.ok(info.endAt.getTime() - Date.now() < 3_000, `endAt ${info.endAt.toISOString()}`)
  await sbx.setTimeout(60_000)
  await sleep(2_500)
  assert.equal(await sbx.isRunning(), true)
})

test('pause keeps state; connect resumes it', async (t) => {
  const sbx = await sandbox(t)
  await sbx.files.write('/home/user/state.txt', 'kept')
  const bg = await sbx.commands.run('sleep 600', { background: true, timeoutMs: 0 })
  const bootId = await sbx.files.read(BOOT_ID)
  assert.match(bootId, /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}\n$/)
  assert.equal(await sbx.pause(), true)
  assert.equal(await sbx.isRunning(), false)
  assert.equal((await Sandbox.getInfo(sbx.sandboxId)).state, 'paused')
  assert.equal(await Sandbox.pause(sbx.sandboxId), false, 'pausing a paused sandbox reports false')
  const resumed = await Sandbox.connect(sbx.sandboxId, { timeoutMs: 60_000 })
  assert.equal(await resumed.isRunning(), true)
  assert.equal(await resumed.files.read(BOOT_ID), bootId, 'a resume is not a reboot')
  assert.equal(await resumed.files.read('/home/user/state.txt'), 'kept')
  const check = await resumed.commands.run(`kill -0 ${bg.pid} && echo alive`)
  assert.equal(check.stdout.trim(), 'alive')
})

test('lifecycle onTimeout pause pauses instead of killing', async (t) => {
  const sbx = await sandbox(t, { timeoutMs: 2_000, lifecycle: { onTimeout: 'pause' } })
  await sbx.files.write('/tmp/marker', 'x')
  await sleep(3_500)
  const info = await Sandbox.getInfo(sbx.sandboxId)
  assert.equal(info.state, 'paused')
  const resumed = await Sandbox.connect(sbx.sandboxId, { timeoutMs: 30_000 })
  assert.equal(await resumed.files.read('/tmp/marker'), 'x')
})

// A pause that keeps only the files (the newest releases; 2.29.1 pauses with memory only): every
// process ends, the files stay, and connecting reboots the world over them.
// A process no other test runs, found by its arguments.
const SLEEPER = 'sleep 613'

async function rebooted(sbx, resume, bootId) {
  const again = await resume()
  assert.notEqual(await again.files.read(BOOT_ID), bootId, 'each boot has its own boot id')
  const ps = await again.commands.run('ps -eo args')
  assert.ok(!ps.stdout.includes(SLEEPER), ps.stdout)
  assert.equal(await again.files.read('/home/user/kept.txt'), 'kept\n')
  assert.equal(await again.files.read('/tmp/kept.txt'), 'tmp\n')
  assert.equal((await again.commands.run('echo up')).stdout, 'up\n')
}

async function populate(sbx) {
  await sbx.files.write('/home/user/kept.txt', 'kept\n')
  await sbx.files.write('/tmp/kept.txt', 'tmp\n')
  await sbx.commands.run(SLEEPER, { background: true })
  const ps = await sbx.commands.run('ps -eo args')
  assert.ok(ps.stdout.includes(SLEEPER), `the process to lose runs: ${ps.stdout}`)
  return await sbx.files.read(BOOT_ID)
}

for (const [how, opts, pause, resume] of [
  ['pause({ keepMemory: false })', {}, (sbx) => sbx.pause({ keepMemory: false }), (id) => Sandbox.connect(id)],
  [
    "onTimeout { action: 'pause', keepMemory: false }",
    { timeoutMs: 1_500, lifecycle: { onTimeout: { action: 'pause', keepMemory: false } } },
    () => sleep(3_000),
    (id) => Sandbox.connect(id),
  ],
  ["a memory pause resumed with onResume: 'reboot'", {}, (sbx) => sbx.pause(), (id) => Sandbox.connect(id, { onResume: 'reboot' })],
]) {
  test(`files only: ${how}`, async (t) => {
    if (!atLeast('2.51.0')) return t.skip('not in this release')
    const sbx = await sandbox(t, opts)
    const bootId = await populate(sbx)
    await pause(sbx)
    assert.equal((await Sandbox.getInfo(sbx.sandboxId)).state, 'paused')
    await rebooted(sbx, () => resume(sbx.sandboxId), bootId)
  })
}

// Snapshots (2.29.1 has them too) and forks (the newest releases): e2b-local keeps the files only, so a sandbox made
// from either starts with the source's files — its overlay, /tmp and homes — and no process.
async function withFiles(sbx) {
  await sbx.files.write('/home/user/kept.txt', 'kept\n')
  await sbx.commands.run('echo root > /etc/added && rm /etc/hostname', { user: 'root' })
  await sbx.commands.run(SLEEPER, { background: true })
}

async function hasFiles(sbx) {
  assert.equal(await sbx.files.read('/home/user/kept.txt'), 'kept\n')
  assert.equal(await sbx.files.read('/etc/added'), 'root\n')
  assert.equal(await sbx.files.exists('/etc/hostname'), false, 'a deletion is kept too')
  assert.ok(!(await sbx.commands.run('ps -eo args')).stdout.includes(SLEEPER))
}

test('a snapshot makes sandboxes by id or name; listed, deleted; the source runs on', async (t) => {
  if (typeof Sandbox.prototype.createSnapshot !== 'function') return t.skip('not in this release')
  const sbx = await sandbox(t)
  await withFiles(sbx)
  const name = `snap-${Date.now()}`
  const snapshot = await sbx.createSnapshot({ name })
  assert.ok(snapshot.snapshotId.startsWith(`${name}:`), snapshot.snapshotId)
  t.after(() => Sandbox.deleteSnapshot(snapshot.snapshotId).catch(() => {}))
  await hasFiles(await sandbox(t, { template: snapshot.snapshotId }))
  await hasFiles(await Sandbox.create(name, { timeoutMs: 60_000 }).then((s) => {
    t.after(() => s.kill())
    return s
  }))
  assert.ok((await sbx.commands.run('ps -eo args')).stdout.includes(SLEEPER), 'the source runs on')
  const listed = await Sandbox.listSnapshots({ sandboxId: sbx.sandboxId }).nextItems()
  assert.deepEqual(listed.map((s) => s.snapshotId), [snapshot.snapshotId])
  assert.equal(await Sandbox.deleteSnapshot(snapshot.snapshotId), true)
  assert.equal(await Sandbox.deleteSnapshot(snapshot.snapshotId), false)
  assert.deepEqual(await Sandbox.listSnapshots({ sandboxId: sbx.sandboxId }).nextItems(), [])
})

test("fork ×3: three sandboxes with the source's files, the source unchanged", async (t) => {
  if (typeof Sandbox.prototype.fork !== 'function') return t.skip('not in this release')
  const sbx = await sandbox(t, { metadata: { role: 'source' } })
  await withFiles(sbx)
  const forks = await sbx.fork({ count: 3 })
  for (const fork of forks) {
    assert.ok(!(fork instanceof Error), String(fork))
    t.after(() => fork.kill())
  }
  assert.equal(new Set([sbx.sandboxId, ...forks.map((f) => f.sandboxId)]).size, 4)
  for (const fork of forks) {
    await hasFiles(fork)
    assert.equal((await Sandbox.getInfo(fork.sandboxId)).metadata.role, 'source')
  }
  // Each fork is its own world: a change in one is not in the others.
  await forks[0].files.write('/home/user/only-here.txt', 'x')
  assert.equal(await forks[1].files.exists('/home/user/only-here.txt'), false)
  assert.ok((await sbx.commands.run('ps -eo args')).stdout.includes(SLEEPER), 'the source runs on')
})

test('list filters by metadata and state', async (t) => {
  const tag = `js-${Date.now()}`
  const a = await sandbox(t, { metadata: { tag, name: 'a b&c' } })
  const b = await sandbox(t, { metadata: { tag, name: 'other' } })
  await sandbox(t, { metadata: { tag: 'unrelated' } })
  const all = await Sandbox.list({ query: { metadata: { tag } } }).nextItems()
  assert.deepEqual(all.map((s) => s.sandboxId).sort(), [a.sandboxId, b.sandboxId].sort())
  const named = await Sandbox.list({ query: { metadata: { tag, name: 'a b&c' } } }).nextItems()
  assert.deepEqual(named.map((s) => s.sandboxId), [a.sandboxId])
  await b.pause()
  const paused = await Sandbox.list({ query: { metadata: { tag }, state: ['paused'] } }).nextItems()
  assert.deepEqual(paused.map((s) => s.sandboxId), [b.sandboxId])
})

test('list paginates with limit', async (t) => {
  const tag = `page-${Date.now()}`
  const ids = []
  for (let i = 0; i < 3; i++) ids.push((await sandbox(t, { metadata: { tag } })).sandboxId)
  const paginator = Sandbox.list({ query: { metadata: { tag } }, limit: 2 })
  const first = await paginator.nextItems()
  assert.equal(first.length, 2)
  assert.equal(paginator.hasNext, true)
  const second = await paginator.nextItems()
  assert.equal(second.length, 1)
  assert.equal(paginator.hasNext, false)
  assert.deepEqual([...first, ...second].map((s) => s.sandboxId).sort(), ids.sort())
})

test('list is newest first unless asked otherwise, and filters by start time', async (t) => {
  const tag = `order-${Date.now()}`
  const ids = []
  for (let i = 0; i < 3; i++) ids.push((await sandbox(t, { metadata: { tag } })).sandboxId)
  const pages = async (opts = {}) => {
    const paginator = Sandbox.list({ ...opts, query: { metadata: { tag }, ...opts.query } })
    const got = []
    while (paginator.hasNext) got.push((await paginator.nextItems()).map((s) => s.sandboxId))
    return got
  }
  // The API's default order, which the newest releases leave to the server.
  assert.deepEqual(await pages(), [[...ids].reverse()])
  assert.deepEqual(await pages({ limit: 2 }), [[ids[2], ids[1]], [ids[0]]])
  if (!atLeast('2.51.0')) return
  assert.deepEqual(await pages({ order: 'asc', limit: 2 }), [[ids[0], ids[1]], [ids[2]]])
  // At or after the second one's start.
  const { startedAt } = await Sandbox.getInfo(ids[1])
  assert.deepEqual(await pages({ query: { startedAfter: startedAt } }), [[ids[2], ids[1]]])
  const later = new Date(Date.now() + 60_000)
  assert.deepEqual(await pages({ query: { startedAfter: later } }), [[]])
})

test('metrics report real figures', async (t) => {
  const sbx = await sandbox(t)
  const metrics = await sbx.getMetrics()
  assert.ok(metrics.length >= 1)
  const m = metrics[metrics.length - 1]
  assert.ok(m.memUsed > 0 && m.memTotal > m.memUsed, JSON.stringify(m))
  assert.ok(m.cpuCount >= 1 && m.diskTotal > 0, JSON.stringify(m))
})

// 2.29.1 puts start and end among the path parameters, so it never sends them: not its test.
if (atLeast('2.51.0')) test('metrics honour the time range', async (t) => {
  const sbx = await sandbox(t)
  // The SDK sends whole seconds (rounded), so the range starts a little before now.
  const start = new Date(Date.now() - 2_000)
  const end = new Date(Date.now() + 60_000)
  const inside = await sbx.getMetrics({ start, end })
  assert.ok(inside.length >= 1, 'a range around now has the current point')
  for (const m of inside) {
    assert.ok(m.timestamp >= new Date(start.getTime() - 1_000) && m.timestamp <= end, JSON.stringify(m))
  }
  const before = await sbx.getMetrics({
    start: new Date(start.getTime() - 3_600_000),
    end: new Date(start.getTime() - 1_800_000),
  })
  assert.deepEqual(before, [], 'none in a range that ended before the sandbox existed')
})

// A sandbox that ends (killed, or its timeout) while a command runs: the call in flight fails as
// a transport failure the SDK reports as the sandbox's end, and later calls as not found.
for (const [how, opts, end] of [
  ['killed', {}, (sbx) => Sandbox.kill(sbx.sandboxId)],
  ['timed out', { timeoutMs: 1_500 }, () => {}],
]) {
  test(`a sandbox ${how} while a command runs ends the call as the sandbox's end`, async (t) => {
    const sbx = await sandbox(t, opts)
    const running = sbx.commands.run('sleep 30').then(
      () => null,
      (err) => err,
    )
    await sleep(500)
    await end(sbx)
    const err = await running
    assert.ok(err instanceof Error, `the call in flight failed: ${err}`)
    if (atLeast('2.51.0')) {
      assert.match(err.message, /killed or reached its end of life while the request was in flight/)
    }
    await assert.rejects(sbx.files.read('/etc/hostname'), /sandbox was not found/)
  })
}
