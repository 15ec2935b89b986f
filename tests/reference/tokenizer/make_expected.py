#!/usr/bin/env python3
"""Regenerates expected_tokens.jsonl: llama.cpp's tokenization of texts.jsonl.

Needs llama-cpp-python 0.3.36 (llama.cpp is the reference implementation):
  python3 -m venv tests/reference/.venv && \
    tests/reference/.venv/bin/pip install llama-cpp-python==0.3.36
Then, from the repository root:
  tests/reference/.venv/bin/python tests/reference/tokenizer/make_expected.py \
    [models/SmolLM2-135M-Instruct.Q4_1.gguf]

Output, one JSON object per line:
  line 1: {"vocab": {...}} summary of the whole vocabulary: size, bos/eos,
          end-of-generation ids (llama_vocab_is_eog), control ids, and a
          64-bit FNV-1a hash over every token's piece (llama_token_to_piece,
          special on and off; each piece prefixed by its length as 4 bytes
          little-endian) so one line checks all 49152 decodings;
  then per text: {"text", "ids_special" (parse_special=true), "ids_plain"
          (parse_special=false), "detok_special" / "detok_plain" (the
          concatenated pieces of ids_special with special on / off, as
          hex because they need not be valid UTF-8)}.
All tokenization is with add_special=false (add_bos=False).
"""
import ctypes
import json
import os
import sys

import llama_cpp

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))


def piece(vocab, token, special):
    buf = ctypes.create_string_buffer(256)
    n = llama_cpp.llama_token_to_piece(vocab, token, buf, len(buf), 0, special)
    assert 0 <= n <= len(buf), (token, n)
    return buf.raw[:n]


def fnv1a64(h, data):
    for b in data:
        h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return h


def main():
    model = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        ROOT, "models", "SmolLM2-135M-Instruct.Q4_1.gguf")
    llm = llama_cpp.Llama(model_path=model, vocab_only=True, verbose=False)
    vocab = llm._model.vocab
    n_vocab = llama_cpp.llama_vocab_n_tokens(vocab)

    digests = {}
    for special in (True, False):
        h = 0xcbf29ce484222325
        for t in range(n_vocab):
            p = piece(vocab, t, special)
            h = fnv1a64(h, len(p).to_bytes(4, "little") + p)
        digests["special" if special else "plain"] = "%016x" % h
    summary = {
        "n_vocab": n_vocab,
        "bos": llama_cpp.llama_vocab_bos(vocab),
        "eos": llama_cpp.llama_vocab_eos(vocab),
        "eog_ids": [t for t in range(n_vocab) if llama_cpp.llama_vocab_is_eog(vocab, t)],
        "control_ids": [t for t in range(n_vocab)
                        if llama_cpp.llama_vocab_is_control(vocab, t)],
        "pieces_fnv1a64": digests,
    }

    with open(os.path.join(HERE, "texts.jsonl"), encoding="utf-8") as f:
        texts = [json.loads(line)["text"] for line in f if line.strip()]

    out_path = os.path.join(HERE, "expected_tokens.jsonl")
    with open(out_path, "w", encoding="utf-8") as out:
        out.write(json.dumps({"vocab": summary}) + "\n")
        for text in texts:
            data = text.encode("utf-8")
            ids_special = llm.tokenize(data, add_bos=False, special=True)
            ids_plain = llm.tokenize(data, add_bos=False, special=False)
            record = {
                "text": text,
                "ids_special": ids_special,
                "ids_plain": ids_plain,
                "detok_special": b"".join(piece(vocab, t, True) for t in ids_special).hex(),
                "detok_plain": b"".join(piece(vocab, t, False) for t in ids_special).hex(),
            }
            out.write(json.dumps(record, ensure_ascii=False) + "\n")
    print("wrote %d texts to %s" % (len(texts), out_path))


if __name__ == "__main__":
    main()
