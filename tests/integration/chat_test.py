#!/usr/bin/env python3
"""Integration test of `tandem chat` against a real cluster (tandem-worker +
tandem-coordinator on 127.0.0.1, ports picked at run time). Greedy answers
are compared with `tandem generate --requests` of the same conversation
written out as chat messages, so each check shows what the chat sent: turn 2
carries turn 1 (and differs from turn 2 asked alone, so the check can fail),
/reset forgets it, --system goes first, a rejected turn (longer than the
context) prints the server's error and is left out while the session goes
on, a lost coordinator ends the session with exit code 1, and the "> " prompt
appears only on a terminal. Standard library only; every wait is bounded.

Env: TANDEM_BIN, TANDEM_WORKER_BIN, TANDEM_COORDINATOR_BIN, TANDEM_MODEL.
"""
import json
import os
import pty
import socket
import subprocess
import tempfile
import threading
import unittest

from server_process import Server

BIN = os.environ["TANDEM_BIN"]
WORKER = os.environ["TANDEM_WORKER_BIN"]
COORDINATOR = os.environ["TANDEM_COORDINATOR_BIN"]
MODEL = os.environ["TANDEM_MODEL"]
MAX_TOKENS = 16
CHAT_TIMEOUT = 180
Q1 = "What is 2+2?"
Q2 = "And times 3?"
SYSTEM = "You are a pirate. Answer like one."
# Far more tokens than the model's context (8192): the server rejects the turn.
TOO_LONG = "hello " * 12000


def chat(address, stdin, extra=()):
    args = [BIN, "chat", "--addr", address, "--temperature", "0", "--max-tokens",
            str(MAX_TOKENS), "--timeout-s", "120", *extra]
    return subprocess.run(args, input=stdin, capture_output=True, text=True,
                          timeout=CHAT_TIMEOUT)


def generate(address, conversations):
    """The greedy answer text to each conversation (a list of (role, content))."""
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
        for conversation in conversations:
            messages = [{"role": r, "content": c} for r, c in conversation]
            f.write(json.dumps({"messages": messages, "temperature": 0,
                                "max_tokens": MAX_TOKENS}) + "\n")
        path = f.name
    try:
        p = subprocess.run([BIN, "generate", "--addr", address, "--requests", path,
                            "--timeout-s", "120"], capture_output=True, text=True,
                           timeout=CHAT_TIMEOUT)
    finally:
        os.unlink(path)
    assert p.returncode == 0, p.stderr
    return [json.loads(line)["text"] for line in p.stdout.splitlines()]


def free_port():
    """A port nothing listens on (bound and released at once)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class StreamReader:
    """Collects a pipe's text in a thread; wait_for() blocks until a
    predicate over everything read holds, or the timeout passes."""

    def __init__(self, stream):
        self.text = ""
        self._cond = threading.Condition()
        self._thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self._thread.start()

    def _read(self, stream):
        while True:
            chunk = stream.read(1)
            with self._cond:
                if not chunk:
                    self._cond.notify_all()
                    return
                self.text += chunk
                self._cond.notify_all()

    def wait_for(self, predicate, timeout):
        with self._cond:
            return self._cond.wait_for(lambda: predicate(self.text), timeout)


class ChatTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.worker = Server([WORKER, "--model", MODEL, "--port", "0"], "tandem-worker")
        try:
            cls.server = Server([COORDINATOR, "--worker", cls.worker.address, "--model", MODEL,
                                 "--port", "0"], "tandem-coordinator")
        except BaseException:
            cls.worker.kill()
            raise
        try:
            cls.a1, cls.a2_alone = generate(cls.server.address, [[("user", Q1)],
                                                                 [("user", Q2)]])
            cls.a2, = generate(cls.server.address,
                               [[("user", Q1), ("assistant", cls.a1), ("user", Q2)]])
        except BaseException:
            cls.tearDownClass()
            raise

    @classmethod
    def tearDownClass(cls):
        cls.server.kill()
        cls.worker.kill()

    def test_second_turn_carries_the_first(self):
        # Otherwise the comparison below could not tell history from none.
        self.assertNotEqual(self.a2, self.a2_alone, "the prompts do not tell history apart")
        p = chat(self.server.address, f"{Q1}\n{Q2}\n/exit\nnever sent\n")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout, f"{self.a1}\n{self.a2}\n", p.stderr)
        self.assertNotIn("> ", p.stderr)  # stdin is not a terminal

    def test_reset_forgets_the_conversation_and_eof_ends_it(self):
        p = chat(self.server.address, f"{Q1}\n{Q2}\n/reset\n\n{Q2}\n")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout, f"{self.a1}\n{self.a2}\n{self.a2_alone}\n", p.stderr)
        self.assertIn("conversation cleared", p.stderr)

    def test_system_prompt_comes_first(self):
        expected, = generate(self.server.address, [[("system", SYSTEM), ("user", Q1)]])
        self.assertNotEqual(expected, self.a1, "the system prompt changes nothing")
        p = chat(self.server.address, f"{Q1}\n", extra=["--system", SYSTEM])
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout, f"{expected}\n", p.stderr)

    def test_rejected_turn_is_reported_and_left_out(self):
        p = chat(self.server.address, f"{TOO_LONG}\n{Q1}\n/exit\n")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("INVALID_ARGUMENT", p.stderr)
        self.assertIn("context length", p.stderr)
        # The next turn is answered as the first of a fresh conversation.
        self.assertEqual(p.stdout, f"{self.a1}\n", p.stderr)

    def test_prompt_on_a_terminal(self):
        leader, follower = pty.openpty()
        try:
            os.write(leader, b"/exit\n")
            p = subprocess.run([BIN, "chat", "--addr", self.server.address], stdin=follower,
                               capture_output=True, text=True, timeout=CHAT_TIMEOUT)
        finally:
            os.close(leader)
            os.close(follower)
        self.assertEqual((p.returncode, p.stdout), (0, ""), p.stderr)
        self.assertTrue(p.stderr.startswith("> "), p.stderr)

    def test_bad_options_and_unreachable_server(self):
        p = chat(self.server.address, "", extra=["--n", "2"])
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("--n 2", p.stderr)
        p = chat(self.server.address, "", extra=["--prompt", "hi"])
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("--prompt", p.stderr)
        address = f"127.0.0.1:{free_port()}"
        p = chat(address, f"{Q1}\n")
        self.assertEqual((p.returncode, p.stdout), (1, ""), p.stderr)
        self.assertIn(f"cannot reach the coordinator at {address}", p.stderr)

    def test_lost_coordinator_ends_the_session(self):
        # A coordinator of its own (in-process model) that the test kills.
        server = Server([COORDINATOR, "--local", "--model", MODEL, "--port", "0"],
                        "tandem-coordinator")
        proc = None
        try:
            first, = generate(server.address, [[("user", Q1)]])
            proc = subprocess.Popen(
                [BIN, "chat", "--addr", server.address, "--temperature", "0", "--max-tokens",
                 str(MAX_TOKENS), "--timeout-s", "120"],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                text=True)
            out, err = StreamReader(proc.stdout), StreamReader(proc.stderr)
            proc.stdin.write(f"{Q1}\n")
            proc.stdin.flush()
            self.assertTrue(out.wait_for(lambda t: t == f"{first}\n", CHAT_TIMEOUT),
                            f"stdout {out.text!r}; stderr {err.text!r}")
            server.kill()
            proc.stdin.write(f"{Q2}\n")
            proc.stdin.flush()
            self.assertEqual(proc.wait(60), 1, err.text)
            self.assertTrue(err.wait_for(lambda t: "lost the coordinator" in t, 10), err.text)
            self.assertEqual(out.text, f"{first}\n")
        finally:
            if proc is not None:
                if proc.poll() is None:
                    proc.kill()
                proc.wait(30)
                proc.stdin.close()
            server.kill()


if __name__ == "__main__":
    unittest.main()
