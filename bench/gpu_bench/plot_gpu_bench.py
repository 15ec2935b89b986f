#!/usr/bin/env python3
"""Draws a tandem-gpu-bench report (--out JSON), with the transformers
baseline of hf_baseline.py beside it when given, into one PNG, and prints a
Markdown table of the same numbers to stdout.

Left: output tokens/s (prefill included) against the number of sequences, one
line per tensor-parallel size, and the baseline's line. Right: single-stream
decode tokens/s per tensor-parallel size as bars, each with its HBM roofline
(weight + KV bytes per token over the measured device-to-device bandwidth)
drawn across it and the fraction reached written above.

Usage: plot_gpu_bench.py --out FIG.png [--baseline HF.json] REPORT.json
Needs matplotlib (scripts/setup-bench-venv.sh makes .venv-bench with it).
"""
import argparse
import json
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def load(path):
    with open(path) as f:
        return json.load(f)


def load_baseline(path):
    """The baseline report, or None (with a note) when there is none to read."""
    if not path:
        return None
    try:
        return load(path)
    except (OSError, ValueError) as e:
        print(f"plot_gpu_bench.py: no baseline ({e})", file=sys.stderr)
        return None


def measured(entries):
    """Baseline entries that ran (not out of memory nor skipped)."""
    return [e for e in entries if "output_tokens_per_s" in e]


def baseline_rows(baseline):
    if not baseline or baseline.get("skipped"):
        return {}
    return {e["num_seqs"]: e for e in measured(baseline.get("throughput", []))}


def baseline_label(report, baseline):
    device = baseline.get("device", "?")
    where = "one GPU" if device == report.get("device") else f"one {device}"
    label = f"transformers {baseline.get('transformers', '')} ({where})"
    for key, why in (("oom", "out of memory"), ("skipped_after_timeout", "skipped (slow)")):
        seqs = [str(e["num_seqs"]) for e in baseline.get("throughput", []) if e.get(key)]
        if seqs:
            label += f", {why} at {','.join(seqs)}"
    return label


def lengths(entries):
    return sorted({(e["input_len"], e["output_len"]) for e in entries})


def describe(lens):
    return ", ".join(f"{i} in / {o} out" for i, o in lens)


def plot_baseline(ax, report, baseline):
    rows = baseline_rows(baseline)
    if rows:
        seqs = sorted(rows)
        label = baseline_label(report, baseline)
        lens = lengths(rows.values())
        if lens != lengths(report.get("throughput", [])):
            label += f" [{describe(lens)}]"
        ax.plot(seqs, [rows[n]["output_tokens_per_s"] for n in seqs], marker="s",
                linestyle="--", color="black", label=label)
    elif baseline and baseline.get("skipped"):
        reason = baseline["skipped"]
        reason = reason if len(reason) <= 60 else reason[:57] + "..."
        ax.plot([], [], " ", label=f"transformers baseline skipped: {reason}")
    return set(rows)


def plot_throughput(ax, report, baseline):
    by_tp = defaultdict(list)
    for e in report.get("throughput", []):
        by_tp[e["tp"]].append((e["num_seqs"], e["output_tokens_per_s"]))
    for tp in sorted(by_tp):
        points = sorted(by_tp[tp])
        ax.plot([p[0] for p in points], [p[1] for p in points], marker="o",
                label=f"tandem TP {tp}")
    baseline_seqs = plot_baseline(ax, report, baseline)
    ax.set(xscale="log", yscale="log", xlabel="sequences in the batch",
           ylabel="output tokens/s (prefill included)",
           title=f"Throughput ({describe(lengths(report.get('throughput', [])))})")
    ax.set_xticks(sorted({n for pts in by_tp.values() for n, _ in pts} | baseline_seqs))
    plain = matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}")
    ax.xaxis.set_major_formatter(plain)
    ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.yaxis.set_major_locator(matplotlib.ticker.LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.yaxis.set_major_formatter(plain)
    ax.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())


def plot_single_stream(ax, report):
    entries = sorted(report.get("single_stream", []), key=lambda e: e["tp"])
    xs = range(len(entries))
    ax.bar(xs, [e["decode_tokens_per_s"] for e in entries], width=0.6, color="tab:blue",
           label="tandem decode")
    roofs = [e["roofline_tokens_per_s"] for e in entries]
    ax.hlines(roofs, [x - 0.4 for x in xs], [x + 0.4 for x in xs], colors="tab:red",
              linewidth=2.5, label="HBM roofline")
    for x, e in zip(xs, entries):
        top = max(e["decode_tokens_per_s"], e["roofline_tokens_per_s"])
        ax.annotate(f"{100 * e['roofline_fraction']:.0f}% of roofline", (x, top),
                    textcoords="offset points", xytext=(0, 4), ha="center", fontsize=8)
    ax.set_xticks(list(xs), [f"TP {e['tp']}" for e in entries])
    ax.set_ylim(0, 1.15 * max(roofs + [e["decode_tokens_per_s"] for e in entries] + [1e-9]))
    context = sorted({e["context_len"] for e in entries})
    ax.set(ylabel="decode tokens/s, one sequence",
           title=f"Single stream (context {', '.join(map(str, context))})")


def title(report):
    model = report.get("model", {})
    gb = model.get("weight_bytes", 0) / 1e9
    devices = report.get("num_devices", 1)
    return (f"{devices} x {report.get('device', '?')}: {model.get('name', '?')} "
            f"({model.get('num_layers', '?')} layers, {gb:.2f} GB {report.get('cuda_weights', '')} "
            f"weights), device copy {report.get('d2d_bandwidth_gbs', 0):.0f} GB/s")


def draw(report, baseline, out):
    fig, (thr, single) = plt.subplots(1, 2, figsize=(13, 5),
                                      gridspec_kw={"width_ratios": [3, 2]})
    plot_throughput(thr, report, baseline)
    plot_single_stream(single, report)
    for ax in (thr, single):
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(title(report), fontsize=10)
    fig.tight_layout()
    fig.savefig(out, dpi=110)


def fmt(value):
    return "—" if value is None else f"{value:.1f}"


def throughput_table(report, baseline):
    rows = baseline_rows(baseline)
    lines = ["| TP | num_seqs | output tok/s | baseline tok/s | ratio |",
             "|---:|---:|---:|---:|---:|"]
    for e in sorted(report.get("throughput", []), key=lambda e: (e["tp"], e["num_seqs"])):
        base = rows.get(e["num_seqs"])
        if base and (base["input_len"], base["output_len"]) != (e["input_len"], e["output_len"]):
            base = None  # different prompt or output lengths: not comparable
        b = base["output_tokens_per_s"] if base else None
        ratio = f"{e['output_tokens_per_s'] / b:.2f}" if b else "—"
        lines.append(f"| {e['tp']} | {e['num_seqs']} | {fmt(e['output_tokens_per_s'])} "
                     f"| {fmt(b)} | {ratio} |")
    return lines


def single_stream_table(report):
    lines = ["| TP | decode tok/s | roofline tok/s | fraction |", "|---:|---:|---:|---:|"]
    for e in sorted(report.get("single_stream", []), key=lambda e: e["tp"]):
        lines.append(f"| {e['tp']} | {fmt(e['decode_tokens_per_s'])} "
                     f"| {fmt(e['roofline_tokens_per_s'])} | {e['roofline_fraction']:.2f} |")
    return lines


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="PNG to write")
    parser.add_argument("--baseline", help="hf_baseline.py's JSON report")
    parser.add_argument("report", help="tandem-gpu-bench's JSON report")
    args = parser.parse_args()
    report, baseline = load(args.report), load_baseline(args.baseline)
    draw(report, baseline, args.out)
    print(f"{title(report)}\n")
    if baseline and baseline.get("skipped"):
        print(f"transformers baseline skipped: {baseline['skipped']}\n")
    elif baseline:
        print(f"baseline: transformers {baseline.get('transformers')}, torch "
              f"{baseline.get('torch')}, {baseline.get('shape')} on {baseline.get('device')}, "
              f"attention {baseline.get('attn_implementation')}\n")
    print("\n".join(throughput_table(report, baseline)))
    print()
    print("\n".join(single_stream_table(report)))
    print(f"\nwrote {args.out}")


if __name__ == "__main__":
    main()
