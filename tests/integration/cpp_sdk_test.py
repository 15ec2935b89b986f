#!/usr/bin/env python3
"""The C++ SDK as an application developer uses it: `cmake --install` the
build into a fresh prefix, build client/sdk/example (find_package(tandem
CONFIG) + tandem::client) against that prefix alone, and run it against a
real tandem-coordinator. Its unary, iterated and callback generations must
all equal `tandem run`'s greedy tokens and text; Tokenize must give `tandem
run`'s prompt ids; a bad request must come back as INVALID_ARGUMENT naming
the value.

Env: TANDEM_BUILD_DIR (the tandem build to install), TANDEM_SOURCE_DIR,
TANDEM_COORDINATOR_BIN, TANDEM_BIN, TANDEM_MODEL.
"""
import json
import os
import shutil
import subprocess
import tempfile
import unittest

from server_process import Server

BUILD_DIR = os.environ["TANDEM_BUILD_DIR"]
SOURCE_DIR = os.environ["TANDEM_SOURCE_DIR"]
COORDINATOR = os.environ["TANDEM_COORDINATOR_BIN"]
BIN = os.environ["TANDEM_BIN"]
MODEL = os.environ["TANDEM_MODEL"]
PROMPT = "The capital of France is"
MAX_TOKENS = 12
TIMEOUT = 600


def run(args, **kwargs):
    """Runs `args`; fails the test with its output when it exits non-zero."""
    p = subprocess.run(args, capture_output=True, text=True, timeout=TIMEOUT, **kwargs)
    if p.returncode != 0:
        raise AssertionError(f"{' '.join(args)} exited {p.returncode}:\n{p.stdout}\n{p.stderr}")
    return p.stdout


def parse_example(out):
    """The example's "label value..." lines as {label: rest}; `text` is
    everything between "text " and the final "error" line (it may span
    lines)."""
    head, _, tail = out.partition("\ntext ")
    text, _, error = tail.rpartition("\nerror ")
    fields = dict(line.split(" ", 1) for line in head.splitlines())
    fields["text"] = text
    fields["error"] = error.strip()
    return fields


class CppSdkTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="tandem-sdk-")
        prefix = os.path.join(cls.tmp, "prefix")
        run(["cmake", "--install", BUILD_DIR, "--prefix", prefix])
        example_build = os.path.join(cls.tmp, "example")
        # Only the install prefix (and the system's packages) are visible.
        run(["cmake", "-S", os.path.join(SOURCE_DIR, "client", "sdk", "example"),
             "-B", example_build, f"-DCMAKE_PREFIX_PATH={prefix}"])
        run(["cmake", "--build", example_build, "-j2"])
        cls.example = os.path.join(example_build, "tandem-sdk-example")
        cls.server = Server([COORDINATOR, "--local", "--model", MODEL, "--port", "0"],
                            "tandem-coordinator")

    @classmethod
    def tearDownClass(cls):
        cls.server.terminate(30)
        cls.server.kill()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_installed_package_has_headers_and_config(self):
        prefix = os.path.join(self.tmp, "prefix")
        for rel in ("include/tandem/client.h", "include/tandem/generation.h",
                    "lib/cmake/tandem/tandemConfig.cmake",
                    "lib/cmake/tandem/tandemConfigVersion.cmake"):
            self.assertTrue(os.path.exists(os.path.join(prefix, rel)), rel)

    def test_example_equals_tandem_run(self):
        out = run([self.example, self.server.address, PROMPT, str(MAX_TOKENS)])
        got = parse_example(out)
        ref = json.loads(run([BIN, "run", "--model", MODEL, "--prompt", PROMPT, "--max-tokens",
                              str(MAX_TOKENS), "--temperature", "0", "--json"]).splitlines()[0])
        self.assertEqual(got["health"], "SERVING")
        self.assertIn("vocab 49152", got["model"])
        ids = " ".join(str(t) for t in ref["token_ids"])
        self.assertEqual(got["prompt"], " ".join(str(t) for t in ref["prompt_token_ids"]))
        for label in ("generate", "stream", "callback"):
            self.assertEqual(got[label], ids, label)
        self.assertEqual(got["text"], ref["text"])
        self.assertTrue(got["error"].startswith("INVALID_ARGUMENT: top_p 2"), got["error"])

    def test_example_against_nothing_fails_cleanly(self):
        # A port that was just free: the SDK retries UNAVAILABLE, then the
        # example reports it and exits 1 (no crash, bounded).
        server = Server([COORDINATOR, "--local", "--model", MODEL, "--port", "0"],
                        "tandem-coordinator")
        address = server.address
        server.kill()
        p = subprocess.run([self.example, address, PROMPT], capture_output=True, text=True,
                           timeout=120)
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn("UNAVAILABLE", p.stderr)


if __name__ == "__main__":
    unittest.main()
