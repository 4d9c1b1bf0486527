// `dlbench data make cifar10 DIR [--format ...] [--images N] [--seed S]`: a seeded synthetic CIFAR-10 in
// the forms users have the real one (models/loader/make.h). `dlbench data make gpt2 DIR [--config C]
// [--tokens N] [--seed S]`: seeded GPT-2 weights and tokens in llm.c's files (models/gpt2_files.h);
// `dlbench data show FILE` checks such a file and prints its header. `dlbench data load DATASET [loader flags]`:
// the loader alone (models/loader/loader.h), each configuration (workers x mode) run for --repetitions
// rounds, a fresh loader per round (workers started, one or more epochs), interleaved with the other
// configurations and with the PyTorch peer (--peer pytorch, bench/peers/pytorch_loader.py) in the same
// rounds; every epoch checked (each sample exactly once) and the first batch compared bit for bit with
// the reference transform before any figure is printed.
#include <CLI/CLI.hpp>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <memory>

#include <nlohmann/json.hpp>

#include "bench/loader_cases.h"
#include "bench/markdown.h"
#include "harness/build_info.h"
#include "harness/commands.h"
#include "harness/sweep.h"
#include "kernels/common/child.h"
#include "kernels/common/errors.h"
#include "kernels/common/safe_file.h"
#include "models/gpt2_files.h"
#include "models/loader/loader.h"
#include "models/loader/make.h"

namespace dlb::harness {

namespace ld = dlb::models::loader;

namespace {

struct MakeFlags {
  std::string what, dir, formats = "python", images = "50000", test_images, seed = "0";
  std::string config = "gpt-mini", tokens = "65536";
};

// DIR/<config>.bin and DIR/tokens.bin, the files llm.c's train_gpt2 reads (-e, -i).
int run_make_gpt2(const MakeFlags& f, const CLI::App* make) {
  for (const char* o : {"--format", "--images", "--test-images"})
    if (make->count(o)) throw UsageError(std::string("data make gpt2: ") + o + " is cifar10's (gpt2 takes --config, --tokens, --seed)");
  const models::Gpt2Config c = models::gpt2_config(f.config);
  const auto n = static_cast<std::size_t>(parse_int(f.tokens, "--tokens", 2, (1LL << 31) - 1));
  const auto seed = static_cast<std::uint64_t>(parse_int(f.seed, "--seed", 0, 1LL << 62));
  std::error_code ec;
  std::filesystem::create_directories(f.dir, ec);
  if (ec || !std::filesystem::is_directory(f.dir)) throw InputError("cannot create " + f.dir + (ec ? ": " + ec.message() : ""));
  const std::string ckpt = f.dir + "/" + c.name + ".bin", toks = f.dir + "/tokens.bin";
  models::write_gpt2_checkpoint(ckpt, models::gpt2_random_weights(c, seed));
  models::write_gpt2_tokens(toks, models::gpt2_random_tokens(n, c.vocab_size, seed));
  std::printf("%s: %s, %zu parameters (llm.c checkpoint, version 3, seed %llu)\n%s: %zu tokens (seed %llu)\n", ckpt.c_str(),
              c.name.c_str(), c.num_params(), static_cast<unsigned long long>(seed), toks.c_str(), n,
              static_cast<unsigned long long>(seed));
  return 0;
}

// An llm.c checkpoint or token file, read whole and checked (as train reads it); its header printed.
int run_show(const std::string& path) {
  const std::string head = read_file_head(path, 4, nullptr);
  std::int32_t magic = 0;
  if (head.size() == 4) std::memcpy(&magic, head.data(), 4);
  if (magic == 20240520) {
    const auto t = models::read_gpt2_tokens(path, 0);
    std::printf("%s: llm.c tokens, %zu uint16 ids, largest %d\n", path.c_str(), t.size(), int(*std::max_element(t.begin(), t.end())));
    return 0;
  }
  const models::Gpt2Weights w = models::read_gpt2_checkpoint(path);  // names the magic when it is neither
  const models::Gpt2Config& c = w.config;
  std::printf("%s: llm.c GPT-2 checkpoint, fp32: max_seq_len %d, vocab_size %d (padded %d), num_layers %d, num_heads %d, "
              "channels %d; %zu parameters\n",
              path.c_str(), c.max_seq_len, c.vocab_size, c.padded_vocab_size, c.num_layers, c.num_heads, c.channels, c.num_params());
  return 0;
}

int run_make(const MakeFlags& f, const CLI::App* make) {
  if (f.what == "gpt2") return run_make_gpt2(f, make);
  if (f.what != "cifar10") throw UsageError("data make '" + f.what + "': expected cifar10 or gpt2");
  for (const char* o : {"--config", "--tokens"})
    if (make->count(o)) throw UsageError(std::string("data make cifar10: ") + o + " is gpt2's");
  const auto n = static_cast<std::size_t>(parse_int(f.images, "--images", 1, 1 << 22));
  const auto n_test = static_cast<std::size_t>(f.test_images.empty() ? n / 5 : parse_int(f.test_images, "--test-images", 0, 1 << 22));
  const auto seed = static_cast<std::uint64_t>(parse_int(f.seed, "--seed", 0, 1LL << 62));
  std::vector<ld::DiskFormat> forms;
  for (const auto& w : parse_words(f.formats, "--format")) forms.push_back(ld::parse_disk_format(w));
  for (const auto form : forms) {
    const auto t0 = std::chrono::steady_clock::now();
    const ld::MakeReport r = ld::make_cifar10(f.dir, form, n, n_test, seed);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("%s: %zu files, %.1f MB (%zu train + %zu test images, seed %llu, %.1f s)\n", r.folder.c_str(), r.files,
                r.bytes / 1e6, n, n_test, static_cast<unsigned long long>(seed), s);
  }
  return 0;
}

struct LoadFlags {
  std::string dataset, loader, workers, mode, pin, prefetch, decode, augment, batch, seed, limit, split;
  std::string epochs = "1", reps = "1", peer;
};

using Round = bench::LoaderRound;

// One loader lifetime: started, `epochs` epochs, stopped. Every epoch visits each sample exactly
// once; the first batch of the first round equals the reference transform of the same indices, bit
// for bit. Throws (exit 1) otherwise.
Round run_round(const std::shared_ptr<const ld::Source>& src, const ld::LoaderOptions& o, int epochs, bool check_first) {
  Round r;
  const double c0 = bench::cpu_seconds_with_children();
  const auto t0 = std::chrono::steady_clock::now();
  {
    ld::Loader loader(src, o);
    for (int e = 0; e < epochs; ++e) {
      bench::EpochCheck check(*src, o, check_first && e == 0 ? bench::EpochCheck::first : bench::EpochCheck::none);
      while (ld::BatchLease b = loader.next()) check.batch(*b);
      r.images += check.finish();
    }
    r.stats = loader.stats();
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.cpu_s = bench::cpu_seconds_with_children() - c0;
  r.first_batch_s = r.stats.first_batch_s;
  return r;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

std::string fmt(const char* f, double v) {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

int run_load(const LoadFlags& f, CLI::App* sub) {
  // The options: --loader SPEC, then each flag given (the flags win), workers and mode as lists.
  std::string spec = f.loader;
  auto add = [&](const char* flag, const char* key, const std::string& v) {
    if (sub->count(flag)) spec += std::string(spec.empty() ? "" : ",") + key + "=" + v;
  };
  add("--pin", "pin", f.pin), add("--prefetch", "prefetch", f.prefetch), add("--decode", "decode", f.decode);
  add("--augment", "augment", f.augment), add("--batch", "batch", f.batch), add("--seed", "seed", f.seed);
  add("--limit", "limit", f.limit), add("--split", "split", f.split);
  ld::LoaderOptions base = ld::parse_loader_options(spec);
  base.dataset = f.dataset;
  std::vector<int> workers = {base.workers};
  if (sub->count("--workers")) {
    workers.clear();
    for (const auto& w : parse_words(f.workers, "--workers")) workers.push_back(static_cast<int>(parse_int(w, "--workers", 0, 256)));
  }
  std::vector<ld::WorkerMode> modes = {base.mode};
  if (sub->count("--mode")) {
    modes.clear();
    for (const auto& m : parse_words(f.mode, "--mode")) modes.push_back(ld::parse_worker_mode(m));
  }
  const int epochs = static_cast<int>(parse_int(f.epochs, "--epochs", 1, 1000000));
  const int reps = static_cast<int>(parse_int(f.reps, "--repetitions", 1, 1000));
  if (!f.peer.empty() && f.peer != "pytorch") throw UsageError("--peer '" + f.peer + "': expected pytorch");

  ld::SourceOptions so;
  so.decode = base.decode, so.split = base.split;
  std::shared_ptr<ld::Source> opened = ld::open_source(base.dataset, so);
  if (base.limit) opened->truncate(base.limit);
  const std::shared_ptr<const ld::Source> src = opened;

  struct Config {
    ld::LoaderOptions o;
    std::vector<Round> ours, theirs;
    std::unique_ptr<bench::LoaderPeer> peer;
    std::string peer_why;
  };
  std::vector<Config> configs;
  for (const auto m : modes)
    for (const int w : workers) {
      if (w == 0 && m != modes.front()) continue;  // no workers: the mode does not matter
      Config c;
      c.o = base;
      c.o.workers = w, c.o.mode = m;
      configs.push_back(std::move(c));
    }
  InterruptScope scope("dlbench: interrupted; stopping the loader's workers\n");
  std::printf("dataset: %s %s, %zu samples of %dx%dx%d, decode %s\n", ld::format_name(src->format()), src->path().c_str(),
              src->size(), src->channels(), src->height(), src->width(), src->decode().c_str());
  std::fflush(stdout);
  if (!f.peer.empty())
    for (auto& c : configs) {
      c.peer = std::make_unique<bench::LoaderPeer>(*src, c.o, &c.peer_why);
      if (!*c.peer) c.peer.reset();
    }
  for (int r = 0; r < reps; ++r)
    for (auto& c : configs) {
      c.ours.push_back(run_round(src, c.o, epochs, r == 0));
      if (c.peer)
        for (int e = 0; e < epochs; ++e) c.theirs.push_back(c.peer->epoch());
    }
  std::vector<std::vector<std::string>> rows = {{"mode", "workers", "pin", "imgs/s", "first batch ms", "CPU us/img", "read",
                                                 "decode", "transform", "collate", "pin us/img"}};
  const bool peer = !f.peer.empty();
  if (peer) rows[0].insert(rows[0].end(), {"PyTorch imgs/s", "PyTorch first ms", "PyTorch CPU us/img", "ours / PyTorch"});
  std::string peer_notes;
  for (const auto& c : configs) {
    std::vector<double> rate, first, cpu;
    ld::StageTimes st;
    std::size_t images = 0;
    for (const auto& r : c.ours) {
      rate.push_back(r.images / r.seconds), first.push_back(r.first_batch_s), cpu.push_back(r.cpu_s / r.images);
      st += r.stats.stages;
      images += r.images;
    }
    const double per = 1e6 / static_cast<double>(images);
    std::vector<std::string> row = {c.o.workers ? ld::worker_mode_name(c.o.mode) : "-", std::to_string(c.o.workers),
                                    c.o.pin ? "on" : "off", fmt("%.0f", median(rate)), fmt("%.1f", 1e3 * median(first)),
                                    fmt("%.1f", 1e6 * median(cpu)), fmt("%.2f", st.read * per), fmt("%.2f", st.decode * per),
                                    fmt("%.2f", st.transform * per), fmt("%.3f", st.collate * per), fmt("%.2f", st.pin * per)};
    if (peer) {
      if (c.theirs.empty()) {
        row.insert(row.end(), {"-", "-", "-", "-"});
        peer_notes += "PyTorch peer for workers=" + std::to_string(c.o.workers) + ": " + c.peer_why + "\n";
      } else {
        std::vector<double> tr, tf, tc;
        for (const auto& r : c.theirs) tr.push_back(r.images / r.seconds), tf.push_back(r.first_batch_s), tc.push_back(r.cpu_s / r.images);
        // ratio of medians over the same interleaved rounds
        row.insert(row.end(), {fmt("%.0f", median(tr)), fmt("%.1f", 1e3 * median(tf)), fmt("%.1f", 1e6 * median(tc)),
                               fmt("%.2fx", median(rate) / median(tr))});
      }
    }
    rows.push_back(row);
  }
  std::string common = ld::describe_options(base);
  common = common.substr(common.find(",pin=") + 1);  // workers and mode are the rows'
  std::printf("loader: %s; %d round(s) of %d epoch(s) each, interleaved; medians; stage columns are us per image summed "
              "over workers; every epoch checked, first batch bit for bit\n",
              common.c_str(), reps, epochs);
  if (peer)
    for (const auto& c : configs)
      if (c.peer) {
        std::printf("PyTorch peer: torch %s\n", c.peer->version().c_str());
        break;
      }
  std::cout << "\n";
  bench::print_markdown(std::cout, rows, true);
  std::cout << peer_notes;
  return 0;
}

}  // namespace

void add_data_command(CLI::App& app, int& rc) {
  CLI::App* data = app.add_subcommand("data", "Datasets on disk and the data loader: make a synthetic CIFAR-10 or GPT-2 files, run the loader alone");
  data->require_subcommand(1);

  auto mf = std::make_shared<MakeFlags>();
  CLI::App* make = data->add_subcommand(
      "make", "Write a seeded synthetic CIFAR-10 (python/binary batches, PNG/JPEG folders) or GPT-2 weights and tokens (llm.c's files)");
  make->add_option("WHAT", mf->what, "cifar10 | gpt2")->required();
  make->add_option("DIR", mf->dir, "Folder to write into (each form in its own subfolder)")->required();
  make->add_option("--format", mf->formats, "python,binary,png,jpeg (a list; default python)");
  make->add_option("--images", mf->images, "Training images (default 50000)");
  make->add_option("--test-images", mf->test_images, "Test images (default images / 5)");
  make->add_option("--seed", mf->seed, "Seed of the synthetic images, weights and tokens (default 0)");
  make->add_option("--config", mf->config, "gpt2: gpt-mini (default) | gpt2-124m");
  make->add_option("--tokens", mf->tokens, "gpt2: tokens in tokens.bin (default 65536)");
  make->callback([mf, make, &rc] { rc = run_make(*mf, make); });

  auto shown = std::make_shared<std::string>();
  CLI::App* show = data->add_subcommand("show", "Check an llm.c GPT-2 checkpoint or token file and print its header");
  show->add_option("FILE", *shown, "gpt2_124M.bin, tokens.bin, ... (llm.c's layouts)")->required();
  show->callback([shown, &rc] { rc = run_show(*shown); });

  auto lf = std::make_shared<LoadFlags>();
  CLI::App* load = data->add_subcommand("load", "Run the data loader alone over a dataset folder: images/s, first batch, CPU, stages");
  load->add_option("DATASET", lf->dataset, "Dataset folder (python or binary CIFAR-10 batches, an image folder, or one made by data make)")->required();
  load->add_option("--loader", lf->loader, "Loader options key=value,... (preset=lecture, workers, mode, pin, prefetch, decode, ...)");
  load->add_option("--workers", lf->workers, "Worker counts, a list (default 0)");
  load->add_option("--mode", lf->mode, "thread | process, a list (default thread)");
  load->add_option("--pin", lf->pin, "on | off: the pin step into page-locked buffers (default off)");
  load->add_option("--prefetch", lf->prefetch, "Batches in flight per worker (default 2)");
  load->add_option("--decode", lf->decode, "none | png | jpeg: which form of a data-make folder (default: what it holds)");
  load->add_option("--augment", lf->augment, "none | crop-flip (default none)");
  load->add_option("--batch", lf->batch, "Batch size (default 64)");
  load->add_option("--seed", lf->seed, "Shuffle and augmentation seed (default 0)");
  load->add_option("--limit", lf->limit, "Only the first N samples (default all)");
  load->add_option("--split", lf->split, "train | test (default train)");
  load->add_option("--epochs", lf->epochs, "Epochs per round (default 1)");
  load->add_option("--repetitions,-r", lf->reps, "Rounds, interleaved over the configurations (default 1)");
  load->add_option("--peer", lf->peer, "pytorch: torchvision + DataLoader over the same files, in the same rounds");
  load->callback([lf, load, &rc] {
    try {
      rc = run_load(*lf, load);
    } catch (const Interrupted&) {
      rc = 130;
    }
  });
}

}  // namespace dlb::harness
