#!/usr/bin/env python3
"""Golden fixtures for hayate's CPU backend, made with Hugging Face transformers.

Runs where torch and transformers are installed (the GPU machine: torch 2.11,
transformers 5.17; it needs no internet). Builds small random
LlamaForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM and MistralForCausalLM
checkpoints, saves them with save_pretrained (safetensors),
reloads each from disk in float32 (the stored bf16/fp16 weights upcast, so the
reference is fp32 vs fp32) and records:

  golden.json  prompt ids, greedy ids for 32 new tokens (HF generate,
               do_sample=False, eos disabled), perplexity of a Japanese+English
               text (whole text, and in windows), versions, self-checks
  logits.bin   HF float32 logits, little-endian, rows = golden.json's
               logits_positions, each of vocab_size values

Perplexity follows HF's "perplexity of fixed-length models" recipe: BOS then
the text's tokens; with a context C the windows start every C/2 tokens, each
window is run from position 0 and scores only the tokens that no earlier
window scored, so every token after BOS is scored exactly once.

Usage (on the GPU machine, from the repository root):
  python3 tools/make_golden.py --tokenizer assets/llama3_1/tokenizer.json \
      --text tests/golden/data/text_ja_en.txt --out /tmp/golden
"""

import argparse
import inspect
import json
import math
import os
import shutil
import sys
import traceback

import torch
import transformers
from transformers import LlamaConfig, LlamaForCausalLM

NEW_TOKENS = 32
PPL_WINDOW = 64  # the windowed perplexity's context (stride PPL_WINDOW // 2)

# name, architecture, stored dtype, shard size (None = one file), config form.
# "v4" rewrites config.json the way Llama 3.1 downloads look (rope_theta and
# rope_scaling at the top level, torch_dtype); "v5" keeps what transformers 5
# writes (rope_parameters, dtype).
CHECKPOINTS = [
    dict(name="gqa1_untied_bf16", dtype="bfloat16", shard=None, form="v4", prompt_len=80,
         seed=1, arch=dict(vocab_size=512, hidden_size=64, intermediate_size=160,
                           num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4,
                           tie_word_embeddings=False, max_position_embeddings=512,
                           rope_theta=10000.0,
                           rope_scaling=dict(rope_type="llama3", factor=8.0, low_freq_factor=1.0,
                                             high_freq_factor=4.0,
                                             original_max_position_embeddings=32))),
    dict(name="gqa2_tied_fp16_sharded", dtype="float16", shard="100KB", form="v5", prompt_len=96,
         seed=2, arch=dict(vocab_size=512, hidden_size=64, intermediate_size=128,
                           num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2,
                           tie_word_embeddings=True, max_position_embeddings=512,
                           rope_theta=500000.0,
                           rope_scaling=dict(rope_type="llama3", factor=8.0, low_freq_factor=1.0,
                                             high_freq_factor=4.0,
                                             original_max_position_embeddings=32))),
    # head_dim given explicitly and q_dim (8 x 16) != hidden (96).
    dict(name="gqa4_headdim_bf16", dtype="bfloat16", shard=None, form="v4", prompt_len=64,
         seed=3, arch=dict(vocab_size=384, hidden_size=96, intermediate_size=192,
                           num_hidden_layers=2, num_attention_heads=8, num_key_value_heads=2,
                           head_dim=16, tie_word_embeddings=False, max_position_embeddings=256,
                           rope_theta=500000.0,
                           rope_scaling=dict(rope_type="llama3", factor=4.0, low_freq_factor=1.0,
                                             high_freq_factor=4.0,
                                             original_max_position_embeddings=16))),
    # float32 file, plain RoPE (no scaling).
    dict(name="gqa2_f32_norope_scaling", dtype="float32", shard=None, form="v4", prompt_len=48,
         seed=4, arch=dict(vocab_size=256, hidden_size=32, intermediate_size=64,
                           num_hidden_layers=1, num_attention_heads=4, num_key_value_heads=2,
                           tie_word_embeddings=False, max_position_embeddings=128,
                           rope_theta=10000.0, rope_scaling=None)),
    # Head sizes the CUDA backend's paged kernels and its persistent batch-1
    # kernel take (32, 64, 128): the fixtures the gpu golden tests run.
    # head_dim 64 with q_dim (4 x 64) != hidden (128), fp16, HF's v5 config.
    dict(name="hd64_gqa2_fp16", dtype="float16", shard=None, form="v5", prompt_len=96,
         seed=6, arch=dict(vocab_size=512, hidden_size=128, intermediate_size=256,
                           num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                           head_dim=64, tie_word_embeddings=False, max_position_embeddings=512,
                           rope_theta=500000.0,
                           rope_scaling=dict(rope_type="llama3", factor=8.0, low_freq_factor=1.0,
                                             high_freq_factor=4.0,
                                             original_max_position_embeddings=32))),
    # head_dim 128 as Llama 3.1 8B, four query heads per kv head, tied, bf16.
    dict(name="hd128_gqa4_tied_bf16", dtype="bfloat16", shard=None, form="v4", prompt_len=80,
         seed=7, arch=dict(vocab_size=384, hidden_size=256, intermediate_size=256,
                           num_hidden_layers=1, num_attention_heads=4, num_key_value_heads=1,
                           head_dim=128, tie_word_embeddings=True, max_position_embeddings=512,
                           rope_theta=500000.0,
                           rope_scaling=dict(rope_type="llama3", factor=8.0, low_freq_factor=1.0,
                                             high_freq_factor=4.0,
                                             original_max_position_embeddings=64))),
    # The other families (family: the transformers class). Qwen2: q/k/v
    # biases, tied, rope_theta 1e6, head_dim derived (32), seven query heads
    # per kv head as Qwen2.5-7B has.
    dict(name="qwen2_bias_gqa7_tied_bf16", family="qwen2", dtype="bfloat16", shard=None,
         form="v5", prompt_len=80, seed=11,
         arch=dict(vocab_size=512, hidden_size=224, intermediate_size=128,
                   num_hidden_layers=2, num_attention_heads=7, num_key_value_heads=1,
                   tie_word_embeddings=True, max_position_embeddings=512,
                   rope_theta=1000000.0, rope_scaling=None)),
    # Qwen3: per-head q/k RMSNorm, head_dim 128 given apart from hidden (96).
    dict(name="qwen3_qknorm_hd128_bf16", family="qwen3", dtype="bfloat16", shard=None,
         form="v5", prompt_len=80, seed=12,
         arch=dict(vocab_size=512, hidden_size=96, intermediate_size=128,
                   num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
                   head_dim=128, tie_word_embeddings=False, max_position_embeddings=512,
                   rope_theta=1000000.0, rope_scaling=None)),
    # Mistral: Llama's layout, sliding_window null, head_dim 64 explicit, fp16,
    # config.json in the transformers 4 form (rope_theta at the top level).
    dict(name="mistral_hd64_gqa4_fp16", family="mistral", dtype="float16", shard=None,
         form="v4", prompt_len=80, seed=13,
         arch=dict(vocab_size=384, hidden_size=128, intermediate_size=192,
                   num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=1,
                   head_dim=64, tie_word_embeddings=False, max_position_embeddings=512,
                   rope_theta=1000000.0, rope_scaling=None)),
    # The real Llama 3.1 vocabulary (tiny hidden size, tied): perplexity on
    # text through hayate's own tokenizer and the `perplexity` command.
    dict(name="realvocab_tied_bf16", dtype="bfloat16", shard=None, form="v4", prompt_len=72,
         seed=5, real_vocab=True,
         arch=dict(vocab_size=128256, hidden_size=16, intermediate_size=32,
                   num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
                   head_dim=8, tie_word_embeddings=True, max_position_embeddings=512,
                   rope_theta=500000.0, bos_token_id=128000,
                   eos_token_id=[128001, 128008, 128009],
                   rope_scaling=dict(rope_type="llama3", factor=8.0, low_freq_factor=1.0,
                                     high_freq_factor=4.0, original_max_position_embeddings=32))),
]

TORCH_DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}


def log(*args):
    print(*args, flush=True)


def family_classes(family):
    """(config class, model class) of a family."""
    if family == "llama":
        return LlamaConfig, LlamaForCausalLM
    if family == "qwen2":
        from transformers import Qwen2Config, Qwen2ForCausalLM
        return Qwen2Config, Qwen2ForCausalLM
    if family == "qwen3":
        from transformers import Qwen3Config, Qwen3ForCausalLM
        return Qwen3Config, Qwen3ForCausalLM
    if family == "mistral":
        from transformers import MistralConfig, MistralForCausalLM
        return MistralConfig, MistralForCausalLM
    raise ValueError(family)


def make_config(arch, family="llama"):
    """The family's config from our dict, in whichever rope form this transformers takes."""
    config_cls, _ = family_classes(family)
    arch = dict(arch)
    theta = arch.pop("rope_theta")
    scaling = arch.pop("rope_scaling")
    kwargs = dict(arch, rms_norm_eps=1e-5 if family in ("llama", "mistral") else 1e-6,
                  hidden_act="silu", initializer_range=0.02)
    if family == "llama":
        kwargs.update(attention_bias=False, mlp_bias=False)
    if family == "qwen3":
        kwargs.update(attention_bias=False)
    if family in ("qwen2", "qwen3"):
        kwargs.update(use_sliding_window=False)
    if family == "mistral":
        kwargs.update(sliding_window=None)
    kwargs.setdefault("bos_token_id", None)
    kwargs.setdefault("eos_token_id", None)
    kwargs.setdefault("pad_token_id", None)
    params = inspect.signature(config_cls.__init__).parameters
    if "rope_parameters" in params:
        rp = {"rope_type": "default", "rope_theta": theta}
        if scaling:
            rp = dict(scaling, rope_theta=theta)
        kwargs["rope_parameters"] = rp
    else:
        kwargs["rope_theta"] = theta
        kwargs["rope_scaling"] = scaling
    return config_cls(**kwargs)


def init_weights(model, gen):
    """Weights that give O(1) activations and spread logits (HF's 0.02 init
    gives near-ties, which would make greedy ids fragile): matrices with std
    1/sqrt(in), embeddings std 1 (H^-1/4 when tied, so the logits stay O(1)),
    norm weights 1 + 0.1 N(0, 1) so that they matter."""
    hidden = model.config.hidden_size
    tied = model.config.tie_word_embeddings
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith(".bias"):  # Qwen2's q/k/v biases
                p.copy_(0.3 * torch.randn(p.shape, generator=gen))
            elif p.dim() == 1:
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=gen))
            elif "embed_tokens" in name:
                std = hidden ** -0.25 if tied else 1.0
                p.copy_(std * torch.randn(p.shape, generator=gen))
            else:
                p.copy_(torch.randn(p.shape, generator=gen) / math.sqrt(p.shape[1]))


def rewrite_config_v4(path, dtype):
    """config.json as Llama 3.1 downloads have it (transformers 4.x form)."""
    with open(path) as f:
        cfg = json.load(f)
    rp = cfg.pop("rope_parameters", None)
    if rp is not None:
        rp = dict(rp)
        cfg["rope_theta"] = rp.pop("rope_theta", cfg.get("rope_theta", 10000.0))
        cfg["rope_scaling"] = None if rp.get("rope_type", "default") == "default" else rp
    if cfg.get("rope_scaling"):
        cfg["rope_scaling"].pop("type", None)
    cfg.pop("dtype", None)
    cfg["torch_dtype"] = dtype
    for key in ("bos_token_id", "eos_token_id", "pad_token_id"):
        if cfg.get(key, 0) is None:
            del cfg[key]
    with open(path, "w") as f:
        json.dump(cfg, f, indent=2, sort_keys=True)


def load_fp32(path, model_cls=LlamaForCausalLM):
    kw = dict(attn_implementation="eager")
    try:
        m = model_cls.from_pretrained(path, dtype=torch.float32, **kw)
    except TypeError:
        m = model_cls.from_pretrained(path, torch_dtype=torch.float32, **kw)
    m.eval()
    return m


@torch.no_grad()
def logits_of(model, ids):
    out = model(input_ids=torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long))
    return out.logits[0].float()  # [n, vocab]


@torch.no_grad()
def greedy_manual(model, prompt, n):
    """Greedy by recomputing the whole sequence each step; also the smallest
    gap between the best and second-best logit over the steps."""
    seq = list(prompt)
    margin = float("inf")
    for _ in range(n):
        last = logits_of(model, seq)[-1]
        top2 = torch.topk(last, 2)
        margin = min(margin, float(top2.values[0] - top2.values[1]))
        seq.append(int(torch.argmax(last)))
    return seq[len(prompt):], margin


@torch.no_grad()
def greedy_hf(model, prompt, n):
    """HF generate, greedy, eos disabled; None (and a traceback) if it fails."""
    try:
        from transformers import GenerationConfig
        gc = GenerationConfig(max_new_tokens=n, do_sample=False, eos_token_id=None,
                              pad_token_id=0, bos_token_id=None)
        ids = torch.tensor([prompt])
        out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids),
                             generation_config=gc)
        return [int(x) for x in out[0, len(prompt):]]
    except Exception:
        traceback.print_exc()
        return None


@torch.no_grad()
def perplexity(model, ids, context):
    """Mean NLL (float64 log-softmax of HF's fp32 logits) with HF's strided
    windows; context None = the whole sequence in one window."""
    n = len(ids)
    if context is None or context >= n:
        context = n
    stride = max(context // 2, 1) if context < n else n
    total, count, prev_end, windows = 0.0, 0, 0, 0
    for begin in range(0, n, stride):
        end = min(begin + context, n)
        lg = logits_of(model, ids[begin:end]).double()
        lse = torch.logsumexp(lg, dim=-1)
        for k in range(max(prev_end, begin + 1), end):  # global index of the scored token
            j = k - begin - 1  # the window row that predicts token k
            total += float(lse[j] - lg[j, ids[k]])
            count += 1
        windows += 1
        prev_end = end
        if end == n:
            break
    mean = total / count
    return dict(context=context, stride=stride, windows=windows, count=count, nll_mean=mean,
                ppl=math.exp(mean))


def tokenize(tokenizer_json, text):
    try:
        from tokenizers import Tokenizer
        tok = Tokenizer.from_file(tokenizer_json)
        return tok.encode(text, add_special_tokens=True).ids, "tokenizers"
    except ImportError:
        from transformers import PreTrainedTokenizerFast
        tok = PreTrainedTokenizerFast(tokenizer_file=tokenizer_json)
        return tok(text, add_special_tokens=True)["input_ids"], "transformers"


def make_one(spec, out_root, text_ids, attempt=0):
    name = spec["name"]
    log(f"== {name} (attempt {attempt})")
    out = os.path.join(out_root, name)
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    seed = spec["seed"] + 100 * attempt
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(1000 + seed)
    family = spec.get("family", "llama")
    _, model_cls = family_classes(family)
    config = make_config(spec["arch"], family)
    model = model_cls(config)
    init_weights(model, gen)
    model = model.to(TORCH_DTYPES[spec["dtype"]])
    if spec.get("real_vocab"):
        from transformers import GenerationConfig
        model.generation_config = GenerationConfig(bos_token_id=128000,
                                                   eos_token_id=[128001, 128008, 128009])
    save_kw = {}
    if spec["shard"]:
        save_kw["max_shard_size"] = spec["shard"]
    model.save_pretrained(out, **save_kw)
    cfg_path = os.path.join(out, "config.json")
    with open(cfg_path) as f:
        written = f.read()
    form = spec["form"]
    if form == "v4":
        rewrite_config_v4(cfg_path, spec["dtype"])
    log("  files:", sorted(os.listdir(out)))

    # Self-check: the reload from disk equals the in-memory model upcast,
    # so the config round trip (rope form, tying) lost nothing.
    # A fresh fp32 model given the stored weights upcast (not model.float():
    # .to(bf16) also rounded the rotary inv_freq buffer, which a reload
    # recomputes in fp32).
    mem = model_cls(config).eval()
    missing, unexpected = mem.load_state_dict(
        {k: v.float() for k, v in model.state_dict().items()}, strict=False)
    assert not unexpected and all("rotary" in k for k in missing), (missing, unexpected)
    V = config.vocab_size
    g = torch.Generator().manual_seed(seed)
    prompt = [int(x) for x in torch.randint(0, V, (spec["prompt_len"],), generator=g)]
    if spec.get("real_vocab"):
        prompt = text_ids[: spec["prompt_len"]]  # real text, BOS first
    lg_mem = logits_of(mem, prompt)

    def reload():
        r = load_fp32(out, model_cls)
        lg = logits_of(r, prompt)
        return r, lg, float((lg - lg_mem).norm() / lg_mem.norm())

    try:
        ref, lg, reload_err = reload()
    except Exception:
        traceback.print_exc()
        ref, lg, reload_err = None, None, float("inf")
    if reload_err >= 1e-6 and form == "v4":
        log(f"  v4 config form did not round-trip (err {reload_err}); keeping HF's own form")
        with open(cfg_path, "w") as f:
            f.write(written)
        form = "v5-fallback"
        ref, lg, reload_err = reload()
    log(f"  reload vs in-memory relative error {reload_err:.3e}")
    assert reload_err < 1e-6, "the saved checkpoint does not reload to the same model"
    log("  reloaded rope:", getattr(ref.config, "rope_parameters", None) or
        getattr(ref.config, "rope_scaling", None))

    greedy, margin = greedy_manual(ref, prompt, NEW_TOKENS)
    if margin < 2e-3 and attempt < 4:
        log(f"  greedy margin {margin:.2e} too close to a tie; new weights")
        return make_one(spec, out_root, text_ids, attempt + 1)
    hf_ids = greedy_hf(ref, prompt, NEW_TOKENS)
    log(f"  greedy min top1-top2 margin {margin:.4f}; HF generate == manual: {hf_ids == greedy}")
    if hf_ids != greedy:
        log("  WARNING: HF generate and the manual greedy loop differ", hf_ids, greedy)

    ids = [t % V for t in text_ids]
    ppl_full = perplexity(ref, ids, None)
    ppl_win = perplexity(ref, ids, PPL_WINDOW)
    with torch.no_grad():
        t = torch.tensor([ids])
        hf_loss = float(ref(input_ids=t, labels=t).loss)
    log(f"  ppl full {ppl_full['ppl']:.6f} (HF loss {hf_loss:.6f}, ours {ppl_full['nll_mean']:.6f}),"
        f" windowed {ppl_win['ppl']:.6f} over {ppl_win['windows']} windows")

    if spec.get("real_vocab"):
        positions = [0, len(prompt) - 1]
    else:
        positions = list(range(len(prompt)))
    rows = lg[positions].contiguous().numpy().astype("<f4")
    rows.tofile(os.path.join(out, "logits.bin"))
    golden = dict(
        name=name, family=family, architecture=model_cls.__name__, stored_dtype=spec["dtype"], config_form=form, weight_seed=seed,
        sharded=bool(spec["shard"]), vocab_size=V,
        versions=dict(torch=torch.__version__, transformers=transformers.__version__,
                      python=sys.version.split()[0]),
        prompt_ids=prompt, logits_positions=positions, logits_file="logits.bin",
        greedy_new_tokens=NEW_TOKENS, greedy_ids=greedy, hf_generate_ids=hf_ids,
        greedy_min_margin=margin,
        perplexity=dict(text_ids_mod_vocab=not spec.get("real_vocab", False),
                        ids=ids, full=ppl_full, windowed=ppl_win, hf_loss_full=hf_loss),
        reload_rel_err=reload_err,
    )
    with open(os.path.join(out, "golden.json"), "w") as f:
        json.dump(golden, f, indent=1)
    size = sum(os.path.getsize(os.path.join(out, x)) for x in os.listdir(out))
    log(f"  {size / 1e6:.2f} MB")
    return size


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tokenizer", required=True, help="Llama 3.1 tokenizer.json")
    ap.add_argument("--text", required=True, help="the Japanese+English perplexity text")
    ap.add_argument("--out", required=True)
    ap.add_argument("--only", default="", help="comma-separated checkpoint names")
    args = ap.parse_args()

    torch.set_num_threads(min(16, os.cpu_count() or 1))
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    log(f"python {sys.version.split()[0]}, torch {torch.__version__}, "
        f"transformers {transformers.__version__}; running on CPU in float32")

    with open(args.text, encoding="utf-8") as f:
        text = f.read()
    text_ids, via = tokenize(args.tokenizer, text)
    log(f"text: {len(text.encode())} bytes -> {len(text_ids)} ids (with BOS) via {via}")
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "text_ids.json"), "w") as f:
        json.dump(dict(tokenizer_via=via, ids=text_ids), f)

    only = set(filter(None, args.only.split(",")))
    total, failed = 0, []
    for spec in CHECKPOINTS:
        if only and spec["name"] not in only:
            continue
        try:
            total += make_one(spec, args.out, text_ids)
        except Exception:  # keep going: one broken case must not lose the others
            traceback.print_exc()
            failed.append(spec["name"])
    log(f"total {total / 1e6:.2f} MB; failed: {failed or 'none'}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
