#!/usr/bin/env python3
"""Integration tests of the real `tandem-draft` process on 127.0.0.1: it
announces its OS-chosen port on one stdout line, answers grpc.health.v1 Check
with SERVING, Draft.Info with the model's vocabulary and Draft.Propose /
Release, ends on SIGTERM with exit 0 within 10 s, and exits non-zero naming
the path for a bad --model. The same over the other draft kinds:
`--speculative ngram` (no model: prompt lookup, deterministic one-hot drafts,
possibly none) and `--speculative layer-skip:L` (the target's first L layers),
and their bad flags. gRPC through grpcio (grpc_channel.py).

Env: TANDEM_DRAFT_BIN (build/bin/tandem-draft), TANDEM_MODEL (the default GGUF).
"""
import os
import signal
import subprocess
import time
import unittest

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from grpc_channel import RPC_TIMEOUT, channel
from server_process import Server
from tandem.v1 import common_pb2, draft_pb2, draft_pb2_grpc

BIN = os.environ["TANDEM_DRAFT_BIN"]
MODEL = os.environ["TANDEM_MODEL"]
START_TIMEOUT = 60
STOP_TIMEOUT = 10


def propose_request(seq_id, tokens, start_pos, gamma, greedy=True):
    # greedy: temperature 0 set explicitly (an unset temperature is the default, 1).
    sampling = common_pb2.SamplingParams(temperature=0.0) if greedy else None
    return draft_pb2.ProposeRequest(sequences=[draft_pb2.ProposeSequence(
        seq_id=seq_id, new_tokens=tokens, start_pos=start_pos, num_draft_tokens=gamma,
        sampling=sampling)])


def release_request(seq_id, keep_length):
    return draft_pb2.ReleaseRequest(
        sequences=[draft_pb2.ReleaseSequence(seq_id=seq_id, keep_length=keep_length)])


def draft_tokens(proposal):
    """[(token, prob, number of support entries)] of one Proposal."""
    return [(t.token, t.prob, len(t.support_token_ids)) for t in proposal.tokens]


class Draft(Server):
    """A tandem-draft process on 127.0.0.1 with an OS-chosen port, and a
    channel to it (closed with the process)."""
    def __init__(self, extra=("--model", MODEL)):
        super().__init__([BIN, *extra, "--host", "127.0.0.1", "--port", "0",
                          "--kv-cache-bytes", str(16 << 20), "--threads", "1"],
                         "tandem-draft", startup_timeout=START_TIMEOUT)
        self.channel = channel(self.port)
        self.stub = draft_pb2_grpc.DraftStub(self.channel)

    def health(self, service=""):
        return health_pb2_grpc.HealthStub(self.channel).Check(
            health_pb2.HealthCheckRequest(service=service), timeout=RPC_TIMEOUT).status

    def info(self):
        return self.stub.Info(draft_pb2.DraftInfoRequest(), timeout=RPC_TIMEOUT)

    def propose(self, seq_id, tokens, start_pos, gamma, greedy=True):
        """Draft.Propose for one sequence; its Proposal."""
        response = self.stub.Propose(propose_request(seq_id, tokens, start_pos, gamma, greedy),
                                     timeout=RPC_TIMEOUT)
        assert len(response.proposals) == 1, response
        return response.proposals[0]

    def release(self, seq_id, keep_length):
        self.stub.Release(release_request(seq_id, keep_length), timeout=RPC_TIMEOUT)

    def close(self):
        self.channel.close()
        super().close()


class DraftProcessTest(unittest.TestCase):
    def setUp(self):
        self.draft = Draft()
        self.addCleanup(self.draft.close)

    def test_serves_health_info_propose_then_stops_on_sigterm(self):
        d = self.draft
        self.assertEqual(d.health(), health_pb2.HealthCheckResponse.SERVING, "overall health")
        self.assertEqual(d.health("tandem.v1.Draft"), health_pb2.HealthCheckResponse.SERVING)
        info = d.info()
        self.assertEqual(info.vocab_size, 49152)
        self.assertTrue(info.model_name, "model_name should be set")
        self.assertGreater(info.context_length, 0)

        prompt = [1, 9690, 198, 2683, 359, 253, 5356, 16]
        response = d.stub.Propose(propose_request(7, prompt, 0, 3), timeout=RPC_TIMEOUT)
        self.assertEqual(len(response.proposals), 1)
        proposal = response.proposals[0]
        self.assertEqual(proposal.seq_id, 7)
        self.assertEqual(len(proposal.tokens), 3, "three draft tokens")
        # Roll back to the prompt, then forget the sequence.
        d.release(7, len(prompt))
        d.release(7, 0)

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
        self.assertEqual(d.health("tandem.v1.Draft"), health_pb2.HealthCheckResponse.SERVING)
        info = d.info()
        self.assertEqual(info.model_name, "ngram", "model_name reports the kind")
        self.assertEqual(info.vocab_size, 49152)
        self.assertGreater(info.context_length, 0)
        self.assertGreater(info.max_sequences, 0)

        # "... 1 2": the suffix "1 2" occurred at the start, followed by
        # 3 4, and the copy continues into its own drafts. No sampling
        # params: n-gram lookup needs none.
        prompt = [1, 2, 3, 4, 1, 2]
        proposal = d.propose(5, prompt, 0, 4, greedy=False)
        self.assertEqual(proposal.seq_id, 5)
        self.assertEqual(draft_tokens(proposal), [(3, 1.0, 0), (4, 1.0, 0), (1, 1.0, 0),
                                                  (2, 1.0, 0)],
                         "deterministic drafts: q = 1, one-hot (no support)")
        # The draft holds the prompt and all drafts but the last (9 tokens).
        # The target accepted "3" and corrected the next token to 9: keep 7.
        d.release(5, len(prompt) + 1)
        # "... 3 9" never occurred: fewer than gamma tokens, here none.
        proposal = d.propose(5, [9], len(prompt) + 1, 4, greedy=False)
        self.assertEqual(draft_tokens(proposal), [])
        # A start_pos that does not match the 8 tokens held is an error, and
        # so is keeping more than that.
        with self.assertRaises(grpc.RpcError) as bad_start:
            d.propose(5, [1], 3, 2, greedy=False)
        self.assertEqual(bad_start.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("start_pos 3", bad_start.exception.details())
        with self.assertRaises(grpc.RpcError) as bad_keep:
            d.release(5, 9)
        self.assertEqual(bad_keep.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("keep_length 9", bad_keep.exception.details())
        d.release(5, 0)
        # Forgotten: the sequence starts over at 0.
        proposal = d.propose(5, [7, 7], 0, 2, greedy=False)
        self.assertEqual(draft_tokens(proposal), [(7, 1.0, 0), (7, 1.0, 0)])

        self.assertEqual(d.terminate(STOP_TIMEOUT), 0, d.stderr())


class NgramWithModelTest(unittest.TestCase):
    """--speculative ngram --model: vocabulary and context from its metadata."""

    def test_vocabulary_from_model_metadata(self):
        d = Draft(("--speculative", "ngram", "--model", MODEL))
        self.addCleanup(d.close)
        info = d.info()
        self.assertEqual(info.model_name, "ngram")
        self.assertEqual(info.vocab_size, 49152)
        self.assertEqual(info.context_length, 8192, "the model's context length")


class LayerSkipDraftTest(unittest.TestCase):
    """--speculative layer-skip:4 over the target GGUF."""

    def setUp(self):
        self.draft = Draft(("--speculative", "layer-skip:4", "--model", MODEL))
        self.addCleanup(self.draft.close)

    def test_info_propose_release_over_grpc(self):
        d = self.draft
        self.assertEqual(d.health("tandem.v1.Draft"), health_pb2.HealthCheckResponse.SERVING)
        info = d.info()
        name = info.model_name
        self.assertTrue(name.startswith("layer-skip:4:"), name)
        self.assertGreater(len(name), len("layer-skip:4:"), "the target's name follows")
        self.assertEqual(info.vocab_size, 49152, "the target's")
        self.assertEqual(info.context_length, 8192)

        prompt = [1, 9690, 198, 2683, 359, 253, 5356, 16]
        tokens = draft_tokens(d.propose(11, prompt, 0, 3))
        self.assertEqual(len(tokens), 3, "a model kind drafts gamma tokens")
        for token, prob, support in tokens:
            self.assertTrue(0 <= token < 49152, token)
            self.assertEqual((prob, support), (1.0, 0), "greedy drafts are one-hot")
        # Roll back to the prompt plus the first draft and continue from the
        # target's (here: the draft's own) next token.
        d.release(11, len(prompt) + 1)
        proposal = d.propose(11, [tokens[1][0]], len(prompt) + 1, 2)
        self.assertEqual([t for t, _, _ in draft_tokens(proposal)][:1], [tokens[2][0]],
                         "after rollback the draft continues as before")
        d.release(11, 0)
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
