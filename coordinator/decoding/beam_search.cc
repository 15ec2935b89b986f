#include "coordinator/decoding/beam_search.h"

#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "common/logging.h"

namespace tandem::coordinator {
namespace {

// transformers starts every beam but each group's first at this score, so
// the first step draws all of a group's beams from one copy of the prompt.
constexpr float kUnusedBeamScore = -1e9f;

}  // namespace

BeamSearch::BeamSearch(const BeamSearchParams& params, std::vector<int32_t> eos_token_ids,
                       int32_t max_new_tokens)
    : params_(params),
      eos_(std::move(eos_token_ids)),
      max_new_tokens_(max_new_tokens),
      group_size_(params.num_beams / params.num_beam_groups) {
  absl::Status status = ValidateBeamSearchParams(params);
  CHECK(status.ok(), "%s", status.ToString());
  CHECK(max_new_tokens >= 1, "max_new_tokens %d", max_new_tokens);
  for (int32_t g = 0; g < params.num_beam_groups; ++g) {
    hyps_.emplace_back(group_size_, params.length_penalty, params.early_stopping, max_new_tokens);
  }
  group_done_.assign(params.num_beam_groups, false);
  running_.push_back(Beam{});  // the prompt
}

bool BeamSearch::IsEos(int32_t token) const {
  return std::find(eos_.begin(), eos_.end(), token) != eos_.end();
}

int32_t BeamSearch::keep_per_group() const {
  return std::max<int32_t>(2, 1 + static_cast<int32_t>(eos_.size())) * group_size_;
}

int32_t BeamSearch::candidates_per_beam() const {
  return keep_per_group() + (params_.num_beam_groups > 1 ? params_.num_beams : 0);
}

struct BeamSearch::Source {
  int32_t running = 0;  // index into Step's `candidates` (and running_)
  float score = 0.0f;
};

struct BeamSearch::Item {
  float total;    // beam score + processed score (after the diversity penalty)
  float key;      // selection order
  int32_t local;  // the source beam within the group
  int32_t token;
};

std::vector<std::vector<BeamSearch::Source>> BeamSearch::GroupSources() const {
  std::vector<std::vector<Source>> sources(params_.num_beam_groups);
  if (first_step_) {
    for (int32_t g = 0; g < params_.num_beam_groups; ++g) {
      for (int32_t i = 0; i < group_size_; ++i) {
        sources[g].push_back({0, i == 0 ? 0.0f : kUnusedBeamScore});
      }
    }
  } else {
    for (int32_t r = 0; r < num_running(); ++r) {
      sources[running_[r].group].push_back({r, running_[r].score});
    }
  }
  return sources;
}

std::vector<BeamSearch::Item> BeamSearch::GroupItems(
    std::span<const Source> sources, std::span<const std::vector<BeamCandidate>> candidates,
    const absl::flat_hash_map<int32_t, int32_t>& chosen_before) const {
  std::vector<Item> items;
  for (int32_t local = 0; local < group_size_; ++local) {
    const Source& src = sources[local];
    for (const BeamCandidate& c : candidates[src.running]) {
      float penalty = 0.0f;
      if (params_.diversity_penalty > 0.0) {
        auto it = chosen_before.find(c.token);
        if (it != chosen_before.end()) {
          penalty = static_cast<float>(params_.diversity_penalty * it->second);
        }
      }
      const float processed = c.score - penalty;
      items.push_back({src.score + processed, src.score + (c.key - penalty), local, c.token});
    }
  }
  return items;
}

void BeamSearch::SelectItems(std::vector<Item>& items) const {
  // The best `keep` by key; ties by the flattened (beam, token) index, as
  // a top-k over [group_size * vocab] scores orders them.
  auto by_key = [](const Item& a, const Item& b) {
    if (a.key != b.key) return a.key > b.key;
    if (a.local != b.local) return a.local < b.local;
    return a.token < b.token;
  };
  const size_t n = std::min(items.size(), static_cast<size_t>(keep_per_group()));
  std::partial_sort(items.begin(), items.begin() + static_cast<std::ptrdiff_t>(n), items.end(),
                    by_key);
  items.resize(n);
  if (params_.do_sample) {
    // Drawn by key; walked best score first, as transformers sorts them.
    std::stable_sort(items.begin(), items.end(),
                     [](const Item& a, const Item& b) { return a.total > b.total; });
  }
}

void BeamSearch::ExtendGroup(int32_t g, std::span<const Item> items,
                             std::span<const Source> sources, std::vector<Beam>& next,
                             std::vector<BeamMove>& moves) {
  const int32_t gs = group_size_;
  int32_t filled = 0;
  for (size_t rank = 0; rank < items.size() && filled < gs; ++rank) {
    const Item& item = items[rank];
    const Beam& from = first_step_ ? running_[0] : running_[sources[item.local].running];
    if (IsEos(item.token)) {
      if (static_cast<int32_t>(rank) >= gs) continue;
      BeamHypothesis h;
      h.tokens = from.tokens;
      h.ended_with_eos = true;
      h.eos_token = item.token;
      hyps_[g].Add(std::move(h), static_cast<double>(item.total), num_generated_ + 1);
      continue;
    }
    Beam beam;
    beam.tokens = from.tokens;
    beam.tokens.push_back(item.token);
    beam.score = item.total;
    beam.group = g;
    next.push_back(std::move(beam));
    moves.push_back({sources[item.local].running, item.token});
    ++filled;
  }
  CHECK(filled == gs, "group %d filled %d of %d beams from %d candidates", g, filled, gs,
        items.size());
  const float best = items.empty() ? kUnusedBeamScore : items[0].total;
  group_done_[g] = hyps_[g].IsDone(static_cast<double>(best), num_generated_ + 1);
}

std::vector<BeamMove> BeamSearch::KeepRunning(std::vector<Beam> next,
                                              std::span<const BeamMove> moves) {
  running_.clear();
  std::vector<BeamMove> running_moves;
  for (size_t i = 0; i < next.size(); ++i) {
    if (group_done_[next[i].group]) continue;
    running_.push_back(std::move(next[i]));
    running_moves.push_back(moves[i]);
  }
  return running_moves;
}

std::vector<BeamMove> BeamSearch::Step(std::span<const std::vector<BeamCandidate>> candidates) {
  CHECK(!done_, "BeamSearch::Step after done");
  CHECK(candidates.size() == running_.size(), "%d candidate lists for %d running beams",
        candidates.size(), running_.size());
  const int32_t gs = group_size_;
  const std::vector<std::vector<Source>> sources = GroupSources();
  // Tokens chosen by earlier groups this step (Hamming diversity).
  absl::flat_hash_map<int32_t, int32_t> chosen_before;
  std::vector<Beam> next;
  std::vector<BeamMove> moves;
  for (int32_t g = 0; g < params_.num_beam_groups; ++g) {
    if (group_done_[g]) {
      // transformers keeps stepping a finished group with pad tokens (the
      // first EOS id); they still count against later groups' tokens.
      if (!eos_.empty()) chosen_before[eos_[0]] += gs;
      continue;
    }
    CHECK(static_cast<int32_t>(sources[g].size()) == gs, "group %d has %d running beams, not %d",
          g, sources[g].size(), gs);
    std::vector<Item> items = GroupItems(sources[g], candidates, chosen_before);
    SelectItems(items);
    ExtendGroup(g, items, sources[g], next, moves);
    for (int32_t i = static_cast<int32_t>(next.size()) - gs; i < static_cast<int32_t>(next.size());
         ++i) {
      ++chosen_before[next[i].tokens.back()];
    }
  }
  first_step_ = false;
  ++num_generated_;
  // Beams of groups that just finished stop running.
  std::vector<BeamMove> running_moves = KeepRunning(std::move(next), moves);
  done_ = running_.empty() || num_generated_ >= max_new_tokens_;
  return running_moves;
}

std::vector<BeamHypothesis> BeamSearch::Finalize() {
  for (const Beam& beam : running_) {
    if (group_done_[beam.group]) continue;
    BeamHypothesis h;
    h.tokens = beam.tokens;
    hyps_[beam.group].Add(std::move(h), static_cast<double>(beam.score), num_generated_);
  }
  running_.clear();
  std::vector<BeamHypothesis> all;
  for (const BeamHypotheses& group : hyps_) {
    all.insert(all.end(), group.beams().begin(), group.beams().end());
  }
  // transformers sorts ascending (stable) and pops from the end.
  std::stable_sort(all.begin(), all.end(),
                   [](const BeamHypothesis& a, const BeamHypothesis& b) { return a.score < b.score; });
  std::vector<BeamHypothesis> best;
  for (int32_t i = 0; i < params_.num_return_sequences && !all.empty(); ++i) {
    best.push_back(std::move(all.back()));
    all.pop_back();
  }
  return best;
}

std::vector<int32_t> BeamSearch::BestTokens() const {
  const Beam* best = nullptr;
  for (const Beam& b : running_) {
    if (best == nullptr || b.score > best->score) best = &b;
  }
  if (best != nullptr) return best->tokens;
  const BeamHypothesis* top = nullptr;
  for (const BeamHypotheses& group : hyps_) {
    for (const BeamHypothesis& h : group.beams()) {
      if (top == nullptr || h.score > top->score) top = &h;
    }
  }
  return top != nullptr ? top->tokens : std::vector<int32_t>{};
}

}  // namespace tandem::coordinator
