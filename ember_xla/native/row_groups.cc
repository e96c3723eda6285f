// Stable grouping of scatter updates by destination row (see row_groups.h).
#include "row_groups.h"

#include <algorithm>

namespace ember {

int64_t RowGroups::first_at_or_after(int64_t row) const {
  return std::lower_bound(rows.begin(), rows.end(), row) - rows.begin();
}

namespace {

template <typename I>
void Build(const I* idx, int64_t n, int64_t table_rows, RowGroups* g) {
  g->rows.clear();
  g->start.clear();
  g->pos.clear();
  if (table_rows <= 4 * n + 4096) {  // counting sort: O(n + rows), stable
    std::vector<int64_t> count(static_cast<size_t>(table_rows) + 1, 0);
    int64_t valid = 0;
    for (int64_t i = 0; i < n; ++i) {
      const int64_t r = static_cast<int64_t>(idx[i]);
      if (r >= 0 && r < table_rows) {
        ++count[static_cast<size_t>(r) + 1];
        ++valid;
      }
    }
    for (int64_t r = 0; r < table_rows; ++r) {
      if (count[r + 1] != 0) {
        g->rows.push_back(r);
        g->start.push_back(count[r]);
      }
      count[r + 1] += count[r];
    }
    g->start.push_back(valid);
    g->pos.resize(static_cast<size_t>(valid));
    for (int64_t i = 0; i < n; ++i) {
      const int64_t r = static_cast<int64_t>(idx[i]);
      if (r >= 0 && r < table_rows) g->pos[count[r]++] = i;
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
  g->pos.resize(keys.size());
  for (size_t k = 0; k < keys.size(); ++k) {
    if (k == 0 || keys[k].first != keys[k - 1].first) {
      g->rows.push_back(keys[k].first);
      g->start.push_back(static_cast<int64_t>(k));
    }
    g->pos[k] = keys[k].second;
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

}  // namespace ember
