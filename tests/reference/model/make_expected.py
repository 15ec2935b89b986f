#!/usr/bin/env python3
"""Regenerates expected_greedy.jsonl: llama.cpp's greedy continuations and
first-position top-5 logprobs for the default model, the independent reference
tandem's model tests compare against.

Usage (from the repository root):
  python3 -m venv tests/reference/.venv
  CMAKE_ARGS="-DGGML_NATIVE=ON" tests/reference/.venv/bin/pip install llama-cpp-python==0.3.36 numpy
  tests/reference/.venv/bin/python tests/reference/model/make_expected.py \
      models/SmolLM2-135M-Instruct.Q4_1.gguf

llama.cpp runs with its defaults for this model on the CPU (f16 KV cache).
Each prompt is tokenized by llama.cpp itself (special tokens parsed, no BOS,
as the GGUF says), evaluated, and continued greedily (argmax of the logits,
no sampler) for 64 tokens. For every generated position the two largest
logits are recorded, so a flipped near-tie can be shown.
"""
import json
import os
import sys

import numpy as np
from llama_cpp import Llama

HERE = os.path.dirname(os.path.abspath(__file__))
NUM_NEW = 64


def log_softmax(x):
    x = np.asarray(x, dtype=np.float64)
    m = x.max()
    return x - m - np.log(np.exp(x - m).sum())


def main():
    model_path = sys.argv[1]
    prompts = [json.loads(l)["prompt"] for l in open(os.path.join(HERE, "prompts.jsonl"))]
    llm = Llama(model_path=model_path, n_ctx=2048, n_batch=512, logits_all=True,
                n_threads=2, verbose=False)
    out = open(os.path.join(HERE, "expected_greedy.jsonl"), "w")
    for prompt in prompts:
        ids = llm.tokenize(prompt.encode("utf-8"), add_bos=llm._model.add_bos_token(), special=True)
        llm.reset()
        llm.eval(ids)
        generated, top2, first_top5 = [], [], None
        for step in range(NUM_NEW):
            logits = np.array(llm.scores[llm.n_tokens - 1], dtype=np.float32)
            order = np.argsort(-logits, kind="stable")
            if step == 0:
                lp = log_softmax(logits)
                first_top5 = [[int(i), float(lp[i])] for i in order[:5]]
            tok = int(order[0])
            top2.append([[int(order[0]), float(logits[order[0]])],
                         [int(order[1]), float(logits[order[1]])]])
            generated.append(tok)
            llm.eval([tok])
        out.write(json.dumps({"prompt": prompt, "prompt_ids": ids, "greedy_ids": generated,
                              "first_top5": first_top5, "top2_logits": top2}) + "\n")
        print(f"{len(ids):4d} prompt tokens -> {llm.detokenize(generated)[:60]!r}")
    out.close()


if __name__ == "__main__":
    main()
