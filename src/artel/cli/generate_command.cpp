// `artel generate RUN`: samples from a trained run's model. RUN is a run
// directory (its config.json says the model and data; its final.safetensors,
// or --weights, the weights: artel's layout or a GPT-2 in Hugging Face's).
// Character and word models print text; token models print ids, or text with
// --tokenizer (llm.c's gpt2_tokenizer.bin, data/token_table.h). With the
// run's seed and temperature and no prompt, it draws what the end of
// `artel train --generate N` printed.
#include <algorithm>
#include <filesystem>
#include <iostream>
#include <sstream>

#include <CLI/CLI.hpp>

#include "artel/autograd/ops.h"
#include "artel/cli/command.h"
#include "artel/cli/parse_flags.h"
#include "artel/core/error.h"
#include "artel/data/dataset.h"
#include "artel/data/token_table.h"
#include "artel/models/generate.h"
#include "artel/models/hf_gpt2.h"
#include "artel/nn/safetensors.h"
#include "artel/train/bundled_data.h"
#include "artel/train/recipe.h"
#include "artel/train/train_config.h"

namespace artel::cli {
namespace {

namespace fs = std::filesystem;

struct GenerateArgs {
  std::string run, weights, prompt, prompt_ids, tokenizer;
  int64_t tokens = 200, top_k = 0;
  std::optional<double> temperature;
  std::optional<int64_t> seed;
};

std::vector<int64_t> parse_ids(const std::string& text) {
  std::vector<int64_t> ids;
  std::string spaced = text;
  std::replace(spaced.begin(), spaced.end(), ',', ' ');  // "464,318" as "464 318"
  std::istringstream in(spaced);
  for (std::string w; in >> w;) {
    size_t used = 0;
    long long v = -1;
    try {
      v = std::stoll(w, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != w.size() || v < 0) throw Error("--prompt-ids: '" + w + "' is not a token id", "e.g. --prompt-ids \"50256 464\"");
    ids.push_back(v);
  }
  return ids;
}

int run_generate(int argc, char** argv) {
  GenerateArgs a;
  CLI::App app{"Sample text (or token ids) from a trained run's model.", "artel generate"};
  app.add_option("run", a.run, "a run directory (config.json, final.safetensors)")->required();
  app.add_option("--weights", a.weights, "weights to load instead of RUN/final.safetensors (artel's or Hugging Face's GPT-2 layout)");
  app.add_option("--prompt", a.prompt, "text to continue (character and word models)");
  app.add_option("--prompt-ids", a.prompt_ids, "token ids to continue, separated by spaces or commas (any text model)");
  app.add_option("--tokens", a.tokens, "tokens to sample [default 200]")->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  app.add_option("--temperature", a.temperature, "the logits are divided by it [default: the run's]")
      ->check(positive());
  app.add_option("--top-k", a.top_k, "keep the k largest logits (0 = all) [default 0]")->check(non_negative());
  app.add_option("--seed", a.seed, "the sampler's seed [default: the run's]");
  app.add_option("--tokenizer", a.tokenizer, "token models: llm.c's gpt2_tokenizer.bin, to print text instead of ids");
  app.footer("example: artel generate runs/gpt --prompt \"ROMEO:\" --tokens 300");
  if (!parse_flags(app, argc, argv, "see `artel generate --help`")) return 0;
  if (!a.prompt.empty() && !a.prompt_ids.empty()) throw Error("--prompt and --prompt-ids together", "give one of them");

  const std::string config = (fs::path(a.run) / "config.json").string();
  if (fs::is_regular_file(a.run))
    throw Error(a.run + " is a file, not a run directory",
                "pass the --out directory of an `artel train` run; other weights go with --weights FILE");
  if (!fs::is_regular_file(config))
    throw Error(a.run + " is not a run directory: it holds no config.json",
                "pass the --out directory of an `artel train` run (and --weights for other weights)");
  train::TrainConfig cfg = train::resolve_config({.json = train::read_config_file(config), .recorded = true});
  if (!models::trains_on_text(cfg.model))
    throw Error(a.run + " trained " + cfg.model + ", which classifies images", "generate from a gpt or wordlm run");
  if (cfg.data.empty()) cfg.data = train::default_data_for(cfg.model);  // as `artel train` resolves it
  const bool tokens = fs::path(cfg.data).extension() == ".bin";
  std::unique_ptr<data::Dataset> ds;
  if (!tokens) {  // its vocabulary
    if (!fs::exists(cfg.data))
      throw Error(config + " names the data " + cfg.data + ", which does not exist",
                  "the run's vocabulary comes from its data: put the file back where the run read it");
    ds = data::open_dataset(cfg.data, train::dataset_options(cfg));
  }
  const auto* text = dynamic_cast<const data::TextDataset*>(ds.get());
  const int64_t vocab = tokens ? (cfg.vocab_size > 0 ? cfg.vocab_size : 50257) : ds->num_classes();
  std::optional<data::TokenTable> table;
  if (!a.tokenizer.empty()) {
    if (!tokens) throw Error("--tokenizer goes with token models; " + a.run + " trained on text", "drop --tokenizer");
    table = data::load_token_table(a.tokenizer);
    if (table->size() < vocab)  // said now, not when the first id past it is drawn
      throw Error("token table " + a.tokenizer + " holds " + std::to_string(table->size()) +
                      " tokens, fewer than the model's vocabulary of " + std::to_string(vocab),
                  "pass the tokenizer the token files were written with");
  }

  std::unique_ptr<models::Model> model = models::declare_model(train::make_model_config(cfg, vocab));
  const std::string weights = a.weights.empty() ? (fs::path(a.run) / "final.safetensors").string() : a.weights;
  if (models::is_hf_gpt2(weights)) models::load_hf_gpt2(*model, weights);
  else nn::load_weights(*model, weights);

  std::vector<int64_t> prompt;
  if (!a.prompt_ids.empty()) {
    prompt = parse_ids(a.prompt_ids);
    for (int64_t id : prompt)
      if (id >= vocab)
        throw Error("--prompt-ids: " + std::to_string(id) + " is not below the model's vocabulary of " +
                        std::to_string(vocab),
                    "give ids the run was trained on");
  } else if (!a.prompt.empty()) {
    if (tokens) throw Error("--prompt is text, and GPT-2's encoder is not in a token table", "use --prompt-ids");
    const auto* chars = dynamic_cast<const data::CharTextDataset*>(text);
    try {
      if (chars) prompt = chars->vocab().encode(a.prompt);
      else
        for (std::string_view w : data::split_words(a.prompt))
          prompt.push_back(static_cast<const data::WordTextDataset*>(text)->vocab().id(w));
    } catch (const Error& e) {  // said of the flag, with what the run can read
      throw Error(std::string("--prompt: ") + e.what(), std::string("write it in the ") +
                                                            (chars ? "characters" : "words") +
                                                            " of the run's training text, or give --prompt-ids");
    }
  } else {
    prompt = {tokens ? (table && table->end_of_text >= 0 ? table->end_of_text : (vocab > 50256 ? 50256 : 0))
                     : text->first_token()};
  }
  if (prompt.empty())
    throw Error(a.prompt_ids.empty() ? "--prompt holds no token" : "--prompt-ids holds no token id",
                a.prompt_ids.empty() ? "give a longer --prompt" : "e.g. --prompt-ids \"50256 464\"");

  autograd::NoGradGuard no_grad;
  model->eval();
  Rng rng(static_cast<uint64_t>(a.seed.value_or(cfg.seed)), models::kSampleStream);
  const models::SamplingOptions opts{.temperature = static_cast<float>(a.temperature.value_or(cfg.temperature)),
                                     .top_k = a.top_k,
                                     .context = cfg.block_size,
                                     .vocab = vocab};
  std::vector<int64_t> ids = models::generate(prompt, a.tokens, opts, rng, [&](const Tensor& in) {
    const Tensor logits = model->forward(in).value();  // (1, T, V padded)
    const float* last = logits.data<float>() + (in.size(1) - 1) * logits.size(-1);
    return std::vector<float>(last, last + vocab);  // no padding rows
  });
  const std::span<const int64_t> fresh = std::span<const int64_t>(ids).subspan(a.prompt.empty() && a.prompt_ids.empty() ? prompt.size() : 0);
  if (table) std::cout << table->decode(fresh) << "\n";
  else if (tokens) {
    for (size_t i = 0; i < fresh.size(); ++i) std::cout << (i ? " " : "") << fresh[i];
    std::cout << "\n";
  } else {
    std::cout << text->decode(fresh) << "\n";
  }
  return 0;
}

const bool kGenerateRegistered =
    register_command("generate", "`generate RUN --prompt TEXT`: sample from a trained run's model", run_generate);

}  // namespace
}  // namespace artel::cli
