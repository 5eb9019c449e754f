#!/usr/bin/env python3
"""Tiny FP8 checkpoints and their references, for hayate's CPU (CI) and CUDA (gpu) tests.

Runs with torch alone (Debian's python3-torch 1.13 here; torch 1.13 has no
float8 type, so e4m3 rounding is written out below and checked against known
values of the OCP FP8 spec before anything is made). Writes, per fixture, a
Llama checkpoint directory in one of the two quantization_config formats in
common use, written from their documented fields:

  ct_channel_dynamic   quant_method compressed-tensors, format float-quantized
                       (llm-compressor's FP8-dynamic): weights strategy channel
                       (weight_scale [out, 1] in BF16, as RedHatAI's files), input
                       activations dynamic per token, ignore ["lm_head"].
  ct_tensor_static_kv  compressed-tensors, weights strategy tensor (weight_scale
                       [1], F32), static per-tensor input_scale, kv_cache_scheme
                       (self_attn.k_scale / v_scale per layer).
  fp8_dynamic          quant_method fp8 (vLLM's Fp8Config / AutoFP8): per-tensor
                       weight_scale (shape []), activation_scheme dynamic.

and a reference computed here in fp32 by an independent Llama forward pass (HF's
LlamaForCausalLM eager math, written out in torch), with the same fake
quantization hayate applies: weights dequantized from their codes, every linear
input quantized per token (dynamic: scale max(amax / 448, 1 / (448 * 512)), as
vLLM) or with its static scale (the max over fused q/k/v and gate/up, as vLLM),
and, for the FP8-KV reference, K and V rounded to e4m3 with the layer's scales
(1.0 where the checkpoint has none) as they enter the cache:

  reference.json  prompt ids, greedy ids (no KV quantization and with an e4m3
                  KV cache), the logits files, and the fp8-vs-bf16 gap (KL
                  divergence and top-1 agreement of the next-token distributions
                  over the prompt, against the unquantized bf16 weights the
                  codes came from)
  logits.bin      fp32 logits [prompt + new tokens, vocab] along the greedy path
  logits_kv8.bin  the same with the e4m3 KV cache (its own greedy path)

Usage (repository root): python3 tools/make_fp8_fixtures.py --out tests/golden/data/fp8
"""

import argparse
import json
import math
import os
import struct

import torch

FP8_MAX = 448.0
MIN_SCALE = 1.0 / (448.0 * 512.0)

ARCH = dict(vocab_size=256, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
            num_attention_heads=2, num_key_value_heads=1, head_dim=64, rms_norm_eps=1e-5,
            rope_theta=10000.0, max_position_embeddings=256)
PROMPT_LEN = 24
NEW_TOKENS = 16


# ---- e4m3fn -------------------------------------------------------------------

def e4m3_round(x):
    """x rounded to the nearest e4m3fn value (ties to even), saturating at 448."""
    a = x.abs().to(torch.float64)
    # exponent of the quantum: normals step 2^(e-3), subnormals 2^-9
    e = torch.floor(torch.log2(torch.clamp(a, min=2.0 ** -6)))
    quantum = torch.pow(2.0, e - 3)
    q = torch.round(a / quantum) * quantum  # torch.round: half to even
    q = torch.clamp(q, max=FP8_MAX)
    return (torch.sign(x.to(torch.float64)) * q).to(torch.float32)


def e4m3_code(v):
    """The byte of an e4m3fn value (already representable)."""
    sign = 0x80 if v < 0 or (v == 0 and math.copysign(1, v) < 0) else 0
    a = abs(v)
    if a < 2.0 ** -6:
        return sign | int(round(a * 512))
    e = math.floor(math.log2(a))
    mant = int(round(a / 2.0 ** e * 8)) - 8
    return sign | ((e + 7) << 3) | mant


def check_e4m3():
    # Known values (OCP 8-bit floating point spec, e4m3: bias 7, max 448, no inf).
    known = {448.0: 448.0, 500.0: 448.0, 1.0: 1.0, -2.0: -2.0, 2.0 ** -9: 2.0 ** -9,
             2.0 ** -10: 0.0, 1.5 * 2.0 ** -9: 2.0 ** -8, 2.0 ** -6: 2.0 ** -6,
             1.0625: 1.0, 1.1875: 1.25, 17.0: 16.0, 19.0: 20.0, 0.3: 0.3125, 240.0: 240.0,
             232.0: 224.0, 464.0: 448.0}
    for x, want in known.items():
        got = float(e4m3_round(torch.tensor([x]))[0])
        assert got == want, (x, got, want)
    codes = {448.0: 0x7E, 1.0: 0x38, -2.0: 0xC0, 2.0 ** -9: 0x01, 2.0 ** -6: 0x08}
    for v, c in codes.items():
        assert e4m3_code(v) == c, (v, hex(e4m3_code(v)), hex(c))


def quantize_rows(x, static_scale=None):
    """Per-row (last dim) quantization: (codes as float values, scales [rows, 1])."""
    if static_scale is None:
        amax = x.abs().amax(dim=-1, keepdim=True)
        s = torch.clamp(amax / FP8_MAX, min=MIN_SCALE)
    else:
        s = torch.full(x.shape[:-1] + (1,), float(static_scale))
    q = e4m3_round(torch.clamp(x / s, -FP8_MAX, FP8_MAX))
    return q, s


def fake_quant(x, static_scale=None):
    q, s = quantize_rows(x, static_scale)
    return q * s


# ---- a Llama forward (HF eager semantics), fp32 -------------------------------

def rmsnorm(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def rope_tables(n, head_dim, theta):
    inv = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
    ang = torch.arange(n, dtype=torch.float32)[:, None] * inv[None, :]
    emb = torch.cat([ang, ang], dim=-1)
    return emb.cos(), emb.sin()


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat([-x[..., h:], x[..., :h]], dim=-1)


def forward(W, ids, quant, kv_scales=None):
    """Logits [len(ids), vocab]; quant: None (no quantization) or the per-linear
    input scales {name: None (dynamic) | float}; kv_scales: per layer (k, v) to
    round K and V to e4m3 as they enter the cache, or None."""
    a = ARCH
    n, H, nh, nkv, d = len(ids), a["hidden_size"], a["num_attention_heads"], \
        a["num_key_value_heads"], a["head_dim"]
    x = W["model.embed_tokens.weight"][torch.tensor(ids)]
    cos, sin = rope_tables(n, d, a["rope_theta"])
    mask = torch.full((n, n), float("-inf")).triu(1)

    def linear(inp, layer, names):
        w = torch.cat([W[f"model.layers.{layer}.{m}.weight"] for m in names], dim=0)
        if quant is not None:
            inp = fake_quant(inp, quant[(layer, names[0])])
        return inp @ w.T

    for l in range(a["num_hidden_layers"]):
        p = f"model.layers.{l}."
        h = rmsnorm(x, W[p + "input_layernorm.weight"], a["rms_norm_eps"])
        qkv = linear(h, l, ["self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"])
        q, k, v = qkv.split([nh * d, nkv * d, nkv * d], dim=-1)
        q = q.view(n, nh, d).transpose(0, 1)
        k = k.view(n, nkv, d).transpose(0, 1)
        v = v.view(n, nkv, d).transpose(0, 1)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        if kv_scales is not None:
            ks, vs = kv_scales[l]
            k = fake_quant(k, ks)
            v = fake_quant(v, vs)
        k = k.repeat_interleave(nh // nkv, dim=0)
        v = v.repeat_interleave(nh // nkv, dim=0)
        att = torch.softmax(q @ k.transpose(1, 2) / math.sqrt(d) + mask, dim=-1) @ v
        att = att.transpose(0, 1).reshape(n, nh * d)
        x = x + linear(att, l, ["self_attn.o_proj"])
        h = rmsnorm(x, W[p + "post_attention_layernorm.weight"], a["rms_norm_eps"])
        gu = linear(h, l, ["mlp.gate_proj", "mlp.up_proj"])
        g, u = gu.chunk(2, dim=-1)
        x = x + linear(torch.nn.functional.silu(g) * u, l, ["mlp.down_proj"])
    x = rmsnorm(x, W["model.norm.weight"], a["rms_norm_eps"])
    return x @ W["lm_head.weight"].T


def greedy(W, prompt, quant, kv_scales=None):
    """Greedy path: ids, the logits of every position of prompt + new tokens but
    the last, and the smallest top-1 margin along the new tokens."""
    ids = list(prompt)
    margin = float("inf")
    for _ in range(NEW_TOKENS):
        logits = forward(W, ids, quant, kv_scales)
        top = torch.topk(logits[-1], 2).values
        margin = min(margin, float(top[0] - top[1]))
        ids.append(int(torch.argmax(logits[-1])))
    return ids[len(prompt):], forward(W, ids[:-1], quant, kv_scales), margin


# ---- safetensors ----------------------------------------------------------------

def st_bytes(t, dtype):
    if dtype == "F32":
        return t.contiguous().to(torch.float32).numpy().tobytes()
    if dtype == "BF16":
        return t.contiguous().to(torch.bfloat16).view(torch.int16).numpy().tobytes()
    if dtype == "F8_E4M3":
        flat = t.flatten().tolist()
        return bytes(e4m3_code(v) for v in flat)
    raise ValueError(dtype)


def write_safetensors(path, tensors):
    """tensors: [(name, tensor, safetensors dtype)], written as the format's
    documentation lays it out (u64 header length, JSON header padded to 8, data)."""
    header, blobs, off = {}, [], 0
    for name, t, dt in sorted(tensors, key=lambda e: e[0]):
        b = st_bytes(t, dt)
        header[name] = {"dtype": dt, "shape": list(t.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    text = json.dumps(header, separators=(",", ":"))
    text += " " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text.encode())
        for b in blobs:
            f.write(b)


# ---- the fixtures -----------------------------------------------------------------

LINEARS = ["self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
           "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"]
FUSED = {"self_attn.q_proj": ["self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"],
         "self_attn.o_proj": ["self_attn.o_proj"],
         "mlp.gate_proj": ["mlp.gate_proj", "mlp.up_proj"], "mlp.down_proj": ["mlp.down_proj"]}


def base_weights(seed):
    """Random bf16-representable weights of ARCH (as a bf16 checkpoint holds)."""
    g = torch.Generator().manual_seed(seed)
    a = ARCH
    H, I, V = a["hidden_size"], a["intermediate_size"], a["vocab_size"]
    qd, kvd = a["num_attention_heads"] * a["head_dim"], a["num_key_value_heads"] * a["head_dim"]
    shapes = {"self_attn.q_proj": (qd, H), "self_attn.k_proj": (kvd, H),
              "self_attn.v_proj": (kvd, H), "self_attn.o_proj": (H, qd),
              "mlp.gate_proj": (I, H), "mlp.up_proj": (I, H), "mlp.down_proj": (H, I)}
    W = {"model.embed_tokens.weight": torch.randn(V, H, generator=g),
         "model.norm.weight": 1.0 + 0.1 * torch.randn(H, generator=g),
         "lm_head.weight": 4.0 * torch.randn(V, H, generator=g) / math.sqrt(H)}
    for l in range(a["num_hidden_layers"]):
        p = f"model.layers.{l}."
        W[p + "input_layernorm.weight"] = 1.0 + 0.1 * torch.randn(H, generator=g)
        W[p + "post_attention_layernorm.weight"] = 1.0 + 0.1 * torch.randn(H, generator=g)
        for m, (o, i) in shapes.items():
            # rows of varied size, so per-channel scales differ
            rows = torch.exp(0.5 * torch.randn(o, 1, generator=g))
            W[p + m + ".weight"] = torch.randn(o, i, generator=g) * rows / math.sqrt(i)
    return {k: v.to(torch.bfloat16).to(torch.float32) for k, v in W.items()}


def make(name, fmt, channel, static, kv, seed, out_dir):
    W = base_weights(seed)
    a = ARCH
    g = torch.Generator().manual_seed(seed + 100)
    prompt = torch.randint(0, a["vocab_size"], (PROMPT_LEN,), generator=g).tolist()
    tensors, Wq, quant = [], dict(W), {}
    for k in ("model.embed_tokens.weight", "model.norm.weight", "lm_head.weight"):
        tensors.append((k, W[k], "BF16"))
    # Static input scales: calibrated on the bf16 model's own activations over the
    # prompt (amax / 448 of each linear's input), then the max over fused parts.
    calib = calibrate(W, prompt) if static else {}
    for l in range(a["num_hidden_layers"]):
        p = f"model.layers.{l}."
        for head, parts in FUSED.items():
            in_scale = None
            if static:
                in_scale = max(calib[(l, m)] for m in parts)
            quant[(l, head)] = in_scale
            for m in parts:
                w = W[p + m + ".weight"]
                if channel:
                    codes, s = quantize_rows(w)                      # s [out, 1]
                else:
                    amax = float(w.abs().max())
                    s = torch.full((1, 1), max(amax / FP8_MAX, MIN_SCALE))
                    codes = e4m3_round(torch.clamp(w / s, -FP8_MAX, FP8_MAX))
                if fmt == "compressed-tensors" and channel:
                    s = s.to(torch.bfloat16).to(torch.float32)      # stored in BF16
                    codes = e4m3_round(torch.clamp(w / s, -FP8_MAX, FP8_MAX))
                Wq[p + m + ".weight"] = codes * s
                tensors.append((p + m + ".weight", codes, "F8_E4M3"))
                if fmt == "compressed-tensors" and channel:
                    tensors.append((p + m + ".weight_scale", s, "BF16"))
                elif fmt == "compressed-tensors":
                    tensors.append((p + m + ".weight_scale", s.reshape(1), "F32"))
                else:
                    tensors.append((p + m + ".weight_scale", s.reshape(()), "F32"))
                if static:
                    tensors.append((p + m + ".input_scale",
                                    torch.tensor([calib[(l, m)]], dtype=torch.float32), "F32"))
        tensors.append((p + "input_layernorm.weight", W[p + "input_layernorm.weight"], "BF16"))
        tensors.append((p + "post_attention_layernorm.weight",
                        W[p + "post_attention_layernorm.weight"], "BF16"))
    kv_scales = [(1.0, 1.0)] * a["num_hidden_layers"]
    if kv:  # per-layer scales from the bf16 model's K and V over the prompt
        kv_scales = calibrate_kv(W, prompt)
        for l, (ks, vs) in enumerate(kv_scales):
            tensors.append((f"model.layers.{l}.self_attn.k_scale", torch.tensor([ks]), "F32"))
            tensors.append((f"model.layers.{l}.self_attn.v_scale", torch.tensor([vs]), "F32"))

    if fmt == "compressed-tensors":
        weights = {"num_bits": 8, "type": "float", "symmetric": True, "dynamic": False,
                   "strategy": "channel" if channel else "tensor", "group_size": None,
                   "block_structure": None, "observer": "minmax"}
        inputs = ({"num_bits": 8, "type": "float", "symmetric": True, "dynamic": False,
                   "strategy": "tensor", "observer": "minmax"} if static else
                  {"num_bits": 8, "type": "float", "symmetric": True, "dynamic": True,
                   "strategy": "token", "observer": None})
        qc = {"quant_method": "compressed-tensors", "format": "float-quantized",
              "quantization_status": "compressed",
              "config_groups": {"group_0": {"targets": ["Linear"], "weights": weights,
                                            "input_activations": inputs,
                                            "output_activations": None}},
              "ignore": ["lm_head"],
              "kv_cache_scheme": ({"num_bits": 8, "type": "float", "symmetric": True,
                                   "dynamic": False, "strategy": "tensor"} if kv else None)}
    else:
        qc = {"quant_method": "fp8", "activation_scheme": "static" if static else "dynamic",
              "ignored_layers": ["lm_head"]}
    cfg = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "torch_dtype": "bfloat16",
           "tie_word_embeddings": False, "bos_token_id": 1, "eos_token_id": 2,
           "hidden_act": "silu", "quantization_config": qc, **ARCH}
    d = os.path.join(out_dir, name)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    write_safetensors(os.path.join(d, "model.safetensors"), tensors)

    ids, logits, margin = greedy(Wq, prompt, quant)
    ids8, logits8, margin8 = greedy(Wq, prompt, quant, kv_scales)
    with open(os.path.join(d, "logits.bin"), "wb") as f:
        f.write(logits.contiguous().numpy().tobytes())
    with open(os.path.join(d, "logits_kv8.bin"), "wb") as f:
        f.write(logits8.contiguous().numpy().tobytes())
    # The gap to the bf16 weights the codes came from (no quantization at all).
    ref = torch.log_softmax(forward(W, prompt, None), dim=-1)
    got = torch.log_softmax(forward(Wq, prompt, quant), dim=-1)
    kl = float((ref.exp() * (ref - got)).sum(-1).mean())
    top1 = float((ref.argmax(-1) == got.argmax(-1)).float().mean())
    with open(os.path.join(d, "reference.json"), "w") as f:
        json.dump({"name": name, "format": fmt, "torch": torch.__version__,
                   "prompt_ids": prompt, "new_tokens": NEW_TOKENS,
                   "greedy_ids": ids, "greedy_min_margin": margin, "logits_file": "logits.bin",
                   "greedy_ids_kv8": ids8, "greedy_min_margin_kv8": margin8,
                   "logits_kv8_file": "logits_kv8.bin",
                   "kv_scales": kv_scales,
                   "gap_vs_bf16": {"kl_mean": kl, "top1_agreement": top1,
                                   "positions": PROMPT_LEN}}, f, indent=1)
    print(f"{name}: greedy {ids[:8]}... margin {margin:.3g} (kv8 {margin8:.3g}); "
          f"vs bf16 KL {kl:.3g}, top-1 {top1:.3f}")


def calibrate(W, prompt):
    """amax / 448 of each linear's input over the prompt, unquantized model."""
    rec = {}
    global fake_quant
    orig = fake_quant
    # forward() quantizes through fake_quant(inp, quant[(layer, head)]); a dict
    # whose lookups record the key lets the spy know which linear it sees.
    seen = []

    class Keys(dict):
        def __getitem__(self, key):
            seen.append(key)
            return None

    def spy(inp, s):
        l, head = seen[-1]
        for m in FUSED[head]:
            rec[(l, m)] = max(rec.get((l, m), 0.0), float(inp.abs().max()) / FP8_MAX)
        return inp
    fake_quant = spy
    try:
        forward(W, prompt, Keys())
    finally:
        fake_quant = orig
    return rec


def calibrate_kv(W, prompt):
    """Per layer (k_scale, v_scale): amax / 448 of the roped K and of V over the prompt."""
    global fake_quant
    orig = fake_quant
    amax = []

    def spy(inp, s):
        amax.append(float(inp.abs().max()) / FP8_MAX)
        return inp
    fake_quant = spy
    try:
        forward(W, prompt, None, [(None, None)] * ARCH["num_hidden_layers"])
    finally:
        fake_quant = orig
    return [(amax[2 * l], amax[2 * l + 1]) for l in range(ARCH["num_hidden_layers"])]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    torch.set_num_threads(2)
    check_e4m3()
    make("ct_channel_dynamic", "compressed-tensors", True, False, False, 11, args.out)
    make("ct_tensor_static_kv", "compressed-tensors", False, True, True, 12, args.out)
    make("fp8_dynamic", "fp8", False, False, False, 13, args.out)


if __name__ == "__main__":
    main()
