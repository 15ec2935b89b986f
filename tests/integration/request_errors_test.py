"""Errors reach gRPC clients as status codes that name the value and the
limit. Against a real `tandem-coordinator --local`: an unknown decoding_mode
or early_stopping value, num_beams outside [2, 32], and prompt + max_tokens
past the context are INVALID_ARGUMENT naming the numbers; an empty
request_id gets a server-assigned one and a given one is echoed. Against a
coordinator in front of a tandem-worker: SIGKILLing the worker while a stream
is open ends that stream with the gRPC status UNAVAILABLE (not OK with an
error field).

Client: grpcio with the stubs generated from proto/ (PYTHONPATH). Every wait
is bounded.

Env: TANDEM_COORDINATOR_BIN, TANDEM_WORKER_BIN, TANDEM_MODEL.
"""
import os
import signal
import unittest

import grpc

from grpc_channel import channel
from server_process import Server
from tandem.v1 import common_pb2, inference_pb2, inference_pb2_grpc

COORDINATOR = os.environ["TANDEM_COORDINATOR_BIN"]
WORKER = os.environ["TANDEM_WORKER_BIN"]
MODEL = os.environ["TANDEM_MODEL"]
CALL_TIMEOUT_S = 120


def request(**sampling):
    sampling.setdefault("max_tokens", 4)
    return inference_pb2.GenerateRequest(text="Once upon a time",
                                         sampling=common_pb2.SamplingParams(**sampling))


class BadRequestTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = Server([COORDINATOR, "--local", "--model", MODEL, "--port", "0"],
                            "tandem-coordinator")
        cls.stub = inference_pb2_grpc.InferenceStub(channel(cls.server.port))

    @classmethod
    def tearDownClass(cls):
        if cls.server.terminate(15) is None:
            cls.server.kill()

    def assert_invalid(self, req, *needles):
        with self.assertRaises(grpc.RpcError) as caught:
            self.stub.Generate(req, timeout=CALL_TIMEOUT_S)
        self.assertEqual(caught.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        for needle in needles:
            self.assertIn(needle, caught.exception.details())

    def test_unknown_decoding_mode(self):
        req = request()
        req.decoding_mode = 99
        self.assert_invalid(req, "decoding_mode 99")

    def test_unknown_early_stopping(self):
        req = request()
        req.decoding_mode = inference_pb2.DECODING_MODE_BEAM_SEARCH
        req.beam_search.num_beams = 2
        req.beam_search.early_stopping = 7
        self.assert_invalid(req, "early_stopping 7")

    def test_num_beams_outside_the_range(self):
        for num_beams in (1, 33):
            req = request()
            req.decoding_mode = inference_pb2.DECODING_MODE_BEAM_SEARCH
            req.beam_search.num_beams = num_beams
            self.assert_invalid(req, f"num_beams {num_beams}", "[2, 32]")

    def test_prompt_and_max_tokens_past_the_context(self):
        context = self.stub.ModelInfo(inference_pb2.ModelInfoRequest(),
                                      timeout=CALL_TIMEOUT_S).context_length
        self.assert_invalid(request(max_tokens=2**31 - 1), "max_tokens 2147483647",
                            f"context length is {context}")

    def test_request_id_is_echoed_or_assigned(self):
        req = request()
        req.request_id = "mine-7"
        self.assertEqual(self.stub.Generate(req, timeout=CALL_TIMEOUT_S).request_id, "mine-7")
        assigned = self.stub.Generate(request(), timeout=CALL_TIMEOUT_S).request_id
        self.assertRegex(assigned, r"^tandem-\d+$")
        for msg in self.stub.GenerateStream(request(), timeout=CALL_TIMEOUT_S):
            self.assertRegex(msg.request_id, r"^tandem-\d+$")
            self.assertNotEqual(msg.request_id, assigned)


class LostWorkerTest(unittest.TestCase):
    def test_a_worker_killed_mid_stream_ends_it_with_unavailable(self):
        worker = Server([WORKER, "--model", MODEL, "--port", "0"], "tandem-worker")
        coordinator = None
        try:
            coordinator = Server([COORDINATOR, "--model", MODEL, "--worker", worker.address,
                                  "--port", "0"], "tandem-coordinator")
            stub = inference_pb2_grpc.InferenceStub(channel(coordinator.port))
            stream = stub.GenerateStream(request(max_tokens=4000, ignore_eos=True),
                                         timeout=CALL_TIMEOUT_S)
            first = next(stream)  # the request runs on the worker
            self.assertTrue(first.deltas)
            worker.proc.send_signal(signal.SIGKILL)
            worker.proc.wait(timeout=30)
            with self.assertRaises(grpc.RpcError) as caught:
                for _ in stream:
                    pass
            self.assertEqual(caught.exception.code(), grpc.StatusCode.UNAVAILABLE,
                             caught.exception.details())
        finally:
            if coordinator is not None and coordinator.terminate(15) is None:
                coordinator.kill()
            worker.kill()


if __name__ == "__main__":
    unittest.main()
