"""The integration tests' client of the coordinator's public API
(tandem.v1.Inference), on tandem-client, the project's Python SDK
(client/python, installed into the tests' venv by setup-test-venv.sh).

`client(port)` is an SDK Client of 127.0.0.1:port that never retries (a
test sees every UNAVAILABLE); `model_info(port)` its ModelInfo. The stream
helpers send the requests of a JSONL request list (the subset the tests use:
prompt / prompt_token_ids / messages, max_tokens, temperature, ignore_eos),
each on its own connection from its own thread, all released at once, and
record when every delta with tokens arrived. Those times are what show that
the server streamed (tokens arrive over several messages, not in one at the
end) and served the requests concurrently (many were mid-generation at the
same moment) — things `tandem generate`'s output cannot show."""
import threading
import time

import grpc

import tandem_client

RPC_TIMEOUT = 10  # seconds, for a unary call

# Delta.finish_reason → the names `tandem run --json` prints.
FINISH_REASONS = {"": "none", "stop": "stop", "length": "length", "cancelled": "cancelled",
                  "error": "error"}


def client(port, timeout=RPC_TIMEOUT, own_connection=False):
    """A tandem_client.Client of 127.0.0.1:port with `timeout` as every
    call's deadline and no retries (Backoff(max_retries=0)), so an
    UNAVAILABLE reaches the test as it happened. It ignores any proxy set in
    the environment (test traffic stays on loopback); with `own_connection`
    it opens its own TCP connection instead of sharing one with the process's
    other channels to the same address (grpcio's global subchannel pool)."""
    options = [("grpc.enable_http_proxy", 0)]
    if own_connection:
        options.append(("grpc.use_local_subchannel_pool", 1))
    return tandem_client.Client(f"127.0.0.1:{port}", timeout=timeout,
                                backoff=tandem_client.Backoff(max_retries=0), options=options)


def model_info(port):
    """The tandem_client.ModelInfo of the coordinator on 127.0.0.1:port;
    raises tandem_client.TandemError when the call fails."""
    with client(port) as c:
        return c.model_info()


def sdk_arguments(req):
    """Client.stream's keyword arguments for one JSONL request dict."""
    unknown = set(req) - {"prompt", "prompt_token_ids", "messages", "temperature", "max_tokens",
                          "ignore_eos"}
    assert not unknown, f"stream_client does not encode {sorted(unknown)}"
    if "prompt" in req:
        kwargs = {"prompt": req["prompt"]}
    elif "prompt_token_ids" in req:
        kwargs = {"prompt": req["prompt_token_ids"]}
    else:
        kwargs = {"messages": req["messages"]}
    for key in ("temperature", "max_tokens"):
        if key in req:
            kwargs[key] = req[key]
    if req.get("ignore_eos"):
        kwargs["ignore_eos"] = True
    return kwargs


class StreamResult:
    """What one GenerateStream returned (completion index 0 only)."""

    def __init__(self):
        self.sent_at = None        # time.monotonic() when the call started
        self.token_times = []      # arrival time of each delta that carried tokens
        self.end_at = None         # when the stream ended
        self.token_ids = []
        self.text = ""
        self.finish_reason = "none"
        self.status = None         # the call's grpc.StatusCode (None: it never ended)
        self.details = ""          # the status's message, or why the stream is incomplete
        self.error = ""            # the last message's error field (the call ended OK)
        self.usage = None          # the last message's tandem_client.Usage

    def as_line(self):
        """The fields `tandem run --json` prints for this completion."""
        return {"token_ids": self.token_ids, "text": self.text,
                "finish_reason": self.finish_reason}


def generate_stream(port, req, timeout, start=None):
    """Runs one GenerateStream on 127.0.0.1:port over a connection of its own,
    with `timeout` as the call's deadline; waits on `start` (a
    threading.Event or Barrier) first when given."""
    result = StreamResult()
    with client(port, timeout, own_connection=True) as c:
        if start is not None:
            start.wait(timeout)
        result.sent_at = time.monotonic()
        stream = c.stream(**sdk_arguments(req))
        read_stream(stream, result)
        result.end_at = time.monotonic()
    result.usage = stream.usage
    if result.status == grpc.StatusCode.OK and not stream.request_id:
        result.details = "the stream ended with OK but without a message"
    return result


def read_stream(stream, result):
    """Folds every delta of a tandem_client.Stream into `result`, then its
    outcome: status OK, or the failed call's code and message."""
    try:
        for delta in stream:
            at = time.monotonic()
            if fold_delta(result, delta):
                result.token_times.append(at)
        result.status = grpc.StatusCode.OK
    except tandem_client.CompletionError as e:
        result.status, result.error = grpc.StatusCode.OK, e.message
    except tandem_client.TandemError as e:
        result.status, result.details = e.code, e.message


def fold_delta(result, delta):
    """Adds one tandem_client.Delta to `result`; whether it carried tokens of
    completion 0."""
    if delta.index != 0:
        return False
    result.token_ids.extend(delta.token_ids)
    result.text += delta.text
    if delta.finish_reason:
        result.finish_reason = FINISH_REASONS[delta.finish_reason]
    return bool(delta.token_ids)


def generate_concurrently(port, requests, timeout):
    """Sends every request at once, one thread and connection each (released
    together by a barrier); returns their StreamResults in request order.
    Every wait is bounded by `timeout`; a stream still running after it has
    status None."""
    results = [None] * len(requests)
    barrier = threading.Barrier(len(requests))

    def run(i):
        results[i] = generate_stream(port, requests[i], timeout, start=barrier)

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(len(requests))]
    for t in threads:
        t.start()
    deadline = time.monotonic() + timeout
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    for i, r in enumerate(results):
        if r is None:
            results[i] = StreamResult()
            results[i].details = f"still streaming after {timeout} s"
    return results


def peak_in_flight(results):
    """The most streams that were between their first and last token message
    at one moment: 1 for a server that runs requests one after another, close
    to len(results) for one that batches them all."""
    events = []
    for r in results:
        if len(r.token_times) >= 2:
            events.append((r.token_times[0], 1))
            events.append((r.token_times[-1], -1))
    peak = current = 0
    for _, step in sorted(events, key=lambda e: (e[0], e[1])):  # ends before starts on ties
        current += step
        peak = max(peak, current)
    return peak
