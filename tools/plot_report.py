#!/usr/bin/env python3
"""Per-run request times per engine, one panel per trial, like the article's
figure: reads hayate bench JSON results (docs/bench_schema.md) from hayate and
tools/hf_baseline.py and writes a PNG. `hayate report --png FILE` runs it.

  python3 tools/plot_report.py --out chart.png results/*.json
"""
import argparse
import json
import sys

COLORS = {"hayate": "#d62728", "hf-eager": "#7f7f7f", "hf-compile": "#1f77b4"}


def load(path):
    with open(path, encoding="utf-8") as f:
        j = json.load(f)
    if j.get("schema") != "hayate-bench":
        raise ValueError(f"{path}: not a hayate-bench result")
    return j


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
