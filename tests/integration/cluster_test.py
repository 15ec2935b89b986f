#!/usr/bin/env python3
"""Integration tests of the cluster: a real tandem-coordinator (--local, and
--worker over a real tandem-worker when that binary is built) driven by
`tandem generate`. Checks: 64 concurrent mixed-length greedy requests all
complete and equal `tandem run` line for line (fast precision; the
tensor-parallel proof in reference precision is tp_test.py); bad requests fail with
INVALID_ARGUMENT naming the value; SIGTERM drains and exits 0. With two
tandem-workers behind one coordinator (TwoGroupClusterTest, migration off:
--max-migrations 0; migration_test.py covers it on): shared-prefix and
distinct requests equal `tandem run`; a SIGKILLed worker fails only its own
requests (UNAVAILABLE within 2 s) while the other group keeps serving; the
restarted worker takes requests again (observed by then killing the other
worker: requests must still succeed, so they ran on the restarted one); with
every worker down requests fail with UNAVAILABLE naming both addresses.
Standard library only; every wait is bounded.

Env: TANDEM_COORDINATOR_BIN, TANDEM_BIN, TANDEM_MODEL; optional
TANDEM_WORKER_BIN (the --worker variant is skipped when it does not exist).
"""
import json
import os
import random
import signal
import subprocess
import threading
import time
import unittest

import generation_check
from generation_check import assert_lines_equal, jsonl, mixed_requests, parse_lines, write_temp
from server_process import Server

COORDINATOR = os.environ["TANDEM_COORDINATOR_BIN"]
BIN = os.environ["TANDEM_BIN"]
MODEL = os.environ["TANDEM_MODEL"]
WORKER = os.environ.get("TANDEM_WORKER_BIN", "")
STARTUP_TIMEOUT = 120
TIMEOUT = 600


def run_cli(args):
    return generation_check.run_cli(BIN, args, TIMEOUT)


class ClusterTestBase:
    """Shared checks; subclasses start the server in setUpClass."""

    def generate(self, args):
        return run_cli(["generate", "--addr", self.server.address] + args)

    def test_concurrent_requests_equal_run(self):
        path = write_temp(jsonl(mixed_requests()))
        try:
            code, out, err = self.generate(["--requests", path, "--concurrency", "64", "--json"])
            self.assertEqual(code, 0, err)
            rcode, rout, rerr = run_cli(["run", "--model", MODEL, "--requests", path, "--json"])
            self.assertEqual(rcode, 0, rerr)
        finally:
            os.unlink(path)
        assert_lines_equal(self, parse_lines(out), parse_lines(rout), 64,
                           ("prompt_token_ids", "token_ids", "text", "finish_reason"),
                           "tandem generate --concurrency 64")


class LocalClusterTest(ClusterTestBase, unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = Server([COORDINATOR, "--local", "--model", MODEL, "--port", "0"],
                            "tandem-coordinator")

    @classmethod
    def tearDownClass(cls):
        cls.server.kill()

    def expect_invalid(self, lines, *needles):
        path = write_temp("\n".join(json.dumps(l) if isinstance(l, dict) else l
                                    for l in lines) + "\n")
        try:
            code, out, err = self.generate(["--requests", path])
        finally:
            os.unlink(path)
        self.assertGreater(code, 0, f"expected a clean non-zero exit: {code} {err}")
        self.assertIn("INVALID_ARGUMENT", err)
        for n in needles:
            self.assertIn(n, err, f"stderr should name {n!r}: {err}")

    def test_empty_prompt(self):
        self.expect_invalid([{"prompt": ""}], "prompt is empty")

    def test_prompt_longer_than_context(self):
        # SmolLM2's context is 8192 tokens.
        self.expect_invalid([{"prompt_token_ids": [42] * 9000}], "9000", "8192")

    def test_n_above_limit(self):
        self.expect_invalid([{"prompt": "hello", "n": 129}], "129", "128")

    def test_unknown_field_is_rejected_by_the_client(self):
        self.expect_invalid([{"prompt": "hello", "max_tokenz": 3}], "max_tokenz", "line 1")

    def test_single_prompt_streams_like_run(self):
        args = ["--prompt", "Once upon a time", "--max-tokens", "12", "--temperature", "0"]
        code, out, err = self.generate(args)
        self.assertEqual(code, 0, err)
        rcode, rout, rerr = run_cli(["run", "--model", MODEL] + args)
        self.assertEqual(rcode, 0, rerr)
        self.assertEqual(out, rout)

    def test_deadline_exceeded_then_server_still_serves(self):
        code, out, err = self.generate(["--prompt", "hello", "--max-tokens", "4000",
                                        "--ignore-eos", "--timeout-s", "1"])
        self.assertEqual(code, 1, err)
        self.assertIn("DEADLINE_EXCEEDED", err)
        code, out, err = self.generate(["--prompt", "hello", "--max-tokens", "4", "--json"])
        self.assertEqual(code, 0, err)
        self.assertEqual(len(json.loads(out)["token_ids"]), 4)

    def test_unreachable_coordinator(self):
        code, out, err = run_cli(["generate", "--addr", "127.0.0.1:1", "--prompt", "hi",
                                  "--timeout-s", "5"])
        self.assertEqual(code, 1, err)
        self.assertRegex(err, "UNAVAILABLE|DEADLINE_EXCEEDED")


class SigtermTest(unittest.TestCase):
    def test_sigterm_exits_zero(self):
        server = Server([COORDINATOR, "--local", "--model", MODEL, "--port", "0"],
                        "tandem-coordinator")
        try:
            # A request in flight when SIGTERM lands still completes: wait for
            # its first streamed text (bounded), then signal.
            client = subprocess.Popen(
                [BIN, "generate", "--addr", server.address, "--prompt", "hello",
                 "--max-tokens", "48", "--ignore-eos", "--temperature", "0"],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            first = {}
            reader = threading.Thread(target=lambda: first.setdefault("c", client.stdout.read(1)),
                                      daemon=True)
            reader.start()
            reader.join(120)
            self.assertTrue(first.get("c"), "the client streamed nothing")
            start = time.monotonic()
            code = server.terminate(15)
            self.assertEqual(code, 0, "".join(server.stderr_lines)[-2000:])
            self.assertLess(time.monotonic() - start, 15)
            rest, err = client.communicate(timeout=60)
            out = first["c"] + rest
            self.assertEqual(client.returncode, 0, err)
            self.assertTrue(out.endswith("\n"))
            # After shutdown nothing listens any more.
            code, _, err = run_cli(["generate", "--addr", server.address, "--prompt", "hi",
                                    "--timeout-s", "5"])
            self.assertEqual(code, 1, err)
            self.assertRegex(err, "UNAVAILABLE|DEADLINE_EXCEEDED")
        finally:
            server.kill()
        self.assertIsNotNone(server.proc.poll(), "no process may be left")


@unittest.skipUnless(WORKER and os.path.exists(WORKER), "tandem-worker is not built")
class WorkerClusterTest(ClusterTestBase, unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.worker = Server([WORKER, "--model", MODEL, "--port", "0"], "tandem-worker")
        try:
            cls.server = Server([COORDINATOR, "--worker", cls.worker.address, "--model", MODEL,
                                 "--port", "0"], "tandem-coordinator")
        except BaseException:
            cls.worker.kill()
            raise

    @classmethod
    def tearDownClass(cls):
        cls.server.kill()
        cls.worker.kill()



def shared_and_distinct_requests():
    rng = random.Random(11)
    prefix = [rng.randint(100, 4000) for _ in range(120)]  # 7 full blocks of 16
    lines = []
    for i in range(16):
        suffix = [rng.randint(100, 4000) for _ in range(i % 5 + 1)]
        lines.append({"prompt_token_ids": prefix + suffix,
                      "max_tokens": rng.randint(6, 14), "temperature": 0})
    for i in range(16):
        distinct = [rng.randint(100, 4000) for _ in range(rng.randint(5, 50))]
        lines.append({"prompt_token_ids": distinct,
                      "max_tokens": rng.randint(6, 14), "temperature": 0})
    rng.shuffle(lines)
    return "\n".join(json.dumps(l) for l in lines) + "\n"


class StreamingClient:
    """One `tandem generate` process; records when it exited (monotonic)."""

    def __init__(self, address, prompt, max_tokens):
        self.proc = subprocess.Popen(
            [BIN, "generate", "--addr", address, "--prompt", prompt, "--max-tokens",
             str(max_tokens), "--ignore-eos", "--temperature", "0", "--timeout-s", "300"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.first = {}
        self.result = {}
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        self.first["c"] = self.proc.stdout.read(1)
        self.first["t"] = time.monotonic()
        rest, err = self.proc.communicate()
        self.result.update(out=self.first["c"] + rest, err=err, code=self.proc.returncode,
                           t=time.monotonic())

    def wait_first_output(self, deadline):
        while "c" not in self.first and time.monotonic() < deadline:
            time.sleep(0.05)
        return bool(self.first.get("c"))

    def join(self, timeout):
        self._thread.join(timeout)
        if self._thread.is_alive():
            self.proc.kill()
            self._thread.join(30)
        return self.result


@unittest.skipUnless(WORKER and os.path.exists(WORKER), "tandem-worker is not built")
class TwoGroupClusterTest(unittest.TestCase):
    def setUp(self):
        self.workers = []
        self.server = None
        try:
            self.workers = [Server([WORKER, "--model", MODEL, "--port", "0"], "tandem-worker")
                            for _ in range(2)]
            self.server = Server([COORDINATOR, "--worker",
                                  ",".join(w.address for w in self.workers), "--model", MODEL,
                                  "--port", "0", "--max-migrations", "0"],
                                 "tandem-coordinator")
        except BaseException:
            self.tearDown()
            raise

    def tearDown(self):
        for s in [self.server] + self.workers:
            if s is not None:
                s.kill()

    def generate(self, args):
        return run_cli(["generate", "--addr", self.server.address] + args)

    def test_shared_prefix_and_distinct_requests_equal_run(self):
        path = write_temp(shared_and_distinct_requests())
        try:
            code, out, err = self.generate(["--requests", path, "--concurrency", "32", "--json"])
            self.assertEqual(code, 0, err)
            rcode, rout, rerr = run_cli(["run", "--model", MODEL, "--requests", path, "--json"])
            self.assertEqual(rcode, 0, rerr)
        finally:
            os.unlink(path)
        assert_lines_equal(self, parse_lines(out), parse_lines(rout), 32,
                           ("prompt_token_ids", "token_ids", "text", "finish_reason"),
                           "two groups")

    def short_request(self, timeout_s=30):
        return self.generate(["--prompt", "hello there", "--max-tokens", "3", "--temperature", "0",
                              "--timeout-s", str(timeout_s)])

    def test_kill_restart_and_all_down(self):
        # Distinct prompts with no shared block spread round-robin over both
        # groups; each generates long enough to be in flight at the kill.
        clients = [StreamingClient(self.server.address, f"story number {i}: once upon a time", 400)
                   for i in range(6)]
        deadline = time.monotonic() + 120
        for c in clients:
            self.assertTrue(c.wait_first_output(deadline), "a client streamed nothing")
        victim = self.workers[0]
        port = victim.address.rsplit(":", 1)[1]
        killed_at = time.monotonic()
        victim.proc.send_signal(signal.SIGKILL)
        results = [c.join(300) for c in clients]
        failed = [r for r in results if r.get("code") != 0]
        succeeded = [r for r in results if r.get("code") == 0]
        self.assertTrue(failed, "no request ran on the killed worker")
        self.assertTrue(succeeded, "no request ran on the surviving worker")
        for r in failed:
            self.assertIn("UNAVAILABLE", r["err"])
            self.assertLess(r["t"] - killed_at, 2.0, r["err"])
        for r in succeeded:
            self.assertTrue(r["out"].endswith("\n"))
        # The surviving group keeps serving; the dead one is no longer chosen.
        for _ in range(4):
            code, _, err = self.short_request()
            self.assertEqual(code, 0, err)

        # Restart the killed worker on its port; the coordinator reconnects
        # without a restart. Observable: once the other worker is killed too,
        # requests can only succeed on the restarted one.
        victim.kill()
        self.workers[0] = Server([WORKER, "--model", MODEL, "--port", port], "tandem-worker")
        restarted_at = time.monotonic()
        self.workers[1].proc.send_signal(signal.SIGKILL)
        ok_at = None
        errors = []
        while time.monotonic() - restarted_at < 15:
            code, _, err = self.short_request(timeout_s=10)
            if code == 0:
                ok_at = time.monotonic()
                break
            errors.append(err)
            time.sleep(0.2)
        self.assertIsNotNone(ok_at, "the restarted worker took no request: " + "".join(errors[-3:]))
        self.assertLess(ok_at - restarted_at, 8.0)

        # Every worker down: requests fail with UNAVAILABLE naming both.
        self.workers[0].proc.send_signal(signal.SIGKILL)
        addresses = [w.address for w in self.workers]
        last = ""
        for _ in range(4):  # the first may still be routed to the just-killed group
            code, _, last = self.short_request(timeout_s=10)
            self.assertEqual(code, 1, last)
            self.assertIn("UNAVAILABLE", last)
            if all(a in last for a in addresses):
                break
        for a in addresses:
            self.assertIn(a, last)


if __name__ == "__main__":
    unittest.main()
