#!/usr/bin/env python3
"""Request migration against real processes: a tandem-coordinator in front of
tandem-workers on 127.0.0.1.

Two replicas (TwoReplicaTest): 64 concurrent streams — greedy, seeded
sampling, n = 2 and 4-beam search mixed — run once on the unfailed cluster
and once more while one worker is SIGKILLed mid-decode. Every request of the
second run succeeds with exactly the output of the first (the client
assembles its result from the streamed deltas, so a repeated or missing
token would show), and ModelInfo counts the killed group's migrations.

One replica (OneReplicaTest): SIGKILLing the only worker ends the running
streams with UNAVAILABLE within 2 s (no group can take them within
--migration-timeout-ms); restarted on its port, the worker serves again.

Clients: `tandem generate` (JSONL requests, --json) and the Python SDK
(stream_client: no retries). Every wait is bounded.

Env: TANDEM_COORDINATOR_BIN, TANDEM_WORKER_BIN, TANDEM_BIN, TANDEM_MODEL;
TANDEM_MIGRATION_STREAMS (default 64: the issue's figure) sizes the two-replica
run, smaller in the ASan job, where every stream costs several times as much;
TANDEM_MIGRATION_LOST=0 (the ASan job) skips LostReplicaTest, which the main
build runs.

Lost for good (LostReplicaTest): a replica SIGKILLed and never restarted, one
SIGSTOPped and never resumed, a TP = 2 group losing its second rank. Every
stream still ends as on the unfailed run, the lost replica is reported
unhealthy (the hung one within 5 s), and requests sent meanwhile are served by
the other replica.
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import unittest

import grpc

import stream_client
import tandem_client
from generation_check import parse_lines, write_temp
from server_process import Server

COORDINATOR = os.environ["TANDEM_COORDINATOR_BIN"]
WORKER = os.environ["TANDEM_WORKER_BIN"]
BIN = os.environ["TANDEM_BIN"]
MODEL = os.environ["TANDEM_MODEL"]
TIMEOUT = 600
STREAMS = int(os.environ.get("TANDEM_MIGRATION_STREAMS", "64"))
WORDS = ["river", "mountain", "city", "garden", "machine", "ocean", "winter", "story",
         "engine", "forest", "bridge", "letter"]


def mixed_requests(count=STREAMS):
    """`count` JSONL requests: greedy, seeded sampling, n = 2 seeded
    sampling and 4-beam search, in turn; distinct prompts."""
    lines = []
    for i in range(count):
        words = " ".join(WORDS[(i * 7 + k) % len(WORDS)] for k in range(3 + i % 5))
        req = {"prompt": f"Request {i}: tell me about the {words}", "max_tokens": 40,
               "ignore_eos": True}
        kind = i % 4
        if kind == 0:
            req["temperature"] = 0
        elif kind == 1:
            req.update(temperature=0.8, top_p=0.95, seed=1000 + i)
        elif kind == 2:
            req.update(temperature=0.7, n=2, seed=2000 + i)
        else:
            req.update(temperature=0, num_beams=4, num_return_sequences=2, max_tokens=24)
        lines.append(req)
    return lines


def comparable(line):
    """A `tandem generate --json` line without what depends on where the
    request ran (prefix-cache hits); beam scores rounded to 1e-4."""
    line = dict(line)
    line.pop("prefix_hit_tokens", None)
    if "score" in line:
        line["score"] = round(line["score"], 4)
    if "sequences" in line:
        line["sequences"] = [comparable(s) for s in line["sequences"]]
    return line


def group_counters(port):
    """{address: tandem_client.WorkerGroup} from ModelInfo."""
    return {g.address: g for g in stream_client.model_info(port).worker_groups}


def generated_tokens(port):
    """{address: tokens the group generated so far} from ModelInfo."""
    return {a: g.num_generated_tokens for a, g in group_counters(port).items()}


class TwoReplicaTest(unittest.TestCase):
    def setUp(self):
        self.workers = []
        self.coordinator = None
        self.addCleanup(self.stop)
        # One thread each: the two workers share the machine's two cores.
        self.workers = [Server([WORKER, "--model", MODEL, "--port", "0", "--threads", "1"],
                               "tandem-worker") for _ in range(2)]
        self.coordinator = Server(
            [COORDINATOR, "--model", MODEL, "--port", "0", "--http-port", "-1",
             "--worker", ",".join(w.address for w in self.workers), "--max-migrations", "3",
             "--migration-timeout-ms", "1000"], "tandem-coordinator")

    def stop(self):
        for s in [self.coordinator] + self.workers:
            if s is not None:
                s.kill()

    def generate(self, path):
        return subprocess.Popen(
            [BIN, "generate", "--addr", self.coordinator.address, "--requests", path,
             "--concurrency", str(STREAMS), "--json", "--timeout-s", "300"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def wait_mid_decode(self, victim, proc, before):
        """Polls ModelInfo until `victim`'s group generated 64 more tokens
        than before the run (`before`: {address: num_generated_tokens}) and
        still has requests (they are mid-decode there), and every other
        group has run requests of this run too. (Not necessarily still
        running them: a victim much slower than the others, e.g. a TP group
        in reference precision, may reach 64 tokens after they finished.)"""
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            self.assertIsNone(proc.poll(), "the run ended before the kill")
            groups = group_counters(self.coordinator.port)
            v = groups[victim]
            others_served = all(g.load > 0 or g.num_generated_tokens > before[address]
                                for address, g in groups.items() if address != victim)
            if v.num_generated_tokens - before[victim] >= 64 and v.load > 0 and others_served:
                return
            time.sleep(0.02)
        self.fail("the victim's group never got mid-decode")

    def test_kill_one_of_two_replicas_mid_decode_loses_nothing(self):
        path = write_temp("".join(json.dumps(r) + "\n" for r in mixed_requests()))
        self.addCleanup(os.unlink, path)
        baseline = self.generate(path)
        out, err = baseline.communicate(timeout=TIMEOUT)
        self.assertEqual(baseline.returncode, 0, err)
        want = parse_lines(out)
        self.assertEqual(len(want), STREAMS)

        victim = self.workers[0].address
        before = generated_tokens(self.coordinator.port)
        run = self.generate(path)
        self.wait_mid_decode(victim, run, before)
        self.workers[0].proc.send_signal(signal.SIGKILL)
        out, err = run.communicate(timeout=TIMEOUT)
        self.assertEqual(run.returncode, 0, f"requests failed after the kill: {err[-2000:]}")
        got = parse_lines(out)
        self.assertEqual(len(got), STREAMS)
        for i, (g, w) in enumerate(zip(got, want)):
            self.assertNotIn("error", g, f"request {i}")
            self.assertEqual(comparable(g), comparable(w), f"request {i} differs after migration")

        groups = group_counters(self.coordinator.port)
        print(f"migrated {groups[victim].num_migrations} requests off the killed group",
              file=sys.stderr)
        self.assertGreater(groups[victim].num_migrations, 0, "nothing migrated")
        self.assertEqual(groups[victim].num_migration_failures, 0)
        self.assertFalse(groups[victim].healthy)


def greedy_requests(count, max_tokens):
    """`count` greedy JSONL requests of `max_tokens` tokens, distinct prompts."""
    return [{"prompt": f"Story {i}: once upon a time in the {WORDS[i % len(WORDS)]}",
             "max_tokens": max_tokens, "ignore_eos": True, "temperature": 0}
            for i in range(count)]


# The step deadline's floor in LostReplicaTest: a hung replica's requests
# migrate after it.
STEP_FLOOR_S = 30


@unittest.skipIf(os.environ.get("TANDEM_MIGRATION_LOST") == "0",
                 "TANDEM_MIGRATION_LOST=0: the sanitizer job runs the kill tests only; these "
                 "run in the main build")
class LostReplicaTest(unittest.TestCase):
    """A replica lost for good: SIGKILLed (never restarted) or SIGSTOPped
    (hung: its socket stays open, its steps never answer; never resumed).
    Every stream completes with the unfailed run's output, and requests
    sent meanwhile are served by the other replica."""

    STREAMS = 16
    TOKENS = 64

    def setUp(self):
        self.workers = []
        self.addCleanup(self.stop)
        self.path = write_temp("".join(json.dumps(r) + "\n"
                                       for r in greedy_requests(self.STREAMS, self.TOKENS)))
        self.addCleanup(os.unlink, self.path)

    def start(self, victim_tp=1):
        """Worker 0 (the victim: one process, or a TP group under mpirun),
        worker 1 and the coordinator in front of both."""
        args = [WORKER, "--model", MODEL, "--port", "0", "--threads", "1"]
        if victim_tp > 1:
            # Fast precision's all-reduce changes the sums, so only reference
            # precision gives the same tokens on a TP group and a lone worker.
            args += ["--precision", "reference"]
        if victim_tp == 1:
            self.workers.append(Server(args, "tandem-worker"))
        else:
            mpirun = shutil.which("mpirun")
            if mpirun is None:
                self.skipTest("mpirun not found")
            env = dict(os.environ, OMPI_MCA_plm_rsh_agent="", OMPI_MCA_mpi_yield_when_idle="1")
            group = Server([mpirun, "--allow-run-as-root", "--oversubscribe", "-np",
                            str(victim_tp)] + args, "tandem-worker", env=env, required=False)
            self.workers.append(group)
            if group.address is None:
                self.skipTest(f"mpirun cannot start the TP group here: {group.stderr()[-500:]}")
        self.workers.append(Server(args, "tandem-worker"))
        self.coordinator = Server(
            [COORDINATOR, "--model", MODEL, "--port", "0", "--http-port", "-1",
             "--worker", ",".join(w.address for w in self.workers), "--max-migrations", "3",
             "--migration-timeout-ms", "1000", "--step-timeout-floor-ms",
             str(int(STEP_FLOOR_S * 1000))],
            "tandem-coordinator")

    def stop(self):
        for s in [getattr(self, "coordinator", None)] + self.workers:
            if s is not None:
                s.kill()

    def generate(self):
        return subprocess.Popen(
            [BIN, "generate", "--addr", self.coordinator.address, "--requests", self.path,
             "--concurrency", str(self.STREAMS), "--json", "--timeout-s", "300"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def run_losing(self, victim_signal, victim_pid=None):
        """The baseline, then the same run with worker 0 (or `victim_pid`(),
        one of its ranks) sent `victim_signal` mid-decode; returns the seconds
        from the signal until ModelInfo reported the victim unhealthy."""
        baseline = self.generate()
        out, err = baseline.communicate(timeout=TIMEOUT)
        self.assertEqual(baseline.returncode, 0, err)
        want = parse_lines(out)
        victim = self.workers[0].address
        before = generated_tokens(self.coordinator.port)
        run = self.generate()
        TwoReplicaTest.wait_mid_decode(self, victim, run, before)
        os.kill(victim_pid() if victim_pid else self.workers[0].proc.pid, victim_signal)
        lost_at = time.monotonic()
        while group_counters(self.coordinator.port)[victim].healthy:
            self.assertLess(time.monotonic() - lost_at, 30, "the victim never turned unhealthy")
            time.sleep(0.05)
        unhealthy_after = time.monotonic() - lost_at
        # New requests meanwhile: routed to the live replica, served well
        # before the hung replica's step deadline (>= STEP_FLOOR_S) would
        # have moved them (a bound loose enough for the sanitizer builds).
        with stream_client.client(self.coordinator.port, timeout=120) as c:
            for i in range(4):
                started = time.monotonic()
                result = c.generate(f"meanwhile {i}", max_tokens=3, temperature=0)
                self.assertEqual(len(result.completions[0].token_ids), 3)
                self.assertLess(time.monotonic() - started, STEP_FLOOR_S / 2,
                                "a new request waited for the lost replica")
        self.assertFalse(group_counters(self.coordinator.port)[victim].healthy)
        out, err = run.communicate(timeout=TIMEOUT)
        self.assertEqual(run.returncode, 0, f"requests failed after the loss: {err[-2000:]}")
        got = parse_lines(out)
        self.assertEqual(len(got), self.STREAMS)
        for i, (g, w) in enumerate(zip(got, want)):
            self.assertNotIn("error", g, f"request {i}")
            self.assertEqual(comparable(g), comparable(w), f"request {i} differs")
        groups = group_counters(self.coordinator.port)
        self.assertGreater(groups[victim].num_migrations, 0, "nothing migrated")
        self.assertEqual(groups[victim].num_migration_failures, 0)
        self.assertFalse(groups[victim].healthy, "the lost replica came back")
        return unhealthy_after

    def test_killed_replica_never_restarted(self):
        self.start()
        self.run_losing(signal.SIGKILL)

    def test_hung_replica_is_unhealthy_within_5s_and_its_requests_migrate(self):
        self.start()
        after = self.run_losing(signal.SIGSTOP)
        print(f"hung replica reported unhealthy after {after:.2f} s", file=sys.stderr)
        self.assertLess(after, 5.0)


    def test_tp2_group_losing_its_second_rank(self):
        self.start(victim_tp=2)
        session = self.workers[0].proc.pid  # mpirun leads its session

        def rank1():
            for entry in os.listdir("/proc"):
                try:
                    with open(f"/proc/{entry}/environ", "rb") as f:
                        env = f.read().split(b"\0")
                    if os.getsid(int(entry)) == session and b"OMPI_COMM_WORLD_RANK=1" in env:
                        with open(f"/proc/{entry}/cmdline", "rb") as f:
                            if b"tandem-worker" in f.read():
                                return int(entry)
                except (OSError, ValueError):
                    continue
            self.fail("rank 1 of the TP group not found")

        self.run_losing(signal.SIGKILL, victim_pid=rank1)


class OneReplicaTest(unittest.TestCase):
    def setUp(self):
        self.worker = Server([WORKER, "--model", MODEL, "--port", "0"], "tandem-worker")
        self.addCleanup(lambda: self.worker.kill())
        self.coordinator = Server(
            [COORDINATOR, "--model", MODEL, "--port", "0", "--http-port", "-1",
             "--worker", self.worker.address, "--migration-timeout-ms", "1000"],
            "tandem-coordinator")
        self.addCleanup(self.coordinator.kill)

    def stream_until_error(self, c, results, started):
        try:
            stream = c.stream("Once upon a time", max_tokens=4000, ignore_eos=True,
                              temperature=0)
            for _ in stream:
                started.set()
            results.append(("ok", time.monotonic()))
        except tandem_client.TandemError as e:
            results.append((e.code, time.monotonic(), e.message))

    def test_unavailable_within_2s_then_serves_after_restart(self):
        results, threads, started = [], [], threading.Event()
        clients = [stream_client.client(self.coordinator.port, timeout=120, own_connection=True)
                   for _ in range(4)]
        for c in clients:
            self.addCleanup(c.close)
            t = threading.Thread(target=self.stream_until_error, args=(c, results, started))
            t.start()
            threads.append(t)
        self.assertTrue(started.wait(60), "no stream produced tokens")
        time.sleep(0.2)  # every stream is decoding
        port = self.worker.port
        killed_at = time.monotonic()
        self.worker.proc.send_signal(signal.SIGKILL)
        for t in threads:
            t.join(30)
            self.assertFalse(t.is_alive(), "a stream did not end after the kill")
        self.assertEqual(len(results), 4)
        for r in results:
            self.assertEqual(r[0], grpc.StatusCode.UNAVAILABLE, r)
            self.assertLess(r[1] - killed_at, 2.0, r)
            self.assertIn("no healthy worker group took it", r[2])

        self.worker.kill()
        self.worker = Server([WORKER, "--model", MODEL, "--port", str(port)], "tandem-worker")
        deadline = time.monotonic() + 20
        last = None
        with stream_client.client(self.coordinator.port, timeout=10) as c:
            while time.monotonic() < deadline:
                try:
                    result = c.generate("hello there", max_tokens=3, temperature=0)
                    self.assertEqual(len(result.completions[0].token_ids), 3)
                    return
                except tandem_client.TandemError as e:
                    last = e
                    time.sleep(0.2)
        self.fail(f"the restarted worker took no request: {last}")


if __name__ == "__main__":
    unittest.main()
