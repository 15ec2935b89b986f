"""AsyncClient: the tandem-client API on grpc.aio (asyncio)."""
import asyncio
from typing import Dict, Iterable, List, Optional, Sequence

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tandem_client import _convert, _tls, errors, types
from tandem_client.client import DEFAULT_TIMEOUT, Backoff
from tandem_client.stream import AsyncStream
from tandem_client.v1 import inference_pb2, inference_pb2_grpc


class AsyncClient:
    """Client's API as coroutines (stream: an async iterator), with the same
    timeout, retry, API-key and TLS rules. Create it inside a running event loop;
    `async with` closes it."""

    def __init__(self, address: str, *, timeout: Optional[float] = DEFAULT_TIMEOUT,
                 backoff: Optional[Backoff] = None, options=None,
                 api_key: Optional[str] = None, tls: bool = False,
                 tls_ca: Optional[str] = None):
        credentials = _tls.channel_credentials(tls, tls_ca)
        if credentials is None:
            self._channel = grpc.aio.insecure_channel(address, options=list(options or []))
        else:
            self._channel = grpc.aio.secure_channel(address, credentials,
                                                    options=list(options or []))
        self._stub = inference_pb2_grpc.InferenceStub(self._channel)
        self._health = health_pb2_grpc.HealthStub(self._channel)
        self.timeout = timeout
        self.backoff = backoff or Backoff()
        # tandem-coordinator --api-key: sent with every call.
        self._metadata = (("authorization", f"Bearer {api_key}"),) if api_key else None

    async def close(self):
        await self._channel.close()

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        await self.close()

    async def _call(self, method, request):
        delays = self.backoff.delays()
        while True:
            try:
                return await method(request, timeout=self.timeout, metadata=self._metadata)
            except grpc.aio.AioRpcError as e:
                delay = next(delays, None) if e.code() == grpc.StatusCode.UNAVAILABLE else None
                if delay is None:
                    raise errors.from_rpc_error(e) from None
                await asyncio.sleep(delay)

    async def generate(self, prompt: _convert.Prompt, **kwargs) -> types.GenerateResult:
        """As Client.generate."""
        return _convert.result(
            await self._call(self._stub.Generate, _convert.request(prompt, **kwargs)))

    async def chat(self, messages: Iterable[Dict[str, str]], **kwargs) -> types.GenerateResult:
        """As Client.chat."""
        return _convert.result(
            await self._call(self._stub.Generate, _convert.request(messages=messages, **kwargs)))

    def stream(self, prompt: Optional[_convert.Prompt] = None, *,
               messages: Optional[Iterable[Dict[str, str]]] = None, **kwargs) -> AsyncStream:
        """As Client.stream: an AsyncStream (`async for`)."""
        request = _convert.request(prompt, messages, **kwargs)
        start = lambda: self._stub.GenerateStream(  # noqa: E731
            request, timeout=self.timeout, metadata=self._metadata)
        return AsyncStream(start, self.backoff)

    async def tokenize(self, text: str) -> List[int]:
        """As Client.tokenize."""
        r = await self._call(self._stub.Tokenize, inference_pb2.TokenizeRequest(text=text))
        return list(r.token_ids)

    async def detokenize(self, token_ids: Sequence[int], skip_special_tokens: bool = False) -> str:
        """As Client.detokenize."""
        r = await self._call(self._stub.Detokenize, inference_pb2.DetokenizeRequest(
            token_ids=token_ids, skip_special_tokens=skip_special_tokens))
        return r.text

    async def model_info(self) -> types.ModelInfo:
        """As Client.model_info."""
        return _convert.model_info(
            await self._call(self._stub.ModelInfo, inference_pb2.ModelInfoRequest()))

    async def health(self, service: str = "") -> bool:
        """As Client.health."""
        try:
            r = await self._health.Check(health_pb2.HealthCheckRequest(service=service),
                                         timeout=self.timeout, metadata=self._metadata)
        except grpc.aio.AioRpcError as e:
            if e.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.NOT_FOUND):
                return False
            raise errors.from_rpc_error(e) from None
        return r.status == health_pb2.HealthCheckResponse.SERVING
