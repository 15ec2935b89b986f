"""Helpers shared by the tests that compare a cluster's output with `tandem
run` (cluster_test.py, tp_test.py): the mixed request set, running the CLI
with a bound, and the line-by-line comparison. Stdlib only."""
import json
import random
import subprocess
import tempfile

WORDS = ["the", "quick", "brown", "fox", "jumps", "over", "a", "lazy", "dog", "while",
         "rain", "falls", "on", "quiet", "hills", "and", "rivers", "run", "to", "sea"]
MIN_PROMPT_TOKENS = 4
MAX_PROMPT_TOKENS = 200
MIN_NEW_TOKENS = 4
MAX_NEW_TOKENS = 24


def run_cli(binary, args, timeout):
    """Runs `binary args`; returns (exit code, stdout, stderr). Raises
    subprocess.TimeoutExpired after `timeout` seconds."""
    p = subprocess.run([binary] + args, capture_output=True, text=True, timeout=timeout)
    return p.returncode, p.stdout, p.stderr


def write_temp(text):
    """A temporary .jsonl file holding `text`; the caller unlinks it."""
    f = tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False)
    f.write(text)
    f.close()
    return f.name


def jsonl(requests):
    return "".join(json.dumps(r) + "\n" for r in requests)


def mixed_requests(count=64, seed=7):
    """`count` greedy requests (dicts of the JSONL request format) of mixed
    kinds, prompt lengths and output lengths, deterministic in `seed`.

    Three in four are prompt_token_ids of MIN_PROMPT_TOKENS..MAX_PROMPT_TOKENS
    ids, both ends included, spread cubically (most short, a few long) so that
    the whole set prefills ~3k tokens: cheap enough for reference precision on
    two cores, yet with prompts that span several KV blocks and prefill
    chunks. The rest are text prompts and chat messages of 1..40 words (so the
    server's tokenizer and chat template are on the path too). max_tokens is
    MIN_NEW_TOKENS..MAX_NEW_TOKENS; EOS may end a completion earlier."""
    rng = random.Random(seed)
    num_ids = count - count // 4
    lengths = [MIN_PROMPT_TOKENS + round((MAX_PROMPT_TOKENS - MIN_PROMPT_TOKENS) *
                                         (k / max(1, num_ids - 1)) ** 3) for k in range(num_ids)]
    rng.shuffle(lengths)
    requests = []
    for i in range(count):
        req = {}
        if i % 8 == 3:
            req["prompt"] = " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 40)))
        elif i % 8 == 7:
            req["messages"] = [{"role": "user", "content": " ".join(
                rng.choice(WORDS) for _ in range(rng.randint(1, 40)))}]
        else:
            req["prompt_token_ids"] = [rng.randint(100, 4000) for _ in range(lengths.pop())]
        req["max_tokens"] = rng.randint(MIN_NEW_TOKENS, MAX_NEW_TOKENS)
        req["temperature"] = 0
        requests.append(req)
    return requests


def parse_lines(out):
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def assert_lines_equal(test, got, want, count, keys, label):
    """`got` and `want` (lists of `tandem run --json` line dicts) both have
    `count` lines that agree on every key of `keys`, and every completion
    generated something."""
    test.assertEqual(len(want), count, f"{label}: tandem run printed {len(want)} lines")
    test.assertEqual(len(got), count, f"{label}: got {len(got)} results")
    for i, (g, w) in enumerate(zip(got, want)):
        for key in keys:
            test.assertEqual(g.get(key), w.get(key), f"{label}: request {i + 1}: {key}")
        test.assertTrue(g["token_ids"], f"{label}: request {i + 1} generated nothing")
