"""Stream and AsyncStream: one Inference.GenerateStream call, what
Client.stream and AsyncClient.stream return. Iterated, it gives the Deltas as
their messages arrive; besides, it knows the request's id and, once the
stream ended, its usage; it can be cancelled. The call starts when the object
is made. A call that fails UNAVAILABLE before any token arrived is retried
per the client's Backoff (a new call; never after a token)."""
import asyncio
import collections
import time
from typing import Callable, Optional

import grpc

from tandem_client import _convert, errors, types


class _Messages:
    """What Stream and AsyncStream share: folding the call's messages into
    deltas not yet returned, request_id and usage, and the retry rule."""

    def __init__(self, start: Callable, backoff):
        self._start = start
        self._delays = backoff.delays()
        self._call = start()
        self._pending = collections.deque()
        self._got_tokens = False
        self._error = ""
        self.request_id = ""  # the request's id (client-chosen or assigned); "" before a message
        self.usage: Optional[types.Usage] = None  # set by the stream's last message

    def _fold(self, message):
        self.request_id = message.request_id
        if message.HasField("usage"):
            self.usage = _convert.usage(message.usage)
        if message.error:
            # The call's status, read next, says what failed: its deltas are dropped.
            self._error = message.error
            return
        self._pending.extend(_convert.deltas(message))

    def _pop(self) -> types.Delta:
        delta = self._pending.popleft()
        self._got_tokens = self._got_tokens or bool(delta.token_ids)
        return delta

    def _retry_delay(self, error) -> Optional[float]:
        """Seconds to wait before a new call after the call failed with
        `error`, or None when it is not retried."""
        if self._got_tokens or error.code() != grpc.StatusCode.UNAVAILABLE:
            return None
        return next(self._delays, None)

    def _restart(self):
        self._call = self._start()
        self._pending.clear()
        self._error = ""
        self.usage = None

    def _ended(self):
        """The call ended OK: CompletionError when its last message carried an error."""
        if self._error:
            raise errors.CompletionError(grpc.StatusCode.OK, self._error)


class Stream(_Messages):
    """A GenerateStream call on a Client: an iterator of Delta that raises
    tandem_client.errors exceptions when the call fails. `with` cancels it on
    exit; so does dropping it. Use it from one thread."""

    def __iter__(self):
        return self

    def __next__(self) -> types.Delta:
        while not self._pending:
            try:
                message = self._read()
            except StopIteration:
                self._ended()
                raise
            self._fold(message)
        return self._pop()

    def _read(self):
        """The call's next message (StopIteration at its end), with the retries."""
        while True:
            try:
                return next(self._call)
            except grpc.RpcError as e:
                delay = self._retry_delay(e)
                if delay is None:
                    raise errors.from_rpc_error(e) from None
                time.sleep(delay)
                self._restart()

    def cancel(self) -> bool:
        """Cancels the call: True when it was still open, False when it had
        already ended. Iterating a cancelled stream raises TandemError with
        code CANCELLED."""
        return self._call.cancel()

    def is_active(self) -> bool:
        """True while the call is open (not ended, failed or cancelled)."""
        return self._call.is_active()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.cancel()


class AsyncStream(_Messages):
    """A GenerateStream call on an AsyncClient: an async iterator of Delta,
    else as Stream. Iterating a cancelled one raises asyncio.CancelledError
    (grpc.aio's rule)."""

    def __aiter__(self):
        return self

    async def __anext__(self) -> types.Delta:
        while not self._pending:
            message = await self._read()
            if message is grpc.aio.EOF:
                self._ended()
                raise StopAsyncIteration
            self._fold(message)
        return self._pop()

    async def _read(self):
        """The call's next message (grpc.aio.EOF at its end), with the retries."""
        while True:
            try:
                return await self._call.read()
            except grpc.aio.AioRpcError as e:
                delay = self._retry_delay(e)
                if delay is None:
                    raise errors.from_rpc_error(e) from None
                await asyncio.sleep(delay)
                self._restart()

    def cancel(self) -> bool:
        """As Stream.cancel."""
        return self._call.cancel()

    def is_active(self) -> bool:
        """As Stream.is_active."""
        return not self._call.done()

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        self.cancel()
