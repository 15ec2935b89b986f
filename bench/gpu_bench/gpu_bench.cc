// tandem-gpu-bench: the engine on GPUs, one process (a thread per
// tensor-parallel rank, rank r on device r; NCCL between them). For each
// --tp size the model loads once and then measures
//  - single-stream decode: one request of --input-len prompt and
//    --output-len generated tokens; its decode tokens/s beside the HBM
//    roofline (the device-to-device copy bandwidth measured in the same run,
//    times the GPUs, over the weight and KV bytes one decode token reads);
//  - throughput: --num-seqs requests of the same shape at once; output
//    tokens/s over prefill plus decode (what transformers' generate is
//    timed on in bench/gpu_bench/hf_baseline.py).
// The report is JSON (--out, else stdout); bench/gpu_bench/run.sh runs the
// whole benchmark (model, baseline, serving benchmark, plot). Built against
// the emulator (the default build) it runs on the CPU at the tiny shape: what
// CI checks.
//
// Thread model: the main thread drives; BenchGroup runs a thread per rank.
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "bench/gpu_bench/bench_group.h"
#include "bench/gpu_bench/copy_bandwidth.h"
#include "common/flags/flag_help.h"
#include "engine/device/device_options.h"
#include "nlohmann/json.hpp"

ABSL_FLAG(std::string, model, "", "GGUF model path (e.g. from tandem make-model --shape llama3-8b)");
ABSL_FLAG(std::string, tp, "1", "Comma-separated tensor-parallel sizes (those past the GPUs are skipped)");
ABSL_FLAG(std::string, num_seqs, "1,16,64,256", "Comma-separated numbers of concurrent sequences");
ABSL_FLAG(int32_t, input_len, 512, "Prompt tokens per sequence");
ABSL_FLAG(int32_t, output_len, 256, "Generated tokens per sequence");
ABSL_FLAG(std::string, cuda_weights, "bf16", "bf16 or native (as tandem-worker's flag)");
ABSL_FLAG(int32_t, max_batched_tokens, 4096, "Most tokens of one forward (prefill batches)");
ABSL_FLAG(int64_t, copy_bytes, int64_t{1} << 30, "Bytes of the bandwidth-measuring copy");
ABSL_FLAG(std::string, out, "", "Write the JSON report here (default: stdout)");

namespace tandem::bench {
namespace {

using nlohmann::json;

absl::StatusOr<std::vector<int>> ParseList(const std::string& flag, const std::string& value) {
  std::vector<int> out;
  for (absl::string_view item : absl::StrSplit(value, ',')) {
    int v = 0;
    if (!absl::SimpleAtoi(item, &v) || v < 1) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "--%s '%s': '%s' is not a positive integer", flag, value, std::string(item)));
    }
    out.push_back(v);
  }
  return out;
}

json SingleStream(const BenchGroup& g, const RunShape& shape, const RunTimes& t, double bw_gbs) {
  const double decode_tokens = shape.output_len - 1;
  const double tokens_per_s = t.decode_s > 0 ? decode_tokens / t.decode_s : 0;
  const double context = shape.input_len + shape.output_len / 2.0;  // mean over the decode
  const double bytes = static_cast<double>(g.weight_bytes_per_step()) +
                       context * static_cast<double>(g.kv_bytes_per_token());
  const double roofline = g.tp() * bw_gbs * 1e9 / bytes;
  return {{"tp", g.tp()},
          {"context_len", shape.input_len + shape.output_len},
          {"decode_tokens", decode_tokens},
          {"decode_tokens_per_s", tokens_per_s},
          {"bytes_per_token", bytes},
          {"roofline_tokens_per_s", roofline},
          {"roofline_fraction", tokens_per_s / roofline}};
}

json Throughput(const BenchGroup& g, const RunShape& shape, const RunTimes& t) {
  const double total = t.prefill_s + t.decode_s;
  return {{"tp", g.tp()},
          {"num_seqs", shape.num_seqs},
          {"input_len", shape.input_len},
          {"output_len", shape.output_len},
          {"prefill_s", t.prefill_s},
          {"decode_s", t.decode_s},
          {"decode_forward_s", t.decode_forward_s},
          {"decode_sample_s", t.decode_sample_s},
          {"layers_step_s", t.layers_step_s},
          {"output_tokens_per_s", shape.num_seqs * static_cast<double>(shape.output_len) / total},
          {"decode_tokens_per_s",
           t.decode_s > 0 ? shape.num_seqs * (shape.output_len - 1.0) / t.decode_s : 0.0}};
}

// Every shape on a group of `tp` ranks into `report`; a shape that does
// not fit is recorded with its error and the rest go on.
void RunGroup(BenchGroup& g, const std::vector<int>& num_seqs, double bw_gbs, json& report) {
  if (!report.contains("model")) {  // the first group's (TP 1 when measured)
    report["model"] = {{"path", absl::GetFlag(FLAGS_model)},
                       {"name", g.config().name},
                       {"tp", g.tp()},
                       {"num_layers", g.config().num_layers},
                       {"weight_bytes", g.weight_bytes_per_step()},
                       {"kv_bytes_per_token", g.kv_bytes_per_token()}};
  }
  for (int n : num_seqs) {
    const RunShape shape{n, absl::GetFlag(FLAGS_input_len), absl::GetFlag(FLAGS_output_len)};
    absl::StatusOr<RunTimes> t = g.Run(shape);
    if (!t.ok()) {
      std::fprintf(stderr, "tandem-gpu-bench: TP %d, %d sequences: %s\n", g.tp(), n,
                   t.status().ToString().c_str());
      report["throughput"].push_back({{"tp", g.tp()}, {"num_seqs", n}, {"error", t.status().ToString()}});
      continue;
    }
    if (n == 1) report["single_stream"].push_back(SingleStream(g, shape, *t, bw_gbs));
    report["throughput"].push_back(Throughput(g, shape, *t));
    std::fprintf(stderr, "tandem-gpu-bench: TP %d, %d sequences: %.1f output tokens/s\n", g.tp(), n,
                 report["throughput"].back()["output_tokens_per_s"].get<double>());
  }
}

int Fail(const absl::Status& s) {
  std::fprintf(stderr, "tandem-gpu-bench: %s\n", s.ToString().c_str());
  return 1;
}

int Main() {
  if (absl::GetFlag(FLAGS_model).empty()) return Fail(absl::InvalidArgumentError("--model is required"));
  absl::StatusOr<std::vector<int>> tps = ParseList("tp", absl::GetFlag(FLAGS_tp));
  if (!tps.ok()) return Fail(tps.status());
  absl::StatusOr<std::vector<int>> num_seqs = ParseList("num-seqs", absl::GetFlag(FLAGS_num_seqs));
  if (!num_seqs.ok()) return Fail(num_seqs.status());
  device::DeviceFlags flags;
  flags.device = "cuda";
  flags.cuda_weights = absl::GetFlag(FLAGS_cuda_weights);
  flags.max_batched_tokens = absl::GetFlag(FLAGS_max_batched_tokens);
  absl::StatusOr<device::DeviceChoice> choice = device::ParseDeviceFlags(flags);
  if (!choice.ok()) return Fail(choice.status());
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess) devices = 0;
  absl::StatusOr<double> bw = MeasureCopyBandwidth(absl::GetFlag(FLAGS_copy_bytes), 20);
  if (!bw.ok()) return Fail(bw.status());
  json report = {{"num_devices", devices}, {"cuda_weights", absl::GetFlag(FLAGS_cuda_weights)},
                 {"d2d_bandwidth_gbs", *bw}, {"single_stream", json::array()},
                 {"throughput", json::array()}};
  for (int tp : *tps) {
    if (tp > devices) {
      std::fprintf(stderr, "tandem-gpu-bench: TP %d skipped: %d devices\n", tp, devices);
      continue;
    }
    absl::StatusOr<std::unique_ptr<BenchGroup>> g =
        BenchGroup::Load(absl::GetFlag(FLAGS_model), tp, choice->cuda);
    if (!g.ok()) return Fail(g.status());
    report["device"] = (*g)->device_name();
    RunGroup(**g, *num_seqs, *bw, report);
  }
  const std::string text = report.dump(2) + "\n";
  if (absl::GetFlag(FLAGS_out).empty()) {
    std::fputs(text.c_str(), stdout);
    return 0;
  }
  std::ofstream out(absl::GetFlag(FLAGS_out));
  out << text;
  out.close();
  if (!out) return Fail(absl::NotFoundError("cannot write --out " + absl::GetFlag(FLAGS_out)));
  return 0;
}

}  // namespace
}  // namespace tandem::bench

int main(int argc, char** argv) {
  const tandem::Program program{
      "tandem-gpu-bench",
      {{"", "--model PATH [flags]",
        "The engine's decode speed against the HBM roofline and its throughput on GPUs "
        "(JSON report)",
        tandem::FlagsDefinedIn(__FILE__)}}};
  tandem::ParseCommandLineOrExit(program, argc, argv);
  return tandem::bench::Main();
}
