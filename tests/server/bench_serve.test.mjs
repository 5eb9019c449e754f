// `hayate bench --mode serve` (the CLI, not the library) against a real
// `hayate serve`: every request completes with the asked-for token counts, and
// the server's own counters agree with what the client reports.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startServer, metrics } from './harness.mjs';

function hayate(args) {
  return new Promise((resolve) => {
    execFile(process.env.HAYATE_BIN, args, { timeout: 120000 }, (err, stdout, stderr) =>
      resolve({ code: err ? (err.code ?? 1) : 0, stdout, stderr }));
  });
}

test('bench --mode serve measures a hayate server', async () => {
  const server = await startServer();
  try {
    const dir = mkdtempSync(join(tmpdir(), 'hayate-bench-serve-'));
    const out = join(dir, 'serve.json');
    const r = await hayate(['bench', '--mode', 'serve', '--endpoint', server.base, '--num-prompts', '6',
      '--input-len', '10', '--output-len', '4', '--max-concurrency', '3', '--request-rate', 'inf',
      '--label', 'hayate', '--json', out]);
    assert.equal(r.code, 0, r.stderr);
    const j = JSON.parse(readFileSync(out, 'utf8'));
    assert.equal(j.mode, 'serve');
    assert.equal(j.summary.completed, 6);
    assert.equal(j.summary.failed, 0);
    for (const q of j.requests) {
      assert.equal(q.output_tokens, 4);
      assert.equal(q.error, null);
      assert.ok(q.ttft_s > 0 && q.ttft_s <= q.latency_s);
    }
    const m = await metrics(server.url);
    assert.equal(m['hayate:generation_tokens_total'], 24);  // 6 requests x 4 tokens
  } finally {
    const s = await server.stop();
    assert.equal(s.code, 0);
  }
});
