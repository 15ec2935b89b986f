#!/usr/bin/env python3
"""Draws a soak.json (bench/soak/soak.py) into one PNG with matplotlib:
the coordinator's RSS and thread count, the KV blocks in use per worker
group and in total, and the output tokens/s with failed requests, over time;
a red dashed line at every replica kill, a grey one where the load stopped.

Usage: plot_soak.py SOAK.json OUT.png   (matplotlib: scripts/setup-bench-venv.sh)"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

BIN_S = 5  # throughput bins


def mark_events(ax, doc):
    for i, k in enumerate(doc["kills"]):
        if "killed_s" in k:
            ax.axvline(k["killed_s"], color="red", linestyle="--", linewidth=0.9,
                       label="replica killed" if i == 0 else None)
    ax.axvline(doc["load_end_s"], color="grey", linestyle=":", linewidth=0.9, label="load ended")


def plot_coordinator(ax_mem, doc):
    """Top panel: RSS on the left axis, threads on a twin right one; the
    samples where /proc had no coordinator (gone) are left out."""
    coord = [(s["t_s"], s["coordinator"]) for s in doc["samples"] if s.get("coordinator")]
    ax_mem.plot([t for t, _ in coord], [c["rss_mib"] for _, c in coord], color="tab:blue",
                label="RSS")
    ax_mem.set_ylabel("coordinator RSS (MiB)", color="tab:blue")
    ax_th = ax_mem.twinx()
    ax_th.plot([t for t, _ in coord], [c["threads"] for _, c in coord], color="tab:orange",
               label="threads")
    ax_th.set_ylabel("coordinator threads", color="tab:orange")
    mark_events(ax_mem, doc)
    ax_mem.legend(loc="upper left")
    ax_mem.set_title("tandem soak: {streams} streams, a replica killed every {kill_interval_s:g} s"
                     .format(**doc["config"]))


def plot_kv(ax_kv, doc):
    """Middle panel: one line per worker group (a group missing from a
    sample just has no point there), their total, and the pre-load baseline."""
    kv = [s for s in doc["samples"] if s.get("kv_used") is not None]
    for addr in sorted({a for s in kv for a in s["kv_used"]}):
        pts = [(s["t_s"], s["kv_used"][addr]) for s in kv if addr in s["kv_used"]]
        ax_kv.plot([t for t, _ in pts], [v for _, v in pts], label=addr)
    ax_kv.plot([s["t_s"] for s in kv], [s["kv_used_total"] for s in kv], color="black",
               linewidth=1.5, label="total")
    ax_kv.axhline(sum(doc["kv"]["baseline"].values()), color="green", linewidth=0.8,
                  label="baseline")
    mark_events(ax_kv, doc)
    ax_kv.set_ylabel("KV blocks in use")
    ax_kv.legend(loc="upper left", fontsize="small")


def throughput_bins(per_second):
    """{bin index: [output tokens, failed requests]} over BIN_S-second bins
    of soak.json's per_second (fields as in its per_second_fields)."""
    bins = {}
    for sec, v in per_second.items():
        b = bins.setdefault(int(sec) // BIN_S, [0, 0])
        b[0] += v[4]
        b[1] += v[3]
    return bins


def plot_throughput(ax_tp, doc):
    """Bottom panel: output tokens/s, and failed requests as red bars on a
    twin axis that exists only when a request failed."""
    bins = throughput_bins(doc["per_second"])
    xs = sorted(bins)
    ax_tp.plot([x * BIN_S for x in xs], [bins[x][0] / BIN_S for x in xs], color="tab:green",
               label=f"output tokens/s ({BIN_S} s bins)")
    failed = [(x * BIN_S, bins[x][1]) for x in xs if bins[x][1]]
    if failed:
        ax_f = ax_tp.twinx()
        ax_f.bar([t for t, _ in failed], [n for _, n in failed], width=BIN_S, color="red",
                 alpha=0.5, label="failed requests")
        ax_f.set_ylabel("failed requests", color="red")
    mark_events(ax_tp, doc)
    ax_tp.set_ylabel("output tokens/s")
    ax_tp.set_xlabel("seconds since the load began")
    ax_tp.legend(loc="upper left", fontsize="small")


def main():
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    with open(sys.argv[1]) as f:
        doc = json.load(f)
    fig, (ax_mem, ax_kv, ax_tp) = plt.subplots(3, 1, figsize=(11, 10), sharex=True)
    plot_coordinator(ax_mem, doc)
    plot_kv(ax_kv, doc)
    plot_throughput(ax_tp, doc)
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=110)


if __name__ == "__main__":
    main()
