#!/usr/bin/env python3
"""Beam search equals Hugging Face transformers' generate(num_beams=...).

tests/reference/beam/expected_beam.jsonl (make_expected.py there) holds
transformers' returned sequences and scores for 6 prompts x num_beams {2, 4}
x length_penalty {0.6, 1.0, 2.0} x early_stopping {true, false, "never"},
num_return_sequences > 1, min_new_tokens and diverse (group) beam search
cases on the default model in float32. Every case runs here as one line of a
`tandem run --requests --precision reference --json` batch (all requests
decode together, beams forked copy-on-write), and each returned sequence must
match: the same generated tokens (the EOS that ended a hypothesis
included), the same finish, the score within 1e-3. The same cases then run
through the cluster (tandem-worker in reference precision behind
tandem-coordinator, `tandem generate --concurrency 32`): streamed, routed and
batched, with the same results; and once more single-process with every beam
speculating (n-gram drafts). Standard library only.

Env: TANDEM_BIN, TANDEM_MODEL, TANDEM_SOURCE_DIR, TANDEM_WORKER_BIN,
TANDEM_COORDINATOR_BIN.
"""
import json
import os
import re
import subprocess
import tempfile
import unittest

from server_process import Server

BIN = os.environ["TANDEM_BIN"]
MODEL = os.environ["TANDEM_MODEL"]
EXPECTED = os.path.join(os.environ["TANDEM_SOURCE_DIR"], "tests", "reference", "beam",
                        "expected_beam.jsonl")
WORKER = os.environ["TANDEM_WORKER_BIN"]
COORDINATOR = os.environ["TANDEM_COORDINATOR_BIN"]
TIMEOUT = 900
SCORE_TOLERANCE = 1e-3


def request_line(case):
    """The JSONL request of one expected case (transformers' parameter names)."""
    early = case["early_stopping"]
    return {"prompt_token_ids": case["prompt_token_ids"], "max_tokens": case["max_new_tokens"],
            "num_beams": case["num_beams"], "length_penalty": case["length_penalty"],
            "early_stopping": early, "num_return_sequences": case["num_return_sequences"],
            "min_new_tokens": case["min_new_tokens"], "num_beam_groups": case["num_beam_groups"],
            "diversity_penalty": case["diversity_penalty"]}


def load_cases():
    with open(EXPECTED) as f:
        return [json.loads(line) for line in f if line.strip()]


def run_cases(cases, command):
    """Runs every case as one JSONL batch through `tandem COMMAND...`;
    returns (exit code, parsed output lines, stderr)."""
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
        for case in cases:
            f.write(json.dumps(request_line(case)) + "\n")
        path = f.name
    try:
        out = subprocess.run([BIN] + command + ["--requests", path, "--json"],
                             capture_output=True, text=True, timeout=TIMEOUT)
    finally:
        os.unlink(path)
    lines = [json.loads(line) for line in out.stdout.splitlines() if line.strip()]
    return out.returncode, lines, out.stderr


def mismatches(cases, lines):
    """Every difference between the expected sequences and `lines`."""
    found = []
    for i, (case, got) in enumerate(zip(cases, lines)):
        want = case["sequences"]
        seqs = got.get("sequences", [])
        if len(seqs) != len(want):
            found.append(f"case {i}: {len(seqs)} sequences, expected {len(want)}: {got}")
            continue
        for k, (w, g) in enumerate(zip(want, seqs)):
            tokens = g["token_ids"]
            ended = g["finish_reason"] == "stop"
            if ended and tokens and tokens[-1] in case["eos_token_ids"]:
                tokens = tokens[:-1]
            if tokens != w["token_ids"] or ended != w["ended_with_eos"] or \
                    abs(g["score"] - w["score"]) > SCORE_TOLERANCE:
                found.append(f"case {i} ({request_line(case)}) sequence {k}: got {tokens} "
                             f"eos={ended} score={g['score']:.5f}, expected {w['token_ids']} "
                             f"eos={w['ended_with_eos']} score={w['score']:.5f}")
    return found


class BeamSearchReferenceTest(unittest.TestCase):
    def test_single_process_matches_transformers(self):
        cases = load_cases()
        self.assertGreaterEqual(len(cases), 108)
        code, lines, err = run_cases(cases, ["run", "--model", MODEL, "--precision", "reference"])
        self.assertEqual(code, 0, err[-3000:])
        self.assertEqual(len(lines), len(cases))
        found = mismatches(cases, lines)
        self.assertEqual(found, [], "\n".join(found[:10]))

    def test_speculative_beam_search_matches_transformers(self):
        # Each beam speculates (n-gram drafts, 4 per round); beams that follow
        # their draft take several steps per forward. The results are the
        # same sequences and scores.
        cases = load_cases()
        code, lines, err = run_cases(cases, ["run", "--model", MODEL, "--precision", "reference",
                                             "--speculative", "ngram",
                                             "--num-speculative-tokens", "4"])
        self.assertEqual(code, 0, err[-3000:])
        m = re.search(r"(\d+) of (\d+) draft tokens accepted", err)
        self.assertIsNotNone(m, err[-2000:])
        self.assertGreater(int(m.group(1)), 0, "no beam ever followed its draft")
        found = mismatches(cases, lines)
        self.assertEqual(found, [], "\n".join(found[:10]))

    def test_cluster_matches_transformers(self):
        cases = load_cases()
        worker = Server([WORKER, "--model", MODEL, "--port", "0", "--precision", "reference"],
                        "tandem-worker")
        try:
            coordinator = Server([COORDINATOR, "--model", MODEL, "--worker", worker.address,
                                  "--port", "0"], "tandem-coordinator")
            try:
                code, lines, err = run_cases(
                    cases, ["generate", "--addr", coordinator.address, "--concurrency", "32"])
            finally:
                coordinator.terminate(15) or coordinator.kill()
        finally:
            worker.terminate(15) or worker.kill()
        self.assertEqual(code, 0, err[-3000:])
        self.assertEqual(len(lines), len(cases))
        found = mismatches(cases, lines)
        self.assertEqual(found, [], "\n".join(found[:10]))


if __name__ == "__main__":
    unittest.main()
