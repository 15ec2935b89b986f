#!/usr/bin/env python3
"""Draws `tandem bench` JSON reports (--out) into one PNG with matplotlib:
output tokens/s against concurrency, one line per series, and the CDFs of
time to first token and of time per output token, one curve per report.

Usage: plot_bench.py --out FIG.png SERIES=REPORT.json [SERIES=REPORT.json ...]
SERIES names the server or protocol ("tandem HTTP", "llama-server"); the
concurrency comes from each report's options. Needs matplotlib (PyPI; see
bench/compare_serving.sh, which sets up a venv for it).
"""
import argparse
import json
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def load(args):
    runs = []
    for item in args:
        series, _, path = item.partition("=")
        if not path:
            raise SystemExit(f"plot_bench.py: '{item}' is not SERIES=REPORT.json")
        with open(path) as f:
            runs.append((series, json.load(f)))
    return runs


def cdf(ax, values, label):
    values = sorted(v for v in values if v is not None)
    if values:
        ax.plot(values, [(i + 1) / len(values) for i in range(len(values))], label=label)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("reports", nargs="+")
    args = parser.parse_args()
    runs = load(args.reports)
    fig, (thr, ttft, tpot) = plt.subplots(1, 3, figsize=(16, 4.5))
    by_series = defaultdict(list)
    for series, r in runs:
        c = r["options"]["concurrency"]
        by_series[series].append((c, r["output_tokens_per_s"]))
        label = f"{series} @ {c}"
        cdf(ttft, [q["ttft_ms"] for q in r["requests"] if q["ok"]], label)
        cdf(tpot, [q["tpot_ms"] for q in r["requests"] if q["ok"]], label)
    for series, points in by_series.items():
        points.sort()
        thr.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=series)
    thr.set(xscale="log", xlabel="concurrent streams", ylabel="output tokens/s",
            title="Throughput")
    ttft.set(xscale="log", xlabel="ms", ylabel="fraction of requests", title="TTFT CDF")
    tpot.set(xscale="log", xlabel="ms", ylabel="fraction of requests", title="TPOT CDF")
    for ax in (thr, ttft, tpot):
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(args.out, dpi=110)
    print(args.out)


if __name__ == "__main__":
    main()
