// OpSpan: an op's forward or backward as a span of the training timeline
// (`artel train --trace`), on the worker's rows "forward ops" and "backward
// ops", named as the op's Node ("linear", "layer_norm", ...). The trace's
// step summary then gives each op's median time a step beside the phases,
// so two runs traced side by side show which op grew.
//
// Only the outermost span of a nest is recorded: an op made of ops, or the
// forward a checkpoint runs again inside its backward, counts once, in the
// outer op. Free when tracing is off: one relaxed load.
//
//   Variable my_op(const Variable& x) {
//     OpSpan span("my_op");
//     ...
//     return make_result(y, {x}, "my_op", backward);
//   }
#pragma once

#include <optional>

#include "artel/core/trace.h"

namespace artel::autograd {

class OpSpan {
 public:
  explicit OpSpan(const char* name, bool backward = false);
  ~OpSpan();
  OpSpan(const OpSpan&) = delete;
  OpSpan& operator=(const OpSpan&) = delete;

 private:
  bool counted_ = false;  // this span holds a level of the thread's nest
  std::optional<trace::Scope> scope_;
};

}  // namespace artel::autograd
