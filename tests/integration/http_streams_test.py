#!/usr/bin/env python3
"""1,000 concurrent server-sent-event streams against one coordinator's HTTP
API (`tandem-coordinator --local`), a third of whose clients hang up after
their first event:

- every stream that stays ends with `data: [DONE]` after exactly its
  max_tokens tokens, and no stream gets an error;
- afterwards no request is running or waiting and the KV cache is back to
  its idle usage (the hung-up requests were cancelled and freed);
- the coordinator's thread count stays bounded (a fixed pool of HTTP I/O
  threads, not a thread per connection).
The client is plain asyncio on sockets (HTTP/1.1, chunked SSE). Every wait
is bounded.

Env: TANDEM_COORDINATOR_BIN, TANDEM_MODEL.
"""
import asyncio
import json
import os
import resource
import time
import unittest

from metrics_scrape import scrape
from server_process import Server

COORDINATOR = os.environ["TANDEM_COORDINATOR_BIN"]
MODEL = os.environ["TANDEM_MODEL"]
STREAMS = 1000
MAX_TOKENS = 4
DEADLINE_S = 600


def gauges(address):
    """The coordinator's metrics without labels (but model_name), by name."""
    return {name: value for (name, labels), value in scrape(f"http://{address}/metrics").items()
            if not labels}


def threads_of(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("Threads:"):
                return int(line.split()[1])
    raise AssertionError("no Threads line")


async def stream(host, port, index, hang_up):
    """('done', tokens) | ('hung_up', 0) | ('error', text) for one stream."""
    body = json.dumps({"prompt": f"Count to ten, take {index}:", "max_tokens": MAX_TOKENS,
                       "temperature": 0, "ignore_eos": True, "stream": True,
                       "return_tokens_as_token_ids": True, "logprobs": 0}).encode()
    reader, writer = await asyncio.open_connection(host, port)
    try:
        writer.write(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
        await writer.drain()
        status = await reader.readline()
        if b" 200 " not in status:
            return ("error", status.decode(errors="replace"))
        tokens = 0
        while True:
            line = await reader.readline()
            if not line:
                return ("error", "connection closed before [DONE]")
            if not line.startswith(b"data: "):
                continue
            if line.startswith(b"data: [DONE]"):
                return ("done", tokens)
            event = json.loads(line[6:])
            if "error" in event:
                return ("error", json.dumps(event))
            for choice in event.get("choices", []):
                if choice.get("logprobs"):
                    tokens += len(choice["logprobs"]["tokens"])
            if hang_up:
                return ("hung_up", 0)
    finally:
        writer.close()


async def run_all(address, pid):
    """The streams' results and the most threads the coordinator had meanwhile."""
    host, port = address.rsplit(":", 1)
    most = [threads_of(pid)]

    async def watch():
        while True:
            most[0] = max(most[0], threads_of(pid))
            await asyncio.sleep(0.2)

    watcher = asyncio.ensure_future(watch())
    try:
        results = await asyncio.wait_for(
            asyncio.gather(*(stream(host, int(port), i, i % 3 == 0) for i in range(STREAMS))),
            DEADLINE_S)
    finally:
        watcher.cancel()
    return results, most[0]


class HttpStreamsTest(unittest.TestCase):
    def test_a_thousand_streams_a_third_hanging_up(self):
        # Both ends hold a socket per stream.
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, 4 * STREAMS)), hard))
        server = Server([COORDINATOR, "--local", "--model", MODEL, "--port", "0", "--threads", "2",
                         "--kv-cache-bytes", str(64 << 20)], "tandem-coordinator")
        try:
            idle = gauges(server.http_address)
            threads_before = threads_of(server.proc.pid)
            results, threads_most = asyncio.run(run_all(server.http_address, server.proc.pid))
            errors = [r[1] for r in results if r[0] == "error"]
            self.assertEqual(errors, [], f"{len(errors)} streams failed")
            done = [r[1] for r in results if r[0] == "done"]
            self.assertEqual(len(done), STREAMS - len(range(0, STREAMS, 3)))
            self.assertEqual(set(done), {MAX_TOKENS})
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                g = gauges(server.http_address)
                if (g["vllm:num_requests_running"] == 0 and g["vllm:num_requests_waiting"] == 0
                        and g["vllm:kv_cache_usage_perc"] == idle["vllm:kv_cache_usage_perc"]):
                    break
                time.sleep(0.2)
            self.assertEqual(g["vllm:num_requests_running"], 0)
            self.assertEqual(g["vllm:num_requests_waiting"], 0)
            self.assertEqual(g["vllm:kv_cache_usage_perc"], idle["vllm:kv_cache_usage_perc"])
            self.assertLessEqual(threads_most, threads_before + 4)
            print(f"{len(done)} streams done, {STREAMS - len(done)} hung up; coordinator threads "
                  f"{threads_before} before, at most {threads_most} during")
        finally:
            server.kill()


if __name__ == "__main__":
    unittest.main()
