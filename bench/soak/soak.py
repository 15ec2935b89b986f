#!/usr/bin/env python3
"""Soak test of a tandem cluster (not in CI): a tandem-coordinator in front
of two tandem-worker replicas on 127.0.0.1 (--threads 1 each), --streams
concurrent streams for --duration-s — half through gRPC (tandem_client's
AsyncClient), half through the OpenAI HTTP API (/v1/completions, stream=true)
— while every --kill-interval-s one replica, the two in turn, is SIGKILLed
and restarted on its port (the other is healthy first, so one is always up).
The coordinator migrates the killed replica's requests: the target is no
failed request.

Records requests sent / completed / cancelled by the client / failed (the
first errors verbatim), throughput per minute, every --sample-interval-s the
coordinator's RSS and thread count (/proc/PID/status) and the KV blocks in
use (ModelInfo); after the load, waits (at most --kv-settle-timeout-s) for
the KV blocks in use to return to the baseline taken before it. Writes
OUT/soak.json (and, with --plot-python, OUT/soak.png by plot_soak.py) and
prints a summary. Exit status 1 when a request failed, the KV blocks did not
return to the baseline, the coordinator died or a replica did not come back;
2 when the cluster could not be started.

Run it through bench/soak/run.sh, which sets up the Python it needs
(.venv-test: tandem_client, grpcio, openai; .venv-bench: matplotlib)."""
import argparse
import json
import os
import resource
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cluster import Cluster  # noqa: E402
from monitor import Groups, Monitor, proc_status  # noqa: E402
import report  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
HEALTHY_TIMEOUT_S = 30  # a (re)started replica must be healthy in the coordinator by then
LOAD_START_DELAY_S = 3  # the load processes import their SDKs meanwhile


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--streams", type=int, default=1000,
                   help="concurrent streams, half gRPC, half HTTP")
    p.add_argument("--duration-s", type=float, default=600, help="seconds of load")
    p.add_argument("--kill-interval-s", type=float, default=60,
                   help="a replica is SIGKILLed (and restarted) this often; 0: never")
    p.add_argument("--restart-delay-s", type=float, default=0,
                   help="seconds between a replica's SIGKILL and its restart")
    p.add_argument("--out", default=os.path.join(ROOT, "build", "soak"),
                   help="output directory (soak.json, soak.png, the processes' logs)")
    p.add_argument("--model", default=os.path.join(ROOT, "models",
                                                   "SmolLM2-135M-Instruct.Q4_1.gguf"))
    p.add_argument("--bin-dir", default=os.path.join(ROOT, "build", "bin"))
    p.add_argument("--worker-threads", type=int, default=1)
    p.add_argument("--min-tokens", type=int, default=8)
    p.add_argument("--max-tokens", type=int, default=48)
    p.add_argument("--cancel-fraction", type=float, default=0.05,
                   help="share of requests the client abandons after a random number of chunks")
    p.add_argument("--sample-interval-s", type=float, default=5)
    p.add_argument("--drain-timeout-s", type=float, default=300,
                   help="after the load stops, requests still running then count as failed")
    p.add_argument("--request-timeout-s", type=float, default=600,
                   help="every request's deadline (both clients)")
    p.add_argument("--kv-settle-timeout-s", type=float, default=60,
                   help="how long to wait after the load for the KV blocks to return")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--coordinator-flag", action="append", default=[], metavar="FLAG",
                   help="an extra tandem-coordinator flag (repeatable), e.g. "
                        "--coordinator-flag=--max-seqs=128")
    p.add_argument("--plot-python", default="",
                   help="a Python with matplotlib that draws OUT/soak.png (plot_soak.py)")
    args = p.parse_args(argv)
    if args.streams < 2:
        p.error(f"--streams {args.streams}: at least 2 (one gRPC, one HTTP)")
    if args.duration_s <= 0:
        p.error(f"--duration-s {args.duration_s}: must be > 0")
    if not 1 <= args.min_tokens <= args.max_tokens:
        p.error(f"--min-tokens {args.min_tokens} / --max-tokens {args.max_tokens}: "
                "want 1 <= min <= max")
    for name in ("tandem-coordinator", "tandem-worker"):
        if not os.access(os.path.join(args.bin_dir, name), os.X_OK):
            p.error(f"--bin-dir {args.bin_dir}: no executable {name} (build it first)")
    if not os.path.isfile(args.model):
        p.error(f"--model {args.model}: no such file (scripts/fetch-model.sh)")
    return args


def raise_fd_limit():
    """Every stream is a socket in a load process and in the coordinator."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


class LoadProcess:
    """One load.py child (one protocol). Its progress lines are kept (the
    latest), its result line parsed; stderr goes to OUT/load-PROTOCOL.log."""

    def __init__(self, protocol, target, streams, start_at, args, model_name):
        self.protocol = protocol
        self.latest = None
        self.result = None
        self._log = open(os.path.join(args.out, f"load-{protocol}.log"), "w")
        cmd = [sys.executable, os.path.join(HERE, "load.py"), "--protocol", protocol,
               "--target", target, "--model-name", model_name, "--streams", str(streams),
               "--start-at", repr(start_at), "--duration-s", str(args.duration_s),
               "--drain-timeout-s", str(args.drain_timeout_s),
               "--request-timeout-s", str(args.request_timeout_s),
               "--min-tokens", str(args.min_tokens), "--max-tokens", str(args.max_tokens),
               "--cancel-fraction", str(args.cancel_fraction),
               "--seed", str(args.seed * 2 + (protocol == "http"))]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=self._log, text=True)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self):
        for line in self.proc.stdout:
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            if msg.get("kind") == "result":
                self.result = msg
            else:
                self.latest = msg

    def wait(self, timeout_s):
        """The exit code, or None (then it is killed) after `timeout_s`."""
        try:
            code = self.proc.wait(max(1.0, timeout_s))
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(30)
            code = None
        self._reader.join(30)
        self._log.close()
        return code

    def stderr_tail(self, chars=2000):
        try:
            with open(self._log.name, errors="replace") as f:
                return f.read()[-chars:]
        except OSError:
            return ""


def worker_address(cluster, index):
    return cluster.workers[index].address


def run_kills(cluster, groups, clock, args, problems, stop):
    """The kill schedule, on the calling thread, until the load's end: at
    every multiple of --kill-interval-s the next replica in turn is
    SIGKILLed once the other is healthy, then restarted on its port.
    Returns one event per kill."""
    events = []
    if args.kill_interval_s <= 0:
        return events
    n = len(cluster.workers)
    victim = 0
    for k in range(1, int(args.duration_s // args.kill_interval_s) + 1):
        due = k * args.kill_interval_s
        if due >= args.duration_s or stop.wait(max(0.0, due - clock())):
            break
        others = [worker_address(cluster, i) for i in range(n) if i != victim]
        waited = groups.wait_healthy(others, HEALTHY_TIMEOUT_S)
        event = {"replica": victim, "address": worker_address(cluster, victim),
                 "due_s": due}
        if waited is None:
            event["skipped"] = f"{others} not healthy within {HEALTHY_TIMEOUT_S} s"
            problems.append(f"kill {k} skipped: replica(s) {others} not healthy in the "
                            f"coordinator within {HEALTHY_TIMEOUT_S} s")
            events.append(event)
            print(f"[{clock():7.1f} s] kill {k} skipped: {event['skipped']}", flush=True)
            continue
        event["pid"] = cluster.workers[victim].pid
        event["killed_s"] = round(clock(), 3)
        event["exit_code"] = cluster.kill_worker(victim)
        if args.restart_delay_s > 0:
            stop.wait(args.restart_delay_s)
        try:
            cluster.restart_worker(victim)
            event["restarted_s"] = round(clock(), 3)
            healthy = groups.wait_healthy([worker_address(cluster, victim)], HEALTHY_TIMEOUT_S)
            if healthy is None:
                problems.append(f"replica {victim} ({event['address']}) not healthy in the "
                                f"coordinator within {HEALTHY_TIMEOUT_S} s of its restart")
            else:
                event["healthy_s"] = round(clock(), 3)
        except RuntimeError as e:
            problems.append(f"replica {victim} did not restart: {e}")
            event["restart_error"] = str(e)[:2000]
        print(f"[{event['killed_s']:7.1f} s] killed replica {victim} ({event['address']}, "
              f"pid {event['pid']}); restarted at {event.get('restarted_s', '-')} s, "
              f"healthy at {event.get('healthy_s', '-')} s", flush=True)
        events.append(event)
        victim = (victim + 1) % n
    return events


def print_progress(loads, clock, stop, interval_s=30):
    for _ in range(100000):
        if stop.wait(interval_s):
            return
        parts = []
        for lp in loads:
            p = lp.latest or {}
            parts.append(f"{lp.protocol}: sent {p.get('sent', 0)} done {p.get('completed', 0)} "
                         f"cancelled {p.get('cancelled', 0)} failed {p.get('failed', 0)} "
                         f"in flight {p.get('in_flight', 0)}")
        print(f"[{clock():7.1f} s] " + "; ".join(parts), flush=True)


def settle_kv(groups, baseline, timeout_s, poll_s=0.5):
    """Polls ModelInfo until every group's KV blocks in use are back at the
    baseline. Returns (seconds waited or None, the last {address: used})."""
    start = time.monotonic()
    last = None
    while True:
        try:
            last = groups.kv_used()
            if all(last.get(a, -1) == b for a, b in baseline.items()):
                return time.monotonic() - start, last
        except Exception as e:  # noqa: BLE001 — the coordinator may be gone: report it
            last = {"error": str(e)}
        if time.monotonic() - start >= timeout_s:
            return None, last
        time.sleep(poll_s)


def model_name_of(path):
    """The name the cluster serves the model under: the file name without .gguf."""
    name = os.path.basename(path)
    if name.endswith(".gguf"):
        name = name[:-len(".gguf")]
    return name


def load_clock(start_at):
    """A monotonic clock of seconds since the load began at wall time
    `start_at` (negative before), the time axis of every record."""
    offset = time.monotonic() - (time.time() - start_at)
    return lambda: time.monotonic() - offset


def start_loads(cluster, start_at, args):
    """The two load processes, half the streams each (gRPC gets the smaller
    half), both starting at `start_at`."""
    coordinator = cluster.coordinator
    model_name = model_name_of(args.model)
    half = args.streams // 2
    return [LoadProcess("grpc", coordinator.address, half, start_at, args, model_name),
            LoadProcess("http", coordinator.http_address, args.streams - half, start_at,
                        args, model_name)]


def wait_loads(loads, clock, args):
    """{protocol: exit code or None}; together they get the load, the drain
    and two minutes more, after which a load process is killed."""
    load_codes = {}
    for lp in loads:
        budget = args.duration_s + args.drain_timeout_s + 120 - clock()
        load_codes[lp.protocol] = lp.wait(budget)
    return load_codes


def final_groups(groups, problems):
    """{address: counters} of every worker group after the load; {} (and a
    problem) when ModelInfo fails."""
    try:
        return {a: {"healthy": g.healthy, "num_migrations": g.num_migrations,
                    "num_migration_failures": g.num_migration_failures,
                    "num_blocks_used": g.num_blocks_used,
                    "num_blocks_total": g.num_blocks_total,
                    "num_generated_tokens": g.num_generated_tokens,
                    "num_preemptions": g.num_preemptions}
                for a, g in groups.get().items()}
    except Exception as e:  # noqa: BLE001
        problems.append(f"ModelInfo after the load failed: {e}")
        return {}


def check_processes(coordinator, loads, load_codes, problems):
    """Appends a problem when the coordinator exited or a load process gave no result."""
    coordinator_exit = coordinator.proc.poll()
    if coordinator_exit is not None:
        problems.append(f"the coordinator exited with {coordinator_exit} during the soak; "
                        f"log tail: {coordinator.log_tail(1000)}")
    for lp in loads:
        if lp.result is None:
            problems.append(f"the {lp.protocol} load process gave no result (exit code "
                            f"{load_codes[lp.protocol]}): {lp.stderr_tail(1000)}")


def soak(cluster, groups, loads, stop, args):
    """The soak on a started cluster: the load, the kills, the drain, the KV
    settling. Appends the load processes to `loads` as they start, so that
    the caller can kill them whatever happens. Returns report.build's
    document, or None when the worker groups never became healthy."""
    addresses = [w.address for w in cluster.workers]
    if groups.wait_healthy(addresses, 60) is None:
        print(f"soak: worker groups {addresses} not healthy within 60 s", file=sys.stderr)
        return None
    baseline = groups.kv_used()
    start_at = time.time() + LOAD_START_DELAY_S
    clock = load_clock(start_at)
    monitor = Monitor(cluster, groups, clock, args.sample_interval_s)
    monitor.start()
    loads.extend(start_loads(cluster, start_at, args))
    coordinator, half = cluster.coordinator, args.streams // 2
    print(f"soak: coordinator {coordinator.address} (HTTP {coordinator.http_address}), "
          f"replicas {addresses}; {half} gRPC + {args.streams - half} HTTP streams for "
          f"{args.duration_s:g} s, a replica killed every {args.kill_interval_s:g} s; "
          f"KV blocks in use before: {baseline}", flush=True)
    threading.Thread(target=print_progress, args=(loads, clock, stop), daemon=True).start()
    problems = []
    kills = run_kills(cluster, groups, clock, args, problems, stop)
    load_codes = wait_loads(loads, clock, args)
    load_end_s = clock()
    stop.set()
    print(f"[{load_end_s:7.1f} s] load finished; waiting for the KV blocks "
          f"(at most {args.kv_settle_timeout_s:g} s)", flush=True)
    settled, kv_final = settle_kv(groups, baseline, args.kv_settle_timeout_s)
    monitor.stop()
    monitor.samples.append(monitor.sample())  # the state the verdict is about
    groups_after = final_groups(groups, problems)
    check_processes(coordinator, loads, load_codes, problems)
    seen = report.Observed(loads, monitor.samples, kills, baseline, settled, kv_final,
                           groups_after, problems, load_end_s, proc_status(coordinator.pid))
    return report.build(args, seen)


def shut_down(stop, loads, groups, cluster):
    """Stops everything soak() started, whether it finished or raised."""
    stop.set()
    for lp in loads:
        if lp.proc.poll() is None:
            lp.proc.kill()
            lp.proc.wait(30)
    if groups is not None:
        groups.close()
    cluster.close()


def write_outputs(doc, args):
    """OUT/soak.json, the printed summary, and OUT/soak.png when there is a
    --plot-python; a failed plot is reported but does not change the verdict."""
    path = os.path.join(args.out, "soak.json")
    with open(path, "w") as f:
        json.dump(doc, f, indent=1)
    print(report.summary(doc))
    print(f"soak: wrote {path}")
    if not args.plot_python:
        return
    png = os.path.join(args.out, "soak.png")
    r = subprocess.run([args.plot_python, os.path.join(HERE, "plot_soak.py"), path, png],
                       timeout=300)
    if r.returncode == 0:
        print(f"soak: wrote {png}")
    else:
        print(f"soak: plot_soak.py failed ({r.returncode}); no {png}", file=sys.stderr)


def run(args):
    """The exit status: 0 pass, 1 fail, 2 the cluster did not start."""
    os.makedirs(args.out, exist_ok=True)
    raise_fd_limit()
    print(f"soak: starting 2 tandem-worker replicas and a tandem-coordinator "
          f"(logs in {args.out})", flush=True)
    try:
        cluster = Cluster(args.bin_dir, args.model, args.out, args.worker_threads,
                          coordinator_flags=args.coordinator_flag)
    except RuntimeError as e:
        print(f"soak: the cluster did not start: {e}", file=sys.stderr)
        return 2
    groups = None
    loads = []
    stop = threading.Event()
    try:
        groups = Groups(cluster.coordinator.address)
        doc = soak(cluster, groups, loads, stop, args)
    finally:
        shut_down(stop, loads, groups, cluster)
    if doc is None:
        return 2
    write_outputs(doc, args)
    return 0 if doc["passed"] else 1


def main():
    os.environ["NO_PROXY"] = os.environ["no_proxy"] = "127.0.0.1,localhost"
    sys.exit(run(parse_args()))


if __name__ == "__main__":
    main()
