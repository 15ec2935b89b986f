"""gRPC plumbing shared by the integration tests that speak the internal
services (tandem.v1.TargetWorker, tandem.v1.Draft) and grpc.health.v1 on raw
stubs: channels to a server on 127.0.0.1 and the bound on every unary call.
The messages and stubs are grpcio-tools' (tandem.v1.*_pb2[_grpc], generated
from proto/ into the build tree by make_stubs.py, found through PYTHONPATH)
and grpcio-health-checking's (grpc_health.v1). The coordinator's public API
(tandem.v1.Inference) goes through the Python SDK instead (stream_client.py)."""
import grpc



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
