// Listing the touched rows of a scatter and, per row, the positions of its updates in order
// (see row_groups.h).
#include "row_groups.h"

#include <algorithm>
#include <stdexcept>

namespace ember {

int64_t RowGroups::first_at_or_after(int64_t row) const {
  return std::lower_bound(rows.begin(), rows.end(), row) - rows.begin();
}

namespace {

// A table not much larger than the batch: count per row, O(n + rows), stable.
template <typename I>
void ByCounting(const I* idx, int64_t n, int64_t table_rows, RowGroups* g) {
  std::vector<uint32_t>& cursor = g->scratch;
  cursor.assign(static_cast<size_t>(table_rows), 0);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t r = static_cast<int64_t>(idx[i]);
    if (r >= 0 && r < table_rows) ++cursor[r];
  }
  uint32_t total = 0;
  for (int64_t r = 0; r < table_rows; ++r) {
    const uint32_t c = cursor[r];
    if (c == 0) continue;
    g->rows.push_back(r);
    g->start.push_back(total);
    cursor[r] = total;  // now: where the row's next position goes
    total += c;
  }
  g->start.push_back(total);
  g->order.resize(total);
  int32_t* order = g->order.data();
  for (int64_t i = 0; i < n; ++i) {
    const int64_t r = static_cast<int64_t>(idx[i]);
    if (r >= 0 && r < table_rows) order[cursor[r]++] = static_cast<int32_t>(i);
  }
}

// A table much larger than the batch: (row, position) keys in position order, radix-sorted
// stably on the row bits only (11 bits per pass), so each row keeps its positions ascending.
template <typename I>
void BySorting(const I* idx, int64_t n, int64_t table_rows, RowGroups* g) {
  std::vector<uint64_t>& a = g->keys;
  std::vector<uint64_t>& b = g->keys2;
  a.clear();
  for (int64_t i = 0; i < n; ++i) {
    const int64_t r = static_cast<int64_t>(idx[i]);
    if (r >= 0 && r < table_rows)
      a.push_back((static_cast<uint64_t>(r) << 32) | static_cast<uint64_t>(i));
  }
  b.resize(a.size());
  int bits = 1;
  while (bits < 63 && (int64_t{1} << bits) < table_rows) ++bits;
  constexpr int kDigit = 11;
  std::vector<uint32_t> count(size_t{1} << kDigit);
  for (int shift = 32; shift < 32 + bits; shift += kDigit) {
    std::fill(count.begin(), count.end(), 0);
    for (const uint64_t k : a) ++count[(k >> shift) & ((1u << kDigit) - 1)];
    uint32_t sum = 0;
    for (uint32_t& c : count) {
      const uint32_t here = c;
      c = sum;
      sum += here;
    }
    for (const uint64_t k : a) b[count[(k >> shift) & ((1u << kDigit) - 1)]++] = k;
    a.swap(b);
  }
  g->order.resize(a.size());
  for (size_t k = 0; k < a.size(); ++k) {
    const int64_t r = static_cast<int64_t>(a[k] >> 32);
    if (k == 0 || r != g->rows.back()) {
      g->rows.push_back(r);
      g->start.push_back(static_cast<int64_t>(k));
    }
    g->order[k] = static_cast<int32_t>(a[k] & 0xffffffffu);
  }
  g->start.push_back(static_cast<int64_t>(a.size()));
}

template <typename I>
void Build(const I* idx, int64_t n, int64_t table_rows, RowGroups* g) {
  if (n >= (int64_t{1} << 31)) throw std::length_error("more than 2^31 updates");
  g->rows.clear();
  g->start.clear();
  if (table_rows <= 4 * n + 4096)
    ByCounting(idx, n, table_rows, g);
  else
    BySorting(idx, n, table_rows, g);
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
