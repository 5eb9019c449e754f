#!/usr/bin/env python3
"""Per-run request times per engine, one panel per trial, like the article's
figure: reads hayate bench JSON results (docs/bench_schema.md) from hayate and
tools/hf_baseline.py and writes a PNG. `hayate report --png FILE` runs it.
Load results (bench --mode throughput or serve) get a chart of their own:
output tok/s, TTFT and TPOT (median and p99) per result.

  python3 tools/plot_report.py --out chart.png results/*.json
"""
import argparse
import json
import sys

COLORS = {"hayate": "#d62728", "hf-eager": "#7f7f7f", "hf-compile": "#1f77b4"}


LOAD_SCHEMAS = ("hayate-bench-throughput", "hayate-bench-serve")


def load(path):
    with open(path, encoding="utf-8") as f:
        j = json.load(f)
    if j.get("schema") not in ("hayate-bench",) + LOAD_SCHEMAS:
        raise ValueError(f"{path}: not a hayate-bench result")
    j["_path"] = path
    return j


def load_figures(plt, results, out):
    """Bars per result: output tok/s, TTFT and TPOT (p50 and p99, ms)."""
    def pick(r, key):
        s = r.get("summary", {})
        if r["schema"] == "hayate-bench-serve":
            st = s.get(key + "_ms") or {}
            return st.get("median"), st.get("p99")
        st = s.get("ttft_s" if key == "ttft" else key + "_ms") or {}
        scale = 1000.0 if key == "ttft" else 1.0
        return tuple(None if st.get(k) is None else st[k] * scale for k in ("p50", "p99"))

    labels = [f"{r.get('engine') or '?'} ({r['_path'].rsplit('/', 1)[-1]})" for r in results]
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.5), squeeze=False)
    xs = range(len(results))
    out_tps = [r["summary"].get("output_throughput", r["summary"].get("output_tokens_per_s", 0)) or 0
               for r in results]
    axes[0][0].bar(xs, out_tps, color="#d62728")
    axes[0][0].set_title("output tokens/s")
    for ax, key, title in ((axes[0][1], "ttft", "TTFT (ms)"), (axes[0][2], "tpot", "TPOT (ms)")):
        p50 = [pick(r, key)[0] or 0 for r in results]
        p99 = [pick(r, key)[1] or 0 for r in results]
        ax.bar([x - 0.2 for x in xs], p50, width=0.4, label="p50", color="#1f77b4")
        ax.bar([x + 0.2 for x in xs], p99, width=0.4, label="p99", color="#ff7f0e")
        ax.set_title(title)
        ax.legend(fontsize=8)
    for ax in axes[0]:
        ax.set_xticks(list(xs))
        ax.set_xticklabels(labels, rotation=20, ha="right", fontsize=8)
        ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("files", nargs="+")
    p.add_argument("--out", required=True, help="PNG to write")
    p.add_argument("--log", choices=["auto", "on", "off"], default="auto",
                   help="log-scale seconds (auto: when the slowest run is 20x the fastest)")
    args = p.parse_args()
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("plot_report.py: matplotlib is not installed for this python", file=sys.stderr)
        return 3

    results = [load(f) for f in args.files]
    loads = [r for r in results if r["schema"] in LOAD_SCHEMAS]
    if loads and len(loads) != len(results):
        print("plot_report.py: give either article results or load results (throughput, serve) "
              "for one chart", file=sys.stderr)
        return 2
    if loads:
        return load_figures(plt, loads, args.out)
    trials = []
    for r in results:
        if r["workload"]["trial"] not in trials:
            trials.append(r["workload"]["trial"])

    fig, axes = plt.subplots(1, len(trials), figsize=(6.5 * len(trials), 4.5), squeeze=False)
    for ax, trial in zip(axes[0], trials):
        rows = [r for r in results if r["workload"]["trial"] == trial]
        n_runs = max(max((run["run"] for run in r["runs"]), default=0) for r in rows)
        width = 0.8 / max(len(rows), 1)
        all_secs = []
        for k, r in enumerate(rows):
            runs = [run for run in r["runs"] if run.get("seconds") is not None and not run.get("error")]
            xs = [run["run"] + (k - (len(rows) - 1) / 2) * width for run in runs]
            ys = [run["seconds"] for run in runs]
            all_secs += ys
            mean = r.get("summary", {}).get("mean_s")
            label = r["engine"] + (f" (mean of runs 3..N {mean:.3f} s)" if mean is not None else "")
            ax.bar(xs, ys, width=width, label=label, color=COLORS.get(r["engine"]))
            failed = [run["run"] for run in r["runs"] if run.get("error")]
            for x in failed:
                ax.annotate("x", (x + (k - (len(rows) - 1) / 2) * width, 0), ha="center",
                            color=COLORS.get(r["engine"], "black"))
        use_log = args.log == "on" or (args.log == "auto" and all_secs and
                                       max(all_secs) > 20 * max(min(all_secs), 1e-9))
        if use_log:
            ax.set_yscale("log")
        ax.set_xticks(range(1, n_runs + 1))
        ax.set_xlabel("run")
        ax.set_ylabel("seconds per request" + (" (log)" if use_log else ""))
        ax.set_title(f"trial: {trial}")
        ax.grid(axis="y", alpha=0.3)
        ax.legend(fontsize=8)
    first = results[0]
    fig.suptitle(f"{first['model']['spec']} {first['model']['dtype']} on "
                 f"{first['system'].get('device') or '?'}: one request at a time, greedy")
    fig.tight_layout()
    fig.savefig(args.out, dpi=120)
    return 0


if __name__ == "__main__":
    sys.exit(main())
