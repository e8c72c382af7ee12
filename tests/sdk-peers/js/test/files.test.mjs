import { test } from 'node:test'
import assert from 'node:assert/strict'
import { FileNotFoundError } from './sdk.mjs'
import { sandbox, eventually } from './helpers.mjs'

test('text, bytes and empty files round-trip', async (t) => {
  const sbx = await sandbox(t)
  const info = await sbx.files.write('hello.txt', 'hello ünïcode\n')
  assert.equal(info.path, '/home/user/hello.txt')
  assert.equal(await sbx.files.read('/home/user/hello.txt'), 'hello ünïcode\n')
  const bytes = new Uint8Array(256).map((_, i) => i)
  await sbx.files.write('/tmp/bytes.bin', bytes)
  assert.deepEqual(new Uint8Array(await sbx.files.read('/tmp/bytes.bin', { format: 'bytes' })), bytes)
  await sbx.files.write('/tmp/empty', '')
  assert.equal(await sbx.files.read('/tmp/empty'), '')
  await assert.rejects(sbx.files.read('/tmp/missing'), FileNotFoundError)
})

test('10 MiB file round-trips', async (t) => {
  const sbx = await sandbox(t)
  const big = new Uint8Array(10 * 1024 * 1024).map((_, i) => (i * 7) % 251)
  await sbx.files.write('/tmp/big.bin', big)
  const back = new Uint8Array(await sbx.files.read('/tmp/big.bin', { format: 'bytes' }))
  assert.equal(back.length, big.length)
  assert.ok(Buffer.from(back).equals(Buffer.from(big)))
  const sum = await sbx.commands.run('stat -c %s /tmp/big.bin')
  assert.equal(sum.stdout.trim(), String(big.length))
})

test('multi-file write, list depth, exists, info', async (t) => {
  const sbx = await sandbox(t)
  const written = await sbx.files.write([
    { path: '/tmp/tree/a.txt', data: 'a' },
    { path: '/tmp/tree/sub/b.txt', data: 'b' },
  ])
  assert.deepEqual(written.map((w) => w.path), ['/tmp/tree/a.txt', '/tmp/tree/sub/b.txt'])
  const one = await sbx.files.list('/tmp/tree')
  assert.deepEqual(one.map((e) => e.name).sort(), ['a.txt', 'sub'])
  const two = await sbx.files.list('/tmp/tree', { depth: 2 })
  assert.deepEqual(two.map((e) => e.path).sort(), ['/tmp/tree/a.txt', '/tmp/tree/sub', '/tmp/tree/sub/b.txt'])
  assert.equal(await sbx.files.exists('/tmp/tree/a.txt'), true)
  assert.equal(await sbx.files.exists('/tmp/tree/nope'), false)
  await sbx.files.write('/home/user/owned.txt', 'x')
  const info = await sbx.files.getInfo('/home/user/owned.txt')
  assert.equal(info.type, 'file')
  assert.equal(info.owner, 'user')
  assert.equal(info.group, 'user')
  assert.equal(info.mode, 0o644)
  assert.equal(info.size, 1)
})

// E2B's own suite writes `/0/…` this way, as `user`; e2b-local's envd acts as the user, so the
// first part is refused (as-root mode would write it). Whatever is refused, the client must read
// the answer: refusing a part early must not close the connection under the rest of the upload
// (an HTTP/1.1 client then sees only EPIPE).
test('a multi-file write whose first part is refused is answered with the refusal', async (t) => {
  const sbx = await sandbox(t)
  const files = []
  for (let i = 0; i < 10; i++) {
    files.push({ path: i % 2 === 0 ? `/${i}/multi${i}.txt` : `/home/user/multi${i}.txt`, data: `file ${i}` })
  }
  await assert.rejects(sbx.files.write(files), (err) => {
    assert.match(err.message, /403: .*failed to create directory \/0: Permission denied/)
    return true
  })
  // The connection stays usable, and the same write as root succeeds part by part.
  const written = await sbx.files.write(files, { user: 'root' })
  assert.deepEqual(written.map((w) => w.path), files.map((f) => f.path))
  assert.equal(await sbx.files.read('/0/multi0.txt', { user: 'root' }), 'file 0')
})

test('makeDir twice, rename, remove', async (t) => {
  const sbx = await sandbox(t)
  assert.equal(await sbx.files.makeDir('/home/user/d/e'), true)
  assert.equal(await sbx.files.makeDir('/home/user/d/e'), false)
  const dir = await sbx.files.getInfo('/home/user/d/e')
  assert.equal(dir.type, 'dir')
  assert.equal(dir.mode, 0o755)
  await sbx.files.write('/home/user/d/x.txt', 'x')
  const moved = await sbx.files.rename('/home/user/d/x.txt', '/home/user/d/new/y.txt')
  assert.equal(moved.path, '/home/user/d/new/y.txt')
  assert.equal(await sbx.files.exists('/home/user/d/x.txt'), false)
  await sbx.files.remove('/home/user/d')
  assert.equal(await sbx.files.exists('/home/user/d'), false)
  await sbx.files.remove('/home/user/d')
})

test('watchDir reports create, write and remove', async (t) => {
  const sbx = await sandbox(t)
  await sbx.files.makeDir('/tmp/watched')
  const events = []
  const watcher = await sbx.files.watchDir('/tmp/watched', (e) => events.push(e), { timeoutMs: 0 })
  await sbx.files.write('/tmp/watched/f.txt', 'one')
  await sbx.commands.run('echo more >> /tmp/watched/f.txt; rm /tmp/watched/f.txt')
  await eventually(() => events.some((e) => e.type === 'remove'), 10_000, 'remove event')
  await watcher.stop()
  const types = new Set(events.filter((e) => e.name === 'f.txt').map((e) => e.type))
  for (const type of ['create', 'write', 'remove']) assert.ok(types.has(type), `${type} in ${[...types]}`)
})
