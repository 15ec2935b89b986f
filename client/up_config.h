// `tandem up --config FILE.json`: the up options as one JSON object, e.g.
//   {"model": "models/m.gguf", "tp": 2, "replicas": 2, "port": 50051, "draft_model": "none",
//    "worker_args": ["--threads=4"], "grace_s": 20}
// Keys: model, tp, replicas, port, http_port, bin_dir, mpirun, grace_s, tls_cert, tls_key
// (strings / integers as the flags of the same name), draft_model (a path, "" = the target
// model, "none" = no draft worker), worker_args, draft_args, coordinator_args (arrays of
// strings: extra flags of tandem-worker / tandem-draft / tandem-coordinator,
// as --worker-arg, --draft-arg, --coordinator-arg give them). Paths are used
// as written (relative to the working directory, as on the command line).
// A flag given on the command line wins over the file; the file wins over a
// flag's default. Unknown keys and wrong types are errors, never ignored.
#ifndef TANDEM_CLIENT_UP_CONFIG_H_
#define TANDEM_CLIENT_UP_CONFIG_H_

#include <set>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "client/up_options.h"

namespace tandem::client {

// The config key that the flag `flag_name` (Abseil's spelling: "tp",
// "worker_arg", "no_draft") sets, or "" when it is not an up option.
std::string UpConfigKeyOfFlag(absl::string_view flag_name);

// Sets `options`' draft fields from a draft_model value: "none" means no
// draft worker, anything else one draft worker on that model ("" = --model).
void SetDraftModel(const std::string& value, UpOptions* options);

// Applies the JSON object `text` to `options`. Keys in `keep` (those the
// command line sets) are checked like the others but not applied. `source`
// (the file name) starts every message. INVALID_ARGUMENT names the key, the
// value found and what is expected; options are left partly applied on error.
absl::Status ApplyUpConfigJson(absl::string_view text, const std::string& source,
                               const std::set<std::string>& keep, UpOptions* options);

// Reads the file at `path` and applies it as ApplyUpConfigJson. A file that
// cannot be read is INVALID_ARGUMENT naming the path and the system's reason.
absl::Status ApplyUpConfigFile(const std::string& path, const std::set<std::string>& keep,
                               UpOptions* options);

}  // namespace tandem::client

#endif  // TANDEM_CLIENT_UP_CONFIG_H_
