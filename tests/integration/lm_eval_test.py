#!/usr/bin/env python3
"""lm-evaluation-harness (PyPI `lm-eval[api]`, model `local-completions`,
tokenizer from the server's /tokenize, /detokenize and /tokenizer_info)
against `tandem-coordinator --local`, offline (HF_HUB_OFFLINE,
HF_DATASETS_OFFLINE), on two tasks defined here in local JSON files:

- a multiple-choice task (loglikelihood: echo with logprobs): every choice's
  loglikelihood lm-eval logged equals the sum of the continuation's prompt
  logprobs computed by `tandem run --prompt-logprobs` (the engine in-process,
  no HTTP) within 1e-3, and lm-eval's accuracy equals the accuracy those sums
  give;
- a generate_until task (stop strings, max_gen_toks, greedy): lm-eval's
  exact_match equals the one `tandem run` greedy continuations give.
Every wait is bounded.

Env: TANDEM_COORDINATOR_BIN, TANDEM_BIN, TANDEM_MODEL, TANDEM_SOURCE_DIR.
"""
import glob
import json
import os
import subprocess
import tempfile
import unittest

from server_process import Server

COORDINATOR = os.environ["TANDEM_COORDINATOR_BIN"]
BIN = os.environ["TANDEM_BIN"]
MODEL = os.environ["TANDEM_MODEL"]
SOURCE = os.environ["TANDEM_SOURCE_DIR"]
TIMEOUT = 600
TOLERANCE = 1e-3

MC = [
    {"question": "The capital of France is", "choices": ["Paris", "London", "Berlin"], "answer": 0},
    {"question": "The capital of Germany is", "choices": ["Madrid", "Berlin", "Rome"], "answer": 1},
    {"question": "Two plus two equals", "choices": ["seven", "one", "four"], "answer": 2},
    {"question": "The sun rises in the", "choices": ["east", "west"], "answer": 0},
    {"question": "Water freezes at zero degrees", "choices": ["Celsius", "Kelvin"], "answer": 0},
]
GEN = [
    {"question": "The capital of France is", "answer": " Paris"},
    {"question": "1, 2, 3, 4,", "answer": " 5"},
    {"question": "Monday, Tuesday,", "answer": " Wednesday"},
]
STOP = [".", "\n", ","]
MAX_GEN = 4


def task_yaml(name, data_file, body):
    return (f"task: {name}\ndataset_path: json\ndataset_kwargs:\n  data_files:\n"
            f"    test: {data_file}\ntest_split: test\ndoc_to_text: \"{{{{question}}}}\"\n" + body)


MC_BODY = """output_type: multiple_choice
doc_to_choice: "{{choices}}"
doc_to_target: "{{answer}}"
metric_list:
  - metric: acc
"""
GEN_BODY = f"""output_type: generate_until
doc_to_target: "{{{{answer}}}}"
generation_kwargs:
  until: {json.dumps(STOP)}
  max_gen_toks: {MAX_GEN}
  do_sample: false
  temperature: 0
metric_list:
  - metric: exact_match
"""


def tandem(args, stdin=None):
    p = subprocess.run([BIN] + args, input=stdin, capture_output=True, text=True,
                       timeout=TIMEOUT)
    if p.returncode != 0:
        raise AssertionError(f"tandem {args[0]} exited {p.returncode}: {p.stderr[-2000:]}")
    return [json.loads(line) for line in p.stdout.splitlines() if line.strip()]


def tokenize(texts):
    return tandem(["tokenize", "--model", MODEL], "".join(json.dumps(t) + "\n" for t in texts))


def run_requests(requests):
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
        f.write("".join(json.dumps(r) + "\n" for r in requests))
    try:
        return tandem(["run", "--model", MODEL, "--requests", f.name, "--json"])
    finally:
        os.unlink(f.name)


def expected_loglikelihoods(pairs):
    """lm-eval's split of (context, continuation) into tokens (TemplateLM's
    _encode_pair), scored by `tandem run --prompt-logprobs`."""
    contexts, wholes = [], []
    for context, continuation in pairs:
        spaces = len(context) - len(context.rstrip())
        if spaces:
            continuation = context[-spaces:] + continuation
            context = context[:-spaces]
        contexts.append(context)
        wholes.append(context + continuation)
    ids = tokenize(contexts + wholes)
    context_ids, whole_ids = ids[:len(pairs)], ids[len(pairs):]
    lines = run_requests([{"prompt_token_ids": w, "max_tokens": 1, "temperature": 0,
                           "prompt_logprobs": 0} for w in whole_ids])
    sums = []
    for ctx, line in zip(context_ids, lines):
        scored = line["prompt_logprobs"]  # null first, then one per later token
        sums.append(sum(p["logprob"] for p in scored[len(ctx):]))
    return sums


class LmEvalTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        setup = subprocess.run(["bash", os.path.join(SOURCE, "scripts/setup-lmeval-venv.sh")],
                               capture_output=True, text=True, timeout=900)
        if setup.returncode != 0:
            raise AssertionError(f"setup-lmeval-venv.sh failed: {setup.stderr[-2000:]}")
        cls.lm_eval = setup.stdout.strip().splitlines()[-1]
        cls.server = Server([COORDINATOR, "--local", "--model", MODEL, "--port", "0",
                             "--threads", "2", "--kv-cache-bytes", str(64 << 20)],
                            "tandem-coordinator")
        cls.dir = tempfile.mkdtemp(prefix="tandem-lm-eval-")
        for name, rows, body in [("tandem_mc", MC, MC_BODY), ("tandem_gen", GEN, GEN_BODY)]:
            data = os.path.join(cls.dir, f"{name}.jsonl")
            with open(data, "w") as f:
                f.write("".join(json.dumps(r) + "\n" for r in rows))
            with open(os.path.join(cls.dir, f"{name}.yaml"), "w") as f:
                f.write(task_yaml(name, data, body))
        cls.results, cls.samples = cls.run_lm_eval()

    @classmethod
    def tearDownClass(cls):
        cls.server.kill()

    @classmethod
    def run_lm_eval(cls):
        out = os.path.join(cls.dir, "out")
        model_args = (f"base_url=http://{cls.server.http_address}/v1/completions,"
                      f"model={os.path.splitext(os.path.basename(MODEL))[0]},"
                      "tokenizer_backend=remote")
        env = dict(os.environ, HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1",
                   HF_HOME=os.path.join(cls.dir, "hf"))
        p = subprocess.run([cls.lm_eval, "run", "--model", "local-completions", "--model_args",
                            model_args, "--tasks", "tandem_mc,tandem_gen", "--include_path",
                            cls.dir, "--output_path", out, "--log_samples"],
                           capture_output=True, text=True, timeout=TIMEOUT, env=env)
        if p.returncode != 0:
            raise AssertionError(f"lm-eval exited {p.returncode}: {p.stderr[-3000:]}")
        print(p.stdout[-1500:])
        with open(glob.glob(os.path.join(out, "*", "results_*.json"))[0]) as f:
            results = json.load(f)["results"]
        samples = {}
        for task in ("tandem_mc", "tandem_gen"):
            with open(glob.glob(os.path.join(out, "*", f"samples_{task}_*.jsonl"))[0]) as f:
                samples[task] = sorted((json.loads(l) for l in f), key=lambda s: int(s["doc_id"]))
        return results, samples

    def test_multiple_choice_loglikelihoods_equal_the_engine(self):
        pairs = [(d["question"], " " + c) for d in MC for c in d["choices"]]
        expected = iter(expected_loglikelihoods(pairs))
        correct = 0
        for doc, sample in zip(MC, self.samples["tandem_mc"]):
            logged = [float(r[0]) for r in sample["filtered_resps"]]
            mine = [next(expected) for _ in doc["choices"]]
            for got, want in zip(logged, mine):
                self.assertAlmostEqual(got, want, delta=TOLERANCE, msg=doc["question"])
            correct += max(range(len(mine)), key=lambda i: mine[i]) == doc["answer"]
        self.assertAlmostEqual(self.results["tandem_mc"]["acc,none"], correct / len(MC))
        print(f"tandem_mc acc {self.results['tandem_mc']['acc,none']}")

    def test_generate_until_equals_greedy_tandem_run(self):
        lines = run_requests([{"prompt": d["question"], "max_tokens": MAX_GEN, "temperature": 0,
                               "stop": STOP} for d in GEN])
        for sample, line in zip(self.samples["tandem_gen"], lines):
            self.assertEqual(sample["filtered_resps"][0], line["text"])
        matches = sum(line["text"] == d["answer"] for d, line in zip(GEN, lines))
        self.assertAlmostEqual(self.results["tandem_gen"]["exact_match,none"], matches / len(GEN))
        print(f"tandem_gen exact_match {self.results['tandem_gen']['exact_match,none']}")


if __name__ == "__main__":
    unittest.main()
