#!/usr/bin/env python3
"""Prompt logprobs end to end, against the float64 numpy reference
(tests/reference/model/expected_prompt_logprobs.jsonl, written by
numpy_forward.py): a `tandem-worker --precision reference` behind a
coordinator, driven by the real `openai` SDK and by `tandem run --json`.

- `echo` with `logprobs` and `max_tokens = 0`: every prompt token after the
  first gets its logprob within 1e-3 of the reference and the reference's
  most likely token among its alternatives; the first is null; nothing is
  generated (usage.completion_tokens = 0);
- echo with generated tokens: prompt and completion logprobs in one list;
- streaming echo sends the same prompt logprobs as the plain answer;
- a prompt served twice (its blocks in the prefix cache) scores the same,
  and a long prompt is scored across several prefill chunks (64-token steps);
- `tandem run --prompt-logprobs` (the engine in-process) and gRPC
  `tandem generate` agree with the reference too;
- max_tokens 0 without echo is a 400 naming the limit.
Every wait is bounded.

Env: TANDEM_COORDINATOR_BIN, TANDEM_WORKER_BIN, TANDEM_BIN, TANDEM_MODEL,
TANDEM_SOURCE_DIR.
"""
import json
import os
import subprocess
import unittest

import openai

from server_process import Server

COORDINATOR = os.environ["TANDEM_COORDINATOR_BIN"]
WORKER = os.environ["TANDEM_WORKER_BIN"]
BIN = os.environ["TANDEM_BIN"]
MODEL = os.environ["TANDEM_MODEL"]
REFERENCE = os.path.join(os.environ["TANDEM_SOURCE_DIR"],
                         "tests/reference/model/expected_prompt_logprobs.jsonl")
TIMEOUT = 300
TOLERANCE = 1e-3
IDS = {"return_tokens_as_token_ids": True}


def reference():
    with open(REFERENCE) as f:
        return [json.loads(line) for line in f]


def ids_of(names):
    return [int(n.split(":", 1)[1]) for n in names]


class EchoLogprobsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.worker = Server([WORKER, "--model", MODEL, "--host", "127.0.0.1", "--port", "0",
                             "--threads", "2", "--precision", "reference",
                             "--kv-cache-bytes", str(64 << 20)], "tandem-worker")
        # 64-token steps: the 243-token prompt is scored over four chunks.
        cls.coordinator = Server([COORDINATOR, "--model", MODEL, "--port", "0",
                                  "--max-batched-tokens", "64", "--worker", cls.worker.address],
                                 "tandem-coordinator")
        cls.client = openai.OpenAI(base_url=f"http://{cls.coordinator.http_address}/v1",
                                   api_key="unused", timeout=TIMEOUT, max_retries=0)
        cls.model = cls.client.models.list().data[0].id
        cls.reference = reference()

    @classmethod
    def tearDownClass(cls):
        cls.coordinator.kill()
        cls.worker.kill()

    def echo(self, prompt_ids, max_tokens=0, **kw):
        return self.client.completions.create(model=self.model, prompt=prompt_ids,
                                              max_tokens=max_tokens, echo=True, logprobs=2,
                                              temperature=0, extra_body=IDS, **kw)

    def assert_matches_reference(self, ref, token_names, token_logprobs, top_logprobs):
        ids = ref["prompt_ids"]
        self.assertEqual(ids_of(token_names[:len(ids)]), ids)
        self.assertIsNone(token_logprobs[0])
        self.assertIsNone(top_logprobs[0])
        worst = 0.0
        for p, expected in enumerate(ref["positions"], start=1):
            worst = max(worst, abs(token_logprobs[p] - expected["logprob"]))
            best_id, best_logprob = expected["top2"][0]
            alternatives = {int(k.split(":", 1)[1]): v for k, v in top_logprobs[p].items()}
            self.assertIn(best_id, alternatives, f"position {p}")
            self.assertAlmostEqual(alternatives[best_id], best_logprob, delta=TOLERANCE)
        self.assertLessEqual(worst, TOLERANCE, f"prompt {ref['prompt_index']}")
        print(f"prompt {ref['prompt_index']}: {len(ids)} tokens, largest |error| {worst:.2e}")

    def test_echo_logprobs_equal_the_float64_reference(self):
        for ref in self.reference:
            r = self.echo(ref["prompt_ids"])
            lp = r.choices[0].logprobs
            self.assertEqual(len(lp.token_logprobs), len(ref["prompt_ids"]))
            self.assert_matches_reference(ref, lp.tokens, lp.token_logprobs, lp.top_logprobs)
            self.assertEqual(r.usage.completion_tokens, 0)
            self.assertEqual(r.usage.prompt_tokens, len(ref["prompt_ids"]))
            self.assertEqual(r.choices[0].finish_reason, "length")

    def test_echo_text_is_the_prompt_alone_with_max_tokens_0(self):
        prompt = "The capital of France is"
        r = self.client.completions.create(model=self.model, prompt=prompt, max_tokens=0,
                                           echo=True)
        self.assertEqual(r.choices[0].text, prompt)
        self.assertEqual(r.usage.completion_tokens, 0)

    def test_echo_with_generated_tokens(self):
        ref = self.reference[0]
        r = self.client.completions.create(model=self.model, prompt=ref["prompt_ids"],
                                           max_tokens=3, echo=True, logprobs=2, temperature=0,
                                           extra_body={**IDS, "ignore_eos": True})
        lp = r.choices[0].logprobs
        self.assertEqual(len(lp.token_logprobs), len(ref["prompt_ids"]) + 3)
        self.assert_matches_reference(ref, lp.tokens, lp.token_logprobs, lp.top_logprobs)
        self.assertTrue(all(v is not None for v in lp.token_logprobs[1:]))
        self.assertEqual(r.usage.completion_tokens, 3)

    def test_stream_echo_sends_the_same_prompt_logprobs(self):
        ref = self.reference[1]
        plain = self.echo(ref["prompt_ids"], max_tokens=2).choices[0].logprobs
        chunks = list(self.client.completions.create(
            model=self.model, prompt=ref["prompt_ids"], max_tokens=2, echo=True, logprobs=2,
            temperature=0, stream=True, extra_body=IDS))
        # The first chunk echoes the prompt; the generated tokens follow.
        first = chunks[0].choices[0].logprobs
        n = len(ref["prompt_ids"])
        self.assertEqual(first.token_logprobs, plain.token_logprobs[:n])
        self.assertEqual(first.tokens, plain.tokens[:n])
        streamed = [t for c in chunks[1:] if c.choices and c.choices[0].logprobs
                    for t in c.choices[0].logprobs.token_logprobs]
        self.assertEqual(streamed, plain.token_logprobs[n:])

    def test_a_cached_prompt_scores_the_same(self):
        ref = self.reference[2]  # 243 tokens: 15 full KV blocks
        first = self.echo(ref["prompt_ids"]).choices[0].logprobs.token_logprobs
        second = self.echo(ref["prompt_ids"]).choices[0].logprobs.token_logprobs
        self.assertEqual(first, second)

    def test_tandem_run_prompt_logprobs(self):
        ref = self.reference[0]
        p = subprocess.run([BIN, "run", "--model", MODEL, "--precision", "reference",
                            "--prompt-ids", ",".join(map(str, ref["prompt_ids"])),
                            "--max-tokens", "1", "--temperature", "0", "--prompt-logprobs", "2",
                            "--json"], capture_output=True, text=True, timeout=TIMEOUT)
        self.assertEqual(p.returncode, 0, p.stderr)
        scored = json.loads(p.stdout.splitlines()[0])["prompt_logprobs"]
        self.assertIsNone(scored[0])
        self.assertEqual(len(scored), len(ref["prompt_ids"]))
        for got, expected in zip(scored[1:], ref["positions"]):
            self.assertEqual(got["token_id"], expected["token"])
            self.assertAlmostEqual(got["logprob"], expected["logprob"], delta=TOLERANCE)
            self.assertEqual(got["top_logprobs"][0]["token_id"], expected["top2"][0][0])

    def test_grpc_generate_prompt_logprobs(self):
        ref = self.reference[0]
        p = subprocess.run([BIN, "generate", "--addr", self.coordinator.address,
                            "--prompt-ids", ",".join(map(str, ref["prompt_ids"])),
                            "--max-tokens", "1", "--temperature", "0", "--prompt-logprobs", "1",
                            "--json"], capture_output=True, text=True, timeout=TIMEOUT)
        self.assertEqual(p.returncode, 0, p.stderr)
        scored = json.loads(p.stdout.splitlines()[0])["prompt_logprobs"]
        self.assertEqual([s["token_id"] for s in scored[1:]], ref["prompt_ids"][1:])
        for got, expected in zip(scored[1:], ref["positions"]):
            self.assertAlmostEqual(got["logprob"], expected["logprob"], delta=TOLERANCE)

    def test_max_tokens_0_needs_echo(self):
        with self.assertRaises(openai.BadRequestError) as e:
            self.client.completions.create(model=self.model, prompt="Hi", max_tokens=0)
        self.assertIn("max_tokens 0", str(e.exception))
        self.assertIn(">= 1", str(e.exception))


if __name__ == "__main__":
    unittest.main()
