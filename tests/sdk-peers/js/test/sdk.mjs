// The E2B SDK release under test: npm `e2b` (the newest release, pinned in package.json) unless
// DSH_E2B_SDK names another installed alias of it (`e2b-2.29.1`, the release e2b-local was first
// built against). The Rust harness runs every suite once with each.
import { readFileSync } from 'node:fs'
import { createRequire } from 'node:module'

export const sdkName = process.env.DSH_E2B_SDK || 'e2b'
const sdk = await import(sdkName)
const require = createRequire(import.meta.url)

/** The release under test, as `major.minor.patch`. */
export const sdkVersion = JSON.parse(
  readFileSync(require.resolve(`${sdkName}/package.json`), 'utf8'),
).version

/** Whether the release under test is `version` or newer. */
export function atLeast(version) {
  const parts = (v) => v.split('.').map(Number)
  const [have, want] = [parts(sdkVersion), parts(version)]
  for (let i = 0; i < 3; i++) {
    if (have[i] !== want[i]) return have[i] > want[i]
  }
  return true
}

export const { Sandbox, CommandExitError, FileNotFoundError, SandboxNotFoundError } = sdk
/** Volumes (`undefined` in releases without them, e.g. 2.29.1). */
export const { Volume, VolumeError, VolumePathNotFoundError } = sdk
/** The template builder. */
export const { Template } = sdk
