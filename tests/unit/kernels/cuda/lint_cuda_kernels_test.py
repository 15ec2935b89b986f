"""Tests of scripts/lint_cuda_kernels.py: each rule rejects a bad sample and
accepts the allowed form; the command fails on a folder holding a bad .cu."""

import os
import pathlib
import subprocess
import sys
import tempfile
import unittest

SOURCE_DIR = pathlib.Path(os.environ.get("TANDEM_SOURCE_DIR",
                                         pathlib.Path(__file__).resolve().parents[4]))
SCRIPT = SOURCE_DIR / "scripts" / "lint_cuda_kernels.py"
sys.path.insert(0, str(SCRIPT.parent))
import lint_cuda_kernels  # noqa: E402

BAD_SAMPLE = """\
#include "kernels/cuda/runtime/cuda_compat.cuh"
__global__ void K(float* out) {
  extern __shared__ float smem[];
  asm volatile("membar.gl;");
}
void Launch(float* out) { K<<<1, 32>>>(out); }
"""

GOOD_SAMPLE = """\
#include "kernels/cuda/runtime/cuda_compat.cuh"
// A comment may say <<< or asm( or extern __shared__ freely.
__global__ void K(float* out) {
  TANDEM_DYNAMIC_SHARED(float, smem);
#ifndef TANDEM_CUDA_EMULATION
  asm volatile("membar.gl;");
#else
  out[0] = smem[0];
#endif
#ifdef TANDEM_CUDA_EMULATION
  out[1] = 0.0f;
#else
  asm("cp.async.commit_group;");
#endif
#if !defined(TANDEM_CUDA_EMULATION)
#if __CUDA_ARCH__ >= 900
  asm volatile("wgmma.fence.sync.aligned;");
#endif
#endif
  const char* text = "<<<";
}
void Launch(float* out) { TANDEM_LAUNCH(K, 1, 32, 128, nullptr, out); }
"""


class LintTest(unittest.TestCase):
    def test_bad_sample_reports_each_rule_with_its_line(self):
        findings = lint_cuda_kernels.lint_text("bad.cu", BAD_SAMPLE)
        self.assertEqual(len(findings), 3, findings)
        self.assertIn("bad.cu:3: extern __shared__", findings[0])
        self.assertIn("bad.cu:4: 'asm volatile' outside an #ifndef TANDEM_CUDA_EMULATION", findings[1])
        self.assertIn("bad.cu:6: raw <<<", findings[2])

    def test_allowed_forms_pass(self):
        self.assertEqual(lint_cuda_kernels.lint_text("good.cu", GOOD_SAMPLE), [])

    def test_device_code_in_the_emulated_branch_is_rejected(self):
        text = "#ifdef TANDEM_CUDA_EMULATION\nasm(\"nop;\");\n#endif\n"
        self.assertEqual(len(lint_cuda_kernels.lint_text("x.cu", text)), 1)
        text = "#ifndef TANDEM_CUDA_EMULATION\n#else\nasm(\"nop;\");\n#endif\n"
        self.assertEqual(len(lint_cuda_kernels.lint_text("x.cu", text)), 1)
        text = "#if defined(__CUDA_ARCH__)\nwmma::mma_sync(d, a, b, c);\n#endif\n"
        self.assertEqual(len(lint_cuda_kernels.lint_text("x.cu", text)), 1)

    def test_command_fails_on_a_folder_with_a_bad_source(self):
        with tempfile.TemporaryDirectory() as folder:
            pathlib.Path(folder, "bad.cu").write_text(BAD_SAMPLE)
            pathlib.Path(folder, "good.cuh").write_text(GOOD_SAMPLE)
            result = subprocess.run([sys.executable, str(SCRIPT), folder],
                                    capture_output=True, text=True)
            self.assertEqual(result.returncode, 1, result.stdout + result.stderr)
            self.assertIn("bad.cu:6: raw <<<", result.stdout)
            self.assertNotIn("good.cuh", result.stdout)


if __name__ == "__main__":
    unittest.main()
