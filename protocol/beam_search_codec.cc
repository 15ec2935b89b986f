#include "protocol/beam_search_codec.h"

#include "absl/strings/str_format.h"

namespace tandem::protocol {

namespace pb = tandem::v1;
using coordinator::BeamSearchParams;
using coordinator::EarlyStopping;

absl::StatusOr<BeamSearchParams> BeamSearchParamsFromProto(const pb::BeamSearchOptions& proto) {
  BeamSearchParams p;
  p.num_beams = proto.num_beams();
  if (proto.has_length_penalty()) p.length_penalty = proto.length_penalty();
  switch (proto.early_stopping()) {
    case pb::EARLY_STOPPING_UNSPECIFIED:
    case pb::EARLY_STOPPING_FALSE: p.early_stopping = EarlyStopping::kFalse; break;
    case pb::EARLY_STOPPING_TRUE: p.early_stopping = EarlyStopping::kTrue; break;
    case pb::EARLY_STOPPING_NEVER: p.early_stopping = EarlyStopping::kNever; break;
    default:
      return absl::InvalidArgumentError(absl::StrFormat(
          "beam_search.early_stopping %d is not a known value: must be one of "
          "EARLY_STOPPING_UNSPECIFIED (0), _FALSE, _TRUE, _NEVER",
          static_cast<int>(proto.early_stopping())));
  }
  if (proto.num_return_sequences() != 0) p.num_return_sequences = proto.num_return_sequences();
  if (proto.num_beam_groups() != 0) p.num_beam_groups = proto.num_beam_groups();
  p.diversity_penalty = proto.diversity_penalty();
  p.do_sample = proto.do_sample();
  return p;
}

void BeamSearchParamsToProto(const BeamSearchParams& params, pb::BeamSearchOptions* proto) {
  proto->set_num_beams(params.num_beams);
  proto->set_length_penalty(params.length_penalty);
  switch (params.early_stopping) {
    case EarlyStopping::kTrue: proto->set_early_stopping(pb::EARLY_STOPPING_TRUE); break;
    case EarlyStopping::kFalse: proto->set_early_stopping(pb::EARLY_STOPPING_FALSE); break;
    case EarlyStopping::kNever: proto->set_early_stopping(pb::EARLY_STOPPING_NEVER); break;
  }
  proto->set_num_return_sequences(params.num_return_sequences);
  proto->set_num_beam_groups(params.num_beam_groups);
  proto->set_diversity_penalty(params.diversity_penalty);
  proto->set_do_sample(params.do_sample);
}

}  // namespace tandem::protocol
