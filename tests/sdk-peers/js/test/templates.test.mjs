// Templates through the official JS SDK's builder: `Template()` steps built offline by
// e2b-local in a world of their own, sandboxes started from the result by name, tag or id,
// tags, build status and logs, and builds that cannot succeed failing with the build's error.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

import { Sandbox, Template, sdkVersion } from './sdk.mjs'

const unique = (what) => `${what}-${sdkVersion.replaceAll('.', '-')}-${process.pid}-${Date.now() % 100000}`

/** A build context dir: `app.txt` and `sub/deep/c.txt`, removed after the test. */
function context(t) {
  const dir = mkdtempSync(join(tmpdir(), 'tpl-ctx-'))
  t.after(() => rmSync(dir, { recursive: true, force: true }))
  writeFileSync(join(dir, 'app.txt'), 'from the context\n')
  mkdirSync(join(dir, 'sub', 'deep'), { recursive: true })
  writeFileSync(join(dir, 'sub', 'deep', 'c.txt'), 'deep file\n')
  return dir
}

/** A sandbox from template `ref` that `t.after` kills. */
async function sandbox(t, ref) {
  const sbx = await Sandbox.create(ref, { timeoutMs: 120_000 })
  t.after(() => Sandbox.kill(sbx.sandboxId).catch(() => {}))
  return sbx
}

/** Deletes template `name` after the test. */
function cleanup(t, name) {
  t.after(() => Sandbox.deleteSnapshot(name).catch(() => {}))
}

test('a template with COPY, ENV, RUN, WORKDIR, USER and a start command; a sandbox starts from it', async (t) => {
  const name = unique('tpl-full')
  cleanup(t, name)
  const logs = []
  const template = Template({ fileContextPath: context(t) })
    .fromTemplate('base')
    .copy('app.txt', '/app/')
    .copy('sub', '/app/sub', { mode: 0o750 })
    .setEnvs({ GREETING: 'hello from $HOME' })
    .runCmd('echo "$GREETING" > /app/greeting && echo built-by-$(whoami)')
    .runCmd('echo root-only > /etc/tpl-marker', { user: 'root' })
    .setUser('builder')
    .runCmd('whoami > /tmp/who')
    .setUser('user')
    .setWorkdir('/app')
    .setStartCmd('python3 -m http.server 8123 --bind 127.0.0.1', 'curl -sf http://127.0.0.1:8123/ >/dev/null')
  const info = await Template.build(template, `${name}:v1`, {
    onBuildLogs: (entry) => logs.push(entry.message),
  })
  assert.ok(info.templateId && info.buildId, 'ids')
  assert.deepEqual(info.tags, ['v1'])
  assert.ok(logs.includes('built-by-user'), `a RUN step's output is in the logs: ${logs.join(' | ')}`)
  assert.ok(await Template.exists(name))
  assert.equal(await Template.exists(unique('never-built')), false)
  assert.ok(await Template.exists('base'), 'the template every sandbox may start from exists')

  for (const ref of [`${name}:v1`, name, info.templateId]) {
    const sbx = await sandbox(t, ref)
    const run = await sbx.commands.run(
      'pwd; whoami; cat /app/app.txt /app/sub/deep/c.txt /app/greeting /etc/tpl-marker /tmp/who; stat -c %a /app/sub/deep/c.txt; curl -sf http://127.0.0.1:8123/app.txt',
    )
    assert.equal(
      run.stdout,
      '/app\nuser\nfrom the context\ndeep file\nhello from /home/user\nroot-only\nbuilder\n750\nfrom the context\n',
      ref,
    )
    // ENV is for the build only, as E2B's.
    assert.equal((await sbx.commands.run('echo "[$GREETING]"')).stdout, '[]\n')
  }
})

test('tags are assigned, listed and removed; a sandbox starts from a tag', async (t) => {
  const name = unique('tpl-tags')
  cleanup(t, name)
  const first = await Template.build(Template().fromTemplate('base').runCmd('echo one > /tmp/v'), name)
  const second = await Template.build(
    Template().fromTemplate('base').runCmd('echo two > /tmp/v'),
    `${name}:next`,
  )
  // A bare name means the default tag: the first build.
  const bare = await sandbox(t, name)
  assert.equal((await bare.commands.run('cat /tmp/v')).stdout, 'one\n')
  const next = await sandbox(t, `${name}:next`)
  assert.equal((await next.commands.run('cat /tmp/v')).stdout, 'two\n')

  const assigned = await Template.assignTags(`${name}:next`, ['prod'])
  assert.equal(assigned.buildId, second.buildId)
  const tags = await Template.getTags(name)
  assert.deepEqual(
    tags.map((tag) => [tag.tag, tag.buildId]).sort(),
    [
      ['default', first.buildId],
      ['next', second.buildId],
      ['prod', second.buildId],
    ],
  )
  const prod = await sandbox(t, `${name}:prod`)
  assert.equal((await prod.commands.run('cat /tmp/v')).stdout, 'two\n')
  await Template.removeTags(name, 'prod')
  assert.deepEqual((await Template.getTags(name)).map((tag) => tag.tag).sort(), ['default', 'next'])
  await assert.rejects(Sandbox.create(`${name}:prod`), /no ready build/)
})

test('a template builds on another template', async (t) => {
  const base = unique('tpl-layer-a')
  const top = unique('tpl-layer-b')
  cleanup(t, top)
  cleanup(t, base)
  await Template.build(
    Template().fromTemplate('base').runCmd('echo lower > /opt-lower', { user: 'root' }).setWorkdir('/tmp'),
    base,
  )
  await Template.build(Template().fromTemplate(base).runCmd('cat /opt-lower > upper'), top)
  const sbx = await sandbox(t, top)
  assert.equal((await sbx.commands.run('pwd; cat /opt-lower /tmp/upper')).stdout, '/tmp\nlower\nlower\n')
})

test('a failing step, an image to pull and a step that needs the internet fail the build with its error', async (t) => {
  const failing = unique('tpl-fail')
  cleanup(t, failing)
  await assert.rejects(
    Template.build(Template().fromTemplate('base').runCmd('echo about to fail; exit 3'), failing),
    (err) =>
      err.name === 'BuildError' &&
      err.message.includes("failed to run command 'echo about to fail; exit 3': command failed: exit status 3"),
  )
  // A step as a user the image lacks: E2B's wording, which E2B's own suite looks for.
  const asNobody = unique('tpl-user')
  cleanup(t, asNobody)
  await assert.rejects(
    Template.build(Template().fromTemplate('base').runCmd('whoami', { user: 'root123' }), asNobody),
    (err) =>
      err.name === 'BuildError' &&
      err.message.includes("failed to run command 'whoami': command failed: unauthenticated: invalid username: 'root123'"),
  )
  await assert.rejects(
    Template.build(Template().fromPythonImage('3.12').runCmd('true'), unique('tpl-image')),
    (err) => err.name === 'BuildError' && /cannot pull image "python:3.12"/.test(err.message),
  )
  // No hang: DNS fails (no route out of e2b-local), the step fails, the build reports it.
  const started = Date.now()
  await assert.rejects(
    Template.build(
      Template().fromTemplate('base').runCmd('curl -sS --max-time 60 https://registry.npmjs.org/'),
      unique('tpl-net'),
    ),
    (err) => err.name === 'BuildError' && err.message.includes("failed to run command 'curl"),
  )
  assert.ok(Date.now() - started < 60_000, 'failed before the command timeout')
})

test('a build in the background reports its status and logs by offset', async (t) => {
  const name = unique('tpl-bg')
  cleanup(t, name)
  const info = await Template.buildInBackground(
    Template().fromTemplate('base').runCmd('for i in 1 2 3; do echo line-$i; done'),
    name,
  )
  let status
  for (let i = 0; i < 300; i++) {
    status = await Template.getBuildStatus(info, { logsOffset: 0 })
    if (status.status === 'ready' || status.status === 'error') break
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  assert.equal(status.status, 'ready')
  const messages = status.logEntries.map((entry) => entry.message)
  for (const line of ['line-1', 'line-2', 'line-3']) assert.ok(messages.includes(line), line)
  const later = await Template.getBuildStatus(info, { logsOffset: messages.length - 1 })
  assert.deepEqual(
    later.logEntries.map((entry) => entry.message),
    messages.slice(-1),
  )
})
