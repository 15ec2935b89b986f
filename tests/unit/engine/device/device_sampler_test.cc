// DeviceSampler under emulation against the CPU Sampler on the same rows:
// greedy and sampled rows with penalties over prompt and output histories,
// the min-tokens mask (stop ids, EOS, ignore_eos), temperature, top-k within
// and beyond the candidate kernel, top-p, min-p, several seeds and streams:
// the same token, the logprob within 1e-6, the same top logprobs (1 to 20,
// ties at the top) within 1e-6. Beam rows (penalties, the mask, tied scores,
// widths 1 to 16, mixed into a batch of plain rows, some with top logprobs):
// the CPU's candidates, in order, scores within 1e-6; beam sampling rows
// (temperature, top-k with its floor of 2 through the candidate kernel, the
// whole row with top-k off or past the kernel — its k-th largest as the
// bound over 3000 logits, ties kept — top-p, min-p): the CPU's candidates,
// scores and keys within 1e-5. Rows it leaves to the host (beam sampling
// over a +inf or with nothing left, beams wider than the candidate kernel,
// a beam row holding a NaN, nothing left after the mask, top logprobs past
// the live logits or over a +inf) are listed and not answered; a call
// allocates no device memory; bad sizes are refused.
#include "engine/device/device_sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda/runtime/device_buffer.h"
#include "kernels/cuda/sampling/top_k.cuh"

namespace tandem::device {
namespace {

constexpr int32_t kVocab = 300;
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// A row's data; SamplingRow views it.
struct RowData {
  std::vector<float> logits;
  sampling::SamplingParams params;
  std::vector<int32_t> prompt, output, eos;
  uint64_t seed = 0, stream = 0;

  sampling::SamplingRow View() const {
    return {.logits = logits.data(),
            .params = &params,
            .prompt_tokens = prompt,
            .output_tokens = output,
            .seed = seed,
            .stream = stream,
            .eos_token_ids = eos};
  }
};

std::vector<int32_t> RandomIds(std::mt19937& rng, int n) {
  std::uniform_int_distribution<int32_t> id(0, kVocab - 1);
  std::vector<int32_t> ids(n);
  for (int32_t& x : ids) x = id(rng);
  return ids;
}

RowData RandomRow(std::mt19937& rng, int i) {
  std::normal_distribution<float> logit(0.0f, 2.0f);
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  RowData row;
  for (int32_t v = 0; v < kVocab; ++v) row.logits.push_back(logit(rng));
  sampling::SamplingParams& p = row.params;
  p.temperature = i % 5 == 0 ? 0.0f : 0.4f + 1.2f * unit(rng);
  p.top_k = i % 3 == 0 ? 0 : (i % 3 == 1 ? 7 : 2500);  // off, candidate kernel, whole row
  p.top_p = i % 2 == 0 ? 1.0f : 0.6f + 0.4f * unit(rng);
  p.min_p = i % 4 == 3 ? 0.05f : 0.0f;
  p.repetition_penalty = i % 2 == 0 ? 1.3f : 1.0f;
  p.frequency_penalty = i % 3 == 2 ? 0.4f : 0.0f;
  p.presence_penalty = i % 4 == 1 ? 0.3f : 0.0f;
  p.min_tokens = i % 4 == 2 ? 50 : 0;
  p.ignore_eos = i % 8 == 6;
  p.stop_token_ids = {7, 9};
  row.prompt = RandomIds(rng, 5 + i % 7);
  row.output = RandomIds(rng, i % 11);
  row.eos = {2};
  // The mask and the penalties must matter: boost the ids they touch.
  for (int32_t id : {2, 7, 9}) row.logits[id] += 4.0f;
  for (int32_t id : row.output) row.logits[id] += 1.0f;
  row.seed = rng();
  row.stream = i % 3;
  p.logprobs = std::vector<int32_t>{0, 1, 0, 5, 20}[i % 5];
  if (i % 7 == 3) {
    // Ties at the top of the raw row: listed by lower id.
    for (int32_t id : {200, 13, 150}) row.logits[id] = 12.0f;
  }
  return row;
}

// Every logit -inf but EOS 2 and stop id 7 (RandomRow's), which the
// min-tokens mask removes: nothing is left.
void MaskEverything(RowData& row) {
  row.logits.assign(kVocab, kNegInf);
  row.logits[2] = row.logits[7] = 1.0f;
  row.params.min_tokens = 10;
  row.params.ignore_eos = false;
}

// The device's top logprobs are the CPU's: same tokens in order, logprobs
// within 1e-6.
void ExpectSameTopLogprobs(const sampling::SampleResult& device,
                           const sampling::SampleResult& cpu) {
  ASSERT_EQ(device.top_logprobs.size(), cpu.top_logprobs.size());
  for (size_t j = 0; j < cpu.top_logprobs.size(); ++j) {
    EXPECT_EQ(device.top_logprobs[j].token, cpu.top_logprobs[j].token) << "top " << j;
    EXPECT_NEAR(device.top_logprobs[j].logprob, cpu.top_logprobs[j].logprob, 1e-6) << "top " << j;
  }
}

// The device's beam row equals the CPU's: token, logprob, top logprobs,
// candidates in order with scores and keys within `tolerance` (a plain
// beam row's key is its score).
void ExpectSameBeamRow(const sampling::SampleResult& device, const sampling::SampleResult& cpu,
                       const sampling::SamplingParams& p, double tolerance) {
  EXPECT_EQ(device.token, cpu.token);
  EXPECT_NEAR(device.logprob, cpu.logprob, 1e-6);
  ExpectSameTopLogprobs(device, cpu);
  ASSERT_EQ(device.beam_candidates.size(), cpu.beam_candidates.size());
  for (size_t j = 0; j < cpu.beam_candidates.size(); ++j) {
    const sampling::BeamToken& d = device.beam_candidates[j];
    EXPECT_EQ(d.token, cpu.beam_candidates[j].token) << "candidate " << j;
    EXPECT_NEAR(d.score, cpu.beam_candidates[j].score, tolerance) << "candidate " << j;
    EXPECT_NEAR(d.key, cpu.beam_candidates[j].key, tolerance) << "candidate " << j;
    if (!p.beam_sample) {
      EXPECT_EQ(d.key, d.score) << "candidate " << j;
    }
  }
}

struct DeviceRun {
  std::vector<sampling::SampleResult> results;
  std::vector<int32_t> host_rows;
};

DeviceRun SampleOnDevice(DeviceSampler& sampler, const std::vector<RowData>& rows) {
  std::vector<float> logits;
  std::vector<sampling::SamplingRow> views;
  for (const RowData& row : rows) {
    logits.insert(logits.end(), row.logits.begin(), row.logits.end());
    views.push_back(row.View());
  }
  absl::StatusOr<cuda::DeviceBuffer> device =
      cuda::DeviceBuffer::Allocate(static_cast<int64_t>(logits.size() * 4), "test logits");
  EXPECT_TRUE(device.ok()) << device.status();
  EXPECT_TRUE(device->Upload(logits.data(), device->bytes(), 0, nullptr).ok());
  DeviceRun run;
  run.results.resize(rows.size());
  const int64_t allocations = cuda::DeviceAllocationCount();
  // The rows in reverse order of the logits, to exercise the gather.
  std::vector<int64_t> logit_rows;
  std::vector<sampling::SamplingRow> reversed;
  for (size_t r = rows.size(); r-- > 0;) {
    logit_rows.push_back(static_cast<int64_t>(r));
    reversed.push_back(views[r]);
  }
  std::vector<sampling::SampleResult> results(rows.size());
  std::vector<int32_t> host_rows;
  const absl::Status s =
      sampler.Sample(device->as<float>(), logit_rows, reversed, results, &host_rows, nullptr);
  for (size_t i = 0; i < rows.size(); ++i) run.results[rows.size() - 1 - i] = results[i];
  for (size_t i = host_rows.size(); i-- > 0;) {
    run.host_rows.push_back(static_cast<int32_t>(rows.size()) - 1 - host_rows[i]);
  }
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_EQ(cuda::DeviceAllocationCount(), allocations) << "Sample allocated device memory";
  return run;
}

std::vector<sampling::SampleResult> SampleOnCpu(const std::vector<RowData>& rows,
                                                int32_t vocab = kVocab) {
  std::vector<sampling::SamplingRow> views;
  for (const RowData& row : rows) views.push_back(row.View());
  sampling::Sampler sampler(vocab);
  std::vector<sampling::SampleResult> results(rows.size());
  sampler.SampleBatch(views, results, nullptr);
  return results;
}

DeviceSampler MakeSampler(int32_t max_rows, int32_t vocab = kVocab) {
  absl::StatusOr<DeviceSampler> sampler = DeviceSampler::Create(max_rows, vocab, 4096);
  EXPECT_TRUE(sampler.ok()) << sampler.status();
  return std::move(*sampler);
}

TEST(DeviceSamplerTest, EqualsTheCpuSampler) {
  std::mt19937 rng(3);
  std::vector<RowData> rows;
  for (int i = 0; i < 40; ++i) rows.push_back(RandomRow(rng, i));
  DeviceSampler sampler = MakeSampler(48);
  const DeviceRun device = SampleOnDevice(sampler, rows);
  const std::vector<sampling::SampleResult> cpu = SampleOnCpu(rows);
  EXPECT_TRUE(device.host_rows.empty());
  int masked = 0;
  int with_top = 0;
  for (size_t r = 0; r < rows.size(); ++r) {
    const sampling::SamplingParams& p = rows[r].params;
    SCOPED_TRACE(::testing::Message() << "row " << r << " temperature " << p.temperature
                                      << " top_k " << p.top_k << " top_p " << p.top_p
                                      << " min_p " << p.min_p << " min_tokens " << p.min_tokens);
    EXPECT_EQ(device.results[r].token, cpu[r].token);
    EXPECT_NEAR(device.results[r].logprob, cpu[r].logprob, 1e-6);
    ExpectSameTopLogprobs(device.results[r], cpu[r]);
    masked += p.min_tokens > 0;
    with_top += p.logprobs > 0;
  }
  EXPECT_GT(masked, 5);
  EXPECT_GT(with_top, 15);
}

TEST(DeviceSamplerTest, BeamRowsGetTheCpuCandidates) {
  std::mt19937 rng(11);
  std::vector<RowData> rows;
  for (int i = 0; i < 24; ++i) {
    RowData row = RandomRow(rng, i);
    if (i % 3 != 2) {
      row.params.beam_candidates = std::vector<int32_t>{1, 2, 4, 8, 16}[i % 5];
      row.params.temperature = i % 2 == 0 ? 0.5f : 0.0f;  // ignored by beams
    }
    // Ties at the top and across the k-th place: broken by lower id.
    if (i % 4 == 1) {
      for (int32_t id : {40, 12, 250, 31, 77}) row.logits[id] = 9.5f;
    }
    rows.push_back(std::move(row));
  }
  DeviceSampler sampler = MakeSampler(24);
  const DeviceRun device = SampleOnDevice(sampler, rows);
  const std::vector<sampling::SampleResult> cpu = SampleOnCpu(rows);
  EXPECT_TRUE(device.host_rows.empty());
  for (size_t r = 0; r < rows.size(); ++r) {
    SCOPED_TRACE(::testing::Message() << "row " << r << " width "
                                      << rows[r].params.beam_candidates);
    ExpectSameBeamRow(device.results[r], cpu[r], rows[r].params, 1e-6);
  }
}

// Row i of the beam-sampling test: beam sampling with the warpers
// (temperature, top-k with its floor of 2 and ties, top-p, min-p, or
// temperature alone), a plain beam row, or a sampling row.
RowData BeamSamplingRow(std::mt19937& rng, int i) {
  RowData row = RandomRow(rng, i);
  sampling::SamplingParams& p = row.params;
  if (i % 12 == 11) {
    p.beam_candidates = 4;  // a plain beam row: key = score
  } else if (i % 7 != 6) {
    p.beam_candidates = std::vector<int32_t>{2, 4, 8, 3, 16}[i % 5];
    p.beam_sample = true;
    p.temperature = std::vector<float>{0.5f, 1.0f, 1.7f}[i % 3];
    // top_k 0 and 2049 (past the candidate kernel) take the whole row.
    p.top_k = std::vector<int32_t>{0, 1, 7, 50, 300, 2049}[i % 6];
    if (i % 9 == 4) p.top_k = 0;
    p.top_p = i % 2 == 0 ? 0.7f : 1.0f;
    p.min_p = i % 4 == 1 ? 0.1f : 0.0f;
  }
  if (i % 4 == 1) {
    for (int32_t id : {40, 12, 250, 31, 77}) row.logits[id] = 9.5f;  // ties across the k-th
  }
  if (i % 8 == 2) {
    // Top-p cuts through six tied scores: the CPU keeps the lowest ids.
    p.top_k = 7;
    p.top_p = 0.6f;
    for (int32_t id : {90, 14, 260, 33, 171, 5}) row.logits[id] = 11.0f;
  }
  return row;
}

// Row i of the whole-row beam-sampling test over kLargeVocab logits: top_k
// past the candidate kernel (its k-th largest is the bound, ties kept) with
// top-p and min-p cuts, near ties at the k-th place.
constexpr int32_t kLargeVocab = 3000;
RowData LargeVocabularyBeamRow(std::mt19937& rng, int i) {
  RowData row = RandomRow(rng, i);
  // Flat scores, so that tokens past the k-th compete for the best keys.
  std::normal_distribution<float> logit(0.0f, 0.5f);
  row.logits.resize(kLargeVocab);
  for (float& l : row.logits) l = logit(rng);
  sampling::SamplingParams& p = row.params;
  p.beam_candidates = std::vector<int32_t>{2, 6, 12}[i % 3];
  p.beam_sample = true;
  p.temperature = i % 2 == 0 ? 0.8f : 1.0f;
  p.top_k = i % 4 == 3 ? 0 : 2100 + 150 * (i % 4);
  p.top_p = i % 3 == 0 ? 1.0f : 0.85f;
  p.min_p = i % 4 == 1 ? 0.02f : 0.0f;
  if (i % 2 == 1) {
    // Many scores tied across the k-th place: all stay.
    for (int32_t id = 100; id < 2900; id += 3) row.logits[id] = -1.5f;
  }
  return row;
}

// Whole-row beam sampling whose top-p cut keeps one token: the first two by
// score stay, as on the CPU — also when every other weight underflows to 0
// (the runner-up at a high id, far below the best but far above the rest)
// and when the best score is tied.
TEST(DeviceSamplerTest, WholeRowBeamSamplingKeepsTheFirstTwoByScore) {
  std::mt19937 rng(29);
  std::vector<RowData> rows;
  for (int i = 0; i < 4; ++i) {
    RowData row = RandomRow(rng, 1);
    sampling::SamplingParams& p = row.params;
    p = sampling::SamplingParams{};
    p.beam_candidates = 2;
    p.beam_sample = true;
    p.top_k = 0;
    p.top_p = 0.3f;
    for (int32_t v = 0; v < kVocab; ++v) row.logits[v] = -300.0f + 0.01f * static_cast<float>(v);
    row.logits[100] = 0.0f;
    if (i < 2) {
      row.logits[250 + i] = -150.0f;  // weight e^-150: 0 in float
    } else {
      for (int32_t id : {240, 12, 100}) row.logits[id] = 0.0f;  // tied best
      p.temperature = i == 3 ? 0.5f : 1.0f;
    }
    rows.push_back(std::move(row));
  }
  DeviceSampler sampler = MakeSampler(4);
  const DeviceRun device = SampleOnDevice(sampler, rows);
  const std::vector<sampling::SampleResult> cpu = SampleOnCpu(rows);
  EXPECT_TRUE(device.host_rows.empty());
  for (size_t r = 0; r < rows.size(); ++r) {
    SCOPED_TRACE(::testing::Message() << "row " << r);
    ExpectSameBeamRow(device.results[r], cpu[r], rows[r].params, 1e-5);
    ASSERT_EQ(cpu[r].beam_candidates.size(), 2u);
  }
  // The kept pairs: the best and the runner-up, or the two lowest tied ids.
  for (size_t r : {0u, 1u}) {
    std::vector<int32_t> kept = {cpu[r].beam_candidates[0].token,
                                 cpu[r].beam_candidates[1].token};
    std::sort(kept.begin(), kept.end());
    EXPECT_EQ(kept, (std::vector<int32_t>{100, static_cast<int32_t>(250 + r)})) << r;
  }
}

TEST(DeviceSamplerTest, WholeRowBeamSamplingGetsTheCpuCandidates) {
  std::mt19937 rng(23);
  std::vector<RowData> rows;
  for (int i = 0; i < 8; ++i) rows.push_back(LargeVocabularyBeamRow(rng, i));
  DeviceSampler sampler = MakeSampler(8, kLargeVocab);
  const DeviceRun device = SampleOnDevice(sampler, rows);
  const std::vector<sampling::SampleResult> cpu = SampleOnCpu(rows, kLargeVocab);
  EXPECT_TRUE(device.host_rows.empty());
  for (size_t r = 0; r < rows.size(); ++r) {
    const sampling::SamplingParams& p = rows[r].params;
    SCOPED_TRACE(::testing::Message() << "row " << r << " top_k " << p.top_k << " top_p "
                                      << p.top_p << " min_p " << p.min_p);
    ExpectSameBeamRow(device.results[r], cpu[r], p, 1e-5);
  }
}

// Beam sampling rows get the CPU's candidates, scores and Gumbel keys.
TEST(DeviceSamplerTest, BeamSamplingRowsGetTheCpuCandidates) {
  std::mt19937 rng(17);
  std::vector<RowData> rows;
  for (int i = 0; i < 48; ++i) rows.push_back(BeamSamplingRow(rng, i));
  // Nothing left after the mask: the CPU's raw-argmax fallback, on the host.
  MaskEverything(rows[3]);
  DeviceSampler sampler = MakeSampler(48);
  const DeviceRun device = SampleOnDevice(sampler, rows);
  const std::vector<sampling::SampleResult> cpu = SampleOnCpu(rows);
  EXPECT_EQ(device.host_rows, std::vector<int32_t>{3});
  for (size_t r = 0; r < rows.size(); ++r) {
    if (r == 3) continue;
    const sampling::SamplingParams& p = rows[r].params;
    SCOPED_TRACE(::testing::Message() << "row " << r << " width " << p.beam_candidates
                                      << " top_k " << p.top_k << " top_p " << p.top_p
                                      << " min_p " << p.min_p);
    ExpectSameBeamRow(device.results[r], cpu[r], p, 1e-5);
  }
}

TEST(DeviceSamplerTest, SameTokensAloneAndInABatch) {
  std::mt19937 rng(8);
  std::vector<RowData> rows;
  for (int i = 0; i < 12; ++i) rows.push_back(RandomRow(rng, i));
  DeviceSampler sampler = MakeSampler(12);
  const DeviceRun batch = SampleOnDevice(sampler, rows);
  for (size_t r = 0; r < rows.size(); ++r) {
    EXPECT_EQ(SampleOnDevice(sampler, {rows[r]}).results[0].token, batch.results[r].token)
        << "row " << r;
  }
}

TEST(DeviceSamplerTest, LeavesRowsToTheHost) {
  std::mt19937 rng(5);
  std::vector<RowData> rows;
  for (int i = 0; i < 10; ++i) rows.push_back(RandomRow(rng, 1));
  for (RowData& row : rows) row.params.logprobs = 0;
  // Beam sampling with nothing left after the mask: the CPU's raw argmax.
  rows[1].params.beam_candidates = 2;
  rows[1].params.beam_sample = true;
  rows[1].params.top_k = 0;
  rows[1].params.top_p = 0.9f;
  MaskEverything(rows[1]);
  // Top logprobs over a +inf, which the candidate order ties with FLT_MAX
  // (here at a lower id: the device's first would be 10, the CPU's 50).
  rows[2].params.logprobs = 1;
  rows[2].logits[10] = std::numeric_limits<float>::max();
  rows[2].logits[50] = std::numeric_limits<float>::infinity();
  MaskEverything(rows[3]);
  rows[4].params.beam_candidates = cuda::kTopKMaxCandidates + 1;
  // A NaN makes the CPU's log_softmax all NaN: no candidate, the raw argmax.
  rows[5].params.beam_candidates = 4;
  rows[5].logits[100] = std::numeric_limits<float>::quiet_NaN();
  rows[6].params.beam_candidates = 4;
  // Five top logprobs of a row with three live logits: the CPU lists -inf
  // tokens too.
  rows[7].logits.assign(kVocab, kNegInf);
  rows[7].logits[20] = rows[7].logits[21] = rows[7].logits[22] = 1.0f;
  rows[7].params.logprobs = 5;
  rows[8].params.logprobs = 3;
  // Beam sampling over a +inf, which the candidate order clamps.
  rows[9].params.beam_candidates = 2;
  rows[9].params.beam_sample = true;
  rows[9].logits[50] = std::numeric_limits<float>::infinity();
  DeviceSampler sampler = MakeSampler(10);
  const DeviceRun device = SampleOnDevice(sampler, rows);
  EXPECT_EQ(device.host_rows, (std::vector<int32_t>{1, 2, 3, 4, 5, 7, 9}));
  for (int r : {0, 6, 8}) EXPECT_GE(device.results[r].token, 0) << "row " << r;
  EXPECT_EQ(device.results[6].beam_candidates.size(), 4u);
  EXPECT_EQ(device.results[8].top_logprobs.size(), 3u);
  for (int r : {1, 2, 3, 4, 5, 7, 9}) {
    EXPECT_EQ(device.results[r].token, -1) << "row " << r;
    EXPECT_TRUE(device.results[r].top_logprobs.empty()) << "row " << r;
  }
}

TEST(DeviceSamplerTest, RefusesBadSizes) {
  EXPECT_EQ(DeviceSampler::Create(0, kVocab, 10).status().code(),
            absl::StatusCode::kInvalidArgument);
  DeviceSampler sampler = MakeSampler(2);
  std::mt19937 rng(1);
  std::vector<RowData> rows = {RandomRow(rng, 1), RandomRow(rng, 2), RandomRow(rng, 3)};
  std::vector<sampling::SamplingRow> views;
  for (const RowData& row : rows) views.push_back(row.View());
  std::vector<sampling::SampleResult> results(3);
  std::vector<int32_t> host_rows;
  const std::vector<int64_t> logit_rows = {0, 1, 2};
  const absl::Status s =
      sampler.Sample(nullptr, logit_rows, views, results, &host_rows, nullptr);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("3 rows (at most 2)"), std::string_view::npos) << s;
}

}  // namespace
}  // namespace tandem::device
