import { test } from 'node:test'
import assert from 'node:assert/strict'
import http from 'node:http'
import { CommandExitError } from './sdk.mjs'
import { sandbox, eventually } from './helpers.mjs'

test('stdout, stderr and exit codes', async (t) => {
  const sbx = await sandbox(t)
  const ok = await sbx.commands.run('echo out; echo err >&2')
  assert.equal(ok.exitCode, 0)
  assert.equal(ok.stdout, 'out\n')
  assert.equal(ok.stderr, 'err\n')
  const err = await sbx.commands.run('echo partial; exit 3').catch((e) => e)
  assert.ok(err instanceof CommandExitError, String(err))
  assert.equal(err.exitCode, 3)
  assert.equal(err.stdout, 'partial\n')
})

test('environment: sandbox vars, per-command envs, cwd, user and root', async (t) => {
  const sbx = await sandbox(t, { envs: { GLOBAL_VAR: 'g' } })
  const env = await sbx.commands.run('echo "$E2B_SANDBOX $GLOBAL_VAR $LOCAL_VAR"', { envs: { LOCAL_VAR: 'l' } })
  assert.equal(env.stdout, 'true g l\n')
  const again = await sbx.commands.run('echo "[$LOCAL_VAR]"')
  assert.equal(again.stdout, '[]\n', 'per-command envs do not persist')
  assert.equal((await sbx.commands.run('pwd')).stdout, '/home/user\n')
  assert.equal((await sbx.commands.run('pwd', { cwd: '/tmp' })).stdout, '/tmp\n')
  assert.equal((await sbx.commands.run('whoami')).stdout, 'user\n')
  assert.equal((await sbx.commands.run('whoami', { user: 'root' })).stdout, 'root\n')
  assert.equal((await sbx.commands.run('id -u; id -g')).stdout, '1000\n1000\n')
  assert.equal((await sbx.commands.run('sudo -n whoami')).stdout, 'root\n')
})

test('background command: list, connect, kill', async (t) => {
  const sbx = await sandbox(t)
  const handle = await sbx.commands.run('for i in $(seq 1 600); do echo tick $i; sleep 0.1; done', {
    background: true,
    timeoutMs: 0,
  })
  assert.ok(handle.pid > 1)
  const listed = await sbx.commands.list()
  assert.ok(listed.some((p) => p.pid === handle.pid), JSON.stringify(listed))
  const seen = []
  const connected = await sbx.commands.connect(handle.pid, { onStdout: (d) => seen.push(d), timeoutMs: 0 })
  await eventually(() => seen.join('').includes('tick'), 10_000, 'output through connect')
  assert.equal(await sbx.commands.kill(handle.pid), true)
  const result = await connected.wait().catch((e) => e)
  assert.ok(result instanceof CommandExitError, String(result))
  assert.equal(await sbx.commands.kill(handle.pid), false, 'killing a dead pid reports false')
  const gone = await sbx.commands.run(`kill -0 ${handle.pid} 2>/dev/null && echo alive || echo gone`)
  assert.equal(gone.stdout, 'gone\n')
})

test('stdin: send then close', async (t) => {
  const sbx = await sandbox(t)
  const handle = await sbx.commands.run('cat', { background: true, stdin: true, timeoutMs: 30_000 })
  await sbx.commands.sendStdin(handle.pid, 'hello ')
  await handle.sendStdin('stdin\n')
  await handle.closeStdin()
  const result = await handle.wait()
  assert.equal(result.stdout, 'hello stdin\n')
})

test('large output arrives whole', async (t) => {
  const sbx = await sandbox(t)
  const result = await sbx.commands.run('head -c 3000000 /dev/zero | tr "\\0" a; echo')
  assert.equal(result.stdout.length, 3_000_001)
  assert.ok(/^a+\n$/.test(result.stdout))
})

test('processes run in the sandbox pid namespace', async (t) => {
  const sbx = await sandbox(t)
  const ps = await sbx.commands.run('ps -e -o pid= | wc -l')
  assert.ok(Number(ps.stdout.trim()) < 15, `ps sees ${ps.stdout.trim()} processes`)
})

test('a web server in the sandbox is fetched through getHost', async (t) => {
  const sbx = await sandbox(t)
  await sbx.files.write('/home/user/site/index.html', '<h1>served in the sandbox</h1>\n')
  await sbx.commands.run('cd /home/user/site && python3 -m http.server 8765 --bind 127.0.0.1', {
    background: true,
  })
  // getHost names the port the way E2B's proxy routes it; the front is E2B_SANDBOX_URL here.
  const host = sbx.getHost(8765)
  assert.equal(host.split('.')[0], `8765-${sbx.sandboxId}`)
  const front = new URL(process.env.E2B_SANDBOX_URL)
  const get = (hostHeader) =>
    new Promise((resolve, reject) => {
      http
        .get({ host: front.hostname, port: front.port, path: '/index.html', headers: { Host: hostHeader } }, (res) => {
          let body = ''
          res.on('data', (chunk) => (body += chunk))
          res.on('end', () => resolve({ status: res.statusCode, body }))
        })
        .on('error', reject)
    })
  const page = await eventually(async () => {
    const reply = await get(host)
    return reply.status === 200 && reply
  }, 10_000, 'the server to answer')
  assert.equal(page.body, '<h1>served in the sandbox</h1>\n')
  const closed = await get(sbx.getHost(8766))
  assert.equal(closed.status, 502)
  assert.match(closed.body, /port is not open/)
})
