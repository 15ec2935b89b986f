#!/usr/bin/env python3
"""Integration test of every binary's command line: `--help` on tandem-worker,
tandem-draft, tandem-coordinator and every `tandem` subcommand lists the flags
it takes, one line each with its default; `tandem --help` lists the
subcommands; an unknown flag (or one of another subcommand) is refused by name
with exit code 2 before anything is loaded; flags that are taken still reach
the program. No model is loaded and no port is opened. Standard library only.

Env: TANDEM_BIN, TANDEM_WORKER_BIN, TANDEM_DRAFT_BIN, TANDEM_COORDINATOR_BIN, and
TANDEM_ENGINE_BENCH_BIN when the benchmarks are built.
"""
import os
import re
import subprocess
import unittest

TANDEM = os.environ["TANDEM_BIN"]
WORKER = os.environ["TANDEM_WORKER_BIN"]
DRAFT = os.environ["TANDEM_DRAFT_BIN"]
COORDINATOR = os.environ["TANDEM_COORDINATOR_BIN"]
ENGINE_BENCH = os.environ.get("TANDEM_ENGINE_BENCH_BIN")
TIMEOUT = 60

SUBCOMMANDS = ["run", "tokenize", "generate", "chat", "bench", "up", "health", "make-model"]
# One flag line: two spaces, --dashed-name=DEFAULT, two or more spaces, help.
FLAG_LINE = re.compile(r"  --([a-z0-9]+(?:-[a-z0-9]+)*)=(\S*)  +\S.*")


def run(argv):
    p = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT,
                       stdin=subprocess.DEVNULL)
    return p.returncode, p.stdout, p.stderr


class HelpTest(unittest.TestCase):
    def help_flags(self, argv):
        """Runs `argv --help`; returns {flag name: default} from its flag lines."""
        code, out, err = run(argv + ["--help"])
        self.assertEqual(code, 0, f"{argv} --help: {err}")
        self.assertEqual(err, "")
        self.assertRegex(out, r"^usage: \S")
        self.assertIn("\nflags:\n", out)
        lines = out.split("\nflags:\n", 1)[1].splitlines()
        flag_lines = [line for line in lines if line.startswith("  ")]
        self.assertTrue(flag_lines, out)
        flags = {}
        for line in flag_lines:
            m = FLAG_LINE.fullmatch(line)
            self.assertIsNotNone(m, f"{argv}: not '--name=default  help': {line!r}")
            self.assertNotIn(m.group(1), flags, f"{argv}: --{m.group(1)} listed twice")
            flags[m.group(1)] = m.group(2)
        return flags

    def assert_defaults(self, flags, want):
        for name, default in want.items():
            self.assertIn(name, flags)
            self.assertEqual(flags[name], default, f"--{name}'s default")

    def test_servers_list_their_flags_with_defaults(self):
        self.assert_defaults(self.help_flags([WORKER]), {
            "model": '""', "host": "127.0.0.1", "port": "0", "kv-cache-bytes": "536870912",
            "kv-blocks": "0", "block-size": "16", "precision": "fast"})
        self.assert_defaults(self.help_flags([DRAFT]), {
            "speculative": "model", "ngram-min": "1", "ngram-max": "4",
            "kv-cache-bytes": "268435456"})
        self.assert_defaults(self.help_flags([COORDINATOR]), {
            "worker": '""', "local": "false", "num-speculative-tokens": "auto",
            "max-seqs": "256", "prefix-cache": "true", "resolve-interval-ms": "5000"})

    @unittest.skipUnless(ENGINE_BENCH, "benchmarks not built (TANDEM_BUILD_BENCH=OFF)")
    def test_engine_bench_lists_its_flags(self):
        self.assert_defaults(self.help_flags([ENGINE_BENCH]), {
            "model": '""', "prefill-len": "512", "batch-sizes": "1,16,64"})
        code, out, err = run([ENGINE_BENCH, "--no-such-flag"])
        self.assertEqual((code, out, err),
                         (2, "", "unknown flag --no-such-flag; see tandem-engine-bench --help\n"))

    def test_each_subcommand_lists_exactly_its_flags(self):
        run_flags = self.help_flags([TANDEM, "run"])
        self.assert_defaults(run_flags, {"model": '""', "max-tokens": "256", "temperature": "1",
                                         "kv-cache-bytes": "536870912", "prefix-cache": "true",
                                         "num-speculative-tokens": "auto", "stop": '""'})
        generate = self.help_flags([TANDEM, "generate"])
        self.assert_defaults(generate, {"addr": "127.0.0.1:50051", "max-tokens": "256",
                                        "num-beams": "1", "timeout-s": "-1"})
        chat = self.help_flags([TANDEM, "chat"])
        up = self.help_flags([TANDEM, "up"])
        self.assert_defaults(up, {"tp": "2", "grace-s": "15", "no-draft": "false",
                                  "mpirun": "mpirun"})
        self.assert_defaults(self.help_flags([TANDEM, "make-model"]),
                             {"dtype": "bf16", "seed": "-1"})
        self.assert_defaults(self.help_flags([TANDEM, "bench"]), {"num-requests": "100"})
        self.assertEqual(set(self.help_flags([TANDEM, "tokenize"])), {"model", "decode"})
        self.assertEqual(set(self.help_flags([TANDEM, "health"])),
                         {"addr", "tls-ca", "service", "timeout-s"})
        # TLS: the gRPC clients trust a CA; up passes the server's files through.
        for flags in (generate, chat, self.help_flags([TANDEM, "bench"])):
            self.assert_defaults(flags, {"tls-ca": '""'})
        self.assert_defaults(up, {"tls-cert": '""', "tls-key": '""'})
        self.assertNotIn("tls-ca", up)
        self.assert_defaults(self.help_flags([COORDINATOR]), {"tls-cert": '""', "tls-key": '""'})
        # Only what each command uses: no engine flags on the gRPC clients,
        # no prompt flags on chat (its messages come from stdin).
        for flag in ("kv-blocks", "threads", "precision", "model"):
            self.assertNotIn(flag, generate)
            self.assertNotIn(flag, chat)
        for flag in ("prompt", "requests", "num-beams"):
            self.assertNotIn(flag, chat)
        self.assertNotIn("addr", run_flags)
        self.assertNotIn("tp", run_flags)
        self.assertNotIn("max-tokens", up)

    def test_tandem_help_lists_the_subcommands(self):
        for argv in ([TANDEM, "--help"], [TANDEM, "-h"]):
            code, out, err = run(argv)
            self.assertEqual(code, 0, err)
            commands = out.split("\ncommands:\n", 1)[1].splitlines()
            names = [re.fullmatch(r"  (\S+)  +\S.*", line).group(1) for line in commands]
            self.assertEqual(names, SUBCOMMANDS)
        code, out, err = run([TANDEM, "--helpfull"])
        self.assertEqual(code, 0, err)
        for sub in SUBCOMMANDS:
            self.assertIn(f"usage: tandem {sub} ", out)

    def test_unknown_flag_is_named_with_exit_code_2(self):
        cases = [([TANDEM, "run", "--no-such-flag=1"], "tandem run"),
                 ([TANDEM, "generate", "--prompt", "hi", "--tempreature", "0"], "tandem generate"),
                 ([TANDEM, "--bogus", "health"], "tandem health"),
                 ([WORKER, "--model", "x.gguf", "--no-such-flag"], "tandem-worker"),
                 ([DRAFT, "--no-such-flag"], "tandem-draft"),
                 ([COORDINATOR, "--local", "--no_such_flag", "3"], "tandem-coordinator")]
        for argv, command in cases:
            code, out, err = run(argv)
            flag = next(a for a in argv[1:] if a.startswith("--") and a not in
                        ("--prompt", "--model", "--local")).split("=")[0]
            self.assertEqual((code, out), (2, ""), f"{argv}: {err}")
            self.assertEqual(err, f"unknown flag {flag}; see {command} --help\n")

    def test_a_flag_of_another_subcommand_is_refused(self):
        code, _, err = run([TANDEM, "run", "--model", "m.gguf", "--addr", "127.0.0.1:1"])
        self.assertEqual(code, 2, err)
        self.assertIn("unknown flag --addr; see tandem run --help", err)
        self.assertIn("tandem generate", err)
        code, _, err = run([TANDEM, "chat", "--prompt", "hi"])
        self.assertEqual(code, 2, err)
        self.assertIn("unknown flag --prompt; see tandem chat --help", err)

    def test_missing_unknown_command_and_extra_arguments(self):
        code, out, err = run([TANDEM])
        self.assertEqual((code, out), (2, ""), err)
        for sub in SUBCOMMANDS:
            self.assertIn(f"\n  {sub} ", err)
        code, _, err = run([TANDEM, "frob"])
        self.assertEqual((code, err), (2, "unknown command 'frob'; see tandem --help\n"))
        code, _, err = run([TANDEM, "tokenize", "extra"])
        self.assertEqual((code, err), (2, "unexpected argument 'extra'; see tandem tokenize --help\n"))
        code, _, err = run([WORKER, "extra"])
        self.assertEqual((code, err), (2, "unexpected argument 'extra'; see tandem-worker --help\n"))

    def test_taken_flags_reach_the_program(self):
        # Both spellings pass the check and the program then fails on the
        # missing model file, naming it: the flags were parsed, not refused.
        missing = "/nonexistent/help-test.gguf"
        for argv in ([TANDEM, "tokenize", "--model", missing, "--decode"],
                     [TANDEM, "run", "--model=" + missing, "--prompt", "hi", "--kv_blocks", "8",
                      "--noprefix-cache"],
                     [WORKER, "--model", missing, "--kv-blocks=8", "--block_size", "16"],
                     [DRAFT, "--model", missing, "--speculative", "model", "--ngram-max", "3"],
                     [COORDINATOR, "--model", missing, "--local", "--max-seqs", "4"]):
            code, out, err = run(argv)
            self.assertEqual(code, 1, f"{argv}: {err}")
            self.assertIn(missing, err, argv)
            self.assertNotIn("unknown flag", err)

    def test_a_bad_value_is_still_abseils_error(self):
        code, _, err = run([TANDEM, "run", "--max-tokens", "many"])
        self.assertNotEqual(code, 0)
        self.assertIn("many", err)
        self.assertIn("max_tokens", err)


if __name__ == "__main__":
    unittest.main()
