"""How a Stream ends when the server misbehaves or fails, against a scripted
in-process Inference server on 127.0.0.1 (no model): a last message with an
error field on an OK call is CompletionError; that message before a failed
status gives the status's exception; UNAVAILABLE before the first token is
retried with a new call, after a token it is not."""
import contextlib
from concurrent import futures

import grpc
import pytest

import tandem_client
from tandem_client import Backoff, Client
from tandem_client.v1 import common_pb2, inference_pb2, inference_pb2_grpc

FAST = Backoff(max_retries=2, initial=0.01)


def message(tokens=(), error="", last=False):
    """A GenerateStreamResponse of request "r": a delta of `tokens` (none
    when empty); `last` adds usage and finishes the delta."""
    m = inference_pb2.GenerateStreamResponse(request_id="r", error=error)
    if tokens:
        m.deltas.add(index=0, text="x" * len(tokens), token_ids=tokens)
    if last:
        m.usage.completion_tokens = 1
        if m.deltas:
            m.deltas[0].finish_reason = common_pb2.FINISH_REASON_LENGTH
    return m


class Scripted(inference_pb2_grpc.InferenceServicer):
    """GenerateStream's n-th call runs script(n, context) (a generator of messages)."""

    def __init__(self, script):
        self.script = script
        self.calls = 0

    def GenerateStream(self, request, context):
        self.calls += 1
        yield from self.script(self.calls, context)


@contextlib.contextmanager
def scripted_client(script, backoff=FAST):
    """A Client of a Scripted server, and the servicer (its call count)."""
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    servicer = Scripted(script)
    inference_pb2_grpc.add_InferenceServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        with Client(f"127.0.0.1:{port}", timeout=10, backoff=backoff) as c:
            yield c, servicer
    finally:
        server.stop(None)


def test_error_field_on_an_ok_call_is_completion_error():
    def script(n, context):
        yield message([5])
        yield message(error="worker group lost", last=True)

    with scripted_client(script) as (c, servicer):
        stream = c.stream("hi")
        assert next(stream).token_ids == [5]
        with pytest.raises(tandem_client.CompletionError) as e:
            next(stream)
    assert (e.value.code, e.value.message) == (grpc.StatusCode.OK, "worker group lost")
    assert not isinstance(e.value, tandem_client.Unavailable)
    assert stream.usage is not None and servicer.calls == 1


def test_the_status_after_an_error_field_wins():
    def script(n, context):
        yield message([5])
        yield message(error="worker group lost", last=True)
        context.abort(grpc.StatusCode.UNAVAILABLE, "worker group lost")

    with scripted_client(script) as (c, servicer):
        stream = c.stream("hi")
        with pytest.raises(tandem_client.Unavailable) as e:
            list(stream)
    assert type(e.value) is tandem_client.Unavailable
    assert servicer.calls == 1  # a token had arrived: not retried


def test_unavailable_before_the_first_token_is_a_new_call():
    def script(n, context):
        if n < 3:
            yield message()  # no token yet
            context.abort(grpc.StatusCode.UNAVAILABLE, "no worker group")
        yield message([7])
        yield message([8], last=True)

    with scripted_client(script) as (c, servicer):
        stream = c.stream("hi")
        assert [t for d in stream for t in d.token_ids] == [7, 8]
    assert servicer.calls == 3 and stream.usage is not None

    with scripted_client(script, Backoff(max_retries=0)) as (c, servicer):
        with pytest.raises(tandem_client.Unavailable):
            list(c.stream("hi"))
    assert servicer.calls == 1
