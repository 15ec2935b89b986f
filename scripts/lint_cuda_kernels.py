#!/usr/bin/env python3
"""Checks that CUDA sources build both with nvcc and under tandem's emulation.

Rules, for every .cu and .cuh under the given folders (kernels/cuda by
default) except the emulation itself (any path with an `emulation` folder)
and cuda_compat.cuh, which defines the macros:

- no raw `<<<` launch: use TANDEM_LAUNCH;
- no `extern __shared__`: use TANDEM_DYNAMIC_SHARED;
- inline PTX (`asm(`, `asm volatile`), `mma`, `wgmma`, `cp.async` only inside
  an `#ifndef TANDEM_CUDA_EMULATION` (or `#if !defined(...)`) block, or the
  `#else` of an `#ifdef TANDEM_CUDA_EMULATION` block, so that the emulated
  build compiles the plain fallback.

The preprocessor tracking is deliberately simple: it follows #if / #ifdef /
#ifndef / #elif / #else / #endif nesting and knows which branches exclude
emulation; comments and string literals are stripped first.

Usage: lint_cuda_kernels.py [FOLDER...]; exit status 1 and one line per
finding (path:line: message) when anything is wrong.
"""

import pathlib
import re
import sys

EMULATION_MACRO = "TANDEM_CUDA_EMULATION"
DEVICE_ONLY = re.compile(r"\basm\s*(\(|volatile\b)|\bw?mma\b|\bcp\.async\b|\bmma\.sync\b|\bwgmma\.")
RAW_LAUNCH = re.compile(r"<<<")
EXTERN_SHARED = re.compile(r"\bextern\s+__shared__\b")
DIRECTIVE = re.compile(r"^\s*#\s*(\w+)\s*(.*)$")


def strip_comments_and_strings(text):
    """Blanks out comments and string/char literals, keeping line breaks."""
    pattern = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)

    def blank(match):
        return re.sub(r"[^\n]", " ", match.group(0))

    return pattern.sub(blank, text)


def excludes_emulation(directive, argument):
    """Whether the branch opened by this #if-like directive is not compiled under emulation."""
    argument = argument.strip()
    if directive == "ifndef":
        return argument == EMULATION_MACRO
    if directive in ("if", "elif"):
        return re.fullmatch(r"!\s*defined\s*\(?\s*%s\s*\)?" % EMULATION_MACRO, argument) is not None
    return False


def includes_only_emulation(directive, argument):
    """Whether the branch is compiled only under emulation (so its #else is not)."""
    argument = argument.strip()
    if directive == "ifdef":
        return argument == EMULATION_MACRO
    if directive == "if":
        return re.fullmatch(r"defined\s*\(?\s*%s\s*\)?" % EMULATION_MACRO, argument) is not None
    return False


def lint_text(path, text):
    """Returns the findings for one source, as 'path:line: message' strings."""
    findings = []
    # Each open #if: [this branch excludes emulation, the #else would exclude it].
    stack = []
    for number, line in enumerate(strip_comments_and_strings(text).splitlines(), start=1):
        match = DIRECTIVE.match(line)
        if match:
            directive, argument = match.groups()
            if directive in ("if", "ifdef", "ifndef"):
                stack.append([excludes_emulation(directive, argument),
                              includes_only_emulation(directive, argument)])
            elif directive == "elif" and stack:
                stack[-1] = [excludes_emulation(directive, argument), False]
            elif directive == "else" and stack:
                stack[-1] = [stack[-1][1], False]
            elif directive == "endif" and stack:
                stack.pop()
            continue
        device_only = any(frame[0] for frame in stack)
        if RAW_LAUNCH.search(line):
            findings.append(f"{path}:{number}: raw <<<...>>> launch; use TANDEM_LAUNCH")
        if EXTERN_SHARED.search(line):
            findings.append(f"{path}:{number}: extern __shared__; use TANDEM_DYNAMIC_SHARED")
        found = DEVICE_ONLY.search(line)
        if found and not device_only:
            findings.append(f"{path}:{number}: '{found.group(0)}' outside an "
                            f"#ifndef {EMULATION_MACRO} block; give it a plain fallback")
    return findings


def sources(folders):
    for folder in folders:
        for path in sorted(pathlib.Path(folder).rglob("*")):
            if (path.suffix in (".cu", ".cuh") and "emulation" not in path.parts
                    and path.name != "cuda_compat.cuh"):
                yield path


def main(argv):
    folders = argv[1:] or [str(pathlib.Path(__file__).resolve().parent.parent / "kernels" / "cuda")]
    findings = []
    checked = 0
    for path in sources(folders):
        checked += 1
        findings += lint_text(path, path.read_text())
    for finding in findings:
        print(finding, flush=True)
    print(f"lint_cuda_kernels: {checked} files, {len(findings)} findings", file=sys.stderr)
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
