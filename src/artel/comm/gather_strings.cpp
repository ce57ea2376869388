#include "artel/comm/gather_strings.h"

#include <algorithm>
#include <cstring>

#include "artel/core/error.h"

namespace artel::comm {

namespace {

// Every rank's length, checked against max_bytes the same way on every rank.
std::vector<int64_t> all_lengths(ProcessGroup& group, const std::string& mine, const StringLimit& limit) {
  const int n = group.size();
  Tensor size = Tensor::empty({1}, DType::i64);
  size.data<int64_t>()[0] = static_cast<int64_t>(mine.size());
  Tensor sizes = Tensor::empty({n}, DType::i64);
  group.all_gather(size, sizes)->wait();
  std::vector<int64_t> lengths(sizes.data<int64_t>(), sizes.data<int64_t>() + n);
  for (int r = 0; r < n; ++r)
    if (lengths[static_cast<size_t>(r)] < 0 || lengths[static_cast<size_t>(r)] > limit.max_bytes)
      throw Error("rank " + std::to_string(r) + "'s " + limit.what + " is " +
                      std::to_string(lengths[static_cast<size_t>(r)]) + " bytes, outside [0, " +
                      std::to_string(limit.max_bytes) + "]",
                  limit.hint);
  return lengths;
}

// Words of 8 bytes a rank, at least one (no empty tensors on the wire); i64
// is an element type every backend carries.
int64_t words_for(const std::vector<int64_t>& lengths) {
  return std::max<int64_t>(1, (*std::max_element(lengths.begin(), lengths.end()) + 7) / 8);
}

Tensor padded(const std::string& mine, int64_t words) {
  Tensor in = Tensor::zeros({words}, DType::i64);
  std::memcpy(in.raw(), mine.data(), mine.size());
  return in;
}

std::vector<std::string> split(const Tensor& out, const std::vector<int64_t>& lengths, int64_t words) {
  std::vector<std::string> all;
  const auto* bytes = static_cast<const char*>(out.raw());
  for (size_t r = 0; r < lengths.size(); ++r)
    all.emplace_back(bytes + static_cast<int64_t>(r) * words * 8, static_cast<size_t>(lengths[r]));
  return all;
}

}  // namespace

std::vector<std::string> all_gather_strings(ProcessGroup& group, const std::string& mine, const StringLimit& limit) {
  const std::vector<int64_t> lengths = all_lengths(group, mine, limit);
  const int64_t words = words_for(lengths);
  Tensor out = Tensor::empty({group.size() * words}, DType::i64);
  group.all_gather(padded(mine, words), out)->wait();
  return split(out, lengths, words);
}

std::vector<std::string> gather_strings(ProcessGroup& group, const std::string& mine, int root, const StringLimit& limit) {
  ARTEL_CHECK(root >= 0 && root < group.size(), "gather_strings: root ", root, " outside the group of ", group.size());
  const std::vector<int64_t> lengths = all_lengths(group, mine, limit);
  const int64_t words = words_for(lengths);
  Tensor out = group.rank() == root ? Tensor::empty({group.size() * words}, DType::i64) : Tensor();
  group.gather(padded(mine, words), out, {.root = root})->wait();
  if (group.rank() != root) return {};
  return split(out, lengths, words);
}

}  // namespace artel::comm
