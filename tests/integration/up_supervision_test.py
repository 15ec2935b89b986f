#!/usr/bin/env python3
"""Integration test of `tandem up`'s supervision: `tandem up --replicas 2
--tp 1` starts two worker groups (each on its own port, both given to the
coordinator); with streams going on through the Python SDK, a worker is
SIGKILLed. The launcher logs the restart (exit status, attempt), never
exits, the coordinator keeps serving (every request on the other replica
succeeds; only those that were running on the killed one may fail), the
restarted worker comes back on the same address, ModelInfo reports both
groups healthy again and the restarted one runs steps again. A coordinator
that keeps crashing (SIGKILLed 3 times) ends `tandem up` with exit 1 and a
message, nothing left behind. With --tp 2, SIGKILL of one rank restarts its
whole mpirun group (the rest of the old group gone). --replicas out of range is exit 2 naming the
value and the limit. Every wait is bounded; traffic stays on 127.0.0.1.

Env: TANDEM_BIN, TANDEM_MODEL, TANDEM_BIN_DIR.
"""
import os
import re
import signal
import subprocess
import threading
import time
import unittest

import grpc

from stream_client import generate_stream, model_info
from up_test import BIN, BIN_DIR, MODEL, THREADS, WORKER_COMM, Launcher, alive, descendants

RESTART_TIMEOUT = 120  # the restarted worker loads the model again
STOP_TIMEOUT = 30
REQUEST = {"prompt": "Count to 50:", "max_tokens": 24, "temperature": 0, "ignore_eos": True}


def wait_for(predicate, timeout, interval=0.2):
    """Polls `predicate` until it returns a true value (returned) or `timeout` s pass (None)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    return None


def groups_by_address(port):
    """ModelInfo's worker groups as {address: WorkerGroup}; {} when the call fails."""
    try:
        return {g.address: g for g in model_info(port).worker_groups}
    except Exception:  # noqa: BLE001 (the coordinator may be restarting)
        return {}


class Traffic:
    """Streams REQUEST one after another from `threads` threads until
    stopped; records (start, end, StreamResult) of each."""

    def __init__(self, port, threads=2):
        self.port = port
        self.results = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._run, daemon=True) for _ in range(threads)]
        for t in self._threads:
            t.start()

    def _run(self):
        while not self._stop.is_set():
            start = time.monotonic()
            r = generate_stream(self.port, REQUEST, timeout=60)
            with self._lock:
                self.results.append((start, time.monotonic(), r))

    def stop(self):
        self._stop.set()
        for t in self._threads:
            t.join(90)
        return list(self.results)

    def ok_since(self, since):
        with self._lock:
            return sum(1 for start, _, r in self.results
                       if start >= since and r.status == grpc.StatusCode.OK)


def succeeded(r):
    return r.status == grpc.StatusCode.OK and not r.error and len(r.token_ids) == 24


class UpSupervisionTest(unittest.TestCase):
    def start(self, args):
        launcher = Launcher(args)
        self.addCleanup(launcher.kill)
        if launcher.error is not None:
            self.fail(launcher.error)
        return launcher

    def worker_addresses(self, launcher):
        return re.findall(r"^tandem up: tandem-worker \(pid (\d+)\) serving on (\S+:\d+)$",
                          launcher.stderr(), re.MULTILINE)

    def test_a_killed_worker_is_restarted_and_serves_again(self):
        launcher = self.start(["--model", MODEL, "--tp", "1", "--replicas", "2", "--no-draft",
                               "--port", "0", "--bin-dir", BIN_DIR, "--grace-s", "8", *THREADS])
        port = int(launcher.address.rsplit(":", 1)[1])
        workers = self.worker_addresses(launcher)
        self.assertEqual(len(workers), 2, launcher.stderr())
        self.assertNotEqual(workers[0][1], workers[1][1])
        self.assertEqual(set(groups_by_address(port)), {a for _, a in workers})
        names = list(launcher.pids_seen.values())
        self.assertEqual(names.count(WORKER_COMM), 2, launcher.pids_seen)

        traffic = Traffic(port)
        self.assertTrue(wait_for(lambda: traffic.ok_since(0) >= 2, 120), "no request succeeded")
        victim_pid, victim = int(workers[1][0]), workers[1][1]
        before = groups_by_address(port)[victim].num_steps
        killed_at = time.monotonic()
        os.kill(victim_pid, signal.SIGKILL)

        restarted = wait_for(lambda: re.search(
            rf"^tandem up: worker group 1 \(tandem-worker, pid {victim_pid}\) exited with signal 9 "
            r"\(Killed\): restarting it in \S+ \(attempt 1\)$", launcher.stderr(), re.MULTILINE),
            30)
        self.assertTrue(restarted, launcher.stderr()[-3000:])
        # Back on the same address, and both groups healthy in the coordinator.
        back = wait_for(lambda: len(self.worker_addresses(launcher)) == 3, RESTART_TIMEOUT)
        self.assertTrue(back, launcher.stderr()[-3000:])
        new_pid, address = self.worker_addresses(launcher)[2]
        self.assertEqual(address, victim)
        self.assertNotEqual(int(new_pid), victim_pid)
        healthy = wait_for(lambda: all(g.healthy for g in groups_by_address(port).values())
                           and len(groups_by_address(port)) == 2, 30)
        self.assertTrue(healthy, groups_by_address(port))
        # The restarted replica takes requests again.
        steps_at_return = groups_by_address(port)[victim].num_steps
        grew = wait_for(lambda: groups_by_address(port)[victim].num_steps > steps_at_return, 60)
        results = traffic.stop()
        self.assertTrue(grew, f"no steps on {victim} since it came back "
                              f"(before the kill: {before}, at return: {steps_at_return})")
        self.assertIsNone(launcher.proc.poll(), "tandem up exited")

        # Requests succeeded throughout; only those running at the kill may fail.
        failed = [(s, e, r) for s, e, r in results if not succeeded(r)]
        for s, e, r in failed:
            self.assertLessEqual(s, killed_at, f"a request started after the kill failed: "
                                               f"{r.status} {r.details} {r.error}")
            self.assertGreaterEqual(e, killed_at)
        self.assertLessEqual(len(failed), 2, [(r.status, r.details) for _, _, r in failed])
        after_kill = [r for s, _, r in results if s > killed_at]
        self.assertGreater(len(after_kill), 0)
        self.assertTrue(all(succeeded(r) for r in after_kill))

        pids = {**launcher.pids_seen, **descendants(launcher.proc.pid)}
        launcher.proc.send_signal(signal.SIGTERM)
        self.assertEqual(launcher.proc.wait(STOP_TIMEOUT), 0, launcher.stderr()[-3000:])
        self.assertEqual(alive(pids), {}, "processes left behind")

    def test_a_killed_rank_restarts_its_whole_tp2_group(self):
        launcher = Launcher(["--model", MODEL, "--tp", "2", "--replicas", "2", "--no-draft",
                             "--port", "0", "--bin-dir", BIN_DIR, "--grace-s", "8", *THREADS])
        self.addCleanup(launcher.kill)
        if launcher.error is not None:
            self.skipTest(f"TP=2 worker groups did not come up under mpirun: {launcher.error}")
        port = int(launcher.address.rsplit(":", 1)[1])
        mpiruns = sorted(pid for pid, comm in launcher.pids_seen.items() if comm == "mpirun")
        self.assertEqual(len(mpiruns), 2, launcher.pids_seen)
        # The second group started: the one whose rank 1 (its higher worker pid) dies.
        group = descendants(mpiruns[1])
        ranks = sorted(pid for pid, comm in group.items() if comm == WORKER_COMM)
        self.assertEqual(len(ranks), 2, group)
        victim = self.worker_addresses(launcher)[1][1]
        traffic = Traffic(port)
        self.assertTrue(wait_for(lambda: traffic.ok_since(0) >= 2, 120), "no request succeeded")
        os.kill(ranks[1], signal.SIGKILL)
        restarted = wait_for(lambda: re.search(
            rf"^tandem up: worker group 1 \(mpirun, pid {mpiruns[1]}\) exited with .*: "
            r"restarting it in \S+ \(attempt 1\)$", launcher.stderr(), re.MULTILINE), 60)
        self.assertTrue(restarted, launcher.stderr()[-3000:])
        # The rest of the old group is gone; the new one serves at the same address.
        self.assertTrue(wait_for(lambda: not alive(group), 10), alive(group))
        back = wait_for(lambda: len(self.worker_addresses(launcher)) == 3, RESTART_TIMEOUT)
        self.assertTrue(back, launcher.stderr()[-3000:])
        self.assertEqual(self.worker_addresses(launcher)[2][1], victim)
        healthy = wait_for(lambda: len(groups_by_address(port)) == 2 and all(
            g.healthy for g in groups_by_address(port).values()), 30)
        self.assertTrue(healthy, groups_by_address(port))
        steps = groups_by_address(port)[victim].num_steps
        grew = wait_for(lambda: groups_by_address(port)[victim].num_steps > steps, 60)
        traffic.stop()
        self.assertTrue(grew, f"no steps on {victim} since it came back")
        self.assertIsNone(launcher.proc.poll(), "tandem up exited")
        pids = {**launcher.pids_seen, **descendants(launcher.proc.pid)}
        launcher.proc.send_signal(signal.SIGTERM)
        self.assertEqual(launcher.proc.wait(STOP_TIMEOUT), 0, launcher.stderr()[-3000:])
        self.assertEqual(alive(pids), {}, "processes left behind")

    def test_a_coordinator_crash_loop_stops_everything(self):
        launcher = self.start(["--model", MODEL, "--tp", "1", "--no-draft", "--port", "0",
                               "--bin-dir", BIN_DIR, "--grace-s", "8", *THREADS])
        pids = dict(launcher.pids_seen)

        def coordinator_lines():
            return re.findall(r"^tandem up: tandem-coordinator \(pid (\d+)\) serving on (\S+)$",
                              launcher.stderr(), re.MULTILINE)

        # Two crashes: restarted each time, on the same address.
        for crash in range(1, 3):
            pid, address = coordinator_lines()[-1]
            self.assertEqual(address, launcher.address)
            os.kill(int(pid), signal.SIGKILL)
            self.assertTrue(wait_for(lambda: len(coordinator_lines()) == crash + 1, 60),
                            launcher.stderr()[-3000:])
            self.assertIn(f"(attempt {crash})", launcher.stderr())
            pids.update(descendants(launcher.proc.pid))
        p = subprocess.run([BIN, "health", "--addr", launcher.address], capture_output=True,
                           text=True, timeout=30)
        self.assertEqual((p.returncode, p.stdout), (0, "SERVING\n"), p.stderr)
        # The third within 60 s: give up.
        os.kill(int(coordinator_lines()[-1][0]), signal.SIGKILL)
        try:
            code = launcher.proc.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            code = None
        self.assertEqual(code, 1, launcher.stderr()[-3000:])
        self.assertRegex(launcher.stderr(), r"coordinator \(tandem-coordinator, pid \d+\) exited "
                                            r"with signal 9 \(Killed\); it crashed 3 times within "
                                            r"1m: giving up")
        self.assertEqual(alive(pids), {}, "processes left behind")

    def test_replicas_out_of_range_exit_2(self):
        for replicas in ("0", "65"):
            p = subprocess.run([BIN, "up", "--model", MODEL, "--replicas", replicas,
                                "--bin-dir", BIN_DIR], capture_output=True, text=True, timeout=30)
            self.assertEqual((p.returncode, p.stdout), (2, ""), p.stderr)
            self.assertIn(f"--replicas {replicas} is out of range: must be in [1, 64]", p.stderr)


if __name__ == "__main__":
    unittest.main()
