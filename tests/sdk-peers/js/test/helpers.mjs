// Shared helpers for dsh's own tests of the official E2B JS SDK against e2b-local.
// The server is given by E2B_API_URL / E2B_SANDBOX_URL / E2B_API_KEY (the Rust harness sets them).
import { Sandbox } from './sdk.mjs'

for (const name of ['E2B_API_URL', 'E2B_SANDBOX_URL', 'E2B_API_KEY']) {
  if (!process.env[name]) {
    throw new Error(`${name} is not set: run these tests through e2b-local's Rust harness (cargo nextest run -p e2b-local)`)
  }
}

/** Creates a sandbox that `t.after` kills, whatever the test's outcome. */
export async function sandbox(t, opts = {}) {
  const sbx = await Sandbox.create({ timeoutMs: 120_000, ...opts })
  t.after(async () => {
    await Sandbox.kill(sbx.sandboxId).catch(() => {})
  })
  return sbx
}

export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

/** Polls `check` until it returns a truthy value or `timeoutMs` passes. */
export async function eventually(check, timeoutMs = 10_000, what = 'condition') {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const value = await check()
    if (value) return value
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await sleep(50)
  }
}
