#!/usr/bin/env python3
"""Regenerates expected_beam.jsonl: Hugging Face transformers' beam search
(GenerationMixin.generate with num_beams, transformers 4.46.3) on the default
model, dequantized to float32 by transformers' GGUF loader — the same weights
as tandem's reference precision. Each line is one case: the prompt's token
ids (tandem's tokenizer, no BOS, as tandem and llama.cpp tokenize), the beam
parameters, and the returned sequences best first: generated token ids (the
EOS that ended a hypothesis excluded), whether it ended with an EOS, and
transformers' sequence score (sum of logprobs / generated_len ** length_penalty).

Cases: 6 prompts x num_beams {2, 4} x length_penalty {0.6, 1.0, 2.0} x
early_stopping {True, False, "never"}, plus num_return_sequences > 1,
min_new_tokens and diverse (group) beam search cases.

Usage (after scripts/setup-reference-venv.sh and a build):
  tests/reference/.venv-hf/bin/python tests/reference/beam/make_expected.py \
      [--model models/SmolLM2-135M-Instruct.Q4_1.gguf] [--tandem build/bin/tandem]
"""
import argparse
import json
import os
import subprocess
import sys

import torch
from transformers import AutoModelForCausalLM

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
# tandem's end-of-generation ids for the default model (<|endoftext|>, <|im_end|>).
EOS = [0, 2]
MAX_NEW_TOKENS = 10
CHAT = ("<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
        "Face<|im_end|>\n<|im_start|>user\n{}<|im_end|>\n<|im_start|>assistant\n")
PROMPTS = [
    "The capital of France is",
    "Once upon a time, in a small village,",
    "def fibonacci(n):",
    CHAT.format("What is the capital of France?"),
    CHAT.format("Name three colors."),
    "The best way to learn a language is",
]


def tokenize(tandem, model, text):
    out = subprocess.run([tandem, "tokenize", "--model", model], input=json.dumps(text) + "\n",
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def cases():
    for p in range(len(PROMPTS)):
        for num_beams in (2, 4):
            for length_penalty in (0.6, 1.0, 2.0):
                for early_stopping in (True, False, "never"):
                    yield dict(prompt=p, num_beams=num_beams, length_penalty=length_penalty,
                               early_stopping=early_stopping)
    for p in (0, 3):
        yield dict(prompt=p, num_beams=4, num_return_sequences=4)
        yield dict(prompt=p, num_beams=3, num_return_sequences=2, length_penalty=0.6)
    for p in (3, 4):
        yield dict(prompt=p, num_beams=2, min_new_tokens=8)
        yield dict(prompt=p, num_beams=4, min_new_tokens=6, num_return_sequences=2)
    # Diverse (group) beam search.
    yield dict(prompt=0, num_beams=4, num_beam_groups=2, diversity_penalty=0.5,
               num_return_sequences=4)
    yield dict(prompt=1, num_beams=6, num_beam_groups=3, diversity_penalty=1.0,
               num_return_sequences=3)
    yield dict(prompt=3, num_beams=4, num_beam_groups=4, diversity_penalty=2.0,
               num_return_sequences=2, early_stopping=True)
    yield dict(prompt=5, num_beams=4, num_beam_groups=2, diversity_penalty=1.5,
               length_penalty=2.0, early_stopping="never")


def split(generated):
    """Generated ids -> (tokens before the first EOS / pad, ended with EOS)."""
    for i, t in enumerate(generated):
        if t in EOS:
            return generated[:i], True
    return generated, False


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=os.path.join(ROOT, "models",
                                                     "SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--tandem", default=os.path.join(ROOT, "build", "bin", "tandem"))
    ap.add_argument("--out", default=os.path.join(HERE, "expected_beam.jsonl"))
    args = ap.parse_args()
    torch.set_num_threads(os.cpu_count() or 1)
    model = AutoModelForCausalLM.from_pretrained(
        os.path.dirname(args.model), gguf_file=os.path.basename(args.model),
        torch_dtype=torch.float32)
    # The GGUF has no output.weight: the LM head is the token embedding (as
    # llama.cpp and tandem read it); transformers' loader leaves it untied.
    model.lm_head.weight = model.model.embed_tokens.weight
    model.eval()
    prompt_ids = [tokenize(args.tandem, args.model, p) for p in PROMPTS]
    with open(args.out, "w") as out:
        for case in cases():
            ids = prompt_ids[case["prompt"]]
            kwargs = dict(num_beams=case["num_beams"],
                          length_penalty=case.get("length_penalty", 1.0),
                          early_stopping=case.get("early_stopping", False),
                          num_return_sequences=case.get("num_return_sequences", 1),
                          min_new_tokens=case.get("min_new_tokens", 0),
                          num_beam_groups=case.get("num_beam_groups", 1),
                          diversity_penalty=case.get("diversity_penalty", 0.0))
            with torch.no_grad():
                result = model.generate(
                    torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                    do_sample=False, max_new_tokens=MAX_NEW_TOKENS, eos_token_id=EOS,
                    pad_token_id=EOS[0], output_scores=True, return_dict_in_generate=True,
                    **kwargs)
            sequences = []
            for seq, score in zip(result.sequences.tolist(), result.sequences_scores.tolist()):
                tokens, eos = split(seq[len(ids):])
                sequences.append(dict(token_ids=tokens, ended_with_eos=eos, score=score))
            line = dict(prompt_token_ids=ids, max_new_tokens=MAX_NEW_TOKENS, eos_token_ids=EOS,
                        **{k: v for k, v in kwargs.items()}, sequences=sequences)
            out.write(json.dumps(line) + "\n")
            out.flush()
            print(json.dumps(case), file=sys.stderr)


if __name__ == "__main__":
    main()
