#include "coordinator/service/admitted_request.h"

#include "common/logging.h"

namespace tandem::coordinator {

void AdmittedRequest::Cancel(std::string_view why) const {
  TANDEM_LOG(kInfo, "request %d: %s", id.value(), why);
  pool->Cancel(id);
}

}  // namespace tandem::coordinator
