"""A stdlib Inference.GenerateStream client for the integration tests, built
on grpc_lite: sends the requests of a JSONL request list (the subset the tests
use: prompt / prompt_token_ids / messages, max_tokens, temperature,
ignore_eos), each on its own connection from its own thread, all released at
once, and records when every streamed message arrived. Those times are what
show that the server streamed (tokens arrive over several messages, not in one
at the end) and served the requests concurrently (many were mid-generation at
the same moment) — things `tandem generate`'s output cannot show."""
import struct
import threading
import time

from grpc_lite import decode_varints, encode_field, encode_varint, grpc_server_stream, parse_proto

GENERATE_STREAM = "/tandem.v1.Inference/GenerateStream"
# FinishReason enum values → the names `tandem run --json` prints.
FINISH_REASONS = {0: "none", 1: "stop", 2: "length", 3: "cancelled", 4: "error"}
DECODING_MODE_SAMPLING = 1


def generate_request(req):
    """The GenerateRequest bytes of one JSONL request dict."""
    if "prompt" in req:
        out = encode_field(2, 2, req["prompt"].encode())
    elif "prompt_token_ids" in req:
        ids = b"".join(encode_varint(t) for t in req["prompt_token_ids"])
        out = encode_field(3, 2, encode_field(1, 2, ids))  # TokenIds{ids (packed)}
    else:
        chat = b"".join(encode_field(1, 2, encode_field(1, 2, m["role"].encode()) +
                                     encode_field(2, 2, m["content"].encode()))
                        for m in req["messages"])
        out = encode_field(4, 2, chat + encode_field(2, 0, 1))  # add_generation_prompt
    sampling = b""
    if "temperature" in req:
        sampling += encode_field(1, 5, struct.pack("<f", req["temperature"]))
    if "max_tokens" in req:
        sampling += encode_field(9, 0, req["max_tokens"])
    if req.get("ignore_eos"):
        sampling += encode_field(13, 0, 1)
    unknown = set(req) - {"prompt", "prompt_token_ids", "messages", "temperature", "max_tokens",
                          "ignore_eos"}
    assert not unknown, f"stream_client does not encode {sorted(unknown)}"
    return out + encode_field(5, 2, sampling) + encode_field(7, 0, DECODING_MODE_SAMPLING)


class StreamResult:
    """What one GenerateStream returned (completion index 0 only)."""

    def __init__(self):
        self.sent_at = None        # time.monotonic() when the call started
        self.token_times = []      # arrival time of each message that carried tokens
        self.end_at = None         # when the stream ended
        self.token_ids = []
        self.text = ""
        self.finish_reason = "none"
        self.error = ""            # the response's error field, or the client's exception

    def as_line(self):
        """The fields `tandem run --json` prints for this completion."""
        return {"token_ids": self.token_ids, "text": self.text,
                "finish_reason": self.finish_reason}


def generate_stream(port, req, timeout, start=None):
    """Runs one GenerateStream on 127.0.0.1:port; waits on `start` (a
    threading.Event or Barrier) first when given."""
    result = StreamResult()
    request = generate_request(req)
    if start is not None:
        start.wait(timeout)
    result.sent_at = time.monotonic()
    try:
        messages = grpc_server_stream(port, GENERATE_STREAM, request, timeout)
    except (OSError, ConnectionError) as e:
        result.error = f"{type(e).__name__}: {e}"
        messages = []
    result.end_at = time.monotonic()
    text = b""  # decoded once: a message's text need not end on a character boundary
    for at, body in messages:
        msg = parse_proto(body)
        tokens = 0
        for delta_bytes in msg.get(2, []):
            delta = parse_proto(delta_bytes)
            if delta.get(1, [0])[0] != 0:
                continue
            ids = []
            for value in delta.get(3, []):  # packed bytes, or one varint when unpacked
                ids.extend(decode_varints(value) if isinstance(value, bytes) else [value])
            result.token_ids.extend(ids)
            tokens += len(ids)
            text += b"".join(delta.get(2, []))
            if delta.get(5):
                result.finish_reason = FINISH_REASONS.get(delta[5][0], str(delta[5][0]))
        if tokens:
            result.token_times.append(at)
        if msg.get(5):
            result.error = b"".join(msg[5]).decode()
    result.text = text.decode(errors="replace")
    if not messages and not result.error:
        result.error = "the stream ended without a message (an error status)"
    return result


def generate_concurrently(port, requests, timeout):
    """Sends every request at once, one thread and connection each (released
    together by a barrier); returns their StreamResults in request order.
    Every wait is bounded by `timeout`; a stream still running after it is
    reported as an error."""
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
            results[i].error = f"still streaming after {timeout} s"
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
