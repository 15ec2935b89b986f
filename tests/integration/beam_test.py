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
included), the same finish, the score within 1e-3. Standard library only.

Env: TANDEM_BIN, TANDEM_MODEL, TANDEM_SOURCE_DIR.
"""
import json
import os
import subprocess
import tempfile
import unittest

BIN = os.environ["TANDEM_BIN"]
MODEL = os.environ["TANDEM_MODEL"]
EXPECTED = os.path.join(os.environ["TANDEM_SOURCE_DIR"], "tests", "reference", "beam",
                        "expected_beam.jsonl")
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


class BeamSearchReferenceTest(unittest.TestCase):
    def test_matches_transformers(self):
        with open(EXPECTED) as f:
            cases = [json.loads(line) for line in f if line.strip()]
        self.assertGreaterEqual(len(cases), 108)
        with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
            for case in cases:
                f.write(json.dumps(request_line(case)) + "\n")
            path = f.name
        try:
            out = subprocess.run([BIN, "run", "--model", MODEL, "--requests", path, "--precision",
                                  "reference", "--json"], capture_output=True, text=True,
                                 timeout=TIMEOUT)
        finally:
            os.unlink(path)
        self.assertEqual(out.returncode, 0, out.stderr[-3000:])
        lines = [json.loads(line) for line in out.stdout.splitlines() if line.strip()]
        self.assertEqual(len(lines), len(cases))
        mismatches = []
        for i, (case, got) in enumerate(zip(cases, lines)):
            want = case["sequences"]
            seqs = got.get("sequences", [])
            if len(seqs) != len(want):
                mismatches.append(f"case {i}: {len(seqs)} sequences, expected {len(want)}")
                continue
            for k, (w, g) in enumerate(zip(want, seqs)):
                tokens = g["token_ids"]
                ended = g["finish_reason"] == "stop"
                if ended:
                    self.assertIn(tokens[-1], case["eos_token_ids"], (i, k, g))
                    tokens = tokens[:-1]
                if tokens != w["token_ids"] or ended != w["ended_with_eos"] or \
                        abs(g["score"] - w["score"]) > SCORE_TOLERANCE:
                    mismatches.append(f"case {i} ({request_line(case)}) sequence {k}: got "
                                      f"{tokens} eos={ended} score={g['score']:.5f}, expected "
                                      f"{w['token_ids']} eos={w['ended_with_eos']} "
                                      f"score={w['score']:.5f}")
        self.assertEqual(mismatches, [], "\n".join(mismatches[:10]))


if __name__ == "__main__":
    unittest.main()
