// Sandbox networking through the official JS SDK: each sandbox has an address of e2b-local's
// pool and a route to the host, so a listener on the host is "the internet" it can reach — or
// not, as `allowInternetAccess`, `network.allowOut` / `denyOut` and the live `updateNetwork` say.
// Sandboxes cannot reach each other directly (only through the front).
import { test } from 'node:test'
import assert from 'node:assert/strict'
import http from 'node:http'

import { sandbox } from './helpers.mjs'
import { Sandbox } from './sdk.mjs'

/** An HTTP listener on every host address, answering `hello from the host`. */
async function hostListener(t) {
  const server = http.createServer((_, res) => res.end('hello from the host'))
  await new Promise((resolve) => server.listen(0, '0.0.0.0', resolve))
  t.after(() => server.close())
  return server.address().port
}

/** How a connection the sandbox's routes forbid fails. */
const refused = /failed: .*(unreachable|No route to host)/i

/** The sandbox's gateway: the host end of its veth pair. */
async function gateway(sbx) {
  const route = await sbx.commands.run("ip -4 route show default | awk '/ via / {print $3}'")
  return route.stdout.trim()
}

/** GET / from `host:port` inside the sandbox (bash's /dev/tcp): the body, or the error. */
async function fetchFrom(sbx, host, port) {
  const run = await sbx.commands
    .run(
      `exec 3<>/dev/tcp/${host}/${port} && printf 'GET / HTTP/1.0\\r\\n\\r\\n' >&3 && sed '1,/^\\r$/d' <&3`,
      { timeoutMs: 20_000 },
    )
    .catch((e) => e)
  return run.exitCode === 0 ? run.stdout : `failed: ${run.stderr}`
}

test('a sandbox has its own address and reaches the host; no IPv6 but loopback', async (t) => {
  const port = await hostListener(t)
  const sbx = await sandbox(t)
  const addr = await sbx.commands.run("ip -4 -o addr show eth0 | awk '{print $4}'")
  assert.match(addr.stdout.trim(), /^\d+\.\d+\.\d+\.\d+\/30$/)
  const gw = await gateway(sbx)
  assert.equal(await fetchFrom(sbx, gw, port), 'hello from the host')
  const v6 = await sbx.commands.run('cat /proc/net/if_inet6')
  assert.ok(!v6.stdout.includes('eth0'), v6.stdout)
  const info = await Sandbox.getInfo(sbx.sandboxId)
  assert.equal(info.allowInternetAccess, true)
})

test('allowInternetAccess: false and denyOut refuse what allowOut does not let through', async (t) => {
  const port = await hostListener(t)
  const closed = await sandbox(t, { allowInternetAccess: false })
  const gw = await gateway(closed)
  assert.match(await fetchFrom(closed, gw, port), refused)
  assert.equal((await Sandbox.getInfo(closed.sandboxId)).allowInternetAccess, false)

  // e2b-local's default pool is 10.213.0.0/16: every gateway is in 10.0.0.0/8.
  const denied = await sandbox(t, { network: { denyOut: ['10.0.0.0/8'] } })
  assert.match(await fetchFrom(denied, await gateway(denied), port), refused)

  // Allowed wins over denied.
  const pinhole = await sandbox(t, {
    network: { allowOut: ['10.0.0.0/8'], denyOut: ['0.0.0.0/0'] },
  })
  assert.equal(await fetchFrom(pinhole, await gateway(pinhole), port), 'hello from the host')
  assert.match(await fetchFrom(pinhole, '192.0.2.1', 80), refused)
  const info = await Sandbox.getInfo(pinhole.sandboxId)
  assert.deepEqual([info.network?.allowOut, info.network?.denyOut], [['10.0.0.0/8'], ['0.0.0.0/0']])

  // What e2b-local cannot enforce is refused, not ignored.
  await assert.rejects(
    Sandbox.create({ network: { allowOut: ['example.com'], denyOut: ['0.0.0.0/0'] } }),
    /not an IP address or CIDR prefix/,
  )
})

test('updateNetwork changes a running sandbox\'s egress at once', async (t) => {
  if (typeof Sandbox.prototype.updateNetwork !== 'function') return t.skip('not in this release')
  const port = await hostListener(t)
  const sbx = await sandbox(t)
  const gw = await gateway(sbx)
  assert.equal(await fetchFrom(sbx, gw, port), 'hello from the host')
  await sbx.updateNetwork({ denyOut: ['0.0.0.0/0'] })
  assert.match(await fetchFrom(sbx, gw, port), refused)
  await sbx.updateNetwork({ allowOut: [gw], denyOut: ['0.0.0.0/0'] })
  assert.equal(await fetchFrom(sbx, gw, port), 'hello from the host')
  await sbx.updateNetwork({ allowInternetAccess: false })
  assert.match(await fetchFrom(sbx, gw, port), refused)
  await sbx.updateNetwork({})
  assert.equal(await fetchFrom(sbx, gw, port), 'hello from the host')
  await assert.rejects(sbx.updateNetwork({ allowOut: ['example.com'] }), /egress proxy/)
  assert.equal(await fetchFrom(sbx, gw, port), 'hello from the host', 'a refused update changes nothing')
})

test('sandboxes cannot reach each other directly', async (t) => {
  const [a, b] = [await sandbox(t), await sandbox(t)]
  await b.commands.run('python3 -m http.server 8000 --bind 0.0.0.0', { background: true })
  const bAddr = (await b.commands.run("ip -4 -o addr show eth0 | awk '{print $4}' | cut -d/ -f1")).stdout.trim()
  // b serves (its own address works)...
  let own
  for (let i = 0; i < 50 && !(own = await fetchFrom(b, bAddr, 8000)).includes('Directory listing'); i++) {
    await new Promise((r) => setTimeout(r, 100))
  }
  assert.match(own, /Directory listing/)
  // ...but not to a.
  assert.match(await fetchFrom(a, bAddr, 8000), refused)
})

/** Starts, in `sbx`, a server on `port` answering each GET with its Host header line as it
 * was received (the name's case too). */
async function hostEcho(sbx, port) {
  await sbx.commands.run(
    `python3 -c 'import http.server as h
class Echo(h.BaseHTTPRequestHandler):
    def do_GET(self):
        body = "".join(k + ": " + v for k, v in self.headers.items() if k.lower() == "host").encode()
        self.send_response(200); self.send_header("Content-Length", str(len(body))); self.end_headers()
        self.wfile.write(body)
h.HTTPServer(("127.0.0.1", ${port}), Echo).serve_forever()'`,
    { background: true },
  )
}

/** GET / of `port` in `sbx` through the front (E2B_SANDBOX_URL) with `headers`, once the
 * server answers (any status but 502) or 10 s passed. */
async function viaFront(sbx, port, headers = {}) {
  const front = new URL(process.env.E2B_SANDBOX_URL)
  const get = () =>
    new Promise((resolve, reject) => {
      http
        .get(
          { host: front.hostname, port: front.port, path: '/', headers: { Host: sbx.getHost(port), ...headers } },
          (res) => {
            let body = ''
            res.on('data', (chunk) => (body += chunk))
            res.on('end', () => resolve({ status: res.statusCode, body }))
          },
        )
        .on('error', reject)
    })
  const deadline = Date.now() + 10_000
  let reply = await get()
  while (reply.status === 502 && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 100))
    reply = await get()
  }
  return reply
}

test('maskRequestHost: a server in the sandbox sees the mask as the Host, ${PORT} its port', async (t) => {
  const sbx = await sandbox(t, { network: { maskRequestHost: 'custom-host.example.com:${PORT}' } })
  await hostEcho(sbx, 8767)
  assert.deepEqual(await viaFront(sbx, 8767), { status: 200, body: 'Host: custom-host.example.com:8767' })
})

test('allowPublicTraffic: false lets only requests with the traffic access token through', async (t) => {
  const sbx = await sandbox(t, { network: { allowPublicTraffic: false } })
  assert.ok(sbx.trafficAccessToken, 'a token comes with the sandbox')
  await hostEcho(sbx, 8768)
  const token = { 'e2b-traffic-access-token': sbx.trafficAccessToken }
  assert.deepEqual(await viaFront(sbx, 8768, token), { status: 200, body: `Host: ${sbx.getHost(8768)}` })
  assert.equal((await viaFront(sbx, 8768)).status, 403)
  assert.equal((await viaFront(sbx, 8768, { 'e2b-traffic-access-token': 'wrong' })).status, 403)
  // Public by default: no token, and none needed.
  const open = await sandbox(t)
  assert.equal(open.trafficAccessToken, undefined)
  await hostEcho(open, 8768)
  assert.equal((await viaFront(open, 8768)).status, 200)
})
