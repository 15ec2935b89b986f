"""Requests to and responses from the tandem.v1 messages."""
from typing import Dict, Iterable, List, Optional, Sequence, Union

from tandem_client import types
from tandem_client.v1 import common_pb2, inference_pb2

# A text or token-id prompt, or a GenerateRequest sent as it is.
Prompt = Union[str, Sequence[int], inference_pb2.GenerateRequest]

_FINISH = {
    common_pb2.FINISH_REASON_UNSPECIFIED: "",
    common_pb2.FINISH_REASON_STOP: "stop",
    common_pb2.FINISH_REASON_LENGTH: "length",
    common_pb2.FINISH_REASON_CANCELLED: "cancelled",
    common_pb2.FINISH_REASON_ERROR: "error",
}

# Keyword arguments that map one to one onto tandem.v1.SamplingParams.
SAMPLING_FIELDS = ("temperature", "top_k", "top_p", "min_p", "repetition_penalty",
                   "presence_penalty", "frequency_penalty", "seed", "max_tokens", "min_tokens",
                   "ignore_eos", "logprobs", "n", "prompt_logprobs")


def request(prompt: Optional[Prompt] = None, messages: Optional[Iterable[Dict[str, str]]] = None,
            *, stop: Optional[Sequence[str]] = None, stop_token_ids: Sequence[int] = (),
            num_beams: int = 0, request_id: str = "", priority: int = 0,
            **sampling) -> inference_pb2.GenerateRequest:
    """A GenerateRequest: a text or token-id prompt, or chat `messages`; the
    sampling keyword arguments of SAMPLING_FIELDS (unset ones take the
    server's defaults); num_beams > 1 asks for beam search. A GenerateRequest
    given as `prompt` is returned as it is (no other argument allowed)."""
    if isinstance(prompt, inference_pb2.GenerateRequest):
        return _as_is(prompt, messages, stop, stop_token_ids, num_beams, request_id, priority,
                      sampling)
    unknown = set(sampling) - set(SAMPLING_FIELDS)
    if unknown:
        raise TypeError(f"unknown sampling arguments: {sorted(unknown)}; "
                        f"known: {', '.join(SAMPLING_FIELDS)}")
    r = inference_pb2.GenerateRequest(request_id=request_id, priority=priority)
    if messages is not None:
        r.chat.add_generation_prompt = True
        for m in messages:
            r.chat.messages.add(role=m["role"], content=m["content"])
    elif isinstance(prompt, str):
        r.text = prompt
    elif prompt is not None:
        r.token_ids.ids.extend(prompt)
    else:
        raise TypeError("give a prompt (text or token ids) or chat messages")
    for name, value in sampling.items():
        if value is not None:
            setattr(r.sampling, name, value)
    if stop:
        r.sampling.stop.extend(stop)
    r.sampling.stop_token_ids.extend(stop_token_ids)
    if num_beams > 1:
        r.decoding_mode = inference_pb2.DECODING_MODE_BEAM_SEARCH
        r.beam_search.num_beams = num_beams
        r.beam_search.num_return_sequences = sampling.get("n") or 1
        r.sampling.n = 1
    return r


def _as_is(request, *others):
    """`request` unchanged when no argument of `others` is given; else TypeError."""
    if any(o for o in others):
        raise TypeError("a GenerateRequest is sent as it is: give no other argument "
                        "(set its fields instead)")
    return request


def positions(items) -> List[types.PositionLogprobs]:
    return [types.PositionLogprobs(p.token, p.logprob,
                                   [types.TokenLogprob(t.token, t.logprob) for t in p.top_logprobs])
            for p in items]


def completion(c) -> types.Completion:
    return types.Completion(c.index, c.text, list(c.token_ids), _FINISH[c.finish_reason],
                            positions(c.logprobs), c.score if c.HasField("score") else None)


def usage(u) -> types.Usage:
    return types.Usage(u.prompt_tokens, u.completion_tokens, u.total_tokens,
                       u.cached_prompt_tokens)


def result(response) -> types.GenerateResult:
    return types.GenerateResult(response.request_id,
                                [completion(c) for c in response.completions],
                                usage(response.usage), positions(response.prompt_logprobs))


def deltas(message) -> List[types.Delta]:
    return [types.Delta(d.index, d.text, list(d.token_ids), _FINISH[d.finish_reason],
                        positions(d.logprobs), d.replace) for d in message.deltas]


def worker_group(g) -> types.WorkerGroup:
    return types.WorkerGroup(
        g.address, g.healthy, g.load, g.draining, g.num_steps, g.step_ms, g.worker_step_ms,
        g.num_generated_tokens, g.num_prompt_tokens_computed, g.num_preemptions,
        g.num_blocks_used, g.num_blocks_total, g.num_speculative_rounds, g.num_draft_tokens,
        g.num_accepted_tokens, g.num_migrations, g.num_migration_failures)


def decoding_mode(value) -> str:
    """DECODING_MODE_BEAM_SEARCH → "beam_search"."""
    return inference_pb2.DecodingMode.Name(value)[len("DECODING_MODE_"):].lower()


def model_info(m) -> types.ModelInfo:
    return types.ModelInfo(m.model_name, m.vocab_size, m.context_length, list(m.eos_token_ids),
                           m.has_chat_template, [worker_group(g) for g in m.worker_groups],
                           [decoding_mode(d) for d in m.decoding_modes],
                           [types.DraftWorker(d.address, d.healthy, d.model_name)
                            for d in m.draft_workers])
