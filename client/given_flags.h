// GivenFlagNames: which flags a command line sets explicitly. Abseil keeps
// that fact private, and comparing a flag with its default cannot tell
// "--tp 2" (the default, given on purpose) from no --tp at all; a config file
// must lose to the first and win over the second (`tandem up --config`).
#ifndef TANDEM_CLIENT_GIVEN_FLAGS_H_
#define TANDEM_CLIENT_GIVEN_FLAGS_H_

#include <set>
#include <string>
#include <vector>

namespace tandem::client {

// The names (as Abseil spells them: "grace_s", "no_draft") of the registered
// flags that `args` sets, reading `args` with absl::ParseCommandLine's
// grammar: argv[0] first; "-name" or "--name"; "name=value" or, for a
// non-bool flag, "name" with the value in the next argument; "noname" for a
// bool flag; positional arguments anywhere; nothing after "--". Unregistered
// names are skipped (the parser has already rejected them). Flags read from a
// --flagfile are not seen.
std::set<std::string> GivenFlagNames(const std::vector<std::string>& args);

}  // namespace tandem::client

#endif  // TANDEM_CLIENT_GIVEN_FLAGS_H_
