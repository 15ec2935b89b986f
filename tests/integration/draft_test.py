#!/usr/bin/env python3
"""Integration tests of the real `tandem-draft` process on 127.0.0.1: it
announces its OS-chosen port on one stdout line, answers grpc.health.v1 Check
with SERVING, Draft.Info with the model's vocabulary and Draft.Propose /
Release, ends on SIGTERM with exit 0 within 10 s, and exits non-zero naming
the path for a bad --model. Standard library only (grpc_lite.py).

Env: TANDEM_DRAFT_BIN (build/bin/tandem-draft), TANDEM_MODEL (the default GGUF).
"""
import os
import signal
import struct
import subprocess
import time
import unittest

from server_process import Server
from grpc_lite import grpc_unary, health_status, parse_proto

BIN = os.environ["TANDEM_DRAFT_BIN"]
MODEL = os.environ["TANDEM_MODEL"]
START_TIMEOUT = 60
STOP_TIMEOUT = 10


def _varint(v):
    out = b""
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def _field(number, wire, payload):
    key = _varint(number << 3 | wire)
    return key + (_varint(payload) if wire == 0 else _varint(len(payload)) + payload)


def propose_request(seq_id, tokens, start_pos, gamma, greedy=True):
    packed = b"".join(_varint(t) for t in tokens)
    seq = _field(1, 0, seq_id) + _field(2, 2, packed) + _field(3, 0, start_pos) + _field(4, 0, gamma)
    if greedy:
        # SamplingParams{temperature: 0.0}: field 1, wire type 5 (fixed32).
        seq += _field(5, 2, b"\x0d" + struct.pack("<f", 0.0))
    return _field(1, 2, seq)


class Draft(Server):
    """A tandem-draft process on 127.0.0.1 with an OS-chosen port."""
    def __init__(self):
        super().__init__([BIN, "--model", MODEL, "--host", "127.0.0.1", "--port", "0",
                          "--kv-cache-bytes", str(16 << 20), "--threads", "1"],
                         "tandem-draft", startup_timeout=START_TIMEOUT)


class DraftProcessTest(unittest.TestCase):
    def setUp(self):
        self.draft = Draft()
        self.addCleanup(self.draft.close)

    def test_serves_health_info_propose_then_stops_on_sigterm(self):
        d = self.draft
        self.assertEqual(health_status(d.port), 1, "overall health should be SERVING")
        self.assertEqual(health_status(d.port, "tandem.v1.Draft"), 1)
        info = parse_proto(grpc_unary(d.port, "/tandem.v1.Draft/Info"))
        self.assertEqual(info[2], [49152], "vocab_size")
        self.assertTrue(info.get(1), "model_name should be set")
        self.assertGreater(info[3][0], 0, "context_length")

        prompt = [1, 9690, 198, 2683, 359, 253, 5356, 16]
        response = parse_proto(grpc_unary(d.port, "/tandem.v1.Draft/Propose",
                                          propose_request(7, prompt, 0, 3)))
        proposals = response[1]
        self.assertEqual(len(proposals), 1)
        proposal = parse_proto(proposals[0])
        self.assertEqual(proposal[1], [7])
        self.assertEqual(len(proposal[2]), 3, "three draft tokens")
        # Roll back to the prompt, then forget the sequence.
        release = _field(1, 2, _field(1, 0, 7) + _field(2, 0, len(prompt)))
        grpc_unary(d.port, "/tandem.v1.Draft/Release", release)
        grpc_unary(d.port, "/tandem.v1.Draft/Release", _field(1, 2, _field(1, 0, 7)))

        start = time.monotonic()
        d.proc.send_signal(signal.SIGTERM)
        rc = d.proc.wait(timeout=STOP_TIMEOUT)
        self.assertEqual(rc, 0, d.stderr())
        self.assertLess(time.monotonic() - start, STOP_TIMEOUT)


class BadFlagsTest(unittest.TestCase):
    def test_missing_model_file(self):
        p = subprocess.run([BIN, "--model", "/nonexistent/draft.gguf", "--port", "0"],
                           capture_output=True, text=True, timeout=START_TIMEOUT)
        self.assertGreater(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout, "")
        self.assertIn("/nonexistent/draft.gguf", p.stderr)


if __name__ == "__main__":
    unittest.main()
