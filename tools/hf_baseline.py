#!/usr/bin/env python3
"""The article's baselines: Hugging Face transformers `generate`, eager and
with torch.compile, on the bench workloads, written in hayate's bench JSON
schema (docs/bench_schema.md) so `hayate report` puts them next to hayate.

The code path is the article's (after huggingface-llama-recipes'
torch_compile.py): fp16 weights on the GPU, generation_config.max_length =
128, greedy `model.generate(**inputs, do_sample=False)`; for `--engine
compile`, `model.forward = torch.compile(model.forward, mode="reduce-overhead",
fullgraph=True)` and `generation_config.cache_implementation = "static"`.
EOS is disabled so every engine makes the same number of tokens (117 for the
11-token prompt). Each request is timed with torch.cuda.Event around the
generate() call; tokenization happens before, outside the timed region.

Random weights (`--dummy NAME --config FILE`) are made directly on the GPU
with transformers' own initialisation from `--seed`; they are not hayate's
values, and the timing does not depend on them (EOS is disabled, shapes are
identical). `--model DIR` loads a checkpoint instead.

Robust by design: progress lines are flushed, each trial's JSON is rewritten
after every run (atomically), SIGTERM (from `timeout`) stops the current
trial and still writes what ran, `--deadline-s` skips runs that would not
fit, and a failing trial does not stop the next one.

Example (the GPU machine, no internet):
  hayate bench --print-config dummy:llama-3.1-8b > /tmp/8b.json
  python3 tools/hf_baseline.py --dummy llama-3.1-8b --config /tmp/8b.json \\
      --engine compile --trials same,varied --out-dir results/
"""
import argparse
import json
import os
import platform
import signal
import socket
import statistics
import subprocess
import sys
import time
import traceback

T0 = time.perf_counter()  # process start, as near as Python gets: imports below count
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCHEMA = "hayate-bench"
SCHEMA_VERSION = 1


def log(*parts):
    print("hf_baseline:", *parts, flush=True)


def since_start():
    return time.perf_counter() - T0


class Stop(Exception):
    """Raised by the SIGTERM handler: finish the current trial's JSON and exit."""


def on_sigterm(signum, frame):
    raise Stop(f"stopped by signal {signum} after {since_start():.1f} s")


# ---- workloads (the same rules as src/bench/workload.cpp) ------------------

def split_prompt_lines(text):
    out = []
    for line in text.split("\n"):
        if line.endswith("\r"):
            line = line[:-1]
        if line.strip(" \t"):
            out.append(line)
    return out


def load_prompts(spec):
    if spec in ("same", "varied"):
        path = os.path.join(REPO, "bench", "prompts", spec + ".txt")
        with open(path, encoding="utf-8") as f:
            return spec, "builtin:" + spec, split_prompt_lines(f.read())
    with open(spec, encoding="utf-8") as f:
        text = f.read()
    stripped = text.lstrip()
    if stripped.startswith("[") or stripped.startswith("{"):
        j = json.loads(text)
        if isinstance(j, dict):
            j = j["prompts"]
        if not isinstance(j, list) or not all(isinstance(p, str) and p for p in j):
            raise ValueError(f"{spec}: expected a JSON array of non-empty strings")
        return "file", spec, j
    return "file", spec, split_prompt_lines(text)


def default_runs(trial, prompts):
    return 10 if trial == "same" else len(prompts)


# ---- statistics (the same definitions as src/bench/stats.cpp) --------------

def summarize(runs, summary_from_run):
    ok = [r for r in runs if not r.get("error")]
    secs = [r["seconds"] for r in ok]
    s = {"runs_ok": len(ok)}
    keys = ["mean_s", "median_s", "min_s", "max_s", "first_s", "mean_all_s",
            "max_over_median_after_first", "decode_ms_per_token", "prefill_ms",
            "tokens_per_s", "achieved_gbs", "bandwidth_share", "floor_ms_per_token",
            "floor_request_s"]
    for k in keys:
        s[k] = None
    if not secs:
        return s
    if len(secs) >= summary_from_run:
        s["mean_s"] = statistics.fmean(secs[summary_from_run - 1:])
    s["median_s"] = statistics.median(secs)
    s["min_s"], s["max_s"], s["first_s"] = min(secs), max(secs), secs[0]
    s["mean_all_s"] = statistics.fmean(secs)
    if len(secs) >= 2:
        med = statistics.median(secs[1:])
        if med > 0:
            s["max_over_median_after_first"] = max(secs[1:]) / med
    s["tokens_per_s"] = statistics.median([r["new_tokens"] / r["seconds"] for r in ok
                                           if r["seconds"] > 0] or [0.0])
    return s


# ---- environment -------------------------------------------------------------

def git_commit():
    try:
        out = subprocess.run(["git", "-C", REPO, "rev-parse", "HEAD"], capture_output=True,
                             text=True, timeout=10)
        if out.returncode == 0 and out.stdout.strip():
            return out.stdout.strip()
    except Exception:
        pass
    return "unknown"


def nvidia_driver():
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20)
        if out.returncode == 0:
            return out.stdout.strip().splitlines()[0].strip()
    except Exception:
        pass
    return None


def system_info(torch, transformers):
    props = torch.cuda.get_device_properties(0)
    return {
        "device": torch.cuda.get_device_name(0),
        "driver": nvidia_driver(),
        "cuda": torch.version.cuda,
        "sm_count": props.multi_processor_count,
        "memory_gb": props.total_memory / 1e9,
        "host": socket.gethostname(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "python": platform.python_version(),
    }


# ---- tokenizer and model ----------------------------------------------------

class _RawTokenizer:
    """Last resort: the `tokenizers` library and jinja2 (both transformers
    dependencies), with the call signature this script uses."""

    def __init__(self, directory, cfg):
        from tokenizers import Tokenizer
        self.tok = Tokenizer.from_file(os.path.join(directory, "tokenizer.json"))
        self.cfg = cfg

    def __call__(self, text, add_special_tokens=True, return_tensors="pt"):
        import torch
        ids = self.tok.encode(text, add_special_tokens=add_special_tokens).ids
        return {"input_ids": torch.tensor([ids]), "attention_mask": torch.ones(1, len(ids),
                                                                               dtype=torch.long)}

    def apply_chat_template(self, messages, tokenize=False, add_generation_prompt=True):
        import jinja2
        def token(v):
            return v.get("content") if isinstance(v, dict) else v
        env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True)
        return env.from_string(self.cfg["chat_template"]).render(
            messages=messages, add_generation_prompt=add_generation_prompt,
            bos_token=token(self.cfg.get("bos_token")) or "",
            eos_token=token(self.cfg.get("eos_token")) or "")


def load_tokenizer(directory):
    """tokenizer.json + tokenizer_config.json (chat template) from `directory`."""
    try:
        from transformers import AutoTokenizer
        return AutoTokenizer.from_pretrained(directory, local_files_only=True)
    except Exception as e:  # another transformers layout: build it from the file directly
        log(f"AutoTokenizer failed ({type(e).__name__}: {e}); trying PreTrainedTokenizerFast")
    cfg = {}
    cfg_path = os.path.join(directory, "tokenizer_config.json")
    if os.path.exists(cfg_path):
        with open(cfg_path, encoding="utf-8") as f:
            cfg = json.load(f)

    def token(v):
        return v.get("content") if isinstance(v, dict) else v

    try:
        from transformers import PreTrainedTokenizerFast
        tok = PreTrainedTokenizerFast(tokenizer_file=os.path.join(directory, "tokenizer.json"),
                                      bos_token=token(cfg.get("bos_token")),
                                      eos_token=token(cfg.get("eos_token")))
        if cfg.get("chat_template"):
            tok.chat_template = cfg["chat_template"]
        return tok
    except Exception as e:
        log(f"PreTrainedTokenizerFast failed ({type(e).__name__}: {e}); using tokenizers directly")
    return _RawTokenizer(directory, cfg)


def prompt_ids(tok, prompt, chat, device):
    """As hayate's bench: plain text with special tokens (BOS), or the chat
    template rendered to text and encoded without adding special tokens."""
    if chat:
        text = tok.apply_chat_template([{"role": "user", "content": prompt}], tokenize=False,
                                       add_generation_prompt=True)
        enc = tok(text, add_special_tokens=False, return_tensors="pt")
    else:
        enc = tok(prompt, return_tensors="pt")
    return {"input_ids": enc["input_ids"].to(device),
            "attention_mask": enc["attention_mask"].to(device)}


def from_config(auto_cls, cfg, torch_dtype):
    try:
        return auto_cls.from_config(cfg, dtype=torch_dtype)
    except TypeError:  # transformers before `dtype` replaced `torch_dtype`
        return auto_cls.from_config(cfg, torch_dtype=torch_dtype)


def from_pretrained(auto_cls, path, torch_dtype):
    kw = dict(device_map="cuda", local_files_only=True)
    try:
        return auto_cls.from_pretrained(path, dtype=torch_dtype, **kw)
    except TypeError:
        return auto_cls.from_pretrained(path, torch_dtype=torch_dtype, **kw)


def build_model(args, torch, torch_dtype):
    from transformers import AutoConfig, AutoModelForCausalLM
    if args.model:
        return from_pretrained(AutoModelForCausalLM, args.model, torch_dtype)
    with open(args.config, encoding="utf-8") as f:
        d = json.load(f)
    d.pop("torch_dtype", None)
    d.pop("dtype", None)
    model_type = d.pop("model_type", "llama")
    try:
        cfg = AutoConfig.for_model(model_type, **d)
    except Exception as e:
        log(f"AutoConfig.for_model failed ({type(e).__name__}: {e}); using LlamaConfig")
        from transformers import LlamaConfig
        cfg = LlamaConfig(**d)
    torch.manual_seed(args.seed)
    # Parameters are created and initialised on the GPU: no 16 GB host copy.
    with torch.device("cuda"):
        model = from_config(AutoModelForCausalLM, cfg, torch_dtype)
    # Whatever the transformers version did with the dtype/device request,
    # time the model the article timed: fp16 (or --dtype) on the GPU.
    first = next(model.parameters())
    if first.device.type != "cuda" or first.dtype != torch_dtype:
        log(f"moving the model from {first.device}/{first.dtype} to cuda/{torch_dtype}")
        model = model.to(device="cuda", dtype=torch_dtype)
    return model


# ---- one trial -----------------------------------------------------------------

def write_json(path, doc):
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(doc, f, ensure_ascii=False, indent=2)
        f.write("\n")
    os.replace(tmp, path)


def run_trial(args, ctx, trial_spec, out_path):
    torch = ctx["torch"]
    model, tok = ctx["model"], ctx["tok"]
    trial, source, prompts = load_prompts(trial_spec)
    runs_n = args.runs if args.runs > 0 else default_runs(trial, prompts)
    notes = list(ctx["notes"])
    doc = {
        "schema": SCHEMA, "schema_version": SCHEMA_VERSION,
        "engine": "hf-" + args.engine,
        "engine_version": ctx["transformers"].__version__,
        "backend": "torch",
        "commit": args.commit or git_commit(),
        "created_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "system": ctx["system"],
        "model": {"spec": args.model or ("dummy:" + args.dummy), "dtype": args.dtype,
                  "seed": args.seed, "weight_bytes_per_token": None},
        "workload": {
            "trial": trial, "source": source, "prompts": prompts, "chat_template": args.chat,
            "max_length": None if args.max_new_tokens > 0 else args.max_length,
            "max_new_tokens": args.max_new_tokens if args.max_new_tokens > 0 else None,
            "ignore_eos": True, "warmup": 0, "runs": runs_n, "summary_from_run": 3,
            "timer": "torch.cuda.Event",
            "timed_region": "one model.generate() call: input ids on the GPU in, output ids out "
                            "(prefill + decode + sampling); tokenization excluded"},
        "startup": {"tokenizer_s": ctx["tokenizer_s"], "load_s": ctx["load_s"],
                    "read_bandwidth_gbs": None, "first_token_s": None,
                    "first_request_done_s": ctx.get("first_request_done_s")},
        "runs": [],
        "summary": summarize([], 3),
        "notes": notes,
    }

    def flush():
        doc["summary"] = summarize(doc["runs"], 3)
        doc["startup"]["first_request_done_s"] = ctx.get("first_request_done_s")
        write_json(out_path, doc)

    flush()
    log(f"trial {trial} ({len(prompts)} prompts, {runs_n} runs) -> {out_path}")
    failures_in_a_row = 0
    try:
        for i in range(runs_n):
            pi = i % len(prompts)
            done = [r["wall_s"] for r in doc["runs"] if r.get("wall_s")]
            estimate = statistics.median(done) if done else 0.0
            if args.deadline_s > 0 and since_start() + estimate > args.deadline_s:
                notes.append(f"runs {i + 1}..{runs_n} skipped: the deadline of {args.deadline_s:.0f} s "
                             f"since start would pass (at {since_start():.0f} s, a run takes "
                             f"~{estimate:.1f} s)")
                log(notes[-1])
                break
            t = time.perf_counter()
            inputs = prompt_ids(tok, prompts[pi], args.chat, "cuda")
            tokenize_ms = (time.perf_counter() - t) * 1e3
            n_prompt = int(inputs["input_ids"].shape[1])
            rec = {"run": i + 1, "prompt_index": pi, "prompt_tokens": n_prompt, "new_tokens": 0,
                   "seconds": None, "tokens_per_s": None, "prefill_ms": None,
                   "decode_ms_per_token": None, "tokenize_ms": tokenize_ms, "finish": None,
                   "output_ids": [], "error": None, "wall_s": None}
            gen_kw = {"do_sample": False}
            if args.max_new_tokens > 0:
                gen_kw["max_new_tokens"] = args.max_new_tokens
            try:
                start = torch.cuda.Event(enable_timing=True)
                end = torch.cuda.Event(enable_timing=True)
                w0 = time.perf_counter()
                start.record()
                out = model.generate(**inputs, **gen_kw)  # generate() runs under no_grad
                end.record()
                torch.cuda.synchronize()
                rec["wall_s"] = time.perf_counter() - w0
                rec["seconds"] = start.elapsed_time(end) * 1e-3
                new = out[0, n_prompt:].tolist()
                rec["new_tokens"] = len(new)
                rec["tokens_per_s"] = len(new) / rec["seconds"] if rec["seconds"] > 0 else None
                rec["finish"] = "length"
                want = args.max_new_tokens if args.max_new_tokens > 0 else args.max_length - n_prompt
                if len(new) != want:
                    notes.append(f"run {i + 1} made {len(new)} new tokens, expected {want}")
                    log(notes[-1])
                if not args.no_ids:
                    rec["output_ids"] = new
                failures_in_a_row = 0
                if "first_request_done_s" not in ctx:
                    ctx["first_request_done_s"] = since_start()
                log(f"{trial} run {i + 1}/{runs_n}: {rec['seconds']:.3f} s, {n_prompt} prompt "
                    f"tokens, {len(new)} new tokens (at {since_start():.0f} s)")
            except Stop:
                raise
            except Exception as e:
                rec["error"] = f"{type(e).__name__}: {e}".splitlines()[0][:500]
                failures_in_a_row += 1
                log(f"{trial} run {i + 1}/{runs_n} failed: {rec['error']}")
                traceback.print_exc()
                sys.stderr.flush()
            doc["runs"].append(rec)
            flush()
            if failures_in_a_row >= 2:
                notes.append(f"runs {i + 2}..{runs_n} skipped after two failures in a row")
                log(notes[-1])
                break
    except Stop as e:
        notes.append(f"{e} during run {len(doc['runs']) + 1}; the runs before it are kept")
        log(notes[-1])
        flush()
        raise
    flush()
    s = doc["summary"]
    log(f"trial {trial}: mean of runs 3..{runs_n} = "
        f"{'-' if s['mean_s'] is None else format(s['mean_s'], '.3f')} s, "
        f"median {'-' if s['median_s'] is None else format(s['median_s'], '.3f')} s")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--dummy", help="dummy architecture name (e.g. llama-3.1-8b); needs --config")
    src.add_argument("--model", help="checkpoint directory")
    p.add_argument("--config", help="config.json of the dummy (hayate bench --print-config NAME)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--engine", choices=["eager", "compile"], required=True)
    p.add_argument("--compile-via", choices=["article", "transformers"], default="article",
                   help="article: model.forward = torch.compile(...); transformers: let "
                        "generate() compile the static-cache decode step itself")
    p.add_argument("--trials", default="same", help="comma list of same, varied or prompt files")
    p.add_argument("--runs", type=int, default=0, help="default: 10 for same, one per prompt else")
    p.add_argument("--max-length", type=int, default=128)
    p.add_argument("--max-new-tokens", type=int, default=0, help="overrides --max-length")
    p.add_argument("--chat", action="store_true", help="wrap prompts in the chat template")
    p.add_argument("--dtype", choices=["float16", "bfloat16"], default="float16")
    p.add_argument("--tokenizer", default=os.path.join(REPO, "assets", "llama3_1"))
    p.add_argument("--out-dir", default=".", help="writes hf-<engine>-<trial>.json here")
    p.add_argument("--commit", default="", help="hayate commit to record (default: git, else unknown)")
    p.add_argument("--deadline-s", type=float, default=0.0,
                   help="skip runs that would end later than this many seconds after start")
    p.add_argument("--no-auto-compile", action="store_true",
                   help="set generation_config.disable_compile (default: transformers decides)")
    p.add_argument("--no-ids", action="store_true", help="leave output ids out of the JSON")
    p.add_argument("--no-graph-partition", action="store_true",
                   help="torch._inductor.config.graph_partition = False (the article's line "
                        "segfaulted inside inductor's partitioned CUDA graphs on torch 2.11)")
    args = p.parse_args()
    if args.dummy and not args.config:
        p.error("--dummy needs --config (write it with: hayate bench --print-config dummy:NAME)")
    if args.max_new_tokens <= 0 and args.max_length < 2:
        p.error("--max-length must be at least 2")
    signal.signal(signal.SIGTERM, on_sigterm)
    os.makedirs(args.out_dir, exist_ok=True)
    trials = [t for t in args.trials.split(",") if t]
    for t in trials:  # bad prompt files fail before the model is made
        load_prompts(t)

    log(f"importing torch and transformers (at {since_start():.1f} s)")
    import torch
    import transformers
    if not torch.cuda.is_available():
        log("error: no CUDA GPU visible to torch")
        return 2
    torch_dtype = {"float16": torch.float16, "bfloat16": torch.bfloat16}[args.dtype]
    ctx = {"torch": torch, "transformers": transformers, "notes": []}
    ctx["system"] = system_info(torch, transformers)
    log(f"torch {torch.__version__}, transformers {transformers.__version__}, "
        f"{ctx['system']['device']} (at {since_start():.1f} s)")

    t = time.perf_counter()
    ctx["tok"] = load_tokenizer(args.tokenizer)
    ctx["tokenizer_s"] = time.perf_counter() - t
    t = time.perf_counter()
    model = build_model(args, torch, torch_dtype)
    model.eval()
    torch.cuda.synchronize()
    ctx["load_s"] = time.perf_counter() - t
    log(f"model ready in {ctx['load_s']:.1f} s ({sum(x.numel() for x in model.parameters()) / 1e9:.2f}"
        f"B parameters)")

    gc = model.generation_config
    gc.eos_token_id = None      # EOS disabled: every request runs to max_length
    gc.pad_token_id = None
    gc.do_sample = False
    for k in ("temperature", "top_p", "top_k"):
        if hasattr(gc, k):
            setattr(gc, k, None)
    if args.max_new_tokens <= 0:
        gc.max_length = args.max_length  # also the static cache's length, as in the article
    if args.no_auto_compile:
        gc.disable_compile = True
        ctx["notes"].append("generation_config.disable_compile = True")
    if args.engine == "compile" and args.compile_via == "transformers":
        # transformers 5's own path for the same thing: a static cache makes
        # generate() compile the decode step (fullgraph, reduce-overhead).
        gc.cache_implementation = "static"
        try:
            from transformers import CompileConfig
            gc.compile_config = CompileConfig(fullgraph=True, mode="reduce-overhead")
        except ImportError:
            pass
        ctx["notes"].append("compiled by transformers' generate(): cache_implementation='static', "
                            "CompileConfig(fullgraph=True, mode='reduce-overhead')")
    elif args.engine == "compile":
        # The article's line. transformers 5 would also auto-compile the
        # static-cache decode step on top of it (two nested cudagraph trees,
        # which fail with "accessing tensor output of CUDAGraphs that has been
        # overwritten"): switch that off so this is the article's code path,
        # and mark each forward as a new cudagraph step, as torch asks.
        if args.no_graph_partition:
            import torch._inductor.config as inductor_config
            inductor_config.graph_partition = False
            ctx["notes"].append("torch._inductor.config.graph_partition = False")
        compiled = torch.compile(model.forward, mode="reduce-overhead", fullgraph=True)

        def forward(*a, **kw):
            torch.compiler.cudagraph_mark_step_begin()
            return compiled(*a, **kw)

        model.forward = forward
        gc.cache_implementation = "static"
        gc.disable_compile = True
        ctx["notes"].append("generation_config.disable_compile = True; "
                            "torch.compiler.cudagraph_mark_step_begin() before each forward")
        dyn = torch._dynamo.config
        limit = getattr(dyn, "recompile_limit", getattr(dyn, "cache_size_limit", None))
        ctx["notes"].append(f"torch.compile(model.forward, mode='reduce-overhead', fullgraph=True), "
                            f"cache_implementation='static', dynamo recompile limit {limit}")
    ctx["model"] = model

    status = 0
    for t_spec in trials:
        name = load_prompts(t_spec)[0] if t_spec in ("same", "varied") else \
            os.path.splitext(os.path.basename(t_spec))[0]
        out_path = os.path.join(args.out_dir, f"hf-{args.engine}-{name}.json")
        try:
            run_trial(args, ctx, t_spec, out_path)
        except Stop:
            return 124
        except Exception as e:
            status = 1
            log(f"trial {t_spec} failed: {type(e).__name__}: {e}")
            traceback.print_exc()
            sys.stderr.flush()
    log(f"done at {since_start():.1f} s")
    return status


if __name__ == "__main__":
    sys.exit(main())
