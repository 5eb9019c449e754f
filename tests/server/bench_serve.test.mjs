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
    const out = join(dir, 'chat.json');
    const turns = 3, chats = 2, words = 40, newTokens = 8;
    const r = await hayate(['bench', '--mode', 'serve', '--endpoint', server.base, '--num-prompts', `${chats}`,
      '--turns', `${turns}`, '--prompt-kind', 'words', '--input-len', `${words}`, '--output-len', `${newTokens}`,
      '--request-rate', 'inf', '--json', out]);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /Median TTFT, turn 3 \(ms\):/);
    const j = JSON.parse(readFileSync(out, 'utf8'));
    assert.equal(j.workload.turns, turns);
    assert.equal(j.summary.completed, chats * turns);
    assert.equal(j.summary.ttft_ms_by_turn.length, turns);
    for (let c = 0; c < chats; ++c) {
      const q = j.requests.slice(c * turns, (c + 1) * turns);
      assert.deepEqual(q.map((x) => x.turn), [0, 1, 2]);
      for (let t = 1; t < turns; ++t) {
        // The previous prompt, its answer and `words` new words (one token each, give or take
        // the merges where texts meet); the previous prompt's full blocks come from the cache.
        assert.ok(q[t].prompt_tokens >= q[t - 1].prompt_tokens + newTokens + words - 4,
          `chat ${c} turn ${t}: ${q[t].prompt_tokens} after ${q[t - 1].prompt_tokens}`);
        assert.ok(q[t].cached_tokens >= 32, `chat ${c} turn ${t}: ${q[t].cached_tokens} cached`);
        assert.ok(q[t].send_s >= q[t - 1].send_s + q[t - 1].latency_s - 1e-6);
      }
    }
    assert.ok(j.summary.prefix_cache_hit_rate > 0);
    // Chats resend text, so token ids are refused with one line.
    const bad = await hayate(['bench', '--mode', 'serve', '--endpoint', server.base, '--turns', '2',
      '--prompt-kind', 'ids']);
    assert.equal(bad.code, 1);
    assert.match(bad.stderr, /^hayate: error: --turns in --mode serve needs --prompt-kind words/m);
  } finally {
    const s = await server.stop();
    assert.equal(s.code, 0);
  }
});
