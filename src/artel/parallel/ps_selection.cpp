#include "artel/parallel/ps_selection.h"

#include <algorithm>

#include "artel/core/error.h"

namespace artel::parallel {

PsSelection PsSelection::decode(int64_t word) {
  const int64_t sparse = word >> 1;
  ARTEL_CHECK(word >= 0 && sparse <= static_cast<int64_t>(PsSparse::whole), "parameter server: bad selection word ",
              word);
  return {(word & 1) != 0, static_cast<PsSparse>(sparse)};
}

std::vector<int64_t> encode_ps_rows(const PsRowList& rows) {
  std::vector<int64_t> words;
  for (const std::vector<int64_t>& r : rows) {
    words.push_back(static_cast<int64_t>(r.size()));
    words.insert(words.end(), r.begin(), r.end());
  }
  return words;
}

std::vector<const PsSegment*> ps_sparse_segments(const PsLayout& layout, int server) {
  std::vector<const PsSegment*> out;
  for (const PsSegment& seg : layout.segments.at(static_cast<size_t>(server)))
    if (layout.params[seg.param].sparse) out.push_back(&seg);
  return out;
}

PsRowList decode_ps_rows(const std::vector<int64_t>& words, const PsLayout& layout, int server) {
  const std::vector<const PsSegment*> sparse = ps_sparse_segments(layout, server);
  PsRowList rows(sparse.size());
  size_t at = 0;
  for (size_t k = 0; k < sparse.size(); ++k) {
    ARTEL_CHECK(at < words.size() && words[at] >= 0, "parameter server: truncated row list");
    const auto count = static_cast<size_t>(words[at++]);
    ARTEL_CHECK(at + count <= words.size(), "parameter server: truncated row list");
    const int64_t limit = (sparse[k]->end - sparse[k]->begin) / layout.row_elements(sparse[k]->param);
    for (size_t i = 0; i < count; ++i, ++at) {
      const int64_t r = words[at];
      ARTEL_CHECK(r >= 0 && r < limit && (i == 0 || r > rows[k].back()), "parameter server: row ", r, " of ",
                  layout.params[sparse[k]->param].name, " is out of range or order");
      rows[k].push_back(r);
    }
  }
  ARTEL_CHECK(at == words.size(), "parameter server: ", words.size() - at, " words after the row list");
  return rows;
}

PsRowList ps_rows_for(const PsLayout& layout, int server, size_t param, const std::vector<int64_t>& rows) {
  const std::vector<const PsSegment*> sparse = ps_sparse_segments(layout, server);
  PsRowList out(sparse.size());
  for (size_t k = 0; k < sparse.size(); ++k) {
    if (sparse[k]->param != param) continue;
    const int64_t row = layout.row_elements(param);
    const int64_t first = sparse[k]->begin / row, last = sparse[k]->end / row;
    auto lo = std::lower_bound(rows.begin(), rows.end(), first), hi = std::lower_bound(rows.begin(), rows.end(), last);
    for (auto it = lo; it != hi; ++it) out[k].push_back(*it - first);
  }
  return out;
}

int64_t ps_walk(const PsLayout& layout, int server, PsSelection sel, const PsRowList& rows,
                const std::function<void(const PsSegment&, int64_t, int64_t, int64_t)>& fn) {
  int64_t pos = 0;
  size_t k = 0;  // the sparse segment's index in `rows`
  for (const PsSegment& seg : layout.segments.at(static_cast<size_t>(server))) {
    const int64_t n = seg.end - seg.begin;
    if (!layout.params[seg.param].sparse) {
      if (sel.dense) fn(seg, 0, n, pos), pos += n;
      continue;
    }
    if (sel.sparse == PsSparse::whole) {
      fn(seg, 0, n, pos), pos += n;
    } else if (sel.sparse == PsSparse::rows) {
      ARTEL_CHECK(k < rows.size(), "parameter server: no row list for ", layout.params[seg.param].name);
      const int64_t row = layout.row_elements(seg.param);
      for (int64_t r : rows[k]) fn(seg, r * row, row, pos), pos += row;
    }
    ++k;
  }
  return pos;
}

}  // namespace artel::parallel
