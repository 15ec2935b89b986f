"""tandem-client against a real coordinator (conftest.py): every call of
Client and AsyncClient, streams (request id, usage, cancel), requests built
and then changed, ModelInfo's counters, errors by status, deadlines, and
retries on UNAVAILABLE before the first token (never after)."""
import asyncio
import os
import threading
import time

import grpc
import pytest

import tandem_client
from tandem_client import AsyncClient, Backoff, Client
from conftest import START_TIMEOUT, free_port, start_coordinator

PROMPT = "The capital of France is"


@pytest.fixture(scope="module")
def client(address):
    with Client(address, timeout=120) as c:
        yield c


def test_generate_greedy_is_deterministic(client):
    a = client.generate(PROMPT, max_tokens=8, temperature=0, ignore_eos=True)
    b = client.generate(PROMPT, max_tokens=8, temperature=0, ignore_eos=True)
    assert len(a.completions) == 1
    assert a.completions[0].token_ids == b.completions[0].token_ids
    assert len(a.completions[0].token_ids) == 8
    assert a.completions[0].finish_reason == "length"
    assert a.usage.completion_tokens == 8
    assert a.usage.prompt_tokens == len(client.tokenize(PROMPT))
    assert a.request_id


def test_token_ids_prompt_with_logprobs(client):
    ids = client.tokenize(PROMPT)
    r = client.generate(ids, max_tokens=3, temperature=0, logprobs=2, prompt_logprobs=1)
    c = r.completions[0]
    assert len(c.logprobs) == len(c.token_ids)
    assert all(p.logprob <= 0 and len(p.top) == 2 for p in c.logprobs)
    assert [p.token_id for p in r.prompt_logprobs] == ids[1:]


def test_stream_adds_up_to_generate(client):
    full = client.generate(PROMPT, max_tokens=10, temperature=0, ignore_eos=True).completions[0]
    deltas = list(client.stream(PROMPT, max_tokens=10, temperature=0, ignore_eos=True))
    assert "".join(d.text for d in deltas) == full.text
    assert [t for d in deltas for t in d.token_ids] == full.token_ids
    assert deltas[-1].finish_reason == "length"


def test_stream_knows_its_request_id_and_usage(client):
    stream = client.stream(PROMPT, max_tokens=6, temperature=0, ignore_eos=True,
                           request_id="stream-7")
    assert stream.request_id == "" and stream.usage is None  # no message read yet
    tokens = [t for d in stream for t in d.token_ids]
    assert stream.request_id == "stream-7"
    assert stream.usage.completion_tokens == len(tokens) == 6
    assert stream.usage.prompt_tokens == len(client.tokenize(PROMPT))
    assert not stream.is_active()
    assert not stream.cancel()  # it had ended


def test_cancel_a_stream(client):
    with client.stream(PROMPT, max_tokens=4000, ignore_eos=True) as stream:
        assert next(stream).token_ids
        assert stream.is_active()
        assert stream.cancel()
        assert not stream.is_active()
        with pytest.raises(tandem_client.TandemError) as e:
            next(stream)
        assert e.value.code == grpc.StatusCode.CANCELLED
    assert not stream.cancel()


def test_a_request_built_then_changed_is_sent_as_is(client):
    request = tandem_client.build_request(PROMPT, max_tokens=3, temperature=0, ignore_eos=True,
                                          request_id="built-1")
    r = client.generate(request)
    assert (r.request_id, len(r.completions[0].token_ids)) == ("built-1", 3)
    assert [t for d in client.stream(request) for t in d.token_ids] == r.completions[0].token_ids
    request.decoding_mode = 99  # no keyword argument sends this
    with pytest.raises(tandem_client.InvalidRequest) as e:
        client.generate(request)
    assert "decoding_mode 99" in e.value.message
    with pytest.raises(TypeError):
        client.generate(request, max_tokens=3)


def test_model_info_counts_the_work(client):
    before = client.model_info().worker_groups[0]
    client.generate(PROMPT, max_tokens=5, temperature=0, ignore_eos=True)
    info = client.model_info()
    after = info.worker_groups[0]
    assert after.healthy and not after.draining
    # (The last step's counts may land just after the response.)
    assert after.num_generated_tokens > before.num_generated_tokens
    assert after.num_steps > before.num_steps
    assert 0 <= after.num_blocks_used <= after.num_blocks_total and after.num_blocks_total > 0
    assert "sampling" in info.decoding_modes and "beam_search" in info.decoding_modes
    # `tandem up` starts an n-gram draft worker beside the group; a
    # coordinator --local has none.
    expected_drafts = ["ngram"] if os.environ.get("TANDEM_BIN") else []
    assert [d.model_name for d in info.draft_workers] == expected_drafts
    assert all(d.healthy for d in info.draft_workers)


def test_chat_and_samples_with_a_seed(client):
    messages = [{"role": "user", "content": "Say hello."}]
    r = client.chat(messages, max_tokens=6, temperature=0)
    assert r.completions[0].text
    a = client.generate(PROMPT, max_tokens=6, n=2, seed=11, temperature=1.0)
    b = client.generate(PROMPT, max_tokens=6, n=2, seed=11, temperature=1.0)
    assert [c.token_ids for c in a.completions] == [c.token_ids for c in b.completions]
    assert [c.index for c in a.completions] == [0, 1]


def test_beam_search(client):
    r = client.generate(PROMPT, max_tokens=4, num_beams=3, n=2)
    assert len(r.completions) == 2
    assert all(c.score is not None for c in r.completions)


def test_tokenize_detokenize_model_info_health(client):
    ids = client.tokenize("Hello world")
    assert client.detokenize(ids) == "Hello world"
    info = client.model_info()
    assert info.vocab_size == 49152
    assert info.context_length > 0
    assert info.eos_token_ids
    assert client.health()
    assert not client.health("no.such.Service")


def test_bad_value_is_invalid_request(client):
    with pytest.raises(tandem_client.InvalidRequest) as e:
        client.generate(PROMPT, temperature=-1.0)
    assert "temperature" in e.value.message
    with pytest.raises(TypeError):
        client.generate(PROMPT, temprature=0)


def test_deadline(address):
    with Client(address, timeout=0.001) as c:
        with pytest.raises(tandem_client.DeadlineExceeded):
            c.generate(PROMPT, max_tokens=200, ignore_eos=True)


def test_unavailable_after_the_retries():
    port = free_port()  # nothing listens there
    backoff = Backoff(max_retries=2, initial=0.2, multiplier=2.0)
    start = time.monotonic()
    with Client(f"127.0.0.1:{port}", timeout=5, backoff=backoff) as c:
        with pytest.raises(tandem_client.Unavailable):
            c.generate(PROMPT, max_tokens=1)
    assert time.monotonic() - start >= 0.6  # waited 0.2 + 0.4 between the tries


def test_retries_until_the_server_comes_up():
    port = free_port()
    started = {}
    starter = threading.Thread(target=lambda: started.setdefault("proc", start_coordinator(port)))
    backoff = Backoff(max_retries=60, initial=0.25, multiplier=1.0)
    try:
        with Client(f"127.0.0.1:{port}", timeout=30, backoff=backoff) as c:
            starter.start()  # the first tries find nothing listening
            r = c.generate(PROMPT, max_tokens=2, temperature=0)
        assert len(r.completions[0].token_ids) == 2
    finally:
        starter.join(START_TIMEOUT)
        if "proc" in started:
            started["proc"].kill()
            started["proc"].wait(30)


def test_async_client(address):
    async def run():
        async with AsyncClient(address, timeout=120) as c:
            r = await c.generate(PROMPT, max_tokens=5, temperature=0, ignore_eos=True)
            stream = c.stream(PROMPT, max_tokens=5, temperature=0, ignore_eos=True,
                              request_id="async-1")
            deltas = [d async for d in stream]
            assert "".join(d.text for d in deltas) == r.completions[0].text
            assert (stream.request_id, stream.usage.completion_tokens) == ("async-1", 5)
            async with c.stream(PROMPT, max_tokens=4000, ignore_eos=True) as stream:
                assert (await stream.__anext__()).token_ids
                assert stream.is_active() and stream.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await stream.__anext__()
            assert await c.detokenize(await c.tokenize(PROMPT)) == PROMPT
            assert (await c.model_info()).vocab_size == 49152
            assert await c.health()
            with pytest.raises(tandem_client.InvalidRequest):
                await c.generate(PROMPT, top_p=2.0)
    asyncio.run(run())
