"""Errors reach gRPC clients as status codes that name the value and the
limit. Against a real `tandem-coordinator --local`: an unknown decoding_mode
or early_stopping value, num_beams outside [2, 32], and prompt + max_tokens
past the context are INVALID_ARGUMENT naming the numbers, and so are bytes that
do not parse as the method's message (an unknown method stays
UNIMPLEMENTED); an empty
request_id gets a server-assigned one and a given one is echoed. Against a
coordinator in front of a tandem-worker: SIGKILLing the worker while a stream
is open ends that stream with the gRPC status UNAVAILABLE (not OK with an
error field).

Client: tandem-client, the Python SDK (stream_client.client: no retries);
the requests the SDK's keyword arguments cannot express (unknown enum
values, num_beams 1) are GenerateRequests from build_request with those
fields set. Every wait is bounded.

Env: TANDEM_COORDINATOR_BIN, TANDEM_WORKER_BIN, TANDEM_MODEL.
"""
import os
import signal
import unittest

import grpc

import tandem_client
from server_process import Server
from stream_client import client
from tandem_client.v1 import inference_pb2

COORDINATOR = os.environ["TANDEM_COORDINATOR_BIN"]
WORKER = os.environ["TANDEM_WORKER_BIN"]
MODEL = os.environ["TANDEM_MODEL"]
CALL_TIMEOUT_S = 120


def request(**sampling):
    sampling.setdefault("max_tokens", 4)
    return tandem_client.build_request("Once upon a time", **sampling)


def beam_request(num_beams):
    """A beam search request of `num_beams` beams, whatever the number."""
    req = request()
    req.decoding_mode = inference_pb2.DECODING_MODE_BEAM_SEARCH
    req.beam_search.num_beams = num_beams
    return req


class BadRequestTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = Server([COORDINATOR, "--local", "--model", MODEL, "--port", "0"],
                            "tandem-coordinator")
        cls.client = client(cls.server.port, CALL_TIMEOUT_S)

    @classmethod
    def tearDownClass(cls):
        cls.client.close()
        if cls.server.terminate(15) is None:
            cls.server.kill()

    def assert_invalid(self, req, *needles):
        with self.assertRaises(tandem_client.InvalidRequest) as caught:
            self.client.generate(req)
        for needle in needles:
            self.assertIn(needle, caught.exception.message)

    def test_unknown_decoding_mode(self):
        req = request()
        req.decoding_mode = 99
        self.assert_invalid(req, "decoding_mode 99")

    def test_unknown_early_stopping(self):
        req = beam_request(2)
        req.beam_search.early_stopping = 7
        self.assert_invalid(req, "early_stopping 7")

    def test_num_beams_outside_the_range(self):
        for num_beams in (1, 33):
            self.assert_invalid(beam_request(num_beams), f"num_beams {num_beams}", "[2, 32]")

    def test_prompt_and_max_tokens_past_the_context(self):
        context = self.client.model_info().context_length
        self.assert_invalid(request(max_tokens=2**31 - 1), "max_tokens 2147483647",
                            f"context length is {context}")

    def test_unparseable_messages_are_invalid_argument(self):
        # gRPC's callback API answered them UNIMPLEMENTED with no message.
        garbage = b"\xff\xff\xff\x07not a protobuf"
        raw = {"request_serializer": lambda x: x, "response_deserializer": lambda x: x}
        with grpc.insecure_channel(self.server.address,
                                   options=[("grpc.enable_http_proxy", 0)]) as ch:
            calls = [ch.unary_unary("/tandem.v1.Inference/Generate", **raw),
                     ch.unary_unary("/tandem.v1.Inference/ModelInfo", **raw),
                     lambda req, timeout: list(ch.unary_stream(
                         "/tandem.v1.Inference/GenerateStream", **raw)(req, timeout=timeout))]
            for call in calls:
                with self.assertRaises(grpc.RpcError) as caught:
                    call(garbage, timeout=CALL_TIMEOUT_S)
                self.assertEqual(caught.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
                self.assertIn("cannot be parsed", caught.exception.details())
            # A method the server does not have is still UNIMPLEMENTED.
            with self.assertRaises(grpc.RpcError) as caught:
                ch.unary_unary("/tandem.v1.Inference/NoSuchMethod", **raw)(
                    b"", timeout=CALL_TIMEOUT_S)
            self.assertEqual(caught.exception.code(), grpc.StatusCode.UNIMPLEMENTED)
        self.assertEqual(len(self.client.generate(request()).completions), 1)  # serves on

    def test_request_id_is_echoed_or_assigned(self):
        self.assertEqual(self.client.generate(request(request_id="mine-7")).request_id, "mine-7")
        assigned = self.client.generate(request()).request_id
        self.assertRegex(assigned, r"^tandem-\d+$")
        # Stream.request_id is that of the message read last: checked at
        # every delta and once more after the last message (the one with usage).
        stream = self.client.stream(request())
        for _ in stream:
            self.assert_assigned_anew(stream.request_id, assigned)
        self.assertIsNotNone(stream.usage)
        self.assert_assigned_anew(stream.request_id, assigned)

    def assert_assigned_anew(self, request_id, assigned):
        self.assertRegex(request_id, r"^tandem-\d+$")
        self.assertNotEqual(request_id, assigned)


class LostWorkerTest(unittest.TestCase):
    def test_a_worker_killed_mid_stream_ends_it_with_unavailable(self):
        worker = Server([WORKER, "--model", MODEL, "--port", "0"], "tandem-worker")
        coordinator = None
        try:
            coordinator = Server([COORDINATOR, "--model", MODEL, "--worker", worker.address,
                                  "--port", "0"], "tandem-coordinator")
            # stream_client.client never retries; a stream that yielded
            # tokens is never retried anyway.
            with client(coordinator.port, CALL_TIMEOUT_S) as c:
                stream = c.stream(request(max_tokens=4000, ignore_eos=True))
                first = next(stream)  # the request runs on the worker
                self.assertTrue(first.token_ids)
                worker.proc.send_signal(signal.SIGKILL)
                worker.proc.wait(timeout=30)
                # Unavailable, not CompletionError (an OK status whose last
                # message has an error field: code OK).
                with self.assertRaises(tandem_client.TandemError) as caught:
                    for _ in stream:
                        pass
            self.assertEqual(caught.exception.code, grpc.StatusCode.UNAVAILABLE,
                             caught.exception.message)
            self.assertIsInstance(caught.exception, tandem_client.Unavailable)
        finally:
            if coordinator is not None and coordinator.terminate(15) is None:
                coordinator.kill()
            worker.kill()


if __name__ == "__main__":
    unittest.main()
