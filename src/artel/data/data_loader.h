// DataLoader: iterates a dataset's train batches k, k+1, … for one rank, with
// a background thread that builds batch k+1 while batch k trains.
//
// Batches are pure functions of k (dataset.h), so the loader holds no state
// beyond the next step: resuming from a checkpoint at step k is
// DataLoader(ds, cfg, {.start_step = k}). An exception thrown while building a
// batch is rethrown by the next() that would have returned it; the destructor
// stops and joins the thread.
//
//   DataLoader loader(*ds, {.seed = 1, .rank_batch = 32, .world_size = 2, .rank = r});
//   for (int64_t k = 0; k < steps; ++k) { Batch b = loader.next(); ... }
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>

#include "artel/data/dataset.h"

namespace artel::data {

struct LoaderConfig {
  int64_t start_step = 0;  // k of the first batch next() returns
  int prefetch = 2;        // batches built ahead, in [0, 8]; 0 builds in next(), no thread
  double timeout_s = 300;  // next() gives up (TimeoutError) after waiting this long for one batch
};

class DataLoader {
 public:
  // `ds` must outlive the loader.
  DataLoader(const Dataset& ds, SamplerConfig sampler, LoaderConfig cfg = {});
  ~DataLoader();
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;

  // The batch of global step step(), then step() advances by one.
  Batch next();
  int64_t step() const { return step_; }
  const DistributedSampler& sampler() const { return sampler_; }
  int64_t steps_per_epoch() const { return sampler_.steps_per_epoch(); }

 private:
  struct Item {
    int64_t k;
    Batch batch;
    std::exception_ptr error;
  };
  void produce();

  const Dataset& ds_;
  DistributedSampler sampler_;
  LoaderConfig cfg_;
  int64_t step_;  // consumer side

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Item> queue_;
  bool stop_ = false;
  std::thread worker_;
};

}  // namespace artel::data
