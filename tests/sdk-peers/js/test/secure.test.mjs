import { test } from 'node:test'
import assert from 'node:assert/strict'
import { sandbox } from './helpers.mjs'

test('secure sandbox: envd requires the access token', async (t) => {
  const sbx = await sandbox(t, { secure: true })
  const info = await sbx.getInfo()
  assert.equal((await sbx.commands.run('echo ok')).stdout, 'ok\n')
  const bare = await fetch(`${process.env.E2B_SANDBOX_URL}/process.Process/List`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', 'E2b-Sandbox-Id': info.sandboxId, 'E2b-Sandbox-Port': '49983' },
    body: '{}',
  })
  assert.equal(bare.status, 401)
})

test('secure sandbox: signed upload and download URLs work without routing headers', async (t) => {
  const sbx = await sandbox(t, { secure: true })
  const uploadUrl = await sbx.uploadUrl('/home/user/signed.txt')
  const form = new FormData()
  form.append('file', new Blob(['signed content']), 'signed.txt')
  const up = await fetch(uploadUrl, { method: 'POST', body: form })
  assert.equal(up.status, 200, await up.clone().text())
  const downloadUrl = await sbx.downloadUrl('/home/user/signed.txt')
  const down = await fetch(downloadUrl)
  assert.equal(down.status, 200)
  assert.equal(await down.text(), 'signed content')
  const forged = new URL(downloadUrl)
  forged.searchParams.set('signature', 'v1_forged')
  assert.equal((await fetch(forged)).status, 502, 'a signature matching no sandbox cannot be routed')
  const expiring = await sbx.downloadUrl('/home/user/signed.txt', { useSignatureExpiration: -10 })
  const expired = await fetch(expiring)
  assert.equal(expired.status, 401)
})
