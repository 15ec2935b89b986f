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
    """One target worker group (model replica) as the coordinator sees it.
    The counters are totals since the group was added; the difference of two
    model_info() calls gives rates and shares."""
    address: str  # its rank 0's "host:port", or "local"
    healthy: bool  # False while it is lost and being reconnected
    load: int  # requests queued or running on it
    draining: bool = False  # discovery no longer lists it: no new requests
    num_steps: int = 0  # scheduler steps run on it
    step_ms: float = 0.0  # their wall time in the coordinator
    worker_step_ms: float = 0.0  # the part the worker spent inside its steps
    num_generated_tokens: int = 0
    num_prompt_tokens_computed: int = 0  # prefix-cache hits excluded
    num_preemptions: int = 0
    num_blocks_used: int = 0  # KV cache blocks in use, of num_blocks_total
    num_blocks_total: int = 0
    num_speculative_rounds: int = 0  # verification rounds
    num_draft_tokens: int = 0  # draft tokens verified
    num_accepted_tokens: int = 0  # of those, accepted
    num_migrations: int = 0  # requests moved to a healthy group after it failed
    num_migration_failures: int = 0  # requests that failed instead (no group in time)


@dataclass
class DraftWorker:
    """One draft worker (speculative decoding) as the coordinator sees it."""
    address: str
    healthy: bool  # False while it does not answer (it is retried)
    model_name: str


@dataclass
class ModelInfo:
    model_name: str
    vocab_size: int
    context_length: int
    eos_token_ids: List[int]
    has_chat_template: bool
    worker_groups: List[WorkerGroup]
    # The decoding modes the server accepts: "sampling", "beam_search", "speculative".
    decoding_modes: List[str] = field(default_factory=list)
    draft_workers: List[DraftWorker] = field(default_factory=list)
