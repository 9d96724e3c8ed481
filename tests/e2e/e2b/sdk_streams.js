// Driven by tests/e2e/e2b_sdk_test.cpp: the streams of E2B's own SDK against a pool's E2B
// front: a background command's output reaches onStdout while it runs, a command longer
// than the request timeout runs to its end, and a background command is killed by its
// handle; a directory's watch sees a file a command makes. Prints one line per step; the
// test checks them.
const { Sandbox } = require('e2b');

(async () => {
  const sbx = await Sandbox.create('base', { timeoutMs: 120000 });
  console.log('created', sbx.sandboxId);

  // Three lines a second apart, each seen as it comes: before the command ends.
  const seen = [];
  const handle = await sbx.commands.run('for i in 1 2 3; do echo line$i; sleep 1; done', {
    background: true,
    onStdout: (data) => seen.push([data, Date.now()]),
  });
  const started = Date.now();
  while (seen.length === 0 && Date.now() - started < 30000) {
    await new Promise((r) => setTimeout(r, 50));
  }
  const first = seen.length ? seen[0][0] : null;
  console.log('first', JSON.stringify(first), 'while running', handle.exitCode === undefined);
  const result = await handle.wait();
  const ended = Date.now();
  console.log('background', JSON.stringify(result.stdout), result.exitCode);
  console.log('first came before the end by at least 1500 ms', ended - seen[0][1] >= 1500);
  console.log('figure: line1 came', ended - seen[0][1], 'ms before the end;',
              seen.length, 'onStdout calls');

  // Longer than the request timeout: the start event comes at once, the rest as it runs.
  const longStarted = Date.now();
  const long = await sbx.commands.run('sleep 6; echo late', { requestTimeoutMs: 3000 });
  console.log('figure: the 6 s command took', Date.now() - longStarted, 'ms');
  console.log('long', JSON.stringify(long.stdout), long.exitCode);

  // A background command killed by its handle ends, and is listed no more.
  const sleeper = await sbx.commands.run('sleep 600', { background: true });
  const listed = (await sbx.commands.list()).some((p) => p.pid === sleeper.pid);
  console.log('listed', listed, 'killed', await sleeper.kill());
  try {
    await sleeper.wait();
    console.log('sleeper ended well?');
  } catch (e) {
    const still = (await sbx.commands.list()).some((p) => p.pid === sleeper.pid);
    console.log('sleeper ended', e.exitCode, still);
  }
  // A watch sees a file a command creates.
  await sbx.files.makeDir('/tmp/w');
  const events = [];
  const watch = await sbx.files.watchDir('/tmp/w', (e) => events.push(e));
  await sbx.commands.run('echo x > /tmp/w/made');
  const watched = Date.now();
  const made = () => events.some((e) => e.name === 'made' && e.type === 'create');
  while (!made() && Date.now() - watched < 30000) {
    await new Promise((r) => setTimeout(r, 50));
  }
  console.log('watched', made());
  await watch.stop();
  await sbx.kill();
})().catch((e) => {
  console.error('FAIL', e);
  process.exit(1);
});
