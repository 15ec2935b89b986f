"""Exceptions of tandem-client, one per gRPC status a caller handles
differently. Each carries the server's message (which names the field, its
value and the limit for a bad request) and the gRPC status code."""
import grpc


class TandemError(Exception):
    """A failed call: `code` is the grpc.StatusCode, `message` the server's text."""

    def __init__(self, code, message):
        super().__init__(f"{code.name}: {message}")
        self.code = code
        self.message = message


class InvalidRequest(TandemError):
    """INVALID_ARGUMENT: the request has a bad value (fix it; retrying will not help)."""


class Unavailable(TandemError):
    """UNAVAILABLE: no worker group (or the coordinator) is reachable right now."""


class CompletionError(TandemError):
    """A stream whose call ended OK (code OK) while its last message carried
    an error: some completion finished with FINISH_REASON_ERROR. tandem's
    coordinator ends such a call with the error's status instead (raised as
    that status's exception); this is for a server that only sets the field."""


class ResourceExhausted(TandemError):
    """RESOURCE_EXHAUSTED: the server is over capacity; try later."""


class DeadlineExceeded(TandemError):
    """DEADLINE_EXCEEDED: the call's timeout passed."""


_BY_CODE = {
    grpc.StatusCode.INVALID_ARGUMENT: InvalidRequest,
    grpc.StatusCode.UNAVAILABLE: Unavailable,
    grpc.StatusCode.RESOURCE_EXHAUSTED: ResourceExhausted,
    grpc.StatusCode.DEADLINE_EXCEEDED: DeadlineExceeded,
}


def from_rpc_error(error):
    """The TandemError subclass instance for a grpc.RpcError (or grpc.aio.AioRpcError)."""
    code = error.code()
    return _BY_CODE.get(code, TandemError)(code, error.details() or "")
