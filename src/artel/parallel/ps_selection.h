// Which of a server's elements a pull or a push carries. A parameter is
// dense or a sparse table (PsParameter::sparse: an embedding whose rows a
// batch looks up by id). A message carries the dense parameters whole or not
// at all, and the sparse tables whole, not at all, or only the rows it lists
// — MXNet's row_sparse_pull, and what makes a large vocabulary cheap: a batch
// of 512 words reads at most 512 of its rows.
//
// The rows listed are per sparse segment of the server (ps_protocol.h), in
// segment order, each local to its segment (0 is the segment's first row)
// and ascending; on the wire, each segment's count and then its rows.
//
//   PsSelection sel{.dense = false, .sparse = PsSparse::rows};
//   int64_t n = ps_walk(layout, server, sel, rows, [&](const PsSegment& seg, int64_t at, int64_t count, int64_t pos) {
//     std::memcpy(message + pos, values + seg.offset + at, count * sizeof(float));   // packs a message
//   });
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "artel/parallel/ps_protocol.h"

namespace artel::parallel {

enum class PsSparse : int64_t { none = 0, rows = 1, whole = 2 };

struct PsSelection {
  bool dense = true;
  PsSparse sparse = PsSparse::whole;
  int64_t encode() const { return (dense ? 1 : 0) | static_cast<int64_t>(sparse) << 1; }
  static PsSelection decode(int64_t word);  // throws on a word no selection encodes
};

// Per sparse segment of one server, the rows a message lists.
using PsRowList = std::vector<std::vector<int64_t>>;

std::vector<int64_t> encode_ps_rows(const PsRowList& rows);
// Throws unless `words` lists rows of `server`'s sparse segments in range and ascending.
PsRowList decode_ps_rows(const std::vector<int64_t>& words, const PsLayout& layout, int server);

// The segments of `server` that hold parts of sparse tables, in segment order.
std::vector<const PsSegment*> ps_sparse_segments(const PsLayout& layout, int server);
// `rows` of sparse parameter `param` (whole-table ids, ascending), as the
// row list of `server` (empty lists for its other segments).
PsRowList ps_rows_for(const PsLayout& layout, int server, size_t param, const std::vector<int64_t>& rows);

// Calls fn(segment, first element within it, count, position in the message)
// for every run of elements the message carries, in message order; returns
// the message's element count. `rows` is read only for PsSparse::rows.
int64_t ps_walk(const PsLayout& layout, int server, PsSelection sel, const PsRowList& rows,
                const std::function<void(const PsSegment&, int64_t, int64_t, int64_t)>& fn);

}  // namespace artel::parallel
