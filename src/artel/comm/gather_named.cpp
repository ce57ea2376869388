#include "artel/comm/gather_named.h"

#include "artel/core/error.h"

namespace artel::comm {

namespace {

// The header: [count, then per tensor: dtype, ndim, dims..., name length,
// one name byte per word]. Words are i64: the only element type shared by
// every backend that fits a byte, a dimension and a count.
std::vector<int64_t> encode(const NamedTensors& list) {
  std::vector<int64_t> h = {static_cast<int64_t>(list.size())};
  for (const auto& [name, t] : list) {
    h.push_back(static_cast<int64_t>(t.dtype()));
    h.push_back(t.dim());
    for (int64_t d : t.shape()) h.push_back(d);
    h.push_back(static_cast<int64_t>(name.size()));
    for (unsigned char c : name) h.push_back(c);
  }
  return h;
}

NamedTensors decode(const std::vector<int64_t>& h, int from) {
  size_t i = 0;
  auto next = [&]() {
    ARTEL_CHECK(i < h.size(), "gather_named: the header from rank ", from, " is truncated");
    return h[i++];
  };
  NamedTensors out;
  for (int64_t n = next(); n > 0; --n) {
    auto dtype = static_cast<DType>(next());
    Shape shape(static_cast<size_t>(next()));
    for (int64_t& d : shape) d = next();
    std::string name(static_cast<size_t>(next()), '\0');
    for (char& c : name) c = static_cast<char>(next());
    out.emplace_back(std::move(name), Tensor::empty(shape, dtype));
  }
  return out;
}

}  // namespace

std::vector<NamedTensors> gather_named(ProcessGroup& group, const NamedTensors& mine, int root) {
  ARTEL_CHECK(root >= 0 && root < group.size(), "gather_named: root ", root, " outside the group of ", group.size());
  if (group.rank() != root) {
    std::vector<int64_t> h = encode(mine);
    Tensor size = Tensor::empty({1}, DType::i64), header = Tensor::empty({static_cast<int64_t>(h.size())}, DType::i64);
    size.data<int64_t>()[0] = static_cast<int64_t>(h.size());
    std::copy(h.begin(), h.end(), header.data<int64_t>());
    std::vector<WorkPtr> sends = {group.send(size, root, 0), group.send(header, root, 1)};
    for (const auto& [name, t] : mine)
      if (t.nbytes() > 0) sends.push_back(group.send(t, root, 2));
    for (auto& w : sends) w->wait();
    return {};
  }
  std::vector<NamedTensors> all(static_cast<size_t>(group.size()));
  for (int r = 0; r < group.size(); ++r) {
    if (r == root) {
      all[static_cast<size_t>(r)] = mine;
      continue;
    }
    Tensor size = Tensor::empty({1}, DType::i64);
    group.recv(size, r, 0)->wait();
    Tensor header = Tensor::empty({size.data<int64_t>()[0]}, DType::i64);
    group.recv(header, r, 1)->wait();
    const int64_t* p = header.data<int64_t>();
    NamedTensors list = decode(std::vector<int64_t>(p, p + header.numel()), r);
    for (auto& [name, t] : list)
      if (t.nbytes() > 0) group.recv(t, r, 2)->wait();
    all[static_cast<size_t>(r)] = std::move(list);
  }
  return all;
}

}  // namespace artel::comm
