"""Client: the synchronous tandem-client API over one gRPC channel."""
import time
from typing import Dict, Iterable, List, Optional, Sequence

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tandem_client import _convert, _tls, errors, types
from tandem_client.stream import Stream
from tandem_client.v1 import inference_pb2, inference_pb2_grpc

DEFAULT_TIMEOUT = 600.0


class Backoff:
    """Exponential backoff for retrying UNAVAILABLE: `max_retries` retries,
    the first after `initial` seconds, each wait `multiplier` times the last,
    at most `maximum`."""

    def __init__(self, max_retries=3, initial=0.1, multiplier=2.0, maximum=2.0):
        self.max_retries = max_retries
        self.initial = initial
        self.multiplier = multiplier
        self.maximum = maximum

    def delays(self):
        delay = self.initial
        for _ in range(self.max_retries):
            yield delay
            delay = min(self.maximum, delay * self.multiplier)


class Client:
    """A tandem coordinator at `address` ("HOST:PORT").

    `timeout` is each call's deadline in seconds (None: none); a call that
    fails UNAVAILABLE before any token arrived is retried per `backoff`
    (never after: a stream that already yielded tokens raises). Errors are
    tandem_client.errors exceptions. `api_key` (tandem-coordinator --api-key)
    is sent as "authorization: Bearer KEY" with every call; a wrong or missing
    one raises TandemError with code UNAUTHENTICATED. `tls_ca` (a PEM CA
    certificate file; for a self-signed server certificate, that certificate)
    connects with TLS to a coordinator started with --tls-cert/--tls-key,
    checking its certificate against that CA; `tls=True` without `tls_ca`
    trusts the system's roots. Plaintext by default. Usable as a context
    manager; thread-safe.
    """

    def __init__(self, address: str, *, timeout: Optional[float] = DEFAULT_TIMEOUT,
                 backoff: Optional[Backoff] = None, options=None,
                 api_key: Optional[str] = None, tls: bool = False,
                 tls_ca: Optional[str] = None):
        credentials = _tls.channel_credentials(tls, tls_ca)
        if credentials is None:
            self._channel = grpc.insecure_channel(address, options=list(options or []))
        else:
            self._channel = grpc.secure_channel(address, credentials,
                                                options=list(options or []))
        self._stub = inference_pb2_grpc.InferenceStub(self._channel)
        self._health = health_pb2_grpc.HealthStub(self._channel)
        self.timeout = timeout
        self.backoff = backoff or Backoff()
        # tandem-coordinator --api-key: sent with every call.
        self._metadata = (("authorization", f"Bearer {api_key}"),) if api_key else None

    def close(self):
        self._channel.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _call(self, method, request):
        """A unary call with the retries of `backoff` on UNAVAILABLE."""
        delays = self.backoff.delays()
        while True:
            try:
                return method(request, timeout=self.timeout, metadata=self._metadata)
            except grpc.RpcError as e:
                delay = next(delays, None) if e.code() == grpc.StatusCode.UNAVAILABLE else None
                if delay is None:
                    raise errors.from_rpc_error(e) from None
                time.sleep(delay)

    def generate(self, prompt: _convert.Prompt, **kwargs) -> types.GenerateResult:
        """Generates the completions of a text or token-id prompt. Keyword
        arguments: the sampling fields (temperature, top_k, top_p, min_p,
        repetition_penalty, presence_penalty, frequency_penalty, seed,
        max_tokens, min_tokens, ignore_eos, logprobs, n, prompt_logprobs),
        stop, stop_token_ids, num_beams, request_id, priority. `prompt` may
        instead be a whole GenerateRequest (see build_request), sent as it is."""
        return _convert.result(self._call(self._stub.Generate, _convert.request(prompt, **kwargs)))

    def chat(self, messages: Iterable[Dict[str, str]], **kwargs) -> types.GenerateResult:
        """generate() on a conversation ([{"role": ..., "content": ...}]),
        rendered through the model's chat template."""
        return _convert.result(
            self._call(self._stub.Generate, _convert.request(messages=messages, **kwargs)))

    def stream(self, prompt: Optional[_convert.Prompt] = None, *,
               messages: Optional[Iterable[Dict[str, str]]] = None, **kwargs) -> Stream:
        """Starts generating a prompt's (or conversation's) completions; the
        Stream returned yields their deltas as they are generated and raises
        when the call fails (see Stream: request_id, usage, cancel)."""
        request = _convert.request(prompt, messages, **kwargs)
        start = lambda: self._stub.GenerateStream(  # noqa: E731
            request, timeout=self.timeout, metadata=self._metadata)
        return Stream(start, self.backoff)

    def tokenize(self, text: str) -> List[int]:
        """The token ids of `text`."""
        return list(self._call(self._stub.Tokenize, inference_pb2.TokenizeRequest(text=text))
                    .token_ids)

    def detokenize(self, token_ids: Sequence[int], skip_special_tokens: bool = False) -> str:
        """The text of `token_ids`."""
        return self._call(self._stub.Detokenize, inference_pb2.DetokenizeRequest(
            token_ids=token_ids, skip_special_tokens=skip_special_tokens)).text

    def model_info(self) -> types.ModelInfo:
        """The served model and the cluster's worker groups."""
        return _convert.model_info(self._call(self._stub.ModelInfo,
                                              inference_pb2.ModelInfoRequest()))

    def health(self, service: str = "") -> bool:
        """True when grpc.health.v1 reports `service` ("" = the server) SERVING."""
        try:
            r = self._health.Check(health_pb2.HealthCheckRequest(service=service),
                                   timeout=self.timeout, metadata=self._metadata)
        except grpc.RpcError as e:
            if e.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.NOT_FOUND):
                return False
            raise errors.from_rpc_error(e) from None
        return r.status == health_pb2.HealthCheckResponse.SERVING
