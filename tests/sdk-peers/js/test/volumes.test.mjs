// Volumes through the official JS SDK: the volume API, its content API (reached at
// E2B_VOLUME_API_URL with the volume's own token), and `volumeMounts` — files that outlive the
// sandboxes that wrote them. Releases without `Volume` (2.29.1) skip, visibly.
import { test } from 'node:test'
import assert from 'node:assert/strict'

import { sandbox } from './helpers.mjs'
import { Sandbox, Volume, VolumeError, VolumePathNotFoundError } from './sdk.mjs'

let counter = 0
/** A fresh volume that `t.after` destroys. */
async function volume(t) {
  const vol = await Volume.create(`vol-${process.pid}-${counter++}`)
  t.after(() => Volume.destroy(vol.volumeId).catch(() => {}))
  return vol
}

const skip = (t) => (Volume ? false : (t.skip('this release has no volumes'), true))

test('volumes are created, listed, described with their token, connected, destroyed', async (t) => {
  if (skip(t)) return
  const vol = await volume(t)
  assert.ok(vol.volumeId && vol.token, 'id and token')
  const info = await Volume.getInfo(vol.volumeId)
  assert.deepEqual([info.volumeId, info.name, info.token], [vol.volumeId, vol.name, vol.token])
  assert.ok((await Volume.list()).some((v) => v.volumeId === vol.volumeId && v.name === vol.name))
  // A name is taken once.
  await assert.rejects(Volume.create(vol.name), VolumeError)
  const again = await Volume.connect(vol.volumeId)
  await vol.writeFile('/from-first.txt', 'shared')
  assert.equal(await again.readFile('/from-first.txt'), 'shared')

  assert.equal(await Volume.destroy(vol.volumeId), true)
  assert.equal(await Volume.destroy(vol.volumeId), false)
  await assert.rejects(Volume.getInfo(vol.volumeId), /not found/)
  assert.ok(!(await Volume.list()).some((v) => v.volumeId === vol.volumeId))
})

test('the content API writes, reads, describes, lists, changes and removes files', async (t) => {
  if (skip(t)) return
  const vol = await volume(t)
  await vol.writeFile('/hello.txt', 'Hello, volume')
  assert.equal(await vol.readFile('/hello.txt'), 'Hello, volume')
  const bytes = new Uint8Array([0, 1, 2, 255])
  await vol.writeFile('/bytes.bin', bytes.buffer)
  assert.deepEqual(await vol.readFile('/bytes.bin', { format: 'bytes' }), bytes)
  await vol.writeFile('/empty.txt', '')
  assert.equal(await vol.readFile('/empty.txt'), '')

  // An existing file is replaced only with force.
  await assert.rejects(vol.writeFile('/hello.txt', 'again'), VolumeError)
  assert.equal(await vol.readFile('/hello.txt'), 'Hello, volume')
  await vol.writeFile('/hello.txt', 'replaced', { force: true })
  assert.equal(await vol.readFile('/hello.txt'), 'replaced')

  const file = await vol.getInfo('/hello.txt')
  assert.deepEqual(
    [file.name, file.type, file.path, file.size],
    ['hello.txt', 'file', '/hello.txt', 'replaced'.length],
  )
  assert.ok(file.mtime instanceof Date && !Number.isNaN(file.mtime.getTime()))
  const owned = await vol.writeFile('/owned.txt', 'x', { uid: 1234, gid: 2345, mode: 0o600 })
  assert.deepEqual([owned.uid, owned.gid, owned.mode], [1234, 2345, 0o600])
  const changed = await vol.updateMetadata('/owned.txt', { uid: 1001, gid: 1001, mode: 0o755 })
  assert.deepEqual([changed.uid, changed.gid, changed.mode], [1001, 1001, 0o755])
  await assert.rejects(vol.updateMetadata('/missing.txt', { mode: 0o644 }), VolumePathNotFoundError)

  // Directories: a missing parent needs force; nested listing by depth.
  await assert.rejects(vol.makeDir('/a/b/c'), VolumePathNotFoundError)
  const dir = await vol.makeDir('/a/b/c', { force: true, mode: 0o750 })
  assert.deepEqual([dir.type, dir.path, dir.mode], ['directory', '/a/b/c', 0o750])
  await vol.writeFile('/a/b/c/deep.txt', 'deep')
  await assert.rejects(vol.writeFile('/nowhere/x.txt', 'x'), VolumePathNotFoundError)
  const top = await vol.list('/')
  assert.deepEqual(
    top.map((e) => e.name),
    ['a', 'bytes.bin', 'empty.txt', 'hello.txt', 'owned.txt'],
  )
  const deep = await vol.list('/a', { depth: 3 })
  assert.deepEqual(deep.map((e) => e.path), ['/a/b', '/a/b/c', '/a/b/c/deep.txt'])
  await assert.rejects(vol.list('/missing'), VolumePathNotFoundError)

  assert.equal(await vol.exists('/a/b/c/deep.txt'), true)
  await vol.remove('/a')
  assert.equal(await vol.exists('/a'), false)
  await assert.rejects(vol.remove('/a'), VolumePathNotFoundError)
  assert.equal(await vol.exists('/never'), false)
})

test('a mounted volume keeps what one sandbox wrote for the next; destroy waits for them', async (t) => {
  if (skip(t)) return
  const vol = await volume(t)
  await vol.writeFile('/from-api.txt', 'written through the content API')

  const writer = await sandbox(t, { volumeMounts: { '/mnt/data': vol } })
  assert.deepEqual((await Sandbox.getInfo(writer.sandboxId)).volumeMounts, [
    { name: vol.name, path: '/mnt/data' },
  ])
  assert.equal(await writer.files.read('/mnt/data/from-api.txt'), 'written through the content API')
  await writer.files.write('/mnt/data/hello.txt', 'written by the writer')
  const who = await writer.commands.run('stat -c %U /mnt/data/hello.txt')
  assert.equal(who.stdout.trim(), 'user')
  // A mounted volume cannot be destroyed.
  await assert.rejects(Volume.destroy(vol.volumeId), VolumeError)
  await writer.kill()

  // By name too; another path.
  const reader = await sandbox(t, { volumeMounts: { '/data/shared': vol.name } })
  assert.equal(await reader.files.read('/data/shared/hello.txt'), 'written by the writer')
  assert.equal(await vol.readFile('/hello.txt'), 'written by the writer')
  await reader.kill()

  assert.equal(await Volume.destroy(vol.volumeId), true)
  await assert.rejects(
    Sandbox.create({ volumeMounts: { '/mnt/data': vol.name } }),
    /no volume named/,
  )
})

test("a sandbox's symlinks cannot lead the content API out of the volume", async (t) => {
  if (skip(t)) return
  const vol = await volume(t)
  const sbx = await sandbox(t, { volumeMounts: { '/mnt/v': vol } })
  const made = await sbx.commands.run(
    'ln -s /etc/shadow /mnt/v/leak && ln -s / /mnt/v/root && ln -s ../../.. /mnt/v/up',
  )
  assert.equal(made.exitCode, 0)
  // Resolved inside the volume, where there is no /etc/shadow.
  await assert.rejects(vol.readFile('/leak'), VolumePathNotFoundError)
  const root = await vol.list('/root')
  assert.deepEqual(root.map((e) => e.name).sort(), ['leak', 'root', 'up'])
  assert.deepEqual((await vol.list('/up')).map((e) => e.name).sort(), ['leak', 'root', 'up'])
  assert.equal((await vol.getInfo('/leak')).type, 'symlink')
  assert.equal((await vol.getInfo('/leak')).target, '/etc/shadow')
  // Writing through the link lands in the volume, not on the host.
  await vol.makeDir('/etc')
  await vol.writeFile('/etc/shadow', "the volume's own")
  assert.equal(await vol.readFile('/leak'), "the volume's own")
  assert.equal((await sbx.commands.run('cat /mnt/v/etc/shadow')).stdout, "the volume's own")
  // `..` stops at the volume's root.
  await vol.writeFile('/../../escape.txt', 'x')
  assert.equal(await vol.readFile('/escape.txt'), 'x')
})
