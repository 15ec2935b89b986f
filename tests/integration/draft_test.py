#!/usr/bin/env python3
"""Integration tests of the real `tandem-draft` process on 127.0.0.1: it
announces its OS-chosen port on one stdout line, answers grpc.health.v1 Check
with SERVING, Draft.Info with the model's vocabulary and Draft.Propose /
Release, ends on SIGTERM with exit 0 within 10 s, and exits non-zero naming
the path for a bad --model. The same over the other draft kinds:
`--speculative ngram` (no model: prompt lookup, deterministic one-hot drafts,
possibly none) and `--speculative layer-skip:L` (the target's first L layers),
and their bad flags. Standard library only (grpc_lite.py).

Env: TANDEM_DRAFT_BIN (build/bin/tandem-draft), TANDEM_MODEL (the default GGUF).
"""
import os
import signal
import struct
import subprocess
import time
import unittest

from server_process import Server
from grpc_lite import encode_field as _field, encode_varint as _varint
from grpc_lite import decode_varints, grpc_unary, health_status, parse_proto

BIN = os.environ["TANDEM_DRAFT_BIN"]
MODEL = os.environ["TANDEM_MODEL"]
START_TIMEOUT = 60
STOP_TIMEOUT = 10


def propose_request(seq_id, tokens, start_pos, gamma, greedy=True):
    packed = b"".join(_varint(t) for t in tokens)
    seq = _field(1, 0, seq_id) + _field(2, 2, packed) + _field(3, 0, start_pos) + _field(4, 0, gamma)
    if greedy:
        # SamplingParams{temperature: 0.0}: field 1, wire type 5 (fixed32).
        seq += _field(5, 2, b"\x0d" + struct.pack("<f", 0.0))
    return _field(1, 2, seq)


def release_request(seq_id, keep_length):
    return _field(1, 2, _field(1, 0, seq_id) + _field(2, 0, keep_length))


def draft_tokens(proposal):
    """[(token, prob, number of support entries)] of one parsed Proposal."""
    out = []
    for raw in proposal.get(2, []):
        t = parse_proto(raw)
        prob = struct.unpack("<f", t[2][0])[0] if 2 in t else 0.0
        support = len(decode_varints(t[3][0])) if 3 in t else 0
        out.append((t.get(1, [0])[0], prob, support))
    return out


def propose(port, seq_id, tokens, start_pos, gamma, greedy=True):
    """Draft.Propose for one sequence; its parsed Proposal."""
    response = parse_proto(grpc_unary(port, "/tandem.v1.Draft/Propose",
                                      propose_request(seq_id, tokens, start_pos, gamma, greedy)))
    proposals = response[1]
    assert len(proposals) == 1, proposals
    return parse_proto(proposals[0])


class Draft(Server):
    """A tandem-draft process on 127.0.0.1 with an OS-chosen port."""
    def __init__(self, extra=("--model", MODEL)):
        super().__init__([BIN, *extra, "--host", "127.0.0.1", "--port", "0",
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


class NgramDraftTest(unittest.TestCase):
    """--speculative ngram: no model file, the vocabulary from --vocab-size."""

    def setUp(self):
        self.draft = Draft(("--speculative", "ngram", "--vocab-size", "49152",
                            "--ngram-min", "1", "--ngram-max", "3"))
        self.addCleanup(self.draft.close)

    def test_info_propose_release_over_grpc(self):
        d = self.draft
        self.assertEqual(health_status(d.port, "tandem.v1.Draft"), 1)
        info = parse_proto(grpc_unary(d.port, "/tandem.v1.Draft/Info"))
        self.assertEqual(info[1], [b"ngram"], "model_name reports the kind")
        self.assertEqual(info[2], [49152], "vocab_size")
        self.assertGreater(info[3][0], 0, "context_length")
        self.assertGreater(info[4][0], 0, "max_sequences")

        # "... 1 2": the suffix "1 2" occurred at the start, followed by
        # 3 4, and the copy continues into its own drafts. No sampling
        # params: n-gram lookup needs none.
        prompt = [1, 2, 3, 4, 1, 2]
        proposal = propose(d.port, 5, prompt, 0, 4, greedy=False)
        self.assertEqual(proposal[1], [5])
        self.assertEqual(draft_tokens(proposal), [(3, 1.0, 0), (4, 1.0, 0), (1, 1.0, 0),
                                                  (2, 1.0, 0)],
                         "deterministic drafts: q = 1, one-hot (no support)")
        # The draft holds the prompt and all drafts but the last (9 tokens).
        # The target accepted "3" and corrected the next token to 9: keep 7.
        grpc_unary(d.port, "/tandem.v1.Draft/Release", release_request(5, len(prompt) + 1))
        # "... 3 9" never occurred: fewer than gamma tokens, here none.
        proposal = propose(d.port, 5, [9], len(prompt) + 1, 4, greedy=False)
        self.assertEqual(draft_tokens(proposal), [])
        # A start_pos that does not match the 8 tokens held is an error.
        with self.assertRaises(ConnectionError):
            propose(d.port, 5, [1], 3, 2, greedy=False)
        with self.assertRaises(ConnectionError):
            grpc_unary(d.port, "/tandem.v1.Draft/Release", release_request(5, 9))
        grpc_unary(d.port, "/tandem.v1.Draft/Release", release_request(5, 0))
        # Forgotten: the sequence starts over at 0.
        proposal = propose(d.port, 5, [7, 7], 0, 2, greedy=False)
        self.assertEqual(draft_tokens(proposal), [(7, 1.0, 0), (7, 1.0, 0)])

        self.assertEqual(d.terminate(STOP_TIMEOUT), 0, d.stderr())



class NgramWithModelTest(unittest.TestCase):
    """--speculative ngram --model: vocabulary and context from its metadata."""

    def test_vocabulary_from_model_metadata(self):
        d = Draft(("--speculative", "ngram", "--model", MODEL))
        self.addCleanup(d.close)
        info = parse_proto(grpc_unary(d.port, "/tandem.v1.Draft/Info"))
        self.assertEqual(info[1], [b"ngram"])
        self.assertEqual(info[2], [49152])
        self.assertEqual(info[3], [8192], "the model's context length")


class LayerSkipDraftTest(unittest.TestCase):
    """--speculative layer-skip:4 over the target GGUF."""

    def setUp(self):
        self.draft = Draft(("--speculative", "layer-skip:4", "--model", MODEL))
        self.addCleanup(self.draft.close)

    def test_info_propose_release_over_grpc(self):
        d = self.draft
        self.assertEqual(health_status(d.port, "tandem.v1.Draft"), 1)
        info = parse_proto(grpc_unary(d.port, "/tandem.v1.Draft/Info"))
        name = info[1][0].decode()
        self.assertTrue(name.startswith("layer-skip:4:"), name)
        self.assertGreater(len(name), len("layer-skip:4:"), "the target's name follows")
        self.assertEqual(info[2], [49152], "vocab_size: the target's")
        self.assertEqual(info[3], [8192])

        prompt = [1, 9690, 198, 2683, 359, 253, 5356, 16]
        proposal = propose(d.port, 11, prompt, 0, 3)
        tokens = draft_tokens(proposal)
        self.assertEqual(len(tokens), 3, "a model kind drafts gamma tokens")
        for token, prob, support in tokens:
            self.assertTrue(0 <= token < 49152, token)
            self.assertEqual((prob, support), (1.0, 0), "greedy drafts are one-hot")
        # Roll back to the prompt plus the first draft and continue from the
        # target's (here: the draft's own) next token.
        grpc_unary(d.port, "/tandem.v1.Draft/Release", release_request(11, len(prompt) + 1))
        proposal = propose(d.port, 11, [tokens[1][0]], len(prompt) + 1, 2)
        self.assertEqual([t for t, _, _ in draft_tokens(proposal)][:1], [tokens[2][0]],
                         "after rollback the draft continues as before")
        grpc_unary(d.port, "/tandem.v1.Draft/Release", release_request(11, 0))
        self.assertEqual(d.terminate(STOP_TIMEOUT), 0, d.stderr())


class BadFlagsTest(unittest.TestCase):
    def run_draft(self, *flags):
        p = subprocess.run([BIN, *flags, "--port", "0"], capture_output=True, text=True,
                           timeout=START_TIMEOUT)
        self.assertGreater(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout, "")
        return p.stderr

    def test_missing_model_file(self):
        self.assertIn("/nonexistent/draft.gguf",
                      self.run_draft("--model", "/nonexistent/draft.gguf"))

    def test_layer_skip_beyond_the_target(self):
        stderr = self.run_draft("--speculative", "layer-skip:31", "--model", MODEL)
        self.assertIn("num_layers 31", stderr)
        self.assertIn("[1, 30]", stderr)

    def test_bad_speculative_kinds(self):
        self.assertIn("'eagle'", self.run_draft("--speculative", "eagle", "--model", MODEL))
        self.assertIn("layer-skip:0", self.run_draft("--speculative", "layer-skip:0",
                                                     "--model", MODEL))
        self.assertIn("--model is required", self.run_draft("--speculative", "layer-skip:4"))

    def test_ngram_needs_a_vocabulary(self):
        self.assertIn("--vocab-size", self.run_draft("--speculative", "ngram"))
        self.assertIn("--ngram-max", self.run_draft("--speculative", "ngram", "--vocab-size",
                                                    "100", "--ngram-min", "3",
                                                    "--ngram-max", "2"))


if __name__ == "__main__":
    unittest.main()
