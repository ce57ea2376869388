#include "artel/autograd/op_span.h"

namespace artel::autograd {
namespace {
thread_local int t_depth = 0;  // OpSpans open on this thread while tracing
}  // namespace

OpSpan::OpSpan(const char* name, bool backward) {
  if (!trace::enabled()) return;
  counted_ = true;
  if (t_depth++ == 0) scope_.emplace(name, "op", backward ? "backward ops" : "forward ops");
}

OpSpan::~OpSpan() {
  if (counted_) --t_depth;
}

}  // namespace artel::autograd
