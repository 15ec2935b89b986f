"""The soak test's report: the JSON document soak.py writes (build) and
the summary it prints (summary). Stdlib only."""
import collections
import dataclasses
from typing import Optional

# A per-second bucket of load.py: [sent, completed, cancelled, failed, output tokens].
SENT, COMPLETED, CANCELLED, FAILED, TOKENS = range(5)
REQUEST_COUNTS = ("sent", "completed", "cancelled", "failed", "output_tokens")


@dataclasses.dataclass
class Observed:
    """What soak.py saw during one soak, the input of build() besides the flags."""
    loads: list  # the LoadProcesses; those whose .result is None gave none
    samples: list  # Monitor's samples, the one after the load last
    kills: list  # run_kills' events
    baseline: dict  # {address: KV blocks in use} before the load
    settled_s: Optional[float]  # seconds until the KV blocks were back at the baseline; None: never
    kv_final: dict  # the last {address: KV blocks in use} (or {"error": ...})
    final_groups: dict  # {address: migration / KV counters} after the load
    problems: list  # reasons to fail found by soak.py itself
    load_end_s: float  # when the load processes had exited, on the load's clock
    coordinator_final: Optional[dict]  # proc_status of the coordinator at the end, None once gone


def merge_buckets(results):
    merged = collections.defaultdict(lambda: [0, 0, 0, 0, 0])
    for r in results:
        for sec, values in r.get("buckets", {}).items():
            m = merged[int(sec)]
            for i, v in enumerate(values):
                m[i] += v
    return dict(sorted(merged.items()))


def per_minute(per_second, load_end_s):
    """One row per minute of the run (the drain's tail included): requests
    sent / completed / cancelled / failed, output tokens and tokens/s."""
    minutes = collections.defaultdict(lambda: [0, 0, 0, 0, 0])
    for sec, values in per_second.items():
        if sec < 0:
            continue
        m = minutes[sec // 60]
        for i, v in enumerate(values):
            m[i] += v
    rows = []
    for minute, v in sorted(minutes.items()):
        seconds = min(60.0, max(1.0, load_end_s - minute * 60))
        rows.append({"minute": minute, "sent": v[SENT], "completed": v[COMPLETED],
                     "cancelled": v[CANCELLED], "failed": v[FAILED],
                     "output_tokens": v[TOKENS],
                     "output_tokens_per_s": round(v[TOKENS] / seconds, 1),
                     "requests_per_s": round(v[COMPLETED] / seconds, 2)})
    return rows


def series_stats(samples, key):
    values = [s["coordinator"][key] for s in samples if s.get("coordinator")]
    if not values:
        return {}
    return {"first": values[0], "last": values[-1], "min": min(values), "max": max(values)}


def request_totals(results):
    """The load processes' request counts added up (a Counter: absent keys read 0)."""
    totals = collections.Counter()
    for r in results:
        for key in REQUEST_COUNTS:
            totals[key] += r.get(key, 0)
    return totals


def merged_errors(results):
    """(every error of both load processes in time order, their counts by message)."""
    errors = sorted((e for r in results for e in r.get("errors", [])), key=lambda e: e["t_s"])
    error_counts = collections.Counter()
    for r in results:
        error_counts.update(r.get("error_counts", {}))
    return errors, error_counts


def verdict(args, seen, totals):
    """The reasons the soak failed — soak.py's own problems first; empty: it passed."""
    reasons = list(seen.problems)
    if totals["failed"]:
        reasons.append(f"{totals['failed']} requests failed")
    if seen.settled_s is None:
        reasons.append(f"KV blocks in use did not return to the baseline {seen.baseline} within "
                       f"{args.kv_settle_timeout_s:g} s (last {seen.kv_final})")
    if totals["completed"] == 0:
        reasons.append("no request completed")
    return reasons


def config_section(args):
    """The flags that shape the load, so that runs can be compared from soak.json alone."""
    return {"streams": args.streams, "grpc_streams": args.streams // 2,
            "http_streams": args.streams - args.streams // 2,
            "duration_s": args.duration_s, "kill_interval_s": args.kill_interval_s,
            "restart_delay_s": args.restart_delay_s, "model": args.model,
            "worker_threads": args.worker_threads, "min_tokens": args.min_tokens,
            "max_tokens": args.max_tokens, "cancel_fraction": args.cancel_fraction,
            "seed": args.seed, "coordinator_flags": args.coordinator_flag}


def by_protocol_section(results):
    """{protocol: its counts and latency / TTFT percentiles}, one per load process."""
    return {r["protocol"]: {k: r.get(k) for k in
                            ("streams", "sent", "completed", "cancelled", "failed",
                             "output_tokens", "latency_s", "ttft_s")}
            for r in results}


def kv_section(seen):
    """The KV baseline, final and peak, and whether (and when) it came back."""
    kv_back = seen.settled_s is not None
    return {"baseline": seen.baseline, "final": seen.kv_final, "returned_to_baseline": kv_back,
            "settle_s": round(seen.settled_s, 3) if kv_back else None,
            "peak_total": max((s["kv_used_total"] for s in seen.samples
                               if s.get("kv_used_total") is not None), default=None)}


def build(args, seen):
    """soak.json: `args` (soak.py's flags) and `seen` (an Observed); its keys
    are what plot_soak.py and summary() read."""
    results = [lp.result for lp in seen.loads if lp.result is not None]
    totals = request_totals(results)
    errors, error_counts = merged_errors(results)
    per_second = merge_buckets(results)
    reasons = verdict(args, seen, totals)
    return {
        "config": config_section(args),
        "requests": dict(totals),
        "by_protocol": by_protocol_section(results),
        "errors": errors[:20],
        "error_counts": dict(error_counts.most_common(50)),
        "per_minute": per_minute(per_second, seen.load_end_s),
        "per_second": {str(k): v for k, v in per_second.items()},
        "per_second_fields": list(REQUEST_COUNTS),
        "load_end_s": round(seen.load_end_s, 3),
        "kills": seen.kills,
        "samples": seen.samples,
        "coordinator_rss_mib": series_stats(seen.samples, "rss_mib"),
        "coordinator_threads": series_stats(seen.samples, "threads"),
        "coordinator_final": seen.coordinator_final,
        "kv": kv_section(seen),
        "worker_groups": seen.final_groups,
        "problems": reasons,
        "passed": not reasons,
    }


def request_lines(doc):
    """What ran and the requests' outcome, in total and per protocol."""
    c, r = doc["config"], doc["requests"]
    lines = [f"soak: {c['streams']} streams ({c['grpc_streams']} gRPC, {c['http_streams']} "
             f"HTTP) for {c['duration_s']:g} s, a replica SIGKILLed every "
             f"{c['kill_interval_s']:g} s; load ended at {doc['load_end_s']:.1f} s",
             f"requests: sent {r.get('sent', 0)}, completed {r.get('completed', 0)}, "
             f"cancelled by the client {r.get('cancelled', 0)}, failed {r.get('failed', 0)}; "
             f"{r.get('output_tokens', 0)} output tokens"]
    for proto, p in doc["by_protocol"].items():
        lat, ttft = p.get("latency_s") or {}, p.get("ttft_s") or {}
        lines.append(f"  {proto}: sent {p['sent']}, completed {p['completed']}, cancelled "
                     f"{p['cancelled']}, failed {p['failed']}; latency p50 {lat.get('p50')} s "
                     f"p99 {lat.get('p99')} s, TTFT p50 {ttft.get('p50')} s p99 "
                     f"{ttft.get('p99')} s")
    return lines


def minute_lines(doc):
    lines = ["per minute (completed requests, output tokens/s, failed):"]
    for m in doc["per_minute"]:
        lines.append(f"  minute {m['minute']}: {m['completed']} done, "
                     f"{m['output_tokens_per_s']} tok/s, {m['cancelled']} cancelled, "
                     f"{m['failed']} failed")
    return lines


def kill_lines(doc):
    """The kills done (skipped ones only counted) and the groups' migration counters."""
    done = [k for k in doc["kills"] if "killed_s" in k]
    lines = [f"kills: {len(done)} ({len(doc['kills']) - len(done)} skipped)"]
    for k in done:
        back = (f"healthy again {k['healthy_s'] - k['killed_s']:.1f} s later"
                if "healthy_s" in k else "NOT healthy again")
        lines.append(f"  {k['killed_s']:7.1f} s: replica {k['replica']} ({k['address']}) "
                     f"killed, {back}")
    for addr, g in doc["worker_groups"].items():
        lines.append(f"  group {addr}: {g['num_migrations']} migrations, "
                     f"{g['num_migration_failures']} migration failures, "
                     f"{g['num_preemptions']} preemptions")
    return lines


def resource_lines(doc):
    """The coordinator's RSS and threads (when sampled at all) and the KV blocks."""
    lines = []
    rss, th = doc["coordinator_rss_mib"], doc["coordinator_threads"]
    if rss:
        lines.append(f"coordinator RSS MiB: first {rss['first']}, max {rss['max']}, last "
                     f"{rss['last']}; threads: first {th['first']}, max {th['max']}, last "
                     f"{th['last']}")
    kv = doc["kv"]
    lines.append(f"KV blocks in use: baseline {kv['baseline']}, peak total {kv['peak_total']}, "
                 f"after the load {kv['final']} -> "
                 + (f"back to baseline after {kv['settle_s']} s" if kv["returned_to_baseline"]
                    else "NOT back to baseline"))
    return lines


def error_lines(doc):
    """The first errors verbatim and the commonest kinds; nothing when there were none."""
    if not doc["errors"]:
        return []
    lines = ["first errors:"]
    for e in doc["errors"][:10]:
        lines.append(f"  [{e['t_s']:7.1f} s] {e['message']}")
    lines.append("errors by kind:")
    for msg, n in list(doc["error_counts"].items())[:10]:
        lines.append(f"  {n} x {msg}")
    return lines


def summary(doc):
    """The text soak.py prints, from build()'s document alone; its last line is the verdict."""
    lines = (request_lines(doc) + minute_lines(doc) + kill_lines(doc) + resource_lines(doc)
             + error_lines(doc))
    lines.append("PASS" if doc["passed"] else "FAIL: " + "; ".join(doc["problems"]))
    return "\n".join(lines)
