#!/usr/bin/env python3
"""scripts/sass_gates.py fails on deliberately bad kernels (bad_kernels.cu,
compiled here by nvcc for sm_90), naming each kernel and rule they break: a
spill and missing 128-bit loads in a GEMV, 64-bit divisions in decode
attention.

Env: NVCC, TANDEM_SOURCE_DIR; run with the test venv's Python (the tools)."""
import os
import subprocess
import sys
import tempfile
import unittest

SOURCE = os.environ["TANDEM_SOURCE_DIR"]
NVCC = os.environ["NVCC"]
GATES = os.path.join(SOURCE, "scripts", "sass_gates.py")


class SassGatesTest(unittest.TestCase):
    def test_bad_kernels_fail_naming_kernel_and_rule(self):
        with tempfile.TemporaryDirectory() as tmp:
            obj = os.path.join(tmp, "bad_kernels.o")
            subprocess.run([NVCC, "-arch=sm_90", "-c", "-o", obj,
                            os.path.join(SOURCE, "tests/unit/kernels/cuda/sass/bad_kernels.cu")],
                           check=True, timeout=300)
            out = subprocess.run([sys.executable, GATES, obj], capture_output=True, text=True,
                                 timeout=300)
        self.assertEqual(out.returncode, 1, out.stderr)
        failures = [line for line in out.stderr.splitlines() if "FAIL" in line]
        def has(kernel, rule):
            return any(kernel in line and f"rule {rule} " in line for line in failures)
        self.assertTrue(has("Gemv16Kernel<float>", "stack"), failures)
        self.assertTrue(has("Gemv16Kernel<float>", "ldg128"), failures)
        self.assertTrue(has("DecodePartitionKernel<float>", "div64"), failures)
        # A gate whose kernel is missing fails too (a rename cannot drop it).
        self.assertTrue(any("VerifyKernel" in line and "no kernel matches" in line
                            for line in failures), failures)


if __name__ == "__main__":
    unittest.main()
