import { test } from 'node:test'
import assert from 'node:assert/strict'
import { sandbox, eventually } from './helpers.mjs'

const decoder = new TextDecoder()

test('pty: create, input, resize visible to tput, kill', async (t) => {
  const sbx = await sandbox(t)
  let output = ''
  const terminal = await sbx.pty.create({
    cols: 80,
    rows: 24,
    timeoutMs: 60_000,
    onData: (data) => {
      output += decoder.decode(data, { stream: true })
    },
  })
  assert.ok(terminal.pid > 1)
  const send = (text) => sbx.pty.sendInput(terminal.pid, new TextEncoder().encode(text))
  await send('echo "cols=$(tput cols)"\n')
  await eventually(() => output.includes('cols=80'), 10_000, 'tput cols = 80')
  await sbx.pty.resize(terminal.pid, { cols: 123, rows: 40 })
  await send('echo "cols=$(tput cols)"\n')
  await eventually(() => output.includes('cols=123'), 10_000, 'tput cols = 123 after resize')
  await send('tty\n')
  await eventually(() => /\/dev\/pts\/\d+/.test(output), 10_000, 'a /dev/pts tty')
  assert.equal(await sbx.pty.kill(terminal.pid), true)
  await terminal.wait().catch(() => {})
  const listed = await sbx.commands.list()
  assert.ok(!listed.some((p) => p.pid === terminal.pid))
})

test('pty: exit ends the handle with code 0', async (t) => {
  const sbx = await sandbox(t)
  const terminal = await sbx.pty.create({ cols: 80, rows: 24, onData: () => {}, timeoutMs: 60_000 })
  await sbx.pty.sendInput(terminal.pid, new TextEncoder().encode('exit\n'))
  const result = await terminal.wait()
  assert.equal(result.exitCode, 0)
})
