// Driven by tests/e2e/e2b_sdk_test.cpp: E2B's own SDK (the `e2b` npm package, its version
// pinned in tools/install-deps) against a pool's E2B front, through E2B_API_URL,
// E2B_SANDBOX_URL and E2B_API_KEY. Prints one line per step; the test checks them.
const { Sandbox } = require('e2b');

(async () => {
  const sbx = await Sandbox.create('base', { timeoutMs: 120000, metadata: { job: 'e2e' } });
  console.log('created', sbx.sandboxId);
  await sbx.files.write('/tmp/a.txt', 'hello from e2b');
  console.log('read', await sbx.files.read('/tmp/a.txt'));
  await sbx.files.makeDir('/tmp/d');
  console.log('listed', (await sbx.files.list('/tmp')).map((e) => e.name).sort().join(','));
  console.log('exists', await sbx.files.exists('/tmp/d'), await sbx.files.exists('/tmp/none'));
  const run = await sbx.commands.run('echo hi $X from ${BASH_VERSION%%.*}', { envs: { X: 'there' } });
  console.log('ran', JSON.stringify(run.stdout), run.exitCode);
  try {
    await sbx.commands.run('echo oops >&2; exit 3');
  } catch (e) {
    console.log('failed', e.exitCode, JSON.stringify(e.stderr));
  }
  const info = await sbx.getInfo();
  console.log('info', info.templateId, info.state, info.metadata.job);
  const mine = await Sandbox.list({ query: { metadata: { job: 'e2e' } } }).nextItems();
  console.log('found', mine.length);
  await sbx.setTimeout(60000);
  await sbx.kill();
  console.log('killed', (await Sandbox.list().nextItems()).length);
})().catch((e) => {
  console.error('FAIL', e);
  process.exit(1);
});
