// Numbering the touched rows of a scatter and tagging every update with its row's number
// (see row_groups.h).
#include "row_groups.h"

#include <algorithm>
#include <stdexcept>

namespace ember {

int64_t RowGroups::first_at_or_after(int64_t row) const {
  return std::lower_bound(rows.begin(), rows.end(), row) - rows.begin();
}

namespace {

template <typename I>
void Build(const I* idx, int64_t n, int64_t table_rows, RowGroups* g) {
  if (n >= (int64_t{1} << 31)) throw std::length_error("more than 2^31 updates");
  g->rows.clear();
  g->start.clear();
  g->group.assign(static_cast<size_t>(n), -1);
  if (table_rows <= 4 * n + 4096) {  // count per row: O(n + rows)
    std::vector<int32_t> count(static_cast<size_t>(table_rows), 0);
    for (int64_t i = 0; i < n; ++i) {
      const int64_t r = static_cast<int64_t>(idx[i]);
      if (r >= 0 && r < table_rows) ++count[r];
    }
    int64_t total = 0;
    for (int64_t r = 0; r < table_rows; ++r) {
      if (count[r] == 0) continue;
      g->start.push_back(total);
      total += count[r];
      count[r] = static_cast<int32_t>(g->rows.size());  // now: the row's group number
      g->rows.push_back(r);
    }
    g->start.push_back(total);
    for (int64_t i = 0; i < n; ++i) {
      const int64_t r = static_cast<int64_t>(idx[i]);
      if (r >= 0 && r < table_rows) g->group[i] = count[r];
    }
    return;
  }
  // a table much larger than the batch: sort (row, position) pairs instead of counting rows
  std::vector<std::pair<int64_t, int64_t>> keys;
  keys.reserve(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const int64_t r = static_cast<int64_t>(idx[i]);
    if (r >= 0 && r < table_rows) keys.emplace_back(r, i);
  }
  std::sort(keys.begin(), keys.end());
  for (size_t k = 0; k < keys.size(); ++k) {
    if (k == 0 || keys[k].first != keys[k - 1].first) {
      g->rows.push_back(keys[k].first);
      g->start.push_back(static_cast<int64_t>(k));
    }
    g->group[keys[k].second] = static_cast<int32_t>(g->rows.size() - 1);
  }
  g->start.push_back(static_cast<int64_t>(keys.size()));
}

}  // namespace

void BuildRowGroups(const void* indices, bool index32, int64_t n, int64_t table_rows,
                    RowGroups* out) {
  if (index32)
    Build(static_cast<const int32_t*>(indices), n, table_rows, out);
  else
    Build(static_cast<const int64_t*>(indices), n, table_rows, out);
}

std::vector<int64_t> EvenCuts(int64_t total, int64_t parts) {
  parts = std::max<int64_t>(1, parts);
  std::vector<int64_t> cut(static_cast<size_t>(parts) + 1);
  for (int64_t p = 0; p <= parts; ++p) cut[p] = total * p / parts;
  return cut;
}

std::vector<int64_t> GroupCuts(const RowGroups& g, int64_t parts) {
  parts = std::max<int64_t>(1, parts);
  const int64_t n = static_cast<int64_t>(g.rows.size());
  const int64_t total = g.start.empty() ? 0 : g.start.back();
  std::vector<int64_t> cut(static_cast<size_t>(parts) + 1, n);
  cut[0] = 0;
  for (int64_t p = 1; p < parts; ++p) {
    const int64_t want = total * p / parts;
    const int64_t k = std::upper_bound(g.start.begin(), g.start.begin() + n, want) -
                      g.start.begin() - 1;
    cut[p] = std::max(cut[p - 1], std::min(std::max<int64_t>(k, 0), n));
  }
  return cut;
}

}  // namespace ember
