"""An Inference.GenerateStream client for the integration tests, on grpcio:
sends the requests of a JSONL request list (the subset the tests use: prompt /
prompt_token_ids / messages, max_tokens, temperature, ignore_eos), each on its
own connection from its own thread, all released at once, and records when
every streamed message arrived. Those times are what show that the server
streamed (tokens arrive over several messages, not in one at the end) and
served the requests concurrently (many were mid-generation at the same
moment) — things `tandem generate`'s output cannot show."""
import threading
import time

import grpc

from grpc_channel import channel
from tandem.v1 import common_pb2, inference_pb2, inference_pb2_grpc

# FinishReason → the names `tandem run --json` prints.
FINISH_REASONS = {
    common_pb2.FINISH_REASON_UNSPECIFIED: "none",
    common_pb2.FINISH_REASON_STOP: "stop",
    common_pb2.FINISH_REASON_LENGTH: "length",
    common_pb2.FINISH_REASON_CANCELLED: "cancelled",
    common_pb2.FINISH_REASON_ERROR: "error",
}


def generate_request(req):
    """The GenerateRequest of one JSONL request dict."""
    unknown = set(req) - {"prompt", "prompt_token_ids", "messages", "temperature", "max_tokens",
                          "ignore_eos"}
    assert not unknown, f"stream_client does not encode {sorted(unknown)}"
    out = inference_pb2.GenerateRequest(decoding_mode=inference_pb2.DECODING_MODE_SAMPLING)
    if "prompt" in req:
        out.text = req["prompt"]
    elif "prompt_token_ids" in req:
        out.token_ids.ids.extend(req["prompt_token_ids"])
    else:
        out.chat.add_generation_prompt = True
        for m in req["messages"]:
            out.chat.messages.add(role=m["role"], content=m["content"])
    if "temperature" in req:
        out.sampling.temperature = req["temperature"]
    if "max_tokens" in req:
        out.sampling.max_tokens = req["max_tokens"]
    if req.get("ignore_eos"):
        out.sampling.ignore_eos = True
    return out


class StreamResult:
    """What one GenerateStream returned (completion index 0 only)."""

    def __init__(self):
        self.sent_at = None        # time.monotonic() when the call started
        self.token_times = []      # arrival time of each message that carried tokens
        self.end_at = None         # when the stream ended
        self.token_ids = []
        self.text = ""
        self.finish_reason = "none"
        self.status = None         # the call's grpc.StatusCode (None: it never ended)
        self.details = ""          # the status's message, or why the stream is incomplete
        self.error = ""            # the last message's error field
        self.usage = None          # the last message's Usage

    def as_line(self):
        """The fields `tandem run --json` prints for this completion."""
        return {"token_ids": self.token_ids, "text": self.text,
                "finish_reason": self.finish_reason}


def generate_stream(port, req, timeout, start=None):
    """Runs one GenerateStream on 127.0.0.1:port over a connection of its own,
    with `timeout` as the call's deadline; waits on `start` (a
    threading.Event or Barrier) first when given."""
    result = StreamResult()
    request = generate_request(req)
    with channel(port, own_connection=True) as ch:
        stub = inference_pb2_grpc.InferenceStub(ch)
        if start is not None:
            start.wait(timeout)
        result.sent_at = time.monotonic()
        messages = 0
        try:
            for msg in stub.GenerateStream(request, timeout=timeout):
                messages += 1
                at = time.monotonic()
                if fold_message(result, msg):
                    result.token_times.append(at)
            result.status = grpc.StatusCode.OK
        except grpc.RpcError as e:
            result.status, result.details = e.code(), e.details()
        result.end_at = time.monotonic()
    if result.status == grpc.StatusCode.OK and messages == 0:
        result.details = "the stream ended with OK but without a message"
    return result


def fold_message(result, msg):
    """Adds one GenerateStreamResponse to `result`; whether it carried tokens
    of completion 0."""
    tokens = 0
    for delta in msg.deltas:
        if delta.index != 0:
            continue
        result.token_ids.extend(delta.token_ids)
        tokens += len(delta.token_ids)
        result.text += delta.text
        if delta.finish_reason != common_pb2.FINISH_REASON_UNSPECIFIED:
            result.finish_reason = FINISH_REASONS[delta.finish_reason]
    if msg.HasField("usage"):
        result.usage = msg.usage
    if msg.error:
        result.error = msg.error
    return tokens > 0


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
