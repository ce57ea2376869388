#include "artel/data/token_split.h"

namespace artel::data {

TokenSplit::TokenSplit(std::vector<int32_t> ids) {
  auto held = std::make_shared<const std::vector<int32_t>>(std::move(ids));
  i32_ = held->data();
  size_ = static_cast<int64_t>(held->size());
  owner_ = std::move(held);
}

TokenSplit TokenSplit::slice(int64_t begin, int64_t end) const {
  TokenSplit s = *this;
  if (i32_) s.i32_ = i32_ + begin;
  if (u16_) s.u16_ = u16_ + begin;
  s.size_ = end - begin;
  return s;
}

}  // namespace artel::data
