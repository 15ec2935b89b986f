#!/usr/bin/env python3
"""Speculative vs plain decoding on this machine, same process, same prompts.

For an extraction set (the answer copies from the prompt) and an open-ended
chat set, at 1 stream and at 16 streams, runs `tandem run --requests` plain
and with each draft kind (--speculative ngram, layer-skip:L, model[:PATH];
--num-speculative-tokens auto by default) and prints decode tokens/s, the
speed-up over plain, the acceptance rate and tokens per round. Greedy, so
every run produces the same tokens (checked). One stream = one request per
`tandem run` (decode rate after the first token, averaged over the set);
16 streams = 16 requests decoding together (aggregate tokens/s).

  python3 bench/speculative_bench.py [--kinds ngram,layer-skip:20,model]
      [--gamma auto] [--max-tokens 96] [--out FILE.json]
Needs build/bin/tandem and the model (scripts/build.sh, scripts/fetch-model.sh).
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(ROOT, "build", "bin", "tandem")
MODEL = os.path.join(ROOT, "models", "SmolLM2-135M-Instruct.Q4_1.gguf")

PASSAGES = [
    "The city council met on Monday to discuss the new bicycle lanes. After two hours of debate, "
    "the members voted seven to two to build lanes on Main Street and Oak Avenue by next summer.",
    "Photosynthesis turns light, water and carbon dioxide into sugar and oxygen. It happens in the "
    "chloroplasts, where chlorophyll absorbs mostly red and blue light and reflects green.",
    "Our return policy allows returns within thirty days of delivery. Items must be unused and in "
    "their original packaging, and refunds are issued to the original payment method.",
    "The expedition left base camp at dawn, crossed the glacier by noon and reached the ridge at "
    "four in the afternoon, where strong winds forced the team to set up an emergency shelter.",
]
EXTRACTION = []
for p in PASSAGES:
    EXTRACTION += [f"Repeat the following text word for word:\n{p}",
                   f"Copy this paragraph exactly, then stop:\n{p}",
                   f"Quote the text below without changing anything:\n{p}",
                   f"Rewrite the following text exactly as it is:\n{p}"]
CHAT = ["Write a short story about a lighthouse keeper.", "Explain how a rainbow forms.",
        "Give me five ideas for a birthday party.", "What makes a good friend?",
        "Describe your ideal weekend.", "Write a poem about the ocean.",
        "How do airplanes stay in the air?", "Tell me about the history of chess.",
        "What are the benefits of reading?", "Invent a new board game and explain the rules.",
        "Why do leaves change color in autumn?", "Describe a busy market in the morning.",
        "What would you take to a desert island?", "Explain what a computer program is.",
        "Write a letter to your future self.", "How does a bee make honey?"]


def run(requests, extra, max_tokens, tmp):
    path = os.path.join(tmp, "r.jsonl")
    with open(path, "w") as f:
        for text in requests:
            f.write(json.dumps({"messages": [{"role": "user", "content": text}],
                                "max_tokens": max_tokens, "temperature": 0}) + "\n")
    out = subprocess.run([BIN, "run", "--model", MODEL, "--requests", path] + extra,
                         capture_output=True, text=True, timeout=1800)
    if out.returncode != 0:
        sys.exit(f"tandem run {extra} failed: {out.stderr[-2000:]}")
    tokens = [json.loads(line)["token_ids"] for line in out.stdout.splitlines() if line.strip()]
    agg = float(re.search(r"([0-9.]+) tokens/s \(", out.stderr).group(1))
    m = re.search(r"then ([0-9.]+) tokens/s", out.stderr)
    decode = float(m.group(1)) if m else None
    m = re.search(r"(\d+) of (\d+) draft tokens accepted .* ([0-9.]+) tokens per round", out.stderr)
    acc = (int(m.group(1)), int(m.group(2)), float(m.group(3))) if m else (0, 0, 1.0)
    return tokens, agg, decode, acc


def measure(prompts, streams, extra, max_tokens, tmp):
    """(tokens per request, tokens/s, accepted, drafted, tokens per round)."""
    if streams == 1:
        all_tokens, rates, accepted, drafted, rounds_tpr = [], [], 0, 0, []
        for p in prompts[:4]:
            tokens, _, decode, acc = run([p], extra, max_tokens, tmp)
            all_tokens += tokens
            rates.append(decode)
            accepted += acc[0]
            drafted += acc[1]
            rounds_tpr.append(acc[2])
        return all_tokens, sum(rates) / len(rates), accepted, drafted, sum(rounds_tpr) / len(rounds_tpr)
    tokens, agg, _, acc = run(prompts[:streams], extra, max_tokens, tmp)
    return tokens, agg, acc[0], acc[1], acc[2]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kinds", default="ngram,layer-skip:20,model")
    ap.add_argument("--gamma", default="auto")
    ap.add_argument("--max-tokens", type=int, default=96)
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for set_name, prompts in (("extraction", EXTRACTION), ("chat", CHAT)):
            for streams in (1, 16):
                base_tokens, base_rate, _, _, _ = measure(prompts, streams, [], args.max_tokens, tmp)
                for kind in args.kinds.split(","):
                    extra = ["--speculative", kind, "--num-speculative-tokens", args.gamma]
                    tokens, rate, acc, drafted, tpr = measure(prompts, streams, extra,
                                                              args.max_tokens, tmp)
                    row = dict(set=set_name, streams=streams, kind=kind, gamma=args.gamma,
                               plain_tokens_per_s=round(base_rate, 1),
                               speculative_tokens_per_s=round(rate, 1),
                               speedup=round(rate / base_rate, 2),
                               acceptance=round(acc / drafted, 3) if drafted else None,
                               tokens_per_round=round(tpr, 2), identical=tokens == base_tokens)
                    rows.append(row)
                    print(f"{set_name:10s} streams={streams:2d} {kind:14s} plain {base_rate:7.1f} "
                          f"spec {rate:7.1f} tok/s  x{rate / base_rate:4.2f}  acceptance "
                          f"{row['acceptance']}  tokens/round {tpr:.2f}  identical "
                          f"{row['identical']}", flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
