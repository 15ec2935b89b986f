#!/usr/bin/env python3
"""Load generator of the soak test: one process, one asyncio loop, that
keeps --streams concurrent streams busy through one of the coordinator's
APIs until --duration-s after --start-at, then lets the streams in flight
finish (at most --drain-timeout-s).

  grpc: tandem_client.AsyncClient streams (Inference.GenerateStream)
  http: the openai SDK's AsyncOpenAI, /v1/completions with stream=true

Each stream runs one request after another: a short random prompt (some
behind a shared preamble, so the prefix cache is in play), max_tokens
uniform in [--min-tokens, --max-tokens], greedy or seeded sampling (half
each); --cancel-fraction of the requests are abandoned after a random number
of chunks. Neither client retries: every failure the server causes is
counted. A completed request is checked: it ended with finish reason stop or
length, its usage counts the tokens streamed (gRPC) and a "length" one has
exactly max_tokens tokens; a request that fails a check counts as failed.

Writes JSON lines to stdout: {"kind": "progress", ...} every
--progress-interval-s, then one {"kind": "result", ...} (see Stats.result).
Run by soak.py; all traffic goes to the 127.0.0.1 address it is given."""
import argparse
import asyncio
import collections
import json
import os
import random
import re
import sys
import time

WORDS = ["river", "mountain", "city", "garden", "machine", "ocean", "winter", "story",
         "engine", "forest", "bridge", "letter", "music", "planet", "window", "coffee",
         "summer", "robot", "island", "train", "library", "castle", "desert", "cloud"]
# Two KV blocks' worth of tokens or more: requests starting with it share
# cached prefix blocks.
PREAMBLE = ("You are a concise assistant. Answer in one short sentence, plainly, "
            "without lists, and stay on the topic you are given. Topic: ")
MAX_REQUESTS_PER_STREAM = 1_000_000  # a stream's loop bound besides the deadline
MAX_ERRORS_KEPT = 20
STREAMS_PER_CONNECTION = 100


class Request:
    """One request's random parameters."""

    def __init__(self, rng, args):
        words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 10)))
        self.prompt = f"{words} {rng.randrange(100000)}"
        if rng.random() < 0.3:
            self.prompt = PREAMBLE + self.prompt
        self.max_tokens = rng.randint(args.min_tokens, args.max_tokens)
        if rng.random() < 0.5:
            self.sampling = {"temperature": 0.0}
        else:
            self.sampling = {"temperature": 0.8, "top_p": 0.95, "seed": rng.randrange(2 ** 31)}
        self.cancel_after = None  # abandon after this many chunks
        if rng.random() < args.cancel_fraction:
            self.cancel_after = rng.randint(1, max(1, self.max_tokens // 2))


class Outcome:
    COMPLETED, CANCELLED, FAILED = "completed", "cancelled", "failed"

    def __init__(self, kind, tokens=0, ttft=None, error=None):
        self.kind = kind
        self.tokens = tokens
        self.ttft = ttft
        self.error = error


class Stats:
    """Counters, per-second buckets (seconds since --start-at) and the first
    errors. One asyncio loop uses it."""

    def __init__(self, protocol, clock):
        self.protocol = protocol
        self.clock = clock
        self.totals = collections.Counter()
        # second → [sent, completed, cancelled, failed, output tokens of completed]
        self.buckets = collections.defaultdict(lambda: [0, 0, 0, 0, 0])
        self.errors = []
        self.error_counts = collections.Counter()
        self.latency_s = []  # completed requests: end-to-end
        self.ttft_s = []  # completed requests: first token
        self.in_flight = 0

    def sent(self):
        self.totals["sent"] += 1
        self.in_flight += 1
        self.buckets[int(self.clock())][0] += 1

    def done(self, outcome, latency):
        self.in_flight -= 1
        b = self.buckets[int(self.clock())]
        self.totals[outcome.kind] += 1
        if outcome.kind == Outcome.COMPLETED:
            b[1] += 1
            b[4] += outcome.tokens
            self.totals["output_tokens"] += outcome.tokens
            self.latency_s.append(latency)
            if outcome.ttft is not None:
                self.ttft_s.append(outcome.ttft)
        elif outcome.kind == Outcome.CANCELLED:
            b[2] += 1
        else:
            b[3] += 1
            self.error(outcome.error)

    def error(self, message):
        # Counted by message with the numbers masked, so one kind of failure is one line.
        self.error_counts[re.sub(r"\d+", "N", message)[:300]] += 1
        if len(self.errors) < MAX_ERRORS_KEPT:
            self.errors.append({"t_s": round(self.clock(), 3), "protocol": self.protocol,
                                "message": message[:2000]})

    def progress(self):
        return {"kind": "progress", "protocol": self.protocol, "t_s": round(self.clock(), 3),
                "sent": self.totals["sent"], "completed": self.totals[Outcome.COMPLETED],
                "cancelled": self.totals[Outcome.CANCELLED],
                "failed": self.totals[Outcome.FAILED], "in_flight": self.in_flight,
                "output_tokens": self.totals["output_tokens"]}

    def result(self, streams):
        r = self.progress()
        r.update(kind="result", streams=streams, errors=self.errors,
                 error_counts=dict(self.error_counts.most_common(50)),
                 latency_s=percentiles(self.latency_s), ttft_s=percentiles(self.ttft_s),
                 buckets={str(k): v for k, v in sorted(self.buckets.items())})
        return r


def percentiles(values):
    if not values:
        return {}
    v = sorted(values)
    pick = lambda q: round(v[min(len(v) - 1, int(q * len(v)))], 4)  # noqa: E731
    return {"p50": pick(0.5), "p90": pick(0.9), "p99": pick(0.99), "max": round(v[-1], 4)}


def describe(e):
    """An exception as one line: its type, message and (for the openai SDK's
    connection errors, whose message says little) its cause."""
    text = f"{type(e).__name__}: {e}"
    cause = e.__cause__ or (None if e.__suppress_context__ else e.__context__)
    if cause is not None and str(cause) not in text:
        text += f" (cause: {type(cause).__name__}: {cause})"
    return text


def check(finish, max_tokens, tokens, usage_tokens):
    """None when a finished request is whole; else what is wrong."""
    if finish not in ("stop", "length"):
        return f"stream ended with finish reason {finish!r} (want stop or length)"
    if usage_tokens is None:
        return "stream ended without usage"
    if tokens is not None and usage_tokens != tokens:
        return f"usage says {usage_tokens} completion tokens, {tokens} were streamed"
    if finish == "length" and usage_tokens != max_tokens:
        return f"finish reason length after {usage_tokens} tokens, max_tokens {max_tokens}"
    return None


class GrpcDriver:
    """tandem_client.AsyncClient streams; one connection per
    STREAMS_PER_CONNECTION streams."""

    def __init__(self, target, streams, timeout_s):
        import tandem_client
        self.errors = tandem_client.TandemError
        options = [("grpc.enable_http_proxy", 0), ("grpc.use_local_subchannel_pool", 1)]
        n = max(1, -(-streams // STREAMS_PER_CONNECTION))
        self.clients = [tandem_client.AsyncClient(target, timeout=timeout_s, options=options,
                                                  backoff=tandem_client.Backoff(max_retries=0))
                        for _ in range(n)]

    async def run(self, slot, req, clock):
        client = self.clients[slot // STREAMS_PER_CONNECTION]
        start = clock()
        chunks = tokens = 0
        finish, ttft = "", None
        stream = client.stream(req.prompt, max_tokens=req.max_tokens, **req.sampling)
        try:
            async for delta in stream:
                if delta.token_ids:
                    chunks += 1
                    tokens += len(delta.token_ids)
                    if ttft is None:
                        ttft = clock() - start
                finish = delta.finish_reason or finish
                if req.cancel_after is not None and chunks >= req.cancel_after and not finish:
                    stream.cancel()
                    return Outcome(Outcome.CANCELLED, tokens)
        except Exception as e:  # noqa: BLE001 — every failure is counted, by its message
            return Outcome(Outcome.FAILED, error=f"grpc: {describe(e)}")
        usage = stream.usage.completion_tokens if stream.usage is not None else None
        problem = check(finish, req.max_tokens, tokens, usage)
        if problem:
            return Outcome(Outcome.FAILED, error=f"grpc: {problem} (request {stream.request_id})")
        return Outcome(Outcome.COMPLETED, tokens, ttft)

    async def close(self):
        for c in self.clients:
            await c.close()


class HttpDriver:
    """openai.AsyncOpenAI streaming /v1/completions; one client (connection
    pool) per STREAMS_PER_CONNECTION streams."""

    def __init__(self, target, streams, timeout_s, model_name):
        import openai
        self.model = model_name
        n = max(1, -(-streams // STREAMS_PER_CONNECTION))
        self.clients = [openai.AsyncOpenAI(base_url=f"http://{target}/v1", api_key="none",
                                           max_retries=0, timeout=timeout_s)
                        for _ in range(n)]

    async def run(self, slot, req, clock):
        client = self.clients[slot // STREAMS_PER_CONNECTION]
        start = clock()
        chunks = 0
        finish, ttft, usage = "", None, None
        try:
            stream = await client.completions.create(
                model=self.model, prompt=req.prompt, max_tokens=req.max_tokens, stream=True,
                stream_options={"include_usage": True}, **req.sampling)
            try:
                async for chunk in stream:
                    if chunk.usage is not None:
                        usage = chunk.usage.completion_tokens
                    for choice in chunk.choices:
                        if choice.text:
                            chunks += 1
                            if ttft is None:
                                ttft = clock() - start
                        finish = choice.finish_reason or finish
                    if (req.cancel_after is not None and chunks >= req.cancel_after
                            and not finish):
                        await stream.close()
                        return Outcome(Outcome.CANCELLED)
            finally:
                await stream.close()
        except Exception as e:  # noqa: BLE001 — every failure is counted, by its message
            return Outcome(Outcome.FAILED, error=f"http: {describe(e)}")
        problem = check(finish, req.max_tokens, None, usage)
        if problem:
            return Outcome(Outcome.FAILED, error=f"http: {problem}")
        return Outcome(Outcome.COMPLETED, usage or 0, ttft)

    async def close(self):
        for c in self.clients:
            await c.close()


async def stream_loop(slot, driver, stats, args, clock, end):
    rng = random.Random(args.seed * 1_000_003 + slot)
    for _ in range(MAX_REQUESTS_PER_STREAM):
        if clock() >= end:
            return
        req = Request(rng, args)
        stats.sent()
        start = clock()
        outcome = await driver.run(slot, req, clock)
        stats.done(outcome, clock() - start)


async def report_progress(stats, interval_s, stop):
    while not stop.is_set():
        emit(stats.progress())
        try:
            await asyncio.wait_for(stop.wait(), interval_s)
        except asyncio.TimeoutError:
            pass


def emit(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


async def main_async(args):
    # The clock: seconds since --start-at (wall clock), read monotonically.
    offset = time.monotonic() - (time.time() - args.start_at)
    clock = lambda: time.monotonic() - offset  # noqa: E731
    if args.protocol == "grpc":
        driver = GrpcDriver(args.target, args.streams, args.request_timeout_s)
    else:
        driver = HttpDriver(args.target, args.streams, args.request_timeout_s, args.model_name)
    stats = Stats(args.protocol, clock)
    if clock() < 0:
        await asyncio.sleep(min(-clock(), 60))
    stop = asyncio.Event()
    progress = asyncio.create_task(report_progress(stats, args.progress_interval_s, stop))
    end = args.duration_s
    tasks = [asyncio.create_task(stream_loop(i, driver, stats, args, clock, end))
             for i in range(args.streams)]
    await asyncio.wait(tasks, timeout=max(0.0, end - clock()) + args.drain_timeout_s)
    unfinished = [t for t in tasks if not t.done()]
    for t in unfinished:
        t.cancel()
    await asyncio.gather(*unfinished, return_exceptions=True)
    for _ in unfinished:
        stats.done(Outcome(Outcome.FAILED, error=f"{args.protocol}: still running "
                           f"{args.drain_timeout_s} s after the load stopped (abandoned)"), 0)
    for t in tasks:
        if t.done() and not t.cancelled() and t.exception() is not None:
            stats.totals[Outcome.FAILED] += 1
            stats.error(f"{args.protocol}: load generator error: {describe(t.exception())}")
    stop.set()
    await progress
    await driver.close()
    emit(stats.result(args.streams))


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--protocol", choices=["grpc", "http"], required=True)
    p.add_argument("--target", required=True, help="127.0.0.1:PORT of the API")
    p.add_argument("--model-name", default="", help="http: the request's model")
    p.add_argument("--streams", type=int, required=True)
    p.add_argument("--start-at", type=float, required=True, help="epoch seconds of t = 0")
    p.add_argument("--duration-s", type=float, required=True)
    p.add_argument("--drain-timeout-s", type=float, default=300)
    p.add_argument("--request-timeout-s", type=float, default=600)
    p.add_argument("--min-tokens", type=int, default=8)
    p.add_argument("--max-tokens", type=int, default=48)
    p.add_argument("--cancel-fraction", type=float, default=0.05)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--progress-interval-s", type=float, default=5)
    args = p.parse_args(argv)
    if not args.target.startswith("127."):
        p.error(f"--target {args.target}: the soak test only talks to 127.0.0.0/8")
    return args


def main():
    args = parse_args()
    # Loopback only: no proxy from the environment may take the HTTP traffic.
    os.environ["NO_PROXY"] = os.environ["no_proxy"] = "127.0.0.1,localhost"
    asyncio.run(main_async(args))


if __name__ == "__main__":
    main()
