"""tandem-client: Python client of the tandem LLM serving cluster.

    from tandem_client import Client
    with Client("127.0.0.1:50051") as c:
        print(c.generate("The capital of France is", max_tokens=8, temperature=0)
              .completions[0].text)

Client (synchronous) and AsyncClient (asyncio) speak the coordinator's gRPC
API (tandem.v1.Inference, stubs generated from the repository's proto/ at
build time); errors are tandem_client.errors exceptions by gRPC status.
build_request makes the GenerateRequest (tandem_client.v1.inference_pb2) of
the keyword arguments, for a caller who sets fields they do not cover.
"""
from tandem_client._convert import request as build_request
from tandem_client.aio import AsyncClient
from tandem_client.client import Backoff, Client
from tandem_client.errors import (CompletionError, DeadlineExceeded, InvalidRequest,
                                  ResourceExhausted, TandemError, Unavailable)
from tandem_client.stream import AsyncStream, Stream
from tandem_client.types import (Completion, Delta, DraftWorker, GenerateResult, ModelInfo,
                                 PositionLogprobs, TokenLogprob, Usage, WorkerGroup)

__all__ = ["AsyncClient", "AsyncStream", "Backoff", "Client", "Completion", "CompletionError",
           "DeadlineExceeded", "Delta", "DraftWorker", "GenerateResult", "InvalidRequest",
           "ModelInfo", "PositionLogprobs", "ResourceExhausted", "Stream", "TandemError",
           "TokenLogprob", "Unavailable", "Usage", "WorkerGroup", "build_request"]
