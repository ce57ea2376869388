// A user's own model through a parameter-server job (ranks as threads): BSP
// with 2 workers and 1 server trains it to the weights one worker alone
// reaches on the global batch.
#include "artel/train/parameter_server.h"

#include <gtest/gtest.h>

#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "artel/comm/thread_group.h"
#include "artel/core/error.h"
#include "artel/nn/embedding.h"
#include "user_model.h"

namespace artel::train {
namespace {

// A program of the user's own reads its flags per rank: a worker started
// with another staleness ran a consistency the server did not keep, and the
// job ended well. Named now, before the roles split the ranks.
TEST(ParameterServerJob, RanksStartedWithAnotherStalenessAreNamed) {
  TrainConfig c = default_config("mlp");
  c.model = "two-layer", c.steps = 2, c.threads = 1, c.batch_size = 16, c.ps_servers = 1;
  std::ostringstream quiet;
  RunOptions run{.out = &quiet, .write_files = false, .sample = false, .set_threads = false};
  std::vector<std::string> said(3);
  comm::spawn_threads(3, [&](comm::ProcessGroup& pg) {
    auto world = std::shared_ptr<comm::ProcessGroup>(&pg, [](comm::ProcessGroup*) {});
    TrainConfig mine = c;
    if (pg.rank() == 1) mine.staleness = "inf";
    try {
      ParameterServerJob job(mine, std::make_unique<TwoLayer>(), argmax_rows(64), run, world);
    } catch (const Error& e) {
      said[static_cast<size_t>(pg.rank())] = e.what();
    }
  });
  for (const std::string& e : said)
    EXPECT_NE(e.find("rank 1 was started with --staleness 'inf', rank 0 with --staleness"), std::string::npos) << e;
}

TEST(ParameterServerJob, AUsersOwnModelUnderBspEqualsOneWorkerOnTheGlobalBatch) {
  TrainConfig c = default_config("mlp");
  c.model = "two-layer", c.steps = 20, c.threads = 1, c.lr = 0.1, c.data_order = "sequential";
  std::ostringstream quiet;
  RunOptions run{.out = &quiet, .write_files = false, .sample = false, .set_threads = false};

  TrainConfig alone = c;
  alone.batch_size = 32;
  Trainer one(alone, std::make_unique<TwoLayer>(), argmax_rows(512), run);
  one.run();

  c.batch_size = 16, c.ps_servers = 1;  // staleness 0 (BSP), the default
  std::map<std::string, std::vector<float>> ps_weights;
  comm::spawn_threads(3, [&](comm::ProcessGroup& pg) {
    auto world = std::shared_ptr<comm::ProcessGroup>(&pg, [](comm::ProcessGroup*) {});
    ParameterServerJob job(c, std::make_unique<TwoLayer>(), argmax_rows(512), run, world);
    job.run();
    if (pg.rank() == 0)  // its final evaluation read every update of the run
      for (const auto& [name, p] : job.trainer()->model().named_parameters()) ps_weights[name] = p.value().to_vector();
  });
  ASSERT_FALSE(ps_weights.empty());
  double worst = 0;
  for (const auto& [name, p] : one.model().named_parameters()) {
    std::vector<float> a = p.value().to_vector(), b = ps_weights.at(name);
    ASSERT_EQ(a.size(), b.size()) << name;
    for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, double(std::fabs(a[i] - b[i])));
  }
  EXPECT_LE(worst, 1e-6);
}

// A user's model with a sparse table of its own: each row holds an id (as a
// float) whose class is id mod 3; the model looks the id up in a 1000-row
// embedding marked sparse, then a linear layer. Under BSP the rows move by
// the ids a step reads, and the weights still equal one worker's.
class IdClassifier : public nn::Model {
 public:
  IdClassifier() {
    table_ = register_module("table", std::make_shared<nn::Embedding>(1000, 8));
    table_->set_sparse(true);
    fc_ = register_module("fc", std::make_shared<nn::Linear>(8, 3));
    set_plan({.pieces = {{.name = "lookup",
                          .modules = {"table"},
                          .forward = [this](const nn::Activations& in) {
                            const Tensor& x = in.at(0).value();  // (B, 1) float ids
                            Tensor ids = Tensor::empty({x.size(0)}, DType::i64);
                            for (int64_t i = 0; i < x.size(0); ++i) ids.data<int64_t>()[i] = std::lround(x.data<float>()[i]);
                            return nn::Activations{table_->forward(ids)};
                          },
                          .layer = false},
                         nn::layer_piece("fc", *fc_)}});
  }

 private:
  std::shared_ptr<nn::Embedding> table_;
  std::shared_ptr<nn::Linear> fc_;
};

std::unique_ptr<data::Dataset> id_rows(int64_t n) {
  Rng rng(5);
  auto split = [&](int64_t rows) {
    Tensor x = Tensor::empty({rows, 1}), y = Tensor::empty({rows}, DType::i64);
    for (int64_t i = 0; i < rows; ++i) {
      const auto id = static_cast<int64_t>(rng.uniform() * 999.0f);
      x.data<float>()[i] = static_cast<float>(id), y.data<int64_t>()[i] = id % 3;
    }
    return std::pair{x, y};
  };
  auto [tx, ty] = split(n);
  auto [vx, vy] = split(n / 4);
  return std::make_unique<data::TensorDataset>(tx, ty, vx, vy, 3, "id rows");
}

TEST(ParameterServerJob, AUsersOwnSparseTableMovesByRowsAndEqualsOneWorker) {
  TrainConfig c = default_config("mlp");
  c.model = "id-classifier", c.steps = 10, c.threads = 1, c.lr = 0.1, c.data_order = "sequential";
  std::ostringstream quiet;
  RunOptions run{.out = &quiet, .write_files = false, .sample = false, .set_threads = false};
  TrainConfig alone = c;
  alone.batch_size = 32;
  Trainer one(alone, std::make_unique<IdClassifier>(), id_rows(512), run);
  one.run();

  c.batch_size = 16, c.ps_servers = 1;
  std::ostringstream log;
  RunOptions ps_run = run;
  ps_run.out = &log;
  std::map<std::string, std::vector<float>> ps_weights;
  comm::spawn_threads(3, [&](comm::ProcessGroup& pg) {
    auto world = std::shared_ptr<comm::ProcessGroup>(&pg, [](comm::ProcessGroup*) {});
    ParameterServerJob job(c, std::make_unique<IdClassifier>(), id_rows(512), ps_run, world);
    job.run();
    if (pg.rank() == 0)
      for (const auto& [name, p] : job.trainer()->model().named_parameters()) ps_weights[name] = p.value().to_vector();
  });
  EXPECT_NE(log.str().find("the sparse tables' rows the step reads"), std::string::npos) << log.str();
  ASSERT_FALSE(ps_weights.empty());
  double worst = 0;
  for (const auto& [name, p] : one.model().named_parameters()) {
    std::vector<float> a = p.value().to_vector(), b = ps_weights.at(name);
    ASSERT_EQ(a.size(), b.size()) << name;
    for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, double(std::fabs(a[i] - b[i])));
  }
  EXPECT_LE(worst, 1e-6);
}

}  // namespace
}  // namespace artel::train
