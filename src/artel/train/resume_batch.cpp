#include "artel/train/resume_batch.h"

#include <vector>

#include "artel/core/error.h"
#include "artel/train/checkpoint_reader.h"

namespace artel::train {

namespace {

constexpr int64_t kMaxAccum = 4096;  // TrainConfig's range
constexpr size_t kChoices = 4;       // listed at most

std::string workers(int64_t n) { return std::to_string(n) + (n == 1 ? " worker" : " workers"); }

// "--nproc 1, 2, 4 or 8": the data-parallel degrees that divide `global`.
std::string degrees_dividing(int64_t global) {
  std::vector<int64_t> d;
  for (int64_t n = 1; n <= global && d.size() < 6; ++n)
    if (global % n == 0) d.push_back(n);
  std::string s;
  for (size_t i = 0; i < d.size(); ++i) s += (i == 0 ? "" : i + 1 == d.size() ? " or " : ", ") + std::to_string(d[i]);
  return s;
}

// Batch sizes (and accumulations) that give `global` over `replicas`, largest batch first.
std::string data_parallel_choices(int64_t global, int64_t replicas) {
  std::string s;
  size_t listed = 0;
  const int64_t per_replica = global / replicas;
  for (int64_t b = per_replica; b >= 1 && listed < kChoices; --b) {
    if (per_replica % b != 0 || per_replica / b > kMaxAccum) continue;
    s += (listed++ ? ", " : "") + std::string("--batch-size ") + std::to_string(b) +
         (per_replica / b > 1 ? " --accum " + std::to_string(per_replica / b) : "");
  }
  return s;
}

}  // namespace

int64_t accum_to_keep_global_batch(int64_t global, const BatchLayout& run, const std::string& path) {
  ARTEL_CHECK(global >= 1 && run.replicas >= 1 && run.batch_size >= 1, "resume: bad global batch ", global);
  const int64_t per_step = run.replicas * run.batch_size;  // rows of one micro-step over the replicas
  if (run.accum_given || per_step * run.accum == global) return run.accum;
  if (!run.mesh && global % per_step == 0 && global / per_step <= kMaxAccum) return global / per_step;
  const std::string head = "checkpoint " + path + " was trained with a global batch of " + std::to_string(global) +
                           "; --batch-size " + std::to_string(run.batch_size) + " with " +
                           (run.mesh ? "dp " + std::to_string(run.replicas) : workers(run.replicas)) + " gives " +
                           std::to_string(per_step) + (run.mesh ? "" : " rows per micro-step");
  const std::string own = "or pass --accum to train on with a global batch of your own";
  std::string hint;
  if (global % run.replicas != 0) {
    hint = "no batch size does with " + (run.mesh ? "dp " + std::to_string(run.replicas) : workers(run.replicas)) +
           "; data-parallel degrees " + degrees_dividing(global) + " can; " + own;
  } else if (run.mesh) {
    const int64_t b = global / run.replicas;
    hint = b % run.micro_batches == 0
               ? "valid: --batch-size " + std::to_string(b) + "; " + own + " (--accum 1 with --tp / --pp)"
               : "--batch-size " + std::to_string(b) + " would, with --micro-batches dividing it; " + own +
                     " (--accum 1 with --tp / --pp)";
  } else {
    hint = "valid with " + workers(run.replicas) + ": " + data_parallel_choices(global, run.replicas) + "; " + own;
  }
  throw Error(head + (run.mesh ? "" : ", and no --accum makes them " + std::to_string(global)), hint);
}

void check_steps_after(int64_t step, int64_t total_steps, const std::string& path) {
  ARTEL_CHECK(step <= total_steps, "checkpoint ", path, " was taken after step ", step, " but this run has only ",
              total_steps, " steps", " (hint: raise --steps, or train into another --out)");
}

void check_resumable(const TrainConfig& cfg, int64_t replicas) {
  std::unique_ptr<ShardedCheckpoint> ck;
  try {
    ck = open_newest_checkpoint(cfg.out + "/checkpoints", [](const std::string&) {});
  } catch (const Error&) {
    return;
  }
  if (!ck) return;
  accum_to_keep_global_batch(ck->manifest().global_batch,
                             {.replicas = replicas,
                              .batch_size = cfg.batch_size,
                              .accum = cfg.accum,
                              .accum_given = cfg.was_given("accum"),
                              .mesh = cfg.model_parallel(),
                              .micro_batches = cfg.micro_batches},
                             ck->dir());
  if (cfg.epochs == 0) check_steps_after(ck->manifest().step, cfg.steps, ck->dir());
}

}  // namespace artel::train
