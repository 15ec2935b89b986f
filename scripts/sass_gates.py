#!/usr/bin/env python3
"""Static gates on the sm_90 code nvcc compiled (no GPU needed).

From `cuobjdump -res-usage` (registers, stack and local memory per kernel)
and `nvdisasm` of the kernels' cubins (the SASS), checks coarse rules tied
to named kernels, and fails naming the kernel and the rule:

  stack     bytes of stack + local memory (spills, or arrays the compiler
            could not keep in registers) at most the kernel's budget
  ldg128    at least N 128-bit global loads (LDG.E.128*) in the kernel
  div64     at most N calls to the 64-bit integer division / remainder
            routines (__cuda_sm20_div_s64 and friends): a slow subroutine
            call per use, usually an index computed in 64 bits

A rule applies to every kernel whose demangled name matches its pattern
(each pattern must match at least one kernel, so that a rename cannot
silently drop a gate). Budgets below 0 / above the target are today's
values where today's code misses the target; the GPU-performance issue
tightens them (docs/gpu.md).

  scripts/sass_gates.py [--cuobjdump BIN] [--nvdisasm BIN] [--report] OBJECT...
OBJECT: static libraries, objects or cubins with sm_90 code. The tools
default to those of PyPI's nvidia-cuda-cuobjdump / nvidia-cuda-nvdisasm in
the running Python's site-packages (the test venv pins them:
scripts/setup-test-venv.sh), else to PATH.
Exit: 0 all rules hold, 1 a rule fails, 2 usage or tool error.
"""
import argparse
import collections
import glob
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile

# (name pattern, rule, budget, why). Targets: stack 0, ldg128 >= 1, div64 0.
RULES = [
    (r"\bGemv(16)?Kernel<", "stack", 0, "the decode GEMV keeps its rows in registers"),
    (r"\bGemv16Kernel<", "ldg128", 1, "the 16-bit decode GEMV streams weights in 16-byte loads"),
    # Today's value: the block-quantized and F32 GEMV read 4 bytes or less
    # at a time (target 1).
    (r"\bGemvKernel<", "ldg128", 0, "the decode GEMV (target 1)"),
    (r"\bDecodePartitionKernel<", "stack", 0, "decode attention"),
    (r"\bDecodeReduceKernel\b", "stack", 0, "decode attention's reduction"),
    (r"\bPrefillKernel<", "stack", 0, "prefill attention"),
    # Today's values: attention reads 2-byte elements and divides 64-bit
    # positions by the block size (target: ldg128 >= 1, div64 0).
    (r"\bDecodePartitionKernel<", "ldg128", 0, "decode attention (target 1)"),
    (r"\bDecodePartitionKernel<", "div64", 2, "decode attention (target 0)"),
    (r"\bPrefillKernel<", "div64", 2, "prefill attention (target 0)"),
    (r"\bAddRmsNormKernel\b", "stack", 0, "fused add + RMSNorm"),
    (r"\bSiluMulKernel\b", "stack", 0, "SiLU·up"),
    (r"\bRopeKernel\b", "stack", 32, "RoPE (target 0)"),
    (r"\bTopKKernel\b", "stack", 0, "top-k"),
    (r"\bDrawKernel\b", "stack", 0, "the seeded draw"),
    (r"\bVocabDrawKernel\b", "stack", 8, "the whole-vocabulary draw (target 0)"),
    (r"\bVerifyKernel\b", "stack", 0, "speculative verification"),
]

DIV64 = re.compile(r"CALL\.[A-Z.]*\s+`?\(?\$__internal_\d+_\$__cuda_sm\d+_(div|rem)_[su]64")
LDG128 = re.compile(r"\bLDG\.E[A-Z0-9.]*\.128\b")


def default_tool(name):
    for key in ("purelib", "platlib"):
        found = sorted(glob.glob(os.path.join(sysconfig.get_paths()[key], "nvidia", "cu*", "bin",
                                              name)))
        if found:
            return found[-1]
    return shutil.which(name)


def run(args):
    result = subprocess.run(args, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(args)}: exit {result.returncode}: {result.stderr[-2000:]}")
    return result.stdout


def demangle(names):
    if not names:
        return {}
    out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True,
                         check=True).stdout.splitlines()
    return dict(zip(names, out))


def resource_usage(cuobjdump, path):
    """{mangled kernel: stack + local bytes} from cuobjdump -res-usage."""
    usage = {}
    name = None
    for line in run([cuobjdump, "-arch", "sm_90", "-res-usage", path]).splitlines():
        m = re.match(r"\s*Function (\S+):", line)
        if m:
            name = m.group(1)
            continue
        m = re.search(r"STACK:(\d+).*LOCAL:(\d+)", line)
        if m and name:
            usage[name] = max(usage.get(name, 0), int(m.group(1)) + int(m.group(2)))
            name = None
    return usage


def sass_facts(cuobjdump, nvdisasm, path):
    """{mangled kernel: Counter(ldg128=, div64=)} from each cubin's SASS; a
    kernel's section holds its body and the subroutines it calls."""
    facts = collections.defaultdict(collections.Counter)
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([cuobjdump, "-arch", "sm_90", "-xelf", "all", os.path.abspath(path)], cwd=tmp,
                       capture_output=True, check=True)
        for cubin in sorted(os.listdir(tmp)):
            section = None
            for line in run([nvdisasm, "-c", os.path.join(tmp, cubin)]).splitlines():
                m = re.match(r"\s*\.section\s+\.text\.(\S+?),", line)
                if m:
                    section = m.group(1)
                    continue
                if section is None:
                    continue
                if LDG128.search(line):
                    facts[section]["ldg128"] += 1
                if DIV64.search(line):
                    facts[section]["div64"] += 1
    return facts


def measure(kernel, rule, usage, facts):
    if rule == "stack":
        return usage.get(kernel, 0)
    return facts.get(kernel, collections.Counter())[rule]


def check(usage, facts, names):
    failures = []
    for pattern, rule, budget, why in RULES:
        kernels = [k for k in sorted(set(usage) | set(facts)) if re.search(pattern, names[k])]
        if not kernels:
            failures.append(f"rule {rule} for /{pattern}/ ({why}): no kernel matches")
            continue
        for kernel in kernels:
            value = measure(kernel, rule, usage, facts)
            ok = value >= budget if rule == "ldg128" else value <= budget
            if not ok:
                bound = "at least" if rule == "ldg128" else "at most"
                failures.append(f"{names[kernel]}: rule {rule} ({why}): {value}, "
                                f"must be {bound} {budget}")
    return failures


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cuobjdump", default=default_tool("cuobjdump"))
    parser.add_argument("--nvdisasm", default=default_tool("nvdisasm"))
    parser.add_argument("--report", action="store_true", help="print every kernel's values")
    parser.add_argument("objects", nargs="+")
    args = parser.parse_args()
    if not args.cuobjdump or not args.nvdisasm:
        print("sass_gates: cuobjdump and nvdisasm not found (pip install nvidia-cuda-cuobjdump "
              "nvidia-cuda-nvdisasm, or --cuobjdump / --nvdisasm)", file=sys.stderr)
        return 2
    usage, facts = {}, collections.defaultdict(collections.Counter)
    try:
        for path in args.objects:
            usage.update(resource_usage(args.cuobjdump, path))
            for kernel, counts in sass_facts(args.cuobjdump, args.nvdisasm, path).items():
                facts[kernel].update(counts)
    except (RuntimeError, subprocess.CalledProcessError, OSError) as e:
        print(f"sass_gates: {e}", file=sys.stderr)
        return 2
    names = demangle(sorted(set(usage) | set(facts)))
    if args.report:
        for kernel in sorted(names, key=names.get):
            f = facts.get(kernel, collections.Counter())
            print(f"stack {usage.get(kernel, 0):4d}  ldg128 {f['ldg128']:3d}  "
                  f"div64 {f['div64']:2d}  {names[kernel]}")
    failures = check(usage, facts, names)
    for failure in failures:
        print(f"sass_gates: FAIL {failure}", file=sys.stderr)
    if not failures:
        print(f"sass_gates: {len(RULES)} rules hold on {len(names)} kernels")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
