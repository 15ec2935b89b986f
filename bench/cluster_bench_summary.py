#!/usr/bin/env python3
"""Summarizes a bench/cluster_bench.sh run. Reads OUT_DIR/manifest.jsonl (one
line per measurement: label, kind bench|ttft|run, path, rep, streams, ...)
and the `tandem bench` reports (LABEL.json) and `tandem run` logs (LABEL.err)
it names; writes OUT_DIR/summary.json (every sample) and OUT_DIR/summary.md
(printed too).

Per cell the best repetition is shown — the highest output tokens/s, or for
time to first token the lowest mean — with the worst beside it: on a shared
machine other work only ever slows a measurement down, so the best is the
least disturbed one and the gap shows how disturbed the others were. "[N %]"
is the share of the machine's CPU that other processes took during that
sample (bench/measure.py).

Usage: cluster_bench_summary.py OUT_DIR MODEL CORES SHARED_PREFIX_LEN GIT_REV
"""
import json
import os
import re
import sys

# tandem run's stderr report (client/commands/run_command.cc).
RUN_LINE = re.compile(r"(\d+) tokens generated in ([\d.]+) s: ([\d.]+) tokens/s \((\d+) steps, "
                      r"(\d+) preemptions\)")


def load_sample(out, entry):
    """The entry with its measured numbers added."""
    s = dict(entry)
    if entry["kind"] == "run":
        text = open(os.path.join(out, entry["label"] + ".err")).read()
        m = RUN_LINE.search(text)
        if not m:
            raise SystemExit(f"cluster_bench_summary: no tokens/s line in {entry['label']}.err: "
                             f"{text[-500:]}")
        s.update(output_tokens=int(m[1]), duration_s=float(m[2]),
                 output_tokens_per_s=float(m[3]), steps=int(m[4]), preemptions=int(m[5]),
                 num_failed=0)
    else:
        with open(os.path.join(out, entry["label"] + ".json")) as f:
            r = json.load(f)
        s.update({k: r[k] for k in ("output_tokens", "duration_s", "output_tokens_per_s",
                                    "num_failed", "ttft_ms", "tpot_ms", "step_overhead")})
    return s


def cells(samples, key):
    """{cell key: [samples]} in first-seen order."""
    grouped = {}
    for s in samples:
        grouped.setdefault(key(s), []).append(s)
    return grouped


def others(sample):
    return f" [{100 * sample['others_cpu_share']:.0f} %]"


def failed_note(group):
    failed = sum(s["num_failed"] for s in group)
    return f" ({failed} failed)" if failed else ""


def main():
    out, model, cores, prefix_len, git = sys.argv[1:]
    with open(os.path.join(out, "manifest.jsonl")) as f:
        samples = [load_sample(out, json.loads(line)) for line in f if line.strip()]
    repeats = max(s["rep"] for s in samples)
    loads = [s["load1_before"] for s in samples]
    shares = [s["others_cpu_share"] for s in samples]
    meta = {"model": os.path.basename(model), "cores": int(cores), "git": git,
            "repeats": repeats, "load1_before_min": min(loads), "load1_before_max": max(loads),
            "others_cpu_share_min": min(shares), "others_cpu_share_max": max(shares)}
    with open(os.path.join(out, "summary.json"), "w") as f:
        json.dump({"meta": meta, "samples": samples}, f, indent=2)

    both = f"best of {repeats} (worst)" if repeats > 1 else "one repetition"
    md = [f"# tandem cluster bench — {meta['model']}, {cores} cores, git {git}", "",
          f"1-minute load average before the measurements: {min(loads):.2f} .. {max(loads):.2f}; "
          f"CPU share taken by other processes during them: {100 * min(shares):.0f} .. "
          f"{100 * max(shares):.0f} %. Each cell: {both}, [CPU share of other processes].", "",
          "Aggregate output tokens/s (128-token prompts, 64 output tokens, greedy):", ""]
    throughput = [s for s in samples if s["kind"] in ("bench", "run")]
    paths = list(dict.fromkeys(s["path"] for s in throughput))
    by_cell = cells(throughput, lambda s: (s["streams"], s["path"]))
    md += ["| streams | requests | " + " | ".join(paths) + " |", "|---|---|" + "---|" * len(paths)]
    for streams in dict.fromkeys(s["streams"] for s in throughput):
        row = [str(streams), str(by_cell[(streams, paths[0])][0]["requests"])]
        for p in paths:
            group = by_cell.get((streams, p), [])
            if not group:
                row.append("")
                continue
            ranked = sorted(group, key=lambda s: s["output_tokens_per_s"])
            best, worst = ranked[-1], ranked[0]
            cell = f"{best['output_tokens_per_s']:.1f}{others(best)}"
            if len(ranked) > 1:
                cell += f" ({worst['output_tokens_per_s']:.1f}{others(worst)})"
            row.append(cell + failed_note(group))
        md.append("| " + " | ".join(row) + " |")

    md += ["", "Coordinator<->worker overhead per step: the share of the coordinator's step time "
           "(scheduling, encoding, the Step RPC, folding results) not spent inside the worker's "
           "step; from the repetition with the best throughput, the highest share over all "
           "repetitions beside it:", "",
           "| path | streams | steps | mean step ms | mean worker step ms | overhead | "
           "TTFT p50 ms | TPOT mean ms | others |", "|---|---|---|---|---|---|---|---|---|"]
    for (streams, path), group in cells([s for s in samples if s["kind"] == "bench"],
                                        lambda s: (s["streams"], s["path"])).items():
        best = max(group, key=lambda s: s["output_tokens_per_s"])
        so = best["step_overhead"]
        shares = [s["step_overhead"]["overhead_share"] for s in group if s["step_overhead"]]
        if so:
            worst = f" ({100 * max(shares):.2f} %)" if len(shares) > 1 else ""
            step = (f"{so['num_steps']} | {so['mean_step_ms']:.2f} | "
                    f"{so['mean_worker_step_ms']:.2f} | {100 * so['overhead_share']:.2f} %{worst}")
        else:
            step = "n/a | n/a | n/a | n/a"
        md.append(f"| {path} | {streams} | {step} | {best['ttft_ms']['p50']:.1f} | "
                  f"{best['tpot_ms']['mean']:.1f} |{others(best)} |")

    md += ["", f"Time to first token, ms (128-token prompts, 8 output tokens; shared prefix: the "
           f"first {prefix_len} tokens identical in all); the repetition with the lowest mean, "
           f"the worst mean beside it:", "",
           "| path | streams | shared prefix | mean | p50 | p90 |", "|---|---|---|---|---|---|"]
    for (path, streams, prefix), group in cells(
            [s for s in samples if s["kind"] == "ttft"],
            lambda s: (s["path"], s["streams"], s["shared_prefix_len"])).items():
        ranked = sorted(group, key=lambda s: s["ttft_ms"]["mean"])
        best, worst = ranked[0], ranked[-1]
        t = best["ttft_ms"]
        worst_note = (f" ({worst['ttft_ms']['mean']:.1f}{others(worst)})" if len(ranked) > 1
                      else "")
        md.append(f"| {path} | {streams} | {prefix} | {t['mean']:.1f}{others(best)}{worst_note}"
                  f"{failed_note(group)} | {t['p50']:.1f} | {t['p90']:.1f} |")

    text = "\n".join(md) + "\n"
    with open(os.path.join(out, "summary.md"), "w") as f:
        f.write(text)
    print(text)


if __name__ == "__main__":
    main()
