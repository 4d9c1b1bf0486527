// Suite gpt2's derived keys and tables (bench/gpt2.cpp registers the suite): tokens/s and mfu_pct
// from the harness's time, the training table in the lecture's layout and op=infer's latency table.
#include "bench/gpt2_tables.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <tuple>
#include <utility>

#include "bench/markdown.h"
#include "bench/paired.h"

namespace dlb::bench {

namespace {

std::string fmt(double v, const char* f) {
  char b[32];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

std::string mb(const json& r, const char* key) {
  return r.contains(key) ? fmt(r.at(key).get<double>() / 1e6, "%.0f") : "-";
}

void summarize_infer(const std::vector<json>& records, std::ostream& out) {
  // One row per config x impl x prompt: prefill tokens/s, decode p50 / p99 per token.
  std::map<std::tuple<std::string, std::string, std::string, int>, std::pair<const json*, const json*>> rows;
  for (const auto& r : records)
    if (r.value("op", "") == "infer" && r.contains("p50_ms")) {
      auto& row = rows[{r.value("device", ""), r.value("config", ""), r.value("impl", ""), r.value("seq", 0)}];
      (r.value("phase", "") == "prefill" ? row.first : row.second) = &r;
    }
  if (rows.empty()) return;
  std::vector<std::vector<std::string>> t{
      {"Device", "Config", "Impl", "Prompt", "prefill tokens/s", "decode p50 ms", "decode p99 ms", "decode tokens/s"}};
  for (const auto& [k, v] : rows) {
    const auto& [dev, config, impl, T] = k;
    auto num = [](const json* r, const char* key, const char* f) { return r && r->contains(key) ? fmt(r->at(key).get<double>(), f) : "-"; };
    t.push_back({dev == "cpu" ? "CPU" : "GPU (" + dev + ")", config, impl, std::to_string(T), num(v.first, "tokens_per_s", "%.0f"),
                 num(v.second, "p50_ms", "%.1f"), num(v.second, "p99_ms", "%.1f"),
                 v.second && v.second->contains("p50_ms") ? fmt(1e3 / v.second->at("p50_ms").get<double>(), "%.1f") : "-"});
  }
  out << "\n### gpt2: inference at batch 1 with a K/V cache (fp32)\n\n";
  print_markdown(out, t, true);
}

// The training point ours and the peer share: device, dtype, config, batch, seq, ckpt ("" off training).
std::string train_point(const json& e) {
  if (e.value("op", "") != "train") return "";
  std::string p = e.value("device", "") + "/" + e.value("dtype", "fp32") + "/" + e.value("config", "");
  return p + "/" + std::to_string(e.value("batch", 0)) + "/" + std::to_string(e.value("seq", 0)) + "/" + e.value("ckpt", "off");
}

}  // namespace

// tokens/s from the time the harness measured, the MFU under its usual name, ours against PyTorch.
void gpt2_derive(std::vector<json>& entries) {
  for (json& e : entries) {
    if (!e.contains("gflops") || !e.contains("flops_per_token")) continue;
    e["tokens_per_s"] = e.at("gflops").get<double>() * 1e9 / e.at("flops_per_token").get<double>();
    if (e.contains("pct_of_peak")) e["mfu_pct"] = e.at("pct_of_peak");
  }
  derive_paired_speedup(entries, train_point, "ours", "pytorch", "tokens_per_s", "speedup_vs_pytorch");
}

void gpt2_summarize(const std::vector<json>& records, std::ostream& out) {
  std::vector<std::vector<std::string>> rows{
      {"Device", "Config", "Impl", "Ckpt", "Batchsize", "Seq len", "tokens/s", "MFU", "vs PyTorch eager", "ms/step", "activations MB",
       "peak RSS MB", "GPU peak MB"}};
  for (const auto& r : records) {
    if (!r.contains("gflops") || !r.contains("flops_per_token")) continue;
    const double tps = r.at("gflops").get<double>() * 1e9 / r.at("flops_per_token").get<double>();
    const std::string dev = r.value("device", "");
    const std::string dt = r.value("dtype", "fp32");
    const std::string im = r.value("impl", "");
    // The peer's other dtype is torch.autocast's, and so is ours' on the CPU (the AmpTrainer step); ours
    // on a GPU autocasts its GEMMs' operands alone.
    const bool autocast = im.rfind("pytorch", 0) == 0 || dev == "cpu";
    const std::string impl = im + (r.value("attn", "flash") == "unfused" ? " (unfused)" : "") +
                             (dt != "fp32" ? " " + dt + (autocast ? " autocast" : " GEMMs") : "") +
                             (r.value("cuda_graph", false) ? ", CUDA graph" : "");
    rows.push_back({dev == "cpu" ? "CPU" : "GPU (" + dev + ")", r.value("config", ""), impl, r.value("ckpt", "off"),
                    std::to_string(r.value("batch", 0)), std::to_string(r.value("seq", 0)), fmt(tps, "%.0f"),
                    r.contains("pct_of_peak") ? fmt(r.at("pct_of_peak").get<double>(), "%.1f%%") : "-",
                    paired_speedup_cell(r, "speedup_vs_pytorch"),
                    fmt(1e3 * r.value("tokens_per_iteration", 0.0) / tps, "%.0f"), mb(r, "activation_bytes"),
                    r.value("host_peak_rss_scope", "") == "case" ? mb(r, "host_peak_rss_bytes") : "-",
                    mb(r, "peak_device_bytes")});
  }
  const bool trained = std::any_of(records.begin(), records.end(), [](const json& r) { return r.value("op", "") == "train"; });
  if (trained || rows.size() > 1) {
    out << "\n### gpt2: training step throughput (AdamW, fp32; \"tf32/bf16/fp16 GEMMs\": their operands alone; "
           "\"bf16 autocast\": PyTorch's AMP policy)\n\n";
    if (rows.size() == 1) out << "(no gpt2 training case finished)\n";
    else print_markdown(out, rows, true);
  }
  summarize_infer(records, out);
}

}  // namespace dlb::bench
