// Updates grouped by destination row, the layout every embedding-gradient kernel works from.
//
// XLA's scatter-add applies its updates one after another in index order, so a row's value is
// ((0 + u_i1) + u_i2) + ... over the updates i1 < i2 < ... that hit it. Grouping the update
// positions by row with a stable sort (a counting sort when the table is not much larger than
// the batch, else a sort of (row, position) keys) keeps that order inside each row, so rows
// can then be summed in parallel and still give XLA's bits. Updates whose index is outside
// [0, rows) are dropped, as XLA's scatter drops them.
#ifndef EMBER_XLA_NATIVE_ROW_GROUPS_H_
#define EMBER_XLA_NATIVE_ROW_GROUPS_H_

#include <cstdint>
#include <vector>

namespace ember {

struct RowGroups {
  std::vector<int64_t> rows;    // touched rows, ascending
  std::vector<int64_t> start;   // rows.size() + 1 offsets into pos
  std::vector<int64_t> pos;     // update positions, grouped by row, in original order each
  int64_t first_at_or_after(int64_t row) const;  // index into rows of the first row >= row
};

// Groups the n indices (int32 when index32, else int64) by row for a table of `table_rows`.
void BuildRowGroups(const void* indices, bool index32, int64_t n, int64_t table_rows,
                    RowGroups* out);

// Splits [0, total) into `parts` contiguous ranges of about equal size (cut has parts + 1).
std::vector<int64_t> EvenCuts(int64_t total, int64_t parts);

}  // namespace ember

#endif  // EMBER_XLA_NATIVE_ROW_GROUPS_H_
