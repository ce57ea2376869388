// `artel checkpoint export CKPT OUT.safetensors`: a sharded checkpoint — its
// directory, or OUT/checkpoints for the newest complete one — consolidated
// into the single-worker weights file (train/checkpoint_export.h).
#include <iostream>
#include <string_view>

#include <CLI/CLI.hpp>

#include "artel/cli/command.h"
#include "artel/cli/parse_flags.h"
#include "artel/core/error.h"
#include "artel/train/checkpoint_export.h"

namespace artel::cli {
namespace {

int run_checkpoint(int argc, char** argv) {
  // CLI11 would say only "A subcommand is required" of a misspelt one.
  if (argc >= 2 && argv[1][0] != '-' && std::string_view(argv[1]) != "export") {
    std::cerr << "artel checkpoint: error: unknown subcommand '" << argv[1]
              << "' (hint: use `artel checkpoint export CKPT OUT`)\n";
    return 2;
  }
  std::string ckpt, out;
  CLI::App app{"Work with sharded checkpoints (OUT/checkpoints/ckpt-<step>/: a shard per worker and a manifest).",
               "artel checkpoint"};
  app.require_subcommand(1);
  CLI::App* exp = app.add_subcommand(
      "export", "consolidate a checkpoint's model into one safetensors file, as final.safetensors holds it");
  exp->add_option("checkpoint", ckpt, "a checkpoint directory, a directory of them or a run directory (the newest complete one)")
      ->required();
  exp->add_option("out", out, "the .safetensors file to write")->required();
  exp->footer("example: artel checkpoint export runs/gpt/checkpoints step.safetensors");
  if (!parse_flags(app, argc, argv, "see `artel checkpoint export --help`")) return 0;
  auto warn = [](const std::string& w) { std::cerr << "artel checkpoint: " << w << "\n"; };
  std::unique_ptr<train::ShardedCheckpoint> ck = train::newest_checkpoint(ckpt, warn);
  train::export_weights(*ck, out);
  std::cout << "wrote " << out << " from " << ck->dir() << " (step " << ck->manifest().step << ")\n";
  return 0;
}

const bool kCheckpointRegistered =
    register_command("checkpoint", "`checkpoint export CKPT OUT`: a checkpoint's model as one weights file", run_checkpoint);

}  // namespace
}  // namespace artel::cli
