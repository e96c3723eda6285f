// Updates grouped by destination row, the layout every embedding-gradient kernel works from.
//
// XLA's scatter-add applies its updates one after another in index order, so a row's value is
// ((0 + u_i1) + u_i2) + ... over the updates i1 < i2 < ... that hit it. The touched rows are
// listed in ascending order and, per row, the positions of its updates in ascending order (a
// stable counting sort when the table is not much larger than the batch, else a stable radix
// sort of the row ids): a part of the pool that owns a range of rows then sums each row's
// updates in XLA's order in registers and writes the row once. Updates whose index is outside
// [0, rows) are dropped, as XLA's scatter drops them.
#ifndef EMBER_XLA_NATIVE_ROW_GROUPS_H_
#define EMBER_XLA_NATIVE_ROW_GROUPS_H_

#include <cstdint>
#include <vector>

namespace ember {

struct RowGroups {
  std::vector<int64_t> rows;    // touched rows, ascending
  std::vector<int64_t> start;   // rows.size() + 1: where each row's positions begin in order
  std::vector<int32_t> order;   // the kept updates' positions, by row, ascending within a row
  int64_t first_at_or_after(int64_t row) const;  // index into rows of the first row >= row
  int64_t count(int64_t k) const { return start[k + 1] - start[k]; }
  std::vector<uint32_t> scratch;  // the sort's buffers, kept between calls
  std::vector<uint64_t> keys, keys2;
};

// Groups the n indices (int32 when index32, else int64) by row for a table of `table_rows`.
void BuildRowGroups(const void* indices, bool index32, int64_t n, int64_t table_rows,
                    RowGroups* out);

// Splits [0, total) into `parts` contiguous ranges of about equal size (cut has parts + 1).
std::vector<int64_t> EvenCuts(int64_t total, int64_t parts);

// Splits the groups into `parts` contiguous ranges of about equal update counts.
std::vector<int64_t> GroupCuts(const RowGroups& g, int64_t parts);

}  // namespace ember

#endif  // EMBER_XLA_NATIVE_ROW_GROUPS_H_
