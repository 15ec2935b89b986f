"""tandem-client: Python client of the tandem LLM serving cluster.

    from tandem_client import Client
    with Client("127.0.0.1:50051") as c:
        print(c.generate("The capital of France is", max_tokens=8, temperature=0)
              .completions[0].text)

Client (synchronous) and AsyncClient (asyncio) speak the coordinator's gRPC
API (tandem.v1.Inference, stubs generated from the repository's proto/ at
build time); errors are tandem_client.errors exceptions by gRPC status.
"""
from tandem_client.aio import AsyncClient
from tandem_client.client import Backoff, Client
from tandem_client.errors import (DeadlineExceeded, InvalidRequest, ResourceExhausted,
                                  TandemError, Unavailable)
from tandem_client.types import (Completion, Delta, GenerateResult, ModelInfo, PositionLogprobs,
                                 TokenLogprob, Usage, WorkerGroup)

__all__ = ["AsyncClient", "Backoff", "Client", "Completion", "DeadlineExceeded", "Delta",
           "GenerateResult", "InvalidRequest", "ModelInfo", "PositionLogprobs",
           "ResourceExhausted", "TandemError", "TokenLogprob", "Unavailable", "Usage",
           "WorkerGroup"]
