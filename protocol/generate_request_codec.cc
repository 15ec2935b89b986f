#include "protocol/generate_request_codec.h"

#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "protocol/beam_search_codec.h"
#include "protocol/sampling_codec.h"

namespace tandem::protocol {

namespace pb = tandem::v1;

absl::StatusOr<coordinator::GenerateRequest> GenerateRequestFromProto(
    const pb::GenerateRequest& proto) {
  coordinator::GenerateRequest native;
  native.params = SamplingParamsFromProto(proto.sampling());
  native.priority = proto.priority();
  switch (proto.decoding_mode()) {
    case pb::DECODING_MODE_UNSPECIFIED:
    case pb::DECODING_MODE_SAMPLING:
      break;
    case pb::DECODING_MODE_BEAM_SEARCH: {
      ASSIGN_OR_RETURN(coordinator::BeamSearchParams beam,
                       BeamSearchParamsFromProto(proto.beam_search()));
      native.beam = beam;
      break;
    }
    case pb::DECODING_MODE_SPECULATIVE: {
      const pb::SpeculativeOptions& spec = proto.speculative();
      if (spec.off()) {
        native.num_speculative_tokens = 0;
      } else if (spec.num_speculative_tokens() != 0) {
        native.num_speculative_tokens = spec.num_speculative_tokens();
      }
      native.draft = spec.draft();
      break;
    }
    default:
      return absl::InvalidArgumentError(absl::StrFormat(
          "decoding_mode %d is not a known value: must be one of DECODING_MODE_UNSPECIFIED (0), "
          "_SAMPLING (1), _BEAM_SEARCH (2), _SPECULATIVE (3)",
          static_cast<int>(proto.decoding_mode())));
  }
  return native;
}

}  // namespace tandem::protocol
