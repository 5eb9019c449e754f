#!/usr/bin/env python3
"""Writes a Llama-3.1-8B-shaped FP8 checkpoint with random weights, laid out as
llm-compressor writes its `*-FP8-dynamic` models (compressed-tensors,
float-quantized: e4m3 weights with a BF16 scale per output channel, activations
quantized per token at run time, lm_head ignored and kept in BF16), in shards
with a model.safetensors.index.json. For timing the load of an FP8 checkpoint
as users download it; the values are random (no reference output is implied).

Runs on the GPU machine (torch with float8_e4m3fn; CUDA if present):
  python3 tools/make_fp8_8b.py --out DIR --tokenizer assets/llama3_1
"""
import argparse
import json
import os
import shutil
import struct
import time

import torch

ARCH = {"hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
        "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128,
        "vocab_size": 128256, "max_position_embeddings": 131072, "rms_norm_eps": 1e-5,
        "rope_theta": 500000.0,
        "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                         "original_max_position_embeddings": 8192, "rope_type": "llama3"}}
FP8_MAX = 448.0
SHARD_BYTES = 5 << 30
DT = {torch.bfloat16: "BF16", torch.float8_e4m3fn: "F8_E4M3", torch.float32: "F32"}


def raw(t):
    t = t.contiguous().cpu()
    if t.dtype in (torch.bfloat16, torch.float8_e4m3fn):
        t = t.view(torch.uint8) if t.dtype == torch.float8_e4m3fn else t.view(torch.int16)
    return t.numpy().tobytes()


def write_shard(path, tensors):
    """safetensors as its documentation lays it out: u64 header length, JSON
    header padded to 8 bytes, then the data in header order."""
    header, off = {}, 0
    for name, t in tensors:
        n = t.numel() * t.element_size()
        header[name] = {"dtype": DT[t.dtype], "shape": list(t.shape), "data_offsets": [off, off + n]}
        off += n
    text = json.dumps(header, separators=(",", ":"))
    text += " " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text.encode())
        for _, t in tensors:
            f.write(raw(t))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--tokenizer", required=True, help="folder with tokenizer.json and tokenizer_config.json")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    g = torch.Generator(device=dev).manual_seed(a.seed)
    H, I, V = ARCH["hidden_size"], ARCH["intermediate_size"], ARCH["vocab_size"]
    qd = ARCH["num_attention_heads"] * ARCH["head_dim"]
    kvd = ARCH["num_key_value_heads"] * ARCH["head_dim"]
    shapes = {"self_attn.q_proj": (qd, H), "self_attn.k_proj": (kvd, H),
              "self_attn.v_proj": (kvd, H), "self_attn.o_proj": (H, qd),
              "mlp.gate_proj": (I, H), "mlp.up_proj": (I, H), "mlp.down_proj": (H, I)}

    def randn(*shape, scale=1.0):
        return torch.randn(*shape, generator=g, device=dev) * scale

    t0 = time.time()
    os.makedirs(a.out, exist_ok=True)
    shards, cur, cur_bytes = [], [], 0

    def add(name, t):
        nonlocal cur, cur_bytes
        n = t.numel() * t.element_size()
        if cur and cur_bytes + n > SHARD_BYTES:
            shards.append(cur)
            cur, cur_bytes = [], 0
        cur.append((name, t.cpu()))
        cur_bytes += n

    add("model.embed_tokens.weight", randn(V, H).to(torch.bfloat16))
    for l in range(ARCH["num_hidden_layers"]):
        p = f"model.layers.{l}."
        add(p + "input_layernorm.weight", (1.0 + 0.1 * randn(H)).to(torch.bfloat16))
        add(p + "post_attention_layernorm.weight", (1.0 + 0.1 * randn(H)).to(torch.bfloat16))
        for m, (o, i) in shapes.items():
            w = randn(o, i, scale=1.0 / i ** 0.5)
            s = (w.abs().amax(dim=1, keepdim=True) / FP8_MAX).clamp_min(1e-12).to(torch.bfloat16)
            codes = (w / s.float()).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
            add(p + m + ".weight", codes)
            add(p + m + ".weight_scale", s)
    add("model.norm.weight", (1.0 + 0.1 * randn(H)).to(torch.bfloat16))
    add("lm_head.weight", randn(V, H, scale=4.0 / H ** 0.5).to(torch.bfloat16))
    shards.append(cur)

    index, total = {}, 0
    for k, tensors in enumerate(shards):
        name = f"model-{k + 1:05d}-of-{len(shards):05d}.safetensors"
        write_shard(os.path.join(a.out, name), tensors)
        for n, t in tensors:
            index[n] = name
            total += t.numel() * t.element_size()
    with open(os.path.join(a.out, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": index}, f, indent=1)

    weights = {"num_bits": 8, "type": "float", "symmetric": True, "dynamic": False,
               "strategy": "channel", "group_size": None, "block_structure": None,
               "observer": "minmax"}
    inputs = {"num_bits": 8, "type": "float", "symmetric": True, "dynamic": True,
              "strategy": "token", "observer": None}
    qc = {"quant_method": "compressed-tensors", "format": "float-quantized",
          "quantization_status": "compressed",
          "config_groups": {"group_0": {"targets": ["Linear"], "weights": weights,
                                        "input_activations": inputs, "output_activations": None}},
          "ignore": ["lm_head"], "kv_cache_scheme": None}
    cfg = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "torch_dtype": "bfloat16",
           "tie_word_embeddings": False, "bos_token_id": 128000, "eos_token_id": [128001, 128008, 128009],
           "hidden_act": "silu", "attention_bias": False, "mlp_bias": False,
           "quantization_config": qc, **ARCH}
    with open(os.path.join(a.out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    for fn in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja"):
        src = os.path.join(a.tokenizer, fn)
        if os.path.exists(src):
            shutil.copy(src, os.path.join(a.out, fn))
    print(f"wrote {len(shards)} shards, {total / 1e9:.2f} GB in {time.time() - t0:.1f} s to {a.out}")


if __name__ == "__main__":
    main()
