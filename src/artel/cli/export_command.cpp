// `artel export IN OUT [--format artel|hf]`: a model's weights in the layout
// another program loads. IN is a weights file (final.safetensors, or a
// GPT-2 in Hugging Face's layout) or a checkpoint directory (or a folder of
// them, or a run directory: the newest complete one). `--format hf` writes a GPT as Hugging
// Face's GPT2Model does (models/hf_gpt2.h); `--format artel` writes
// artel's own layout, as final.safetensors holds it.
#include <filesystem>
#include <iostream>

#include <CLI/CLI.hpp>

#include "artel/cli/command.h"
#include "artel/cli/parse_flags.h"
#include "artel/core/error.h"
#include "artel/models/hf_gpt2.h"
#include "artel/nn/safetensors.h"
#include "artel/train/checkpoint_export.h"

namespace artel::cli {
namespace {

namespace fs = std::filesystem;

// IN's weights under artel's names and layout.
std::vector<std::pair<std::string, Tensor>> read_weights(const std::string& in) {
  if (models::is_hf_gpt2(in)) return models::read_all_hf_gpt2(in);
  nn::SafetensorsFile file = nn::read_safetensors(in);
  return {file.tensors.begin(), file.tensors.end()};
}

int run_export(int argc, char** argv) {
  std::string in, out, format = "artel";
  CLI::App app{"Write a model's weights in the layout another program loads.", "artel export"};
  app.add_option("in", in, "a weights file (.safetensors: artel's, or a GPT-2 in Hugging Face's layout), or a "
                           "checkpoint directory (or a folder of them, or a run directory: the newest complete one)")
      ->required();
  app.add_option("out", out, "the .safetensors file to write")->required();
  app.add_option("--format", format, "artel (final.safetensors's layout) | hf (Hugging Face's GPT2Model, GPT only)")
      ->check(CLI::IsMember({"artel", "hf"}));
  app.footer("example: artel export runs/gpt/final.safetensors gpt2-hf/model.safetensors --format hf");
  if (!parse_flags(app, argc, argv, "see `artel export --help`")) return 0;
  std::error_code ec;
  std::string weights = in;
  if (fs::is_directory(in, ec)) {  // a checkpoint: consolidated first
    auto warn = [](const std::string& w) { std::cerr << "artel export: " << w << "\n"; };
    std::unique_ptr<train::ShardedCheckpoint> ck = train::newest_checkpoint(in, warn);
    weights = format == "artel" ? out : out + ".artel.tmp";
    train::export_weights(*ck, weights);
    if (format == "artel") {
      std::cout << "wrote " << out << " from " << ck->dir() << " (step " << ck->manifest().step << ")\n";
      return 0;
    }
  }
  const bool hf_in = models::is_hf_gpt2(weights);
  std::vector<std::pair<std::string, Tensor>> w = read_weights(weights);
  if (weights != in) fs::remove(weights, ec);
  // --format hf writes GPT-2s only, and whole ones; a file read in Hugging
  // Face's layout must be one too (a tensor of another shape was converted
  // and written without a word).
  if (format == "hf" || hf_in) models::check_whole_gpt(w, in);
  if (format == "hf") {
    models::write_hf_gpt2(w, out);
  } else {
    std::map<std::string, Tensor> all(w.begin(), w.end());
    nn::write_safetensors(out, all, {{"format", "pt"}});
  }
  std::cout << "wrote " << out << " (" << (format == "hf" ? "Hugging Face's GPT-2 layout" : "artel's layout") << ", "
            << w.size() << " tensors)\n";
  return 0;
}

const bool kExportRegistered =
    register_command("export", "`export IN OUT --format hf`: weights as Hugging Face's GPT-2 (or artel's layout)", run_export);

}  // namespace
}  // namespace artel::cli
