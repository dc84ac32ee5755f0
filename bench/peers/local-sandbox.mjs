// The peer of bench/run: @mastra/core's LocalSandbox doing the same exec
// round trips as bench/platform.lua's LocalSandbox figures.
//   node --expose-gc local-sandbox.mjs OUT_TSV SEQ_N CONC CONC_PER_TASK ROUNDS CREATE_N
//     MEM_N STDOUT_MB STDOUT_REPS
// Appends "key<TAB>unit<TAB>samples" lines to OUT_TSV (samples are
// space-separated; times in ms).
import { appendFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { LocalSandbox } from '@mastra/core/workspace';

const [out, seqN, conc, perTask, rounds, createN, memN, stdoutMb, stdoutReps] =
  process.argv.slice(2);
const emit = (key, unit, xs) =>
  appendFileSync(out, `${key}\t${unit}\t${xs.map((x) => +x.toFixed(4)).join(' ')}\n`);
const dir = mkdtempSync(join(tmpdir(), 'mastra-bench-peer-'));

try {
  // create -> first exec (one warm-up first, as on the Lua side)
  const warm = new LocalSandbox({ workingDirectory: join(dir, 'warm') });
  await warm.start();
  await warm.executeCommand('true');
  await warm.destroy();
  const create = [];
  for (let i = 0; i < +createN; i++) {
    const t0 = performance.now();
    const sb = new LocalSandbox({ workingDirectory: join(dir, `c${i}`) });
    await sb.start();
    await sb.executeCommand('true');
    create.push(performance.now() - t0);
    await sb.destroy();
  }
  emit('peer.local.create_first_exec', 'ms', create);

  const sb = new LocalSandbox({ workingDirectory: join(dir, 'run') });
  await sb.start();
  for (let i = 0; i < 20; i++) await sb.executeCommand('true'); // warm-up
  const seq = [];
  for (let i = 0; i < +seqN; i++) {
    const t0 = performance.now();
    const r = await sb.executeCommand('true');
    seq.push(performance.now() - t0);
    if (r.exitCode !== 0) throw new Error(`true exited ${r.exitCode}`);
  }
  emit('peer.local.exec_seq', 'ms', seq);

  const lat = [];
  const rates = [];
  for (let r = 0; r < +rounds; r++) {
    const n0 = lat.length;
    const t0 = performance.now();
    await Promise.all(Array.from({ length: +conc }, async () => {
      for (let i = 0; i < +perTask; i++) {
        const t = performance.now();
        await sb.executeCommand('true');
        lat.push(performance.now() - t);
      }
    }));
    rates.push((lat.length - n0) / ((performance.now() - t0) / 1000));
  }
  emit('peer.local.exec_conc', 'ms', lat);
  emit('peer.local.exec_conc_rate', 'ops/s', rates);

  // stdout throughput, counted by onStdout: the result keeping the output (as
  // ours does by default), then keeping none of it
  const bytes = +stdoutMb * 1048576;
  const stdoutMbps = async (extra) => {
    const xs = [];
    for (let r = 0; r < +stdoutReps; r++) {
      let got = 0;
      const t = performance.now();
      await sb.executeCommand('head', ['-c', String(bytes), '/dev/zero'], {
        onStdout: (chunk) => { got += Buffer.byteLength(chunk); },
        ...extra,
      });
      const ms = performance.now() - t;
      if (got !== bytes) throw new Error(`stdout: got ${got} of ${bytes} bytes`);
      xs.push(bytes / 1048576 / (ms / 1000));
    }
    return xs;
  };
  emit('peer.local.stdout_mbps', 'MB/s', await stdoutMbps({}));
  emit('peer.local.stdout_noretain_mbps', 'MB/s', await stdoutMbps({ maxRetainedBytes: 0 }));
  await sb.destroy();

  // client memory per idle (unstarted) handle
  if (global.gc) {
    const handles = [];
    global.gc(); global.gc();
    const before = process.memoryUsage().heapUsed;
    for (let i = 0; i < +memN; i++) {
      handles.push(new LocalSandbox({ workingDirectory: join(dir, 'm') }));
    }
    global.gc(); global.gc();
    const after = process.memoryUsage().heapUsed;
    emit('peer.local.mem_per_handle', 'KiB', [(after - before) / 1024 / +memN]);
    if (handles.length !== +memN) throw new Error('lost handles');
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}
