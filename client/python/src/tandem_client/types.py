"""Plain result types of tandem-client (dataclasses, no gRPC in them)."""
from dataclasses import dataclass, field
from typing import List, Optional


@dataclass
class TokenLogprob:
    token_id: int
    logprob: float


@dataclass
class PositionLogprobs:
    """A token at one position, its logprob, and the most likely alternatives."""
    token_id: int
    logprob: float
    top: List[TokenLogprob] = field(default_factory=list)


@dataclass
class Completion:
    index: int
    text: str
    token_ids: List[int]
    finish_reason: str  # "stop", "length", "cancelled", "error" ("" while running)
    logprobs: List[PositionLogprobs] = field(default_factory=list)
    score: Optional[float] = None  # beam search: transformers' sequence score


@dataclass
class Usage:
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    cached_prompt_tokens: int


@dataclass
class GenerateResult:
    request_id: str
    completions: List[Completion]
    usage: Usage
    # prompt_logprobs asked for: one per prompt token after the first.
    prompt_logprobs: List[PositionLogprobs] = field(default_factory=list)


@dataclass
class Delta:
    """What one completion produced since the previous delta of a stream."""
    index: int
    text: str
    token_ids: List[int]
    finish_reason: str
    logprobs: List[PositionLogprobs] = field(default_factory=list)
    replace: bool = False  # beam search: text and token_ids replace all before


@dataclass
class WorkerGroup:
    address: str
    healthy: bool
    load: int


@dataclass
class ModelInfo:
    model_name: str
    vocab_size: int
    context_length: int
    eos_token_ids: List[int]
    has_chat_template: bool
    worker_groups: List[WorkerGroup]
