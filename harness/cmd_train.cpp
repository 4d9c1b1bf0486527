// `dlbench train --model M --dataset PATH ...`: placeholder until issue 5 lands.
#include <CLI/CLI.hpp>

#include <memory>

#include "harness/commands.h"
#include "kernels/common/errors.h"

namespace dlb::harness {

void add_train_command(CLI::App& app, int& rc) {
  CLI::App* sub = app.add_subcommand("train", "Train a seed model on a dataset and print loss, accuracy, imgs/s");
  sub->allow_extras();
  sub->callback([&rc] { throw UsageError("train: not available in this build yet"); });
}

}  // namespace dlb::harness
