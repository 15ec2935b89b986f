#include "protocol/sampling_codec.h"

namespace tandem::protocol {

void SamplingParamsToProto(const sampling::SamplingParams& params,
                           tandem::v1::SamplingParams* proto) {
  proto->Clear();
  proto->set_temperature(params.temperature);
  proto->set_top_k(params.top_k);
  proto->set_top_p(params.top_p);
  proto->set_min_p(params.min_p);
  proto->set_repetition_penalty(params.repetition_penalty);
  proto->set_presence_penalty(params.presence_penalty);
  proto->set_frequency_penalty(params.frequency_penalty);
  if (params.seed.has_value()) proto->set_seed(*params.seed);
  proto->set_max_tokens(params.max_tokens);
  proto->set_min_tokens(params.min_tokens);
  proto->mutable_stop_token_ids()->Add(params.stop_token_ids.begin(),
                                       params.stop_token_ids.end());
  for (const std::string& s : params.stop) proto->add_stop(s);
  proto->set_ignore_eos(params.ignore_eos);
  proto->set_logprobs(params.logprobs);
  proto->set_n(params.n);
  if (params.prompt_logprobs >= 0) proto->set_prompt_logprobs(params.prompt_logprobs);
}

sampling::SamplingParams SamplingParamsFromProto(const tandem::v1::SamplingParams& proto) {
  sampling::SamplingParams p;
  if (proto.has_temperature()) p.temperature = proto.temperature();
  if (proto.has_top_k()) p.top_k = proto.top_k();
  if (proto.has_top_p()) p.top_p = proto.top_p();
  if (proto.has_min_p()) p.min_p = proto.min_p();
  if (proto.has_repetition_penalty()) p.repetition_penalty = proto.repetition_penalty();
  if (proto.has_presence_penalty()) p.presence_penalty = proto.presence_penalty();
  if (proto.has_frequency_penalty()) p.frequency_penalty = proto.frequency_penalty();
  if (proto.has_seed()) p.seed = proto.seed();
  if (proto.has_max_tokens()) p.max_tokens = proto.max_tokens();
  if (proto.has_min_tokens()) p.min_tokens = proto.min_tokens();
  p.stop_token_ids.assign(proto.stop_token_ids().begin(), proto.stop_token_ids().end());
  p.stop.assign(proto.stop().begin(), proto.stop().end());
  if (proto.has_ignore_eos()) p.ignore_eos = proto.ignore_eos();
  if (proto.has_logprobs()) p.logprobs = proto.logprobs();
  if (proto.has_prompt_logprobs()) p.prompt_logprobs = proto.prompt_logprobs();
  if (proto.has_n()) p.n = proto.n();
  return p;
}

}  // namespace tandem::protocol
