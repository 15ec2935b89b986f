#include "coordinator/decoding/gamma_controller.h"

#include <algorithm>
#include <cmath>

namespace tandem::coordinator {

double ExpectedTokensPerRound(double alpha, int32_t gamma) {
  alpha = std::clamp(alpha, 0.0, 1.0);
  if (alpha >= 1.0) return gamma + 1.0;
  return (1.0 - std::pow(alpha, gamma + 1)) / (1.0 - alpha);
}

namespace {

// Decay of the global counts per round; of a step size's mean time per step.
constexpr float kGlobalKeep = 0.98f;
constexpr double kSizeKeep = 0.8;

void Fold(AcceptanceProfile& p, int32_t accepted, int32_t proposed, float keep) {
  for (int i = 0; i < AcceptanceProfile::kPositions; ++i) {
    p.tried[i] *= keep;
    p.accepted[i] *= keep;
  }
  p.prior_weight *= keep;
  // Draft k (1-based) was tried if drafts 1..k-1 were accepted.
  const int32_t reached = std::min(accepted + 1, proposed);
  for (int32_t k = 1; k <= reached; ++k) {
    const int i = std::min(k, AcceptanceProfile::kPositions) - 1;
    p.tried[i] += 1.0f;
    if (k <= accepted) p.accepted[i] += 1.0f;
  }
}

}  // namespace

AcceptanceProfile AcceptanceProfile::Constant(double alpha, double weight) {
  AcceptanceProfile p;
  alpha = std::clamp(alpha, 0.0, 1.0);
  p.tried.fill(static_cast<float>(weight));
  p.accepted.fill(static_cast<float>(weight * alpha));
  p.base = alpha;
  return p;
}

namespace {

// The rate at position i (0-based) given the prior from the position before.
double BlendRate(const AcceptanceProfile& p, int i, double prior) {
  const double w = p.prior_weight;
  if (!(p.tried[i] + w > 0.0)) return prior;
  const double rate = (p.accepted[i] + w * prior) / (p.tried[i] + w);
  return std::clamp(rate, 0.0, 1.0);
}

}  // namespace

double AcceptanceProfile::Rate(int32_t k) const {
  double rate = base;
  for (int i = 0; i < std::clamp(k, 1, kPositions); ++i) rate = BlendRate(*this, i, rate);
  return rate;
}

double AcceptanceProfile::ExpectedTokens(int32_t gamma) const {
  double tokens = 1.0, survive = 1.0, rate = base;
  for (int32_t k = 1; k <= gamma; ++k) {
    if (k <= kPositions) rate = BlendRate(*this, k - 1, rate);
    survive *= rate;
    tokens += survive;
  }
  return tokens;
}

GammaController::GammaController(const GammaControllerConfig& config)
    : config_(config),
      global_acceptance_(config.prior_acceptance),
      global_profile_() {
  global_profile_.base = std::clamp(config.prior_acceptance, 0.0, 1.0);
}

void GammaController::ObserveStep(int64_t num_tokens, double step_ms) {
  if (num_tokens <= 0 || !(step_ms >= 0.0)) return;
  const double d = config_.cost_decay;
  const double x = static_cast<double>(num_tokens);
  w_ = d * w_ + 1.0;
  wx_ = d * wx_ + x;
  wy_ = d * wy_ + step_ms;
  wxx_ = d * wxx_ + x * x;
  wxy_ = d * wxy_ + x * step_ms;
  if (num_tokens <= kMeasuredSizes) {
    double& m = size_ms_[num_tokens];
    m = m > 0.0 ? kSizeKeep * m + (1.0 - kSizeKeep) * step_ms : step_ms;
  }
}

double GammaController::StepMs(int64_t num_tokens) const {
  num_tokens = std::max<int64_t>(1, num_tokens);
  if (num_tokens <= kMeasuredSizes && size_ms_[num_tokens] > 0.0) return size_ms_[num_tokens];
  return fixed_ms() + per_token_ms() * static_cast<double>(num_tokens);
}

void GammaController::ObserveDraft(int32_t positions, double ms) {
  if (positions <= 0 || !(ms >= 0.0)) return;
  const double per = ms / positions;
  draft_ms_ = draft_seen_ ? config_.cost_decay * draft_ms_ + (1.0 - config_.cost_decay) * per : per;
  draft_seen_ = true;
}

bool GammaController::SlopeIdentified() const {
  return w_ >= 3.0 && w_ * wxx_ - wx_ * wx_ > 1e-9 * w_ * w_;
}

double GammaController::per_token_ms() const {
  if (SlopeIdentified()) {
    return std::max(0.0, (w_ * wxy_ - wx_ * wy_) / (w_ * wxx_ - wx_ * wx_));
  }
  // Too few step sizes to fit a slope (a single stream decoding, maybe
  // after its prefill): assume small steps are latency-bound, an extra
  // token costing 1/16 of the smallest step measured (else of the mean
  // step), so speculation gets tried and its steps identify the slope.
  for (int n = 1; n <= kMeasuredSizes; ++n) {
    if (size_ms_[n] > 0.0) return size_ms_[n] / 16.0;
  }
  if (w_ > 0.0) return (wy_ / w_) / 16.0;
  return config_.prior_per_token_ms;
}

double GammaController::fixed_ms() const {
  if (w_ <= 0.0) return config_.prior_fixed_ms;
  const double b = per_token_ms();
  if (!SlopeIdentified()) {
    // The line through the smallest measured step (see per_token_ms).
    for (int n = 1; n <= kMeasuredSizes; ++n) {
      if (size_ms_[n] > 0.0) return std::max(0.0, size_ms_[n] - b * n);
    }
  }
  return std::max(0.0, (wy_ - b * wx_) / w_);
}

int32_t GammaController::Choose(const AcceptanceProfile& profile, int64_t batch_tokens,
                                int64_t batch_sequences) const {
  const int64_t n = std::max<int64_t>(1, batch_tokens);
  const double step = StepMs(n);
  if (!(step > 0.0)) return config_.max_gamma;
  const double s = static_cast<double>(std::max<int64_t>(1, batch_sequences));
  int32_t best = 0;
  // Plain decoding, plus a margin: the linear cost model misses per-token
  // costs of verification (logits and sampling of every position), so a
  // predicted gain under 5% is not worth it.
  double best_gain = 1.05;
  for (int32_t g = 1; g <= config_.max_gamma; ++g) {
    const double gain =
        (s - 1.0 + profile.ExpectedTokens(g)) / s * step /
        (std::max(step, StepMs(n + g)) + g * draft_ms_);
    // A deeper round must pay for itself clearly (noise in alpha and beta).
    if (gain > best_gain * 1.02 || (best == 0 && gain > best_gain)) {
      best = g;
      best_gain = gain;
    }
  }
  return best;
}

AcceptanceProfile GammaController::NewProfile() const {
  AcceptanceProfile p;
  p.base = global_profile_.Rate(1);
  return p;
}

void GammaController::UpdateAcceptance(AcceptanceProfile& profile, int32_t accepted,
                                       int32_t proposed) {
  if (proposed <= 0) return;
  accepted = std::clamp(accepted, 0, proposed);
  Fold(profile, accepted, proposed, static_cast<float>(config_.acceptance_decay));
  Fold(global_profile_, accepted, proposed, kGlobalKeep);
  const double observed = static_cast<double>(accepted) / proposed;
  // The global rate moves slowly: many sequences feed it.
  const double global_keep = std::pow(0.98, proposed);
  global_acceptance_ = global_keep * global_acceptance_ + (1.0 - global_keep) * observed;
}

}  // namespace tandem::coordinator
