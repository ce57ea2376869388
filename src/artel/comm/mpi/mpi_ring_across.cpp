#include "artel/comm/mpi/mpi_ring_across.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "artel/comm/reduce.h"

namespace artel::comm::mpi {
namespace {

constexpr size_t kPiece = size_t{1} << 20;
constexpr int kTag = 7;  // the communicator carries nothing else

}  // namespace

MpiRingAcross::MpiRingAcross(MPI_Comm comm) : comm_(comm) {
  if (comm_ == MPI_COMM_NULL) return;
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
  // The ring's neighbours as MPI_COMM_WORLD numbers them, for a timeout's message.
  MPI_Group mine = MPI_GROUP_NULL, world = MPI_GROUP_NULL;
  MPI_Comm_group(comm_, &mine);
  MPI_Comm_group(MPI_COMM_WORLD, &world);
  const int ring[2] = {(rank_ + size_ - 1) % size_, (rank_ + 1) % size_};
  int named[2] = {-1, -1};
  MPI_Group_translate_ranks(mine, 2, ring, world, named);
  MPI_Group_free(&mine);
  MPI_Group_free(&world);
  stuck_ = "stuck inside MPI in the ring across hosts, between rank " + std::to_string(named[0]) +
           ", which it receives from, and rank " + std::to_string(named[1]) + ", which it sends to";
}

bool MpiRingAcross::supports(const Collective& c) const {
  if (c.kind == OpKind::all_gather) return true;
  return (c.kind == OpKind::all_reduce || c.kind == OpKind::reduce_scatter) && c.op != ReduceOp::avg;
}

void MpiRingAcross::exchange(const std::byte* send, size_t send_bytes, std::byte* recv, size_t recv_bytes,
                             const OpContext& ctx) {
  const int next = (rank_ + 1) % size_, prev = (rank_ + size_ - 1) % size_;
  requests_.clear();
  // Pieces from one sender with one tag match in the order they were posted.
  for (size_t off = 0; off < recv_bytes; off += kPiece)
    check(MPI_Irecv(recv + off, static_cast<int>(std::min(kPiece, recv_bytes - off)), MPI_BYTE, prev, kTag, comm_,
                    &requests_.emplace_back()),
          ctx.describe() + ": MPI_Irecv across hosts");
  for (size_t off = 0; off < send_bytes; off += kPiece)
    check(MPI_Isend(send + off, static_cast<int>(std::min(kPiece, send_bytes - off)), MPI_BYTE, next, kTag, comm_,
                    &requests_.emplace_back()),
          ctx.describe() + ": MPI_Isend across hosts");
  check(MPI_Waitall(static_cast<int>(requests_.size()), requests_.data(), MPI_STATUSES_IGNORE),
        ctx.describe() + ": MPI_Waitall across hosts");
  sent_.fetch_add(static_cast<int64_t>(send_bytes), std::memory_order_relaxed);
  received_.fetch_add(static_cast<int64_t>(recv_bytes), std::memory_order_relaxed);
}

void MpiRingAcross::reduce_scatter(std::byte* buf, size_t n, const Collective& c, int shift, const OpContext& ctx) {
  const size_t eb = c.elem_bytes();
  const int h = size_;
  auto begin = [&](int block) { return part_begin(n, h, ((block % h) + h) % h); };
  auto count = [&](int block) { return part_begin(n, h, ((block % h) + h) % h + 1) - begin(block); };
  incoming_.resize((n / static_cast<size_t>(h) + 1) * eb);
  // Step s receives block rank + shift − s − 2 and adds this rank's part, so it
  // then holds s + 2 ranks' parts; the last step (s = h − 2) completes block rank + shift.
  for (int s = 0; s < h - 1; ++s) {
    const int out = rank_ + shift - s - 1, in = rank_ + shift - s - 2;
    exchange(buf + begin(out) * eb, count(out) * eb, incoming_.data(), count(in) * eb, ctx);
    reduce_into(buf + begin(in) * eb, incoming_.data(), count(in), c.dtype, c.op);
  }
}

void MpiRingAcross::all_gather(std::byte* buf, size_t n, size_t eb, int shift, const OpContext& ctx) {
  const int h = size_;
  auto begin = [&](int block) { return part_begin(n, h, ((block % h) + h) % h); };
  auto count = [&](int block) { return part_begin(n, h, ((block % h) + h) % h + 1) - begin(block); };
  // Each block travels once around the ring, starting from the rank that holds it.
  for (int s = 0; s < h - 1; ++s) {
    const int out = rank_ + shift - s, in = rank_ + shift - s - 1;
    exchange(buf + begin(out) * eb, count(out) * eb, buf + begin(in) * eb, count(in) * eb, ctx);
  }
}

void MpiRingAcross::run(const Collective& c, const OpContext& ctx) {
  const size_t eb = c.elem_bytes(), h = static_cast<size_t>(size_), r = static_cast<size_t>(rank_);
  WatchGuard guard(ctx, stuck_);  // Note [Blocking native collectives]
  switch (c.kind) {
    case OpKind::all_reduce:
      if (c.in != c.out) std::memcpy(c.out, c.in, c.count * eb);
      if (size_ == 1 || c.count == 0) return;
      reduce_scatter(c.out, c.count, c, 1, ctx);  // completes block rank + 1 here,
      all_gather(c.out, c.count, eb, 1, ctx);     // which starts the all-gather
      return;
    case OpKind::reduce_scatter: {  // in: h blocks of count; out: this rank's, summed
      work_.assign(c.in, c.in + h * c.count * eb);
      if (size_ > 1 && c.count > 0) reduce_scatter(work_.data(), h * c.count, c, 0, ctx);
      std::memcpy(c.out, work_.data() + r * c.count * eb, c.count * eb);
      return;
    }
    case OpKind::all_gather:  // in: this rank's block of count; out: h blocks
      std::memmove(c.out + r * c.count * eb, c.in, c.count * eb);
      if (size_ > 1 && c.count > 0) all_gather(c.out, h * c.count, eb, 0, ctx);
      return;
    default:
      throw Error(std::string("the links between hosts carry no ") + op_kind_name(c.kind));
  }
}

}  // namespace artel::comm::mpi
