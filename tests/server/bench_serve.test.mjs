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

test('bench --mode serve runs multi-turn chats that resend the conversation', async () => {
  const server = await startServer();
  try {
    const dir = mkdtempSync(join(tmpdir(), 'hayate-bench-chat-'));
    const turns = 3, chats = 2, own = 40, newTokens = 8;
    const run = async (kind) => {
      const out = join(dir, `chat-${kind}.json`);
      const r = await hayate(['bench', '--mode', 'serve', '--endpoint', server.base, '--num-prompts', `${chats}`,
        '--turns', `${turns}`, '--prompt-kind', kind, '--input-len', `${own}`, '--output-len', `${newTokens}`,
        '--request-rate', 'inf', '--json', out]);
      assert.equal(r.code, 0, r.stderr);
      assert.match(r.stdout, /Median TTFT, turn 3 \(ms\):/);
      const j = JSON.parse(readFileSync(out, 'utf8'));
      assert.equal(j.workload.turns, turns);
      assert.equal(j.summary.completed, chats * turns);
      assert.equal(j.summary.ttft_ms_by_turn.length, turns);
      assert.ok(j.summary.prefix_cache_hit_rate > 0);
      return j;
    };
    // Ids: each turn resends exactly the previous prompt and the ids the server
    // generated (return_token_ids), then its own; the cache holds every full
    // block of that but the last answer id's (sampled, never run).
    const ids = await run('ids');
    for (let c = 0; c < chats; ++c) {
      const q = ids.requests.slice(c * turns, (c + 1) * turns);
      assert.deepEqual(q.map((x) => x.turn), [0, 1, 2]);
      assert.equal(q[0].prompt_tokens, own);
      for (let t = 1; t < turns; ++t) {
        assert.equal(q[t].prompt_tokens, q[t - 1].prompt_tokens + newTokens + own, `chat ${c} turn ${t}`);
        const computed = q[t - 1].prompt_tokens + newTokens - 1;
        assert.ok(q[t].cached_tokens > computed - 32 && q[t].cached_tokens <= computed,
          `chat ${c} turn ${t}: ${q[t].cached_tokens} cached of ${computed} computed`);
        assert.ok(q[t].send_s >= q[t - 1].send_s + q[t - 1].latency_s - 1e-6);
      }
    }
    // Words: the answer goes back as text, which the server retokenizes.
    const words = await run('words');
    for (let c = 0; c < chats; ++c) {
      const q = words.requests.slice(c * turns, (c + 1) * turns);
      for (let t = 1; t < turns; ++t)
        assert.ok(q[t].prompt_tokens > q[t - 1].prompt_tokens + own, `chat ${c} turn ${t}`);
    }
  } finally {
    const s = await server.stop();
    assert.equal(s.code, 0);
  }
});
