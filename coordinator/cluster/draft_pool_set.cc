#include "coordinator/cluster/draft_pool_set.h"

#include <algorithm>
#include <utility>

namespace tandem::coordinator {

DraftPoolSet::DraftPoolSet(std::unique_ptr<DraftPool> deployment,
                           std::function<std::unique_ptr<DraftPool>()> make_ngram)
    : deployment_(std::move(deployment)), make_ngram_(std::move(make_ngram)) {}

bool DraftPoolSet::Serves(std::string_view kind) const {
  if (deployment_ != nullptr && deployment_->Serves(kind)) return true;
  return kind == "ngram" && make_ngram_ != nullptr;
}

std::string DraftPoolSet::name() const {
  return deployment_ != nullptr ? deployment_->name() : "ngram";
}

DraftPool* DraftPoolSet::MemberFor(std::string_view kind) {
  if (deployment_ != nullptr && deployment_->Serves(kind)) return deployment_.get();
  if (kind != "ngram" || make_ngram_ == nullptr) return nullptr;
  if (ngram_ == nullptr) ngram_ = make_ngram_();
  return ngram_.get();
}

std::vector<DraftProposal> DraftPoolSet::Propose(std::span<const DraftRequest> requests) {
  std::vector<DraftProposal> out(requests.size());
  // Each member gets its sequences' requests in one call.
  std::vector<std::pair<DraftPool*, std::vector<size_t>>> calls;
  for (size_t i = 0; i < requests.size(); ++i) {
    const DraftRequest& r = requests[i];
    DraftPool* member = nullptr;
    auto it = member_of_.find(r.seq);
    if (it != member_of_.end()) {
      member = it->second;
    } else if (r.start_pos == 0) {
      member = MemberFor(r.kind);
    }
    if (member == nullptr) {  // no draft of its kind (or its draft is gone)
      out[i].ok = false;
      continue;
    }
    member_of_[r.seq] = member;
    auto call = std::find_if(calls.begin(), calls.end(),
                             [&](const auto& c) { return c.first == member; });
    if (call == calls.end()) {
      calls.push_back({member, {}});
      call = calls.end() - 1;
    }
    call->second.push_back(i);
  }
  for (const auto& [member, indices] : calls) {
    std::vector<DraftRequest> subset;
    subset.reserve(indices.size());
    for (size_t i : indices) subset.push_back(requests[i]);
    std::vector<DraftProposal> got = member->Propose(subset);
    for (size_t k = 0; k < indices.size(); ++k) {
      out[indices[k]] = std::move(got[k]);
      if (!out[indices[k]].ok) member_of_.erase(requests[indices[k]].seq);
    }
  }
  return out;
}

bool DraftPoolSet::Release(SeqId seq, int32_t keep_length) {
  auto it = member_of_.find(seq);
  if (it == member_of_.end()) return true;  // no draft holds it
  const bool ok = it->second->Release(seq, keep_length);
  if (!ok || keep_length == 0) member_of_.erase(it);
  return ok;
}

}  // namespace tandem::coordinator
