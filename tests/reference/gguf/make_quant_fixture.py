#!/usr/bin/env python3
"""Regenerates quant_fixture.gguf: reference data for tests/unit/gguf.

Written with the `gguf` Python package (llama.cpp's gguf-py), independent of
tandem's GgufWriter, so the fixture checks tandem's reader against another
writer and tandem's dequantizers / quantizers against gguf.quants:

  q4_k.raw / q6_k.raw    random K-quant super-blocks (2 each), raw bytes
  q4_k.f32 / q6_k.f32    gguf.quants.dequantize of those blocks
  quant.input            128 random floats (4 blocks of 32, one all zero,
                         one with a negative extreme)
  q8_0.ref / q4_0.ref / q4_1.ref   gguf.quants.quantize of quant.input
  q8_0.f32 / q4_0.f32 / q4_1.f32   gguf.quants.dequantize of those
  metadata: one key of every GGUF value type, typed and nested arrays.

Usage: /tmp/gv/bin/python tests/reference/gguf/make_quant_fixture.py
"""
import os

import numpy as np
import gguf
from gguf import GGMLQuantizationType as QT
from gguf import GGUFValueType as VT

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "quant_fixture.gguf")


def random_k_blocks(rng, qtype, n_blocks):
    """Random bytes with small finite fp16 scales in place of the random ones."""
    _, type_size = gguf.GGML_QUANT_SIZES[qtype]
    raw = rng.integers(0, 256, size=(n_blocks, type_size), dtype=np.uint8)
    for b in range(n_blocks):
        if qtype == QT.Q4_K:  # d, dmin at bytes 0..3
            scales = rng.uniform(0.001, 0.05, size=2).astype(np.float16)
            raw[b, 0:4] = scales.view(np.uint8)
        else:  # Q6_K: d is the last 2 bytes
            raw[b, type_size - 2:] = np.array([rng.uniform(0.001, 0.05)], np.float16).view(np.uint8)
    return raw.reshape(-1)


def main():
    rng = np.random.default_rng(20240601)
    w = gguf.GGUFWriter(OUT, arch="fixture")

    # Metadata of every value type.
    w.add_uint8("fixture.u8", 200)
    w.add_int8("fixture.i8", -100)
    w.add_uint16("fixture.u16", 60000)
    w.add_int16("fixture.i16", -30000)
    w.add_uint32("fixture.u32", 4000000000)
    w.add_int32("fixture.i32", -2000000000)
    w.add_float32("fixture.f32", 0.15625)
    w.add_uint64("fixture.u64", 18446744073709551615)
    w.add_int64("fixture.i64", -9000000000000000000)
    w.add_float64("fixture.f64", 2.718281828459045)
    w.add_bool("fixture.bool", True)
    w.add_string("fixture.string", "héllo ▁world")
    w.add_array("fixture.strings", ["a", "bc", "", "\u0120def"])
    w.add_key_value("fixture.u16s", [1, 2, 65535], VT.ARRAY, sub_type=VT.UINT16)
    w.add_key_value("fixture.f32s", [0.5, -1.25, 3.0], VT.ARRAY, sub_type=VT.FLOAT32)
    w.add_array("fixture.nested", [[1, 2], [3], [4, 5, 6]])

    for qtype, name in ((QT.Q4_K, "q4_k"), (QT.Q6_K, "q6_k")):
        raw = random_k_blocks(rng, qtype, 2)
        w.add_tensor(f"{name}.raw", raw, raw_dtype=qtype)
        w.add_tensor(f"{name}.f32", gguf.quants.dequantize(raw, qtype).astype(np.float32))

    x = rng.normal(0.0, 1.0, size=128).astype(np.float32)
    x[32:64] = 0.0                      # all-zero block: d = 0
    x[64 + 7] = -5.0                     # negative extreme: Q4_0 d > 0
    x[96:128] = rng.uniform(0.5, 2.0, size=32).astype(np.float32)  # min > 0 for Q4_1
    w.add_tensor("quant.input", x)
    for qtype, name in ((QT.Q8_0, "q8_0"), (QT.Q4_0, "q4_0"), (QT.Q4_1, "q4_1")):
        ref = gguf.quants.quantize(x, qtype)
        w.add_tensor(f"{name}.ref", ref, raw_dtype=qtype)
        w.add_tensor(f"{name}.f32", gguf.quants.dequantize(ref, qtype).astype(np.float32))

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print(f"wrote {OUT} ({os.path.getsize(OUT)} bytes)")


if __name__ == "__main__":
    main()
