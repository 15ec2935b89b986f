#!/usr/bin/env python3
"""Integration test of discovery: tandem-coordinator finds its worker groups
and draft workers through DNS names it re-resolves, as a Kubernetes headless
Service gives them (one A record per ready pod, all on one port).

The test runs its own tiny DNS server on 127.0.0.1 (UDP, port chosen at run
time) whose records it edits, two real tandem-worker groups on 127.0.0.1:P
and 127.0.0.2:P (the same port, as pods of one Service), and one
tandem-draft. The coordinator gets `--worker dns://127.0.0.1:DNS/workers.test:P
--draft dns://127.0.0.1:DNS/drafts.test:Q` and must:
  - use a group as soon as its record appears, and route requests to both;
  - drain a group whose record disappears while requests run on it: every
    in-flight request completes, then the group leaves ModelInfo;
  - take a group back when its record returns;
  - list a draft worker while its record exists, and drop it after.
Every wait is bounded; only 127.0.0.0/8 is used.

Env: TANDEM_WORKER_BIN, TANDEM_COORDINATOR_BIN, TANDEM_DRAFT_BIN, TANDEM_BIN,
TANDEM_MODEL.
"""
import json
import os
import socket
import struct
import subprocess
import tempfile
import threading
import time
import unittest

import stream_client
from server_process import Server

WORKER = os.environ["TANDEM_WORKER_BIN"]
COORDINATOR = os.environ["TANDEM_COORDINATOR_BIN"]
DRAFT = os.environ["TANDEM_DRAFT_BIN"]
BIN = os.environ["TANDEM_BIN"]
MODEL = os.environ["TANDEM_MODEL"]
WAIT = 30          # seconds for discovery to notice a DNS change
RUN_TIMEOUT = 300  # seconds for a batch of requests


class DnsServer:
    """Answers A queries from `records` (name -> [IPv4]); a name without
    addresses is NXDOMAIN; other types get an empty NOERROR answer."""

    def __init__(self):
        self.records = {}
        self.lock = threading.Lock()
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.stopped = False
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def set(self, name, addresses):
        with self.lock:
            self.records[name] = list(addresses)

    def _serve(self):
        while not self.stopped:
            try:
                query, peer = self.sock.recvfrom(512)
            except socket.timeout:
                continue
            try:
                self.sock.sendto(self._answer(query), peer)
            except (IndexError, struct.error):
                continue  # malformed query: no answer

    def _answer(self, query):
        qid, _, qdcount = struct.unpack(">HHH", query[:6])
        i, labels = 12, []
        while query[i] != 0:
            labels.append(query[i + 1:i + 1 + query[i]].decode())
            i += 1 + query[i]
        qtype, _ = struct.unpack(">HH", query[i + 1:i + 5])
        question = query[12:i + 5]
        with self.lock:
            addresses = self.records.get(".".join(labels).lower(), [])
        if not addresses:
            return struct.pack(">HHHHHH", qid, 0x8183, 1, 0, 0, 0) + question  # NXDOMAIN
        answers = b""
        if qtype == 1:  # A
            for a in addresses:
                answers += struct.pack(">HHHIH", 0xC00C, 1, 1, 0, 4) + socket.inet_aton(a)
        count = len(addresses) if qtype == 1 else 0
        return struct.pack(">HHHHHH", qid, 0x8180, 1, count, 0, 0) + question + answers

    def stop(self):
        self.stopped = True
        self.thread.join(5)
        self.sock.close()


def free_port_on(hosts):
    """A TCP port free on every address in `hosts` at the time of the call."""
    for _ in range(50):
        probe = socket.socket()
        probe.bind((hosts[0], 0))
        port = probe.getsockname()[1]
        others = []
        try:
            for h in hosts[1:]:
                s = socket.socket()
                s.bind((h, port))
                others.append(s)
            return port
        except OSError:
            continue
        finally:
            probe.close()
            for s in others:
                s.close()
    raise AssertionError(f"no common free port on {hosts}")


def model_info(port):
    """ModelInfo's worker groups {address: tandem_client.WorkerGroup} and
    draft workers {address: tandem_client.DraftWorker}."""
    info = stream_client.model_info(port)
    return ({g.address: g for g in info.worker_groups},
            {d.address: d for d in info.draft_workers})


class DiscoveryTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        # Cleanups run even when setUpClass fails half-way (tearDownClass
        # would not), so no server outlives the test.
        cls.servers = []
        cls.addClassCleanup(cls.stop_servers)
        cls.dns = DnsServer()
        cls.addClassCleanup(cls.dns.stop)
        cls.port = free_port_on(["127.0.0.1", "127.0.0.2"])
        cls.draft_port = free_port_on(["127.0.0.1"])
        worker_flags = ["--model", MODEL, "--port", str(cls.port), "--threads", "1",
                        "--kv-blocks", "512"]
        cls.w1 = cls.start([WORKER, "--host", "127.0.0.1"] + worker_flags, "tandem-worker")
        cls.w2 = cls.start([WORKER, "--host", "127.0.0.2"] + worker_flags, "tandem-worker")
        cls.draft = cls.start([DRAFT, "--model", MODEL, "--host", "127.0.0.1", "--port",
                               str(cls.draft_port), "--threads", "1"], "tandem-draft")
        cls.g1, cls.g2 = f"127.0.0.1:{cls.port}", f"127.0.0.2:{cls.port}"
        cls.dns.set("workers.test", ["127.0.0.1"])
        resolver = f"dns://127.0.0.1:{cls.dns.port}"
        cls.coordinator = cls.start(
            [COORDINATOR, "--model", MODEL, "--worker", f"{resolver}/workers.test:{cls.port}",
             "--draft", f"{resolver}/drafts.test:{cls.draft_port}", "--resolve-interval-ms",
             "200"], "tandem-coordinator")
        cls.tmp = tempfile.TemporaryDirectory()
        cls.addClassCleanup(cls.tmp.cleanup)

    @classmethod
    def start(cls, args, name):
        server = Server(args, name)
        cls.servers.append(server)
        return server

    @classmethod
    def stop_servers(cls):
        for s in reversed(cls.servers):
            if s.terminate(15) is None:
                s.kill()

    def wait_for(self, what, predicate):
        """Polls ModelInfo until predicate(groups, drafts) holds (bounded)."""
        deadline = time.monotonic() + WAIT
        while True:
            groups, drafts = model_info(self.coordinator.port)
            if predicate(groups, drafts):
                return groups, drafts
            if time.monotonic() > deadline:
                self.fail(f"{what}: not within {WAIT} s; groups {sorted(groups)}, drafts "
                          f"{sorted(drafts)}; coordinator stderr:\n"
                          f"{self.coordinator.stderr()[-3000:]}")
            time.sleep(0.1)

    def start_generate(self, n, max_tokens):
        """`tandem generate` with n distinct concurrent requests, in the background."""
        path = os.path.join(self.tmp.name, f"requests-{n}-{max_tokens}.jsonl")
        with open(path, "w") as f:
            for i in range(n):
                f.write(json.dumps({"prompt": f"Story {i}: once upon a time in city {i * 7},",
                                    "max_tokens": max_tokens, "temperature": 0,
                                    "ignore_eos": True}) + "\n")
        return subprocess.Popen([BIN, "generate", "--addr", self.coordinator.address,
                                 "--requests", path, "--concurrency", str(n), "--json"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def finish(self, proc, n, max_tokens):
        out, err = proc.communicate(timeout=RUN_TIMEOUT)
        self.assertEqual(proc.returncode, 0, err[-3000:])
        lines = [json.loads(line) for line in out.splitlines() if line.strip()]
        self.assertEqual(len(lines), n, out[-2000:])
        for line in lines:
            self.assertNotIn("error", line)
            self.assertEqual(len(line["token_ids"]), max_tokens, line)

    def test_groups_and_drafts_follow_dns(self):
        # Only the first record exists: one group, no draft.
        groups, drafts = self.wait_for("the first group", lambda g, d: set(g) == {self.g1})
        self.assertEqual(drafts, {})

        # The second group and the draft appear: both used.
        self.dns.set("workers.test", ["127.0.0.1", "127.0.0.2"])
        self.dns.set("drafts.test", ["127.0.0.1"])
        self.wait_for("the second group and the draft", lambda g, d: (
            set(g) == {self.g1, self.g2} and all(x.healthy for x in g.values())
            and set(d) == {f"127.0.0.1:{self.draft_port}"}
            and all(x.healthy for x in d.values())))
        before, _ = model_info(self.coordinator.port)
        proc = self.start_generate(8, 8)
        self.finish(proc, 8, 8)
        after, _ = model_info(self.coordinator.port)
        for g in (self.g1, self.g2):
            self.assertGreater(after[g].num_steps, before[g].num_steps,
                               f"no step ran on {g}: requests were not spread")

        # The first group's record goes while requests run on both groups:
        # it drains (every request completes), then leaves.
        proc = self.start_generate(6, 40)
        self.wait_for("requests running on both groups",
                      lambda g, d: all(g[x].load > 0 for x in (self.g1, self.g2)))
        self.dns.set("workers.test", ["127.0.0.2"])
        self.finish(proc, 6, 40)
        self.wait_for("the first group removed", lambda g, d: set(g) == {self.g2})
        # New requests all run on the group left.
        before, _ = model_info(self.coordinator.port)
        self.finish(self.start_generate(4, 4), 4, 4)
        after, _ = model_info(self.coordinator.port)
        self.assertGreater(after[self.g2].num_steps, before[self.g2].num_steps)

        # It returns: connected again.
        self.dns.set("workers.test", ["127.0.0.1", "127.0.0.2"])
        self.wait_for("the first group back", lambda g, d: set(g) == {self.g1, self.g2})

        # The draft's record goes: it is dropped.
        self.dns.set("drafts.test", [])
        self.wait_for("the draft dropped", lambda g, d: d == {})
        self.assertIsNone(self.coordinator.proc.poll(), "the coordinator exited")


if __name__ == "__main__":
    unittest.main()
