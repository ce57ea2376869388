#include "artel/comm/step_thread.h"

namespace artel::comm {

StepThread::StepThread(std::function<void(size_t)> step) : step_(std::move(step)), thread_([this] { loop(); }) {}

StepThread::~StepThread() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

void StepThread::post(size_t k) {
  {
    std::lock_guard lock(mutex_);
    posted_ = k + 1;
  }
  changed_.notify_all();
}

void StepThread::wait(size_t k) {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [&] { return done_ > k || error_; });
  if (done_ <= k) std::rethrow_exception(error_);  // step k failed, or one before it (a later failure is not k's)
}

void StepThread::loop() {
  for (size_t k = 0;; ++k) {
    {
      std::unique_lock lock(mutex_);
      changed_.wait(lock, [&] { return posted_ > k || stop_; });
      if (posted_ <= k) return;  // stopped with nothing more posted
    }
    std::exception_ptr error;
    try {
      step_(k);
    } catch (...) {
      error = std::current_exception();
    }
    {
      std::lock_guard lock(mutex_);
      if (error)
        error_ = error;
      else
        done_ = k + 1;
    }
    changed_.notify_all();
    if (error) return;
  }
}

}  // namespace artel::comm
