#include "artel/comm/mpi/mpi_transport.h"

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstring>
#include <memory>
#include <thread>

#include "artel/comm/mpi/mpi_env.h"

namespace artel::comm::mpi {
namespace {

// Messages are at most 1 GiB on the wire (MPI counts are ints); a larger one
// goes as a header (its size) and pieces, which both sides derive from the size.
constexpr size_t kMaxPiece = size_t{1} << 30;
constexpr int kBarrierTag = 1;  // on split_: the members' rendezvous before a subgroup

// Waiting: spin first (a reply is often microseconds away), then yield the core
// (ranks may outnumber cores), then sleep a little.
void back_off(Clock::time_point since) {
  auto waited = Clock::now() - since;
  if (waited < std::chrono::microseconds(20)) return;
  if (waited < std::chrono::milliseconds(2)) std::this_thread::yield();
  else std::this_thread::sleep_for(std::chrono::microseconds(50));
}

// A duplicate of `comm` (MPI_Comm_idup), waited for until ctx's deadline: a
// rank that never comes is a TimeoutError (`missing` says what it failed to
// do), not a hang. A late duplicate is not cancelled: MPI cannot cancel a
// collective request (Open MPI's MPI_Cancel never returns on one); the caller
// ends the job.
MPI_Comm duplicate(MPI_Comm comm, const OpContext& ctx, const char* missing) {
  MPI_Comm dup = MPI_COMM_NULL;
  MPI_Request req = MPI_REQUEST_NULL;
  const std::string what = ctx.describe() + ": MPI_Comm_idup";
  check(MPI_Comm_idup(comm, &dup, &req), what);
  for (auto since = Clock::now();; back_off(since)) {
    int flag = 0;
    check(MPI_Test(&req, &flag, MPI_STATUS_IGNORE), what);
    if (flag) return dup;
    if (ctx.expired()) {
      mark_unclean();
      throw ctx.timeout_error({}, missing);
    }
  }
}

// After a failed wait: cancel what is still pending, so a receive cannot write
// into the caller's buffer later. Cancelling completes quickly for receives;
// what does not complete (a send already on its way) is left to MPI.
template <class Reqs>
void abandon(Reqs& reqs) {
  for (auto& q : reqs)
    if (!q.done && q.req != MPI_REQUEST_NULL) MPI_Cancel(&q.req);
  const auto give_up = Clock::now() + std::chrono::milliseconds(200);
  for (auto& q : reqs) {
    int flag = q.done || q.req == MPI_REQUEST_NULL;
    while (!flag && Clock::now() < give_up && MPI_Test(&q.req, &flag, MPI_STATUS_IGNORE) == MPI_SUCCESS)
      if (!flag) std::this_thread::yield();
    if (!flag) mark_unclean();  // Note [Finalize at exit]
    q.done = true;
  }
}

std::string describe_peer(const char* dir, int peer, Tag tag) {
  std::string t = static_cast<int64_t>(tag) < 0 ? "step " + std::to_string(tag & 0xfffff) : "tag " + std::to_string(tag);
  return std::string(dir) + " rank " + std::to_string(peer) + " (" + t + ")";
}

// Whether every rank of `comm` shares one host (collective over `comm`).
bool on_one_host(MPI_Comm comm) {
  int rank = 0, size = 1, local_size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  MPI_Comm host = MPI_COMM_NULL;
  check(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &host), "MPI_Comm_split_type");
  MPI_Comm_size(host, &local_size);
  MPI_Comm_free(&host);
  return local_size == size;  // the same answer on every rank
}

}  // namespace

struct MpiTransport::Pending {
  MPI_Request req = MPI_REQUEST_NULL;
  int peer = -1;
  bool is_recv = false;
  size_t expected = 0;  // bytes a receive must get
  Tag tag = 0;
  bool done = false;
};

struct MpiTransport::Buffered {
  std::unique_ptr<std::byte[]> data;  // written whole before it is sent: not zero-filled first
  uint64_t header = 0;
  std::vector<Pending> reqs;
};

MpiTransport::MpiTransport(MPI_Comm members, Duration timeout) : split_(members), timeout_(timeout) {
  MPI_Comm_set_errhandler(split_, MPI_ERRORS_RETURN);
  MPI_Comm_rank(split_, &rank_);
  MPI_Comm_size(split_, &size_);
  int* ub = nullptr;
  int found = 0;
  MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &found);
  if (found && ub) tag_ub_ = *ub;
  coll_tag_mask_ = 1;
  while (coll_tag_mask_ <= tag_ub_ / 2) coll_tag_mask_ = coll_tag_mask_ * 2 + 1;
  // The other two communicators, one at a time: with two duplicates in flight
  // on one communicator, Open MPI 4.1's context-id agreement now and then left
  // a rank waiting in its second while its peers had finished theirs and moved
  // on (about one run in 20 of the 2,1,2 cluster suite).
  OpContext ctx{"creating the group's MPI communicators"};
  ctx.deadline = Clock::now() + timeout_;
  const char* missing = "not every member created the group";
  p2p_ = duplicate(split_, ctx, missing);
  coll_ = duplicate(split_, ctx, missing);
  MPI_Comm_set_errhandler(p2p_, MPI_ERRORS_RETURN);
  MPI_Comm_set_errhandler(coll_, MPI_ERRORS_RETURN);
  native_ = MpiNative(coll_);
}

// A rank that fails here fails alone (its options, its host's shared memory)
// while its peers wait in the group's first collectives, some of which MPI
// cannot time out (MPI_Comm_split). Finalising at exit would wait for them;
// leaving without it has mpirun end the job at once (Note [Finalize at exit]),
// as a failure after the group exists does (end_job_on_failure).
std::unique_ptr<MpiTransport> MpiTransport::world(const GroupOptions& opts) {
  ensure_initialized();
  try {
    const int r = world_rank(), n = world_size();
    bool defaults = opts.rank == 0 && opts.world_size == 1;
    if (!defaults && (opts.rank != r || opts.world_size != n))
      throw Error("the mpi backend: GroupOptions say rank " + std::to_string(opts.rank) + " of " +
                      std::to_string(opts.world_size) + " but MPI says rank " + std::to_string(r) + " of " +
                      std::to_string(n),
                  "leave rank and world_size unset with backend mpi: mpirun decides them");
    OpContext ctx{"init_process_group (mpi)"};
    ctx.deadline = Clock::now() + opts.timeout;
    MPI_Comm members = duplicate(MPI_COMM_WORLD, ctx, "not every rank of MPI_COMM_WORLD called init_process_group");
    std::unique_ptr<MpiTransport> t(new MpiTransport(members, opts.timeout));
    t->hierarchy_ = MpiHierarchy::of_world(t->split_, opts);
    t->job_spans_hosts_ = !on_one_host(t->split_);
    return t;
  } catch (...) {
    mark_unclean();
    throw;
  }
}

void MpiTransport::end_job_on_failure() { mark_unclean(); }

MpiTransport::~MpiTransport() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;  // a group that outlived MPI (Note [Finalize at exit])
  OpContext ctx{"delivering the group's last sends"};
  ctx.deadline = Clock::now() + timeout_;
  for (auto since = Clock::now(); !buffered_.empty(); back_off(since)) {
    reap_buffered();
    if (ctx.expired()) {  // no one received them: leave them to MPI
      mark_unclean();
      buffered_sends_in_flight(-static_cast<int>(buffered_.size()));
      break;
    }
  }
  for (MPI_Comm* c : {&p2p_, &coll_, &split_})
    if (*c != MPI_COMM_NULL) MPI_Comm_free(c);
}

int MpiTransport::wire_tag(Tag tag, const OpContext& ctx) const {
  if (static_cast<int64_t>(tag) < 0) return static_cast<int>(tag & static_cast<Tag>(coll_tag_mask_));
  if (tag > static_cast<Tag>(tag_ub_))
    throw Error(ctx.describe() + ": tag " + std::to_string(tag) + " is larger than this MPI allows (MPI_TAG_UB = " +
                    std::to_string(tag_ub_) + ")",
                "use smaller tags with the mpi backend");
  return static_cast<int>(tag);
}

void MpiTransport::post_send(int dst, Tag tag, const void* data, size_t nbytes, const OpContext& ctx, std::vector<Pending>& out,
                             uint64_t* header) {
  const int t = wire_tag(tag, ctx);
  MPI_Comm comm = comm_for(tag);
  auto isend = [&](const void* p, size_t n) {
    Pending& q = out.emplace_back();
    q.peer = dst, q.tag = tag;
    check(MPI_Isend(p, static_cast<int>(n), MPI_BYTE, dst, t, comm, &q.req), ctx.describe() + ": MPI_Isend to rank " + std::to_string(dst));
  };
  const auto* p = static_cast<const std::byte*>(data);
  *header = nbytes;  // the caller keeps it alive until the send completes
  if (nbytes > kMaxPiece) isend(header, sizeof(uint64_t));
  for (size_t off = 0; off < nbytes || off == 0; off += kMaxPiece) {
    isend(p + off, std::min(kMaxPiece, nbytes - off));
    if (nbytes == 0) break;
  }
}

void MpiTransport::post_recv(int src, Tag tag, void* data, size_t nbytes, const OpContext& ctx, std::vector<Pending>& out,
                             uint64_t* header) {
  const int t = wire_tag(tag, ctx);
  MPI_Comm comm = comm_for(tag);
  auto irecv = [&](void* p, size_t n) {
    Pending& q = out.emplace_back();
    q.peer = src, q.tag = tag, q.is_recv = true, q.expected = n;
    check(MPI_Irecv(p, static_cast<int>(n), MPI_BYTE, src, t, comm, &q.req),
          ctx.describe() + ": MPI_Irecv from rank " + std::to_string(src));
  };
  auto* p = static_cast<std::byte*>(data);
  if (nbytes > kMaxPiece) irecv(header, sizeof(uint64_t));
  for (size_t off = 0; off < nbytes || off == 0; off += kMaxPiece) {
    irecv(p + off, std::min(kMaxPiece, nbytes - off));
    if (nbytes == 0) break;
  }
}

void MpiTransport::wait_all(std::vector<Pending>& reqs, const OpContext& ctx) {
  for (auto since = Clock::now();; back_off(since)) {
    bool all = true;
    for (Pending& q : reqs) {
      if (q.done) continue;
      int flag = 0;
      MPI_Status st;
      int rc = MPI_Test(&q.req, &flag, &st);
      int cls = MPI_SUCCESS;
      if (rc != MPI_SUCCESS) MPI_Error_class(rc, &cls);
      if (rc != MPI_SUCCESS) q.done = true, abandon(reqs);
      if (cls == MPI_ERR_TRUNCATE)
        throw Error(ctx.describe() + ": " + describe_peer("message from", q.peer, q.tag) + " is larger than the " +
                        std::to_string(q.expected) + " bytes expected",
                    "every rank must pass tensors of the same size and dtype");
      check(rc, ctx.describe() + ": MPI_Test on a message with rank " + std::to_string(q.peer));
      if (!flag) {
        all = false;
        continue;
      }
      q.done = true;
      int got = 0;
      if (q.is_recv && (MPI_Get_count(&st, MPI_BYTE, &got), static_cast<size_t>(got) != q.expected))
        abandon(reqs), throw Error(ctx.describe() + ": " + describe_peer("message from", q.peer, q.tag) + " has " + std::to_string(got) +
                        " bytes, " + std::to_string(q.expected) + " expected",
                    "every rank must pass tensors of the same size and dtype");
    }
    if (all) return;
    const bool aborted = aborted_.load(std::memory_order_relaxed) || ctx.abort_requested();
    if (!aborted && !ctx.expired()) continue;
    std::vector<int> peers;
    std::string detail;
    for (Pending& q : reqs)
      if (!q.done) {
        peers.push_back(q.peer);
        detail += (detail.empty() ? "" : ", ") + describe_peer(q.is_recv ? "receiving from" : "sending to", q.peer, q.tag);
      }
    abandon(reqs);
    std::sort(peers.begin(), peers.end());
    peers.erase(std::unique(peers.begin(), peers.end()), peers.end());
    if (aborted) throw ctx.abort_error();
    throw ctx.timeout_error(peers, detail);
  }
}

void MpiTransport::reap_buffered() {
  while (!buffered_.empty()) {
    int flag = 0;
    for (Pending& q : buffered_.front().reqs)
      if (!q.done) {
        check(MPI_Test(&q.req, &flag, MPI_STATUS_IGNORE), "MPI_Test on a buffered send to rank " + std::to_string(q.peer));
        if (!flag) return;
        q.done = true;
      }
    buffered_.pop_front();
    buffered_sends_in_flight(-1);
  }
}

void MpiTransport::send(int dst, Tag tag, const void* data, size_t nbytes, const OpContext& ctx) {
  reap_buffered();
  if (static_cast<int64_t>(tag) >= 0) {  // Note [Buffered user sends]
    Buffered& b = buffered_.emplace_back();
    b.data = std::make_unique_for_overwrite<std::byte[]>(nbytes);
    if (nbytes) std::memcpy(b.data.get(), data, nbytes);
    try {
      post_send(dst, tag, b.data.get(), nbytes, ctx, b.reqs, &b.header);
    } catch (...) {
      buffered_.pop_back();
      throw;
    }
    buffered_sends_in_flight(1);  // Note [Progress of buffered sends]
    return;
  }
  std::vector<Pending> reqs;
  uint64_t header = 0;
  post_send(dst, tag, data, nbytes, ctx, reqs, &header);
  wait_all(reqs, ctx);
}

void MpiTransport::recv(int src, Tag tag, void* data, size_t nbytes, const OpContext& ctx) {
  reap_buffered();
  std::vector<Pending> reqs;
  uint64_t header = 0;
  post_recv(src, tag, data, nbytes, ctx, reqs, &header);
  wait_all(reqs, ctx);
  if (nbytes > kMaxPiece && header != nbytes)
    throw Error(ctx.describe() + ": " + describe_peer("message from", src, tag) + " has " + std::to_string(header) + " bytes, " +
                    std::to_string(nbytes) + " expected",
                "every rank must pass tensors of the same size and dtype");
}

void MpiTransport::send_recv(int dst, Tag send_tag, const void* send_data, size_t send_bytes, int src, Tag recv_tag,
                             void* recv_data, size_t recv_bytes, const OpContext& ctx) {
  reap_buffered();
  std::vector<Pending> reqs;
  uint64_t send_header = 0, recv_header = 0;
  post_recv(src, recv_tag, recv_data, recv_bytes, ctx, reqs, &recv_header);
  post_send(dst, send_tag, send_data, send_bytes, ctx, reqs, &send_header);
  wait_all(reqs, ctx);
  if (recv_bytes > kMaxPiece && recv_header != recv_bytes)
    throw Error(ctx.describe() + ": " + describe_peer("message from", src, recv_tag) + " has " + std::to_string(recv_header) +
                    " bytes, " + std::to_string(recv_bytes) + " expected",
                "every rank must pass tensors of the same size and dtype");
}

// A dissemination barrier over `ranks` (this group's numbering) on split_, so
// that MPI_Comm_create_group, which cannot time out, starts only once every
// member is there.
void MpiTransport::barrier_members(const std::vector<int>& ranks, const OpContext& ctx) {
  const int k = static_cast<int>(ranks.size());
  const int i = static_cast<int>(std::lower_bound(ranks.begin(), ranks.end(), rank_) - ranks.begin());
  for (int d = 1; d < k; d *= 2) {
    std::vector<Pending> reqs(2);
    reqs[0].peer = ranks[(i + k - d) % k], reqs[0].is_recv = true;
    reqs[1].peer = ranks[(i + d) % k];
    check(MPI_Irecv(nullptr, 0, MPI_BYTE, reqs[0].peer, kBarrierTag, split_, &reqs[0].req), "MPI_Irecv (new_group)");
    check(MPI_Isend(nullptr, 0, MPI_BYTE, reqs[1].peer, kBarrierTag, split_, &reqs[1].req), "MPI_Isend (new_group)");
    wait_all(reqs, ctx);
  }
}

std::unique_ptr<Transport> MpiTransport::split(const std::vector<int>& ranks, const std::string& id,
                                               const GroupOptions& opts) {
  OpContext ctx{"new_group " + id};
  ctx.deadline = Clock::now() + timeout_;
  barrier_members(ranks, ctx);
  MPI_Group all = MPI_GROUP_NULL, some = MPI_GROUP_NULL;
  MPI_Comm members = MPI_COMM_NULL;
  check(MPI_Comm_group(split_, &all), "MPI_Comm_group");
  int rc = MPI_Group_incl(all, static_cast<int>(ranks.size()), ranks.data(), &some);
  // Members agree on the id, so on its hash: the tag here, the segment's name below.
  uint64_t hash = 1469598103934665603ull;
  for (char ch : id) hash = (hash ^ static_cast<unsigned char>(ch)) * 1099511628211ull;
  if (rc == MPI_SUCCESS) rc = MPI_Comm_create_group(split_, some, static_cast<int>(hash % 32768), &members);
  MPI_Group_free(&all);
  if (some != MPI_GROUP_NULL) MPI_Group_free(&some);
  check(rc, "new_group: MPI_Comm_create_group");
  // Note [Subgroups on one host] (mpi_transport.h): tp all-reduces of GPT-2
  // over OpenMPI's shared memory each malloc'd a temporary of the message's
  // size, and ran at MPI's bandwidth, not artel's. A job on one host keeps
  // MPI throughout, as its world group does.
  if (job_spans_hosts_ && ranks.size() > 1 && on_one_host(members)) {
    char name[24];  // the id, hashed: ids hold brackets and commas
    std::snprintf(name, sizeof name, "g%llx", static_cast<unsigned long long>(hash));
    std::unique_ptr<Transport> local = shared_memory_transport(members, name, opts);
    MPI_Comm_free(&members);
    return local;
  }
  std::unique_ptr<MpiTransport> t(new MpiTransport(members, timeout_));
  t->job_spans_hosts_ = job_spans_hosts_;
  return t;
}

}  // namespace artel::comm::mpi
