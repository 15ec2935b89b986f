"""gRPC plumbing shared by the integration tests: channels to a server on
127.0.0.1 and the bound on every unary call. The messages and stubs are
grpcio-tools' (tandem.v1.*_pb2[_grpc], generated from proto/ into the build
tree by make_stubs.py, found through PYTHONPATH) and grpcio-health-checking's
(grpc_health.v1)."""
import grpc

from tandem.v1 import inference_pb2, inference_pb2_grpc

RPC_TIMEOUT = 10  # seconds, for a unary call


def channel(port, own_connection=False):
    """An insecure channel to 127.0.0.1:port that ignores any proxy set in the
    environment (test traffic stays on loopback). With `own_connection` it
    opens its own TCP connection instead of sharing one with the process's
    other channels to the same address (grpcio's global subchannel pool)."""
    options = [("grpc.enable_http_proxy", 0)]
    if own_connection:
        options.append(("grpc.use_local_subchannel_pool", 1))
    return grpc.insecure_channel(f"127.0.0.1:{port}", options=options)


def model_info(port):
    """Inference.ModelInfo of the coordinator on 127.0.0.1:port (a
    ModelInfoResponse); raises grpc.RpcError when the call fails."""
    with channel(port) as ch:
        return inference_pb2_grpc.InferenceStub(ch).ModelInfo(inference_pb2.ModelInfoRequest(),
                                                              timeout=RPC_TIMEOUT)
