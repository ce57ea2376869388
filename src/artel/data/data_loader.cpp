#include "artel/data/data_loader.h"

#include <chrono>

#include "artel/core/error.h"

namespace artel::data {

DataLoader::DataLoader(const Dataset& ds, SamplerConfig sampler, LoaderConfig cfg)
    : ds_(ds), sampler_(ds.num_train_items(), sampler), cfg_(cfg), step_(cfg.start_step) {
  ARTEL_CHECK(cfg_.start_step >= 0, "DataLoader start step must be >= 0, got ", cfg_.start_step);
  ARTEL_CHECK(cfg_.prefetch >= 0 && cfg_.prefetch <= 8, "DataLoader prefetch must be in [0, 8], got ",
              cfg_.prefetch);
  ARTEL_CHECK(cfg_.timeout_s > 0, "DataLoader timeout must be positive, got ", cfg_.timeout_s);
  if (cfg_.prefetch > 0) worker_ = std::thread([this] { produce(); });
}

DataLoader::~DataLoader() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (worker_.joinable()) worker_.join();
}

void DataLoader::produce() {
  for (int64_t k = cfg_.start_step;; ++k) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      // Waits for room or for the destructor: each next() makes room, and the
      // destructor always sets stop_, so this cannot wait forever.
      cv_.wait(lock, [&] { return stop_ || static_cast<int>(queue_.size()) < cfg_.prefetch; });
      if (stop_) return;
    }
    Item item{k, {}, nullptr};
    try {
      item.batch = ds_.train_batch(sampler_, k);
    } catch (...) {
      item.error = std::current_exception();
    }
    bool failed = item.error != nullptr;
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.push_back(std::move(item));
    }
    cv_.notify_all();
    if (failed) return;  // the error is the last thing this loader delivers
  }
}

Batch DataLoader::next() {
  if (cfg_.prefetch == 0) {
    Batch b = ds_.train_batch(sampler_, step_);
    ++step_;
    return b;
  }
  std::unique_lock<std::mutex> lock(mu_);
  auto timeout = std::chrono::duration<double>(cfg_.timeout_s);
  if (!cv_.wait_for(lock, timeout, [&] { return !queue_.empty(); }))
    throw TimeoutError("DataLoader: batch " + std::to_string(step_) + " was not ready after " +
                           std::to_string(cfg_.timeout_s) + " s",
                       "is the machine overloaded? raise LoaderConfig::timeout_s");
  if (queue_.front().error) {
    // The error stays queued, so every later next() rethrows it too.
    std::exception_ptr error = queue_.front().error;
    lock.unlock();
    std::rethrow_exception(error);
  }
  Item item = std::move(queue_.front());
  queue_.pop_front();
  lock.unlock();
  cv_.notify_all();
  ARTEL_CHECK(item.k == step_, "DataLoader internal order broken: got batch ", item.k, ", expected ", step_);
  ++step_;
  return std::move(item.batch);
}

}  // namespace artel::data
