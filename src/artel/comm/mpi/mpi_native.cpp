#include "artel/comm/mpi/mpi_native.h"

#include <climits>
#include <cstring>
#include <vector>

#include "artel/comm/mpi/mpi_env.h"
#include "artel/comm/reduce.h"

namespace artel::comm::mpi {
namespace {

bool reduces(OpKind k) { return k == OpKind::all_reduce || k == OpKind::reduce || k == OpKind::reduce_scatter; }

MPI_Datatype mpi_type(DType d) {
  switch (d) {
    case DType::f32: return MPI_FLOAT;
    case DType::f64: return MPI_DOUBLE;
    case DType::i32: return MPI_INT32_T;
    case DType::i64: return MPI_INT64_T;
    case DType::bf16: return MPI_UINT16_T;  // moved as bits, never reduced
  }
  return MPI_DATATYPE_NULL;
}

MPI_Op mpi_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::avg: return MPI_SUM;
    case ReduceOp::max: return MPI_MAX;
    case ReduceOp::min: return MPI_MIN;
    case ReduceOp::prod: return MPI_PROD;
  }
  return MPI_OP_NULL;
}

// MPI_IN_PLACE when the op works in place.
const void* send_buf(const Collective& c) { return c.in == c.out ? MPI_IN_PLACE : c.in; }

}  // namespace

MpiNative::MpiNative(MPI_Comm comm) : comm_(comm) {
  if (comm_ == MPI_COMM_NULL) return;
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
}

bool MpiNative::supports(const Collective& c) const {
  if (comm_ == MPI_COMM_NULL) return false;
  if (reduces(c.kind) && c.dtype == DType::bf16) return false;
  // The largest count one call passes: all_to_all and the rooted gathers pass
  // per-block counts, like all_gather and reduce_scatter.
  return c.count <= static_cast<size_t>(INT_MAX);
}

void MpiNative::run(const Collective& c, const OpContext& ctx) {
  const int n = static_cast<int>(c.count);
  const MPI_Datatype type = mpi_type(c.dtype);
  const MPI_Op op = mpi_op(c.op);
  WatchGuard guard(ctx);  // Note [Blocking native collectives]
  int rc = MPI_SUCCESS;
  switch (c.kind) {
    case OpKind::all_reduce: rc = MPI_Allreduce(send_buf(c), c.out, n, type, op, comm_); break;
    case OpKind::broadcast: rc = MPI_Bcast(c.out, n, type, c.root, comm_); break;
    case OpKind::reduce:
      rc = MPI_Reduce(rank_ == c.root ? send_buf(c) : c.in, rank_ == c.root ? c.out : nullptr, n, type, op, c.root, comm_);
      break;
    case OpKind::all_gather: {
      // In place (`in` is this rank's block of `out`): MPI forbids aliased buffers and names it MPI_IN_PLACE.
      const bool in_place = c.in == c.out + static_cast<size_t>(rank_) * c.block_bytes();
      rc = MPI_Allgather(in_place ? MPI_IN_PLACE : c.in, n, type, c.out, n, type, comm_);
      break;
    }
    case OpKind::reduce_scatter: {
      // In place (`out` is this rank's block of `in`): MPI forbids aliased
      // buffers, and its MPI_IN_PLACE puts the result at block 0; go through a copy.
      const bool in_place = c.out == c.in + static_cast<size_t>(rank_) * c.block_bytes();
      std::vector<std::byte> result(in_place ? c.block_bytes() : 0);
      rc = MPI_Reduce_scatter_block(c.in, in_place ? result.data() : c.out, n, type, op, comm_);
      if (in_place && rc == MPI_SUCCESS) std::memcpy(c.out, result.data(), result.size());
      break;
    }
    case OpKind::all_to_all: rc = MPI_Alltoall(c.in, n, type, c.out, n, type, comm_); break;
    case OpKind::gather: rc = MPI_Gather(c.in, n, type, c.out, n, type, c.root, comm_); break;
    case OpKind::scatter: rc = MPI_Scatter(c.in, n, type, c.out, n, type, c.root, comm_); break;
    case OpKind::barrier: rc = MPI_Barrier(comm_); break;
  }
  check(rc, ctx.describe() + ": MPI's " + op_kind_name(c.kind));
  if (c.op != ReduceOp::avg || !reduces(c.kind)) return;
  if (c.kind == OpKind::reduce && rank_ != c.root) return;
  finish_reduce(c.out, c.count, c.dtype, c.op, size_);
}

}  // namespace artel::comm::mpi
