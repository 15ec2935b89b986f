#!/usr/bin/env python3
"""Regenerates expected_f32.jsonl: last-position logits of the default model
computed in float64 by an independent, straightforward numpy implementation of
the llama decoder (weights dequantized by the `gguf` package), the reference
for tandem's reference-precision mode; and expected_prompt_logprobs.jsonl:
for the same prompts, every prompt token's log-probability (log_softmax in
float64 of the logits at the position before it) and the two most likely
tokens there, the reference for prompt logprobs and `echo`.

Usage (from the repository root):
  python3 -m venv tests/reference/.venv
  tests/reference/.venv/bin/pip install gguf numpy
  tests/reference/.venv/bin/python tests/reference/model/numpy_forward.py \
      models/SmolLM2-135M-Instruct.Q4_1.gguf
"""
import json
import os
import sys

import numpy as np
from gguf import GGUFReader
from gguf.quants import dequantize

HERE = os.path.dirname(os.path.abspath(__file__))


def prompt_logprobs(all_logits, ids):
    """Per prompt position p >= 1: ids[p]'s log_softmax at row p - 1 (float64)
    and that row's two most likely tokens."""
    m = all_logits.max(-1, keepdims=True)
    logp = all_logits - m - np.log(np.exp(all_logits - m).sum(-1, keepdims=True))
    positions = []
    for p in range(1, len(ids)):
        row = logp[p - 1]
        top = np.argsort(-row, kind="stable")[:2]
        positions.append({"token": ids[p], "logprob": float(row[ids[p]]),
                          "top2": [[int(i), float(row[i])] for i in top]})
    return positions


def main():
    r = GGUFReader(sys.argv[1])
    f = {k: v for k, v in r.fields.items()}
    val = lambda k: f[k].parts[f[k].data[0]][0]
    n_layer, n_head, n_kv = int(val("llama.block_count")), int(val("llama.attention.head_count")), int(val("llama.attention.head_count_kv"))
    base, eps = float(val("llama.rope.freq_base")), float(val("llama.attention.layer_norm_rms_epsilon"))
    t = {}
    for ten in r.tensors:
        # gguf shapes are ne order (fastest first); numpy rows are the reverse.
        t[ten.name] = dequantize(ten.data, ten.tensor_type).reshape([int(x) for x in reversed(ten.shape)]).astype(np.float64)
    emb = t["token_embd.weight"]
    out_w = t.get("output.weight", emb)
    dim = emb.shape[1]
    hd = dim // n_head
    group = n_head // n_kv

    def rms(x, w):
        return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * w

    def rope(x, pos):  # x [T, H, hd], llama "normal": adjacent pairs
        i = np.arange(hd // 2)
        theta = pos[:, None] * base ** (-2.0 * i / hd)  # [T, hd/2]
        c, s = np.cos(theta)[:, None, :], np.sin(theta)[:, None, :]
        x0, x1 = x[..., 0::2], x[..., 1::2]
        y = np.empty_like(x)
        y[..., 0::2] = x0 * c - x1 * s
        y[..., 1::2] = x0 * s + x1 * c
        return y

    lines = [json.loads(l) for l in open(os.path.join(HERE, "expected_greedy.jsonl"))]
    out = open(os.path.join(HERE, "expected_f32.jsonl"), "w")
    prompt_out = open(os.path.join(HERE, "expected_prompt_logprobs.jsonl"), "w")
    for idx in (0, 3, 8):
        ids = lines[idx]["prompt_ids"]
        T = len(ids)
        pos = np.arange(T, dtype=np.float64)
        x = emb[ids]
        mask = np.triu(np.full((T, T), -np.inf), 1)
        for l in range(n_layer):
            p = f"blk.{l}."
            h = rms(x, t[p + "attn_norm.weight"])
            q = rope((h @ t[p + "attn_q.weight"].T).reshape(T, n_head, hd), pos)
            k = rope((h @ t[p + "attn_k.weight"].T).reshape(T, n_kv, hd), pos)
            v = (h @ t[p + "attn_v.weight"].T).reshape(T, n_kv, hd)
            att = np.empty((T, n_head, hd))
            for hh in range(n_head):
                s = q[:, hh] @ k[:, hh // group].T / np.sqrt(hd) + mask
                s = np.exp(s - s.max(-1, keepdims=True))
                s /= s.sum(-1, keepdims=True)
                att[:, hh] = s @ v[:, hh // group]
            x = x + att.reshape(T, dim) @ t[p + "attn_output.weight"].T
            h = rms(x, t[p + "ffn_norm.weight"])
            g = h @ t[p + "ffn_gate.weight"].T
            u = h @ t[p + "ffn_up.weight"].T
            x = x + (g / (1 + np.exp(-g)) * u) @ t[p + "ffn_down.weight"].T
        all_logits = rms(x, t["output_norm.weight"]) @ out_w.T  # [T, vocab]
        prompt_out.write(json.dumps({"prompt_index": idx, "prompt_ids": ids,
                                     "positions": prompt_logprobs(all_logits, ids)}) + "\n")
        logits = all_logits[-1]
        top = np.argsort(-logits, kind="stable")[:20]
        out.write(json.dumps({"prompt_index": idx, "prompt_ids": ids,
                              "top20": [[int(i), float(logits[i])] for i in top]}) + "\n")
        print(idx, [(int(i), round(float(logits[i]), 3)) for i in top[:5]])


if __name__ == "__main__":
    main()
