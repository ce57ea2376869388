// A user's own model through a parameter-server job (ranks as threads): BSP
// with 2 workers and 1 server trains it to the weights one worker alone
// reaches on the global batch.
#include "artel/train/parameter_server.h"

#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

#include "artel/comm/thread_group.h"
#include "user_model.h"

namespace artel::train {
namespace {

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

}  // namespace
}  // namespace artel::train
