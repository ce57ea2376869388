#include "artel/comm/process_group.h"

#include <algorithm>
#include <atomic>
#include <map>
#include <ostream>

#include "artel/comm/algorithms.h"
#include "artel/comm/backends.h"
#include "artel/comm/counted_transport.h"
#include "artel/comm/progress.h"
#include "artel/comm/signature.h"

namespace artel::comm {

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return "sum";
    case ReduceOp::avg: return "avg";
    case ReduceOp::max: return "max";
    case ReduceOp::min: return "min";
    case ReduceOp::prod: return "prod";
  }
  return "?";
}

ReduceOp parse_reduce_op(const std::string& name) {
  for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg, ReduceOp::max, ReduceOp::min, ReduceOp::prod})
    if (name == reduce_op_name(op)) return op;
  throw Error("unknown reduce op '" + name + "'", "choose one of: sum, avg, max, min, prod");
}

struct ProcessGroup::Impl {
  GroupOptions opts;
  std::string name;
  std::shared_ptr<CountedTransport> transport;
  std::shared_ptr<Progress> progress;
  uint64_t seq = 0;                      // collectives issued
  const char* last_algorithm = "none";   // what the last one issued runs (auto's choice made visible)
  std::shared_ptr<std::atomic<int64_t>> held = std::make_shared<std::atomic<int64_t>>(0);  // alloc()'s live bytes
  std::map<std::string, int> subgroups;  // new_group calls per rank list

  // "all_reduce on group 'world' (rank 1)": where an argument error happened.
  // Checks take a Where, formatted only when they fail, so a small op's
  // issue builds no strings.
  struct Where {
    const Impl* g;
    const char* op;
    friend std::ostream& operator<<(std::ostream& os, const Where& w) { return os << w.g->where(w.op); }
  };
  Where at(const char* op) const { return {this, op}; }
  std::string where(const char* op) const {
    return std::string(op) + " on group '" + name + "' (rank " + std::to_string(transport->rank()) + ")";
  }
  void check_rank(const char* op, const char* what, int r) const {
    ARTEL_CHECK(r >= 0 && r < transport->size(), where(op), ": ", what, " ", r, " is outside the group (size ",
                transport->size(), ")");
  }
  WorkPtr collective(Collective c, std::vector<Tensor> keep);
};

namespace {

void check_defined(const ProcessGroup::Impl::Where& where, const char* name, const Tensor& t) {
  ARTEL_CHECK(t.defined(), where, ": tensor `", name, "` is undefined");
}

// `b` must have `factor` times the elements of `a` (or 1/factor, if `inverse`) and the same dtype.
void check_pair(const ProcessGroup::Impl::Where& where, const Tensor& small, const char* sname, const Tensor& big, const char* bname,
                int64_t factor) {
  check_defined(where, sname, small);
  check_defined(where, bname, big);
  ARTEL_CHECK(small.dtype() == big.dtype(), where, ": `", sname, "` is ", dtype_name(small.dtype()), " but `", bname,
              "` is ", dtype_name(big.dtype()), " (they must match)");
  ARTEL_CHECK(big.numel() == small.numel() * factor, where, ": `", bname, "` has ", big.numel(), " elements; it needs ",
              factor == 1 ? "the same as" : std::to_string(factor) + " times the", " ", small.numel(), " of `", sname, "`");
}

}  // namespace

WorkPtr ProcessGroup::Impl::collective(Collective c, std::vector<Tensor> keep) {
  last_algorithm = choose_algorithm(c, *transport).name;  // an unknown algorithm fails at issue
  uint64_t s = ++seq;
  auto t = transport;
  bool debug = opts.debug_checks;
  return progress->submit(op_kind_name(c.kind), s, [t, c, s, debug, keep = std::move(keep)](const OpContext& ctx) {
    t->enter(s);
    if (debug) check_agreement(*t, signature_of(c, s), ctx);
    run_collective(*t, c, ctx);
  });
}

ProcessGroup::ProcessGroup(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ProcessGroup::~ProcessGroup() { impl_->progress->shutdown(); }

int ProcessGroup::rank() const { return impl_->transport->rank(); }
int ProcessGroup::size() const { return impl_->transport->size(); }
void ProcessGroup::end_job_on_failure() { impl_->transport->end_job_on_failure(); }
const std::string& ProcessGroup::name() const { return impl_->name; }
const GroupOptions& ProcessGroup::options() const { return impl_->opts; }

WorkPtr ProcessGroup::send(const Tensor& t, int dst, int tag) {
  impl_->check_rank("send", "destination rank", dst);
  ARTEL_CHECK(tag >= 0, impl_->at("send"), ": tag must be >= 0, got ", tag);
  check_defined(impl_->at("send"), "t", t);
  auto tr = impl_->transport;
  std::string op = "send to rank " + std::to_string(dst) + " tag " + std::to_string(tag);
  auto send_now = [&](const OpContext& ctx) { return tr->try_send(dst, user_tag(tag), t.raw(), t.nbytes(), ctx); };
  if (WorkPtr done = impl_->progress->run_now_if(op, send_now)) return done;
  // Urgent: the sender goes on computing while its peer waits for this.
  return impl_->progress->submit(
      op, 0, [tr, t, dst, tag](const OpContext& ctx) { tr->send(dst, user_tag(tag), t.raw(), t.nbytes(), ctx); },
      /*urgent=*/true);
}

WorkPtr ProcessGroup::recv(Tensor t, int src, int tag) {
  impl_->check_rank("recv", "source rank", src);
  ARTEL_CHECK(tag >= 0, impl_->at("recv"), ": tag must be >= 0, got ", tag);
  check_defined(impl_->at("recv"), "t", t);
  auto tr = impl_->transport;
  std::string op = "recv from rank " + std::to_string(src) + " tag " + std::to_string(tag);
  return impl_->progress->submit(op, 0, [tr, t, src, tag](const OpContext& ctx) { tr->recv(src, user_tag(tag), t.raw(), t.nbytes(), ctx); });
}

WorkPtr ProcessGroup::all_reduce(Tensor t, const AllReduceOptions& opts) { return all_reduce(t, t, opts); }

WorkPtr ProcessGroup::all_reduce(const Tensor& in, Tensor out, const AllReduceOptions& opts) {
  check_pair(impl_->at("all_reduce"), in, "in", out, "out", 1);
  Collective c{OpKind::all_reduce, static_cast<const std::byte*>(in.raw()), static_cast<std::byte*>(out.raw()),
               static_cast<size_t>(in.numel()), in.dtype(), opts.op, 0, opts.algorithm};
  return impl_->collective(c, {in, out});
}

WorkPtr ProcessGroup::broadcast(Tensor t, const BroadcastOptions& opts) {
  impl_->check_rank("broadcast", "root", opts.root);
  check_defined(impl_->at("broadcast"), "t", t);
  Collective c{OpKind::broadcast, static_cast<const std::byte*>(t.raw()), static_cast<std::byte*>(t.raw()),
               static_cast<size_t>(t.numel()), t.dtype(), ReduceOp::sum, opts.root, opts.algorithm};
  return impl_->collective(c, {t});
}

WorkPtr ProcessGroup::reduce(Tensor t, const ReduceOptions& opts) {
  impl_->check_rank("reduce", "root", opts.root);
  check_defined(impl_->at("reduce"), "t", t);
  Collective c{OpKind::reduce, static_cast<const std::byte*>(t.raw()), static_cast<std::byte*>(t.raw()),
               static_cast<size_t>(t.numel()), t.dtype(), opts.op, opts.root, opts.algorithm};
  return impl_->collective(c, {t});
}

WorkPtr ProcessGroup::all_gather(const Tensor& in, Tensor out, const AllGatherOptions& opts) {
  check_pair(impl_->at("all_gather"), in, "in", out, "out", size());
  Collective c{OpKind::all_gather, static_cast<const std::byte*>(in.raw()), static_cast<std::byte*>(out.raw()),
               static_cast<size_t>(in.numel()), in.dtype(), ReduceOp::sum, 0, opts.algorithm};
  return impl_->collective(c, {in, out});
}

WorkPtr ProcessGroup::reduce_scatter(const Tensor& in, Tensor out, const ReduceScatterOptions& opts) {
  check_pair(impl_->at("reduce_scatter"), out, "out", in, "in", size());
  Collective c{OpKind::reduce_scatter, static_cast<const std::byte*>(in.raw()), static_cast<std::byte*>(out.raw()),
               static_cast<size_t>(out.numel()), in.dtype(), opts.op, 0, opts.algorithm};
  return impl_->collective(c, {in, out});
}

WorkPtr ProcessGroup::all_to_all(const Tensor& in, Tensor out, const AllToAllOptions& opts) {
  const auto where = impl_->at("all_to_all");
  check_pair(where, in, "in", out, "out", 1);
  ARTEL_CHECK(in.numel() % size() == 0, where, ": `in` has ", in.numel(), " elements, not a multiple of the group size ", size());
  Collective c{OpKind::all_to_all, static_cast<const std::byte*>(in.raw()), static_cast<std::byte*>(out.raw()),
               static_cast<size_t>(in.numel() / size()), in.dtype(), ReduceOp::sum, 0, opts.algorithm};
  return impl_->collective(c, {in, out});
}

WorkPtr ProcessGroup::gather(const Tensor& in, Tensor out, const RootOptions& opts) {
  impl_->check_rank("gather", "root", opts.root);
  const auto where = impl_->at("gather");
  if (rank() == opts.root) check_pair(where, in, "in", out, "out", size());
  else check_defined(where, "in", in);
  Collective c{OpKind::gather, static_cast<const std::byte*>(in.raw()), static_cast<std::byte*>(out.raw()),
               static_cast<size_t>(in.numel()), in.dtype(), ReduceOp::sum, opts.root, "auto"};
  return impl_->collective(c, {in, out});
}

WorkPtr ProcessGroup::scatter(const Tensor& in, Tensor out, const RootOptions& opts) {
  impl_->check_rank("scatter", "root", opts.root);
  const auto where = impl_->at("scatter");
  if (rank() == opts.root) check_pair(where, out, "out", in, "in", size());
  else check_defined(where, "out", out);
  Collective c{OpKind::scatter, static_cast<const std::byte*>(in.raw()), static_cast<std::byte*>(out.raw()),
               static_cast<size_t>(out.numel()), out.dtype(), ReduceOp::sum, opts.root, "auto"};
  return impl_->collective(c, {in, out});
}

WorkPtr ProcessGroup::barrier() {
  Collective c;
  c.kind = OpKind::barrier;
  return impl_->collective(c, {});
}

// The backend's tensor, wrapped so that its bytes count as held until it is
// released (the wrapper keeps the backend's storage, and so its block, alive).
Tensor ProcessGroup::alloc(const Shape& shape, DType dtype) {
  Tensor t = impl_->transport->alloc(shape, dtype);
  const auto bytes = static_cast<int64_t>(t.storage()->nbytes());
  std::shared_ptr<std::atomic<int64_t>> held = impl_->held;
  *held += bytes;
  auto storage = Storage::wrap(t.storage()->data(), t.storage()->nbytes(),
                               [backend = t.storage(), held, bytes] { *held -= bytes; });
  return Tensor::wrap(std::move(storage), shape, dtype);
}

int64_t ProcessGroup::allocated_bytes() const { return *impl_->held; }
const char* ProcessGroup::last_algorithm() const { return impl_->last_algorithm; }
std::string ProcessGroup::hosts() const {
  const Hierarchy* h = impl_->transport->hierarchy();
  return h ? h->describe() : "";
}
bool ProcessGroup::hierarchical_blocks() const {
  const Hierarchy* h = impl_->transport->hierarchy();
  return h && h->equal_hosts();
}
int64_t ProcessGroup::bytes_sent() const {
  const Hierarchy* h = impl_->transport->hierarchy();
  return impl_->transport->bytes_sent() + (h ? h->bytes_sent_across() : 0);
}
int64_t ProcessGroup::bytes_received() const {
  const Hierarchy* h = impl_->transport->hierarchy();
  return impl_->transport->bytes_received() + (h ? h->bytes_received_across() : 0);
}

namespace {

std::shared_ptr<ProcessGroup> make_group(const GroupOptions& opts, std::string name, std::unique_ptr<Transport> t,
                                         std::vector<int> world_ranks = {}) {
  auto impl = std::make_unique<ProcessGroup::Impl>();
  impl->opts = opts;
  impl->name = std::move(name);
  impl->transport = std::make_shared<CountedTransport>(std::move(t));
  impl->progress = std::make_shared<Progress>(impl->transport, impl->name, opts.timeout, std::move(world_ranks));
  impl->progress->start();
  return std::make_shared<ProcessGroup>(std::move(impl));
}

std::map<std::string, TransportFactory>& registry() {
  static std::map<std::string, TransportFactory> r = {{"shm", make_shm_transport}, {"thread", make_thread_transport}};
  return r;
}

}  // namespace

std::shared_ptr<ProcessGroup> ProcessGroup::new_group(const std::vector<int>& ranks, const NewGroupOptions& sub) {
  const auto where = impl_->at("new_group");
  ARTEL_CHECK(!ranks.empty(), where, ": the rank list is empty");
  std::vector<int> sorted = ranks;
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 0; i < sorted.size(); ++i) {
    impl_->check_rank("new_group", "rank", sorted[i]);
    ARTEL_CHECK(i == 0 || sorted[i] != sorted[i - 1], where, ": rank ", sorted[i], " is listed twice");
  }
  if (!std::binary_search(sorted.begin(), sorted.end(), rank())) return nullptr;
  std::string list;
  for (int r : sorted) {
    if (!list.empty()) list += ',';
    list += std::to_string(r);
  }
  // The id must agree among the members only: the list and how often it was used.
  uint64_t hash = 1469598103934665603ull;
  for (char ch : list) hash = (hash ^ static_cast<unsigned char>(ch)) * 1099511628211ull;
  int nth = impl_->subgroups[list]++;
  char id[40];
  std::snprintf(id, sizeof id, "g%016llx-%d", static_cast<unsigned long long>(hash), nth);
  GroupOptions opts = impl_->opts;
  opts.rank = static_cast<int>(std::lower_bound(sorted.begin(), sorted.end(), rank()) - sorted.begin());
  opts.world_size = static_cast<int>(sorted.size());
  if (sub.message_bytes) opts.message_bytes = sub.message_bytes;
  if (sub.timeout > Duration::zero()) opts.timeout = sub.timeout;
  if (sub.registered_bytes) opts.registered_bytes = *sub.registered_bytes;
  // Errors in the subgroup name its ranks in the first group's numbering too.
  const std::vector<int>* parent = impl_->progress->world_ranks();
  std::vector<int> world;
  for (int r : sorted) world.push_back(parent ? (*parent)[static_cast<size_t>(r)] : r);
  return make_group(opts, impl_->name + "/[" + list + "]", impl_->transport->split(sorted, id, opts), std::move(world));
}

bool register_backend(const std::string& name, TransportFactory factory) {
  registry()[name] = std::move(factory);
  return true;
}

std::vector<std::string> backend_names() {
  std::vector<std::string> names;
  for (const auto& [n, f] : registry()) names.push_back(n);
  return names;
}

std::shared_ptr<ProcessGroup> init_process_group(const GroupOptions& opts) {
  ARTEL_CHECK(opts.world_size >= 1, "init_process_group: world_size must be >= 1, got ", opts.world_size);
  ARTEL_CHECK(opts.rank >= 0 && opts.rank < opts.world_size, "init_process_group: rank ", opts.rank,
              " is outside the world of ", opts.world_size, " ranks (need 0 <= rank < world_size)");
  ARTEL_CHECK(opts.timeout.count() > 0, "init_process_group: timeout must be > 0 ms, got ", opts.timeout.count());
  auto it = registry().find(opts.backend);
  if (it == registry().end()) {
    std::string names;
    for (const auto& n : backend_names()) names += (names.empty() ? "" : ", ") + n;
    throw Error("unknown communication backend '" + opts.backend + "'",
                "choose one of: " + names + (opts.backend == "mpi" ? " (this build has no MPI backend)" : ""));
  }
  return make_group(opts, "world", it->second(opts));
}

}  // namespace artel::comm
