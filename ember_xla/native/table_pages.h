// Table pages: embedding tables are read at random rows, so with 4 KiB pages nearly every lookup
// into a large table also misses the TLB (a page walk, which on a KVM guest is a two-level walk).
// Measured on the 26-table DLRM stage (3.4 GiB of tables, docs/BENCHMARKS.md): the reduce loop
// runs ~1.35x faster when the tables sit on 2 MiB transparent huge pages. XLA allocates its
// buffers with malloc, i.e. on 4 KiB pages unless THP is in `always` mode, and the pages are
// already written when a kernel first sees them, so MADV_HUGEPAGE alone would only affect pages
// faulted later. AdviseTable() therefore asks Linux to collapse a large table's 2 MiB-aligned
// interior into huge pages in place (MADV_HUGEPAGE + MADV_COLLAPSE, Linux >= 6.1): the same
// bytes at the same addresses, only the page size changes; any thread may keep reading and
// writing meanwhile.
//
// A table is collapsed when a second call reads it at the same address (a served model's
// table, or a donated one updated in place; a fresh buffer read by one call only, like a
// training step's undonated table, is not worth the copy), once per process. Collapsing
// costs about 0.3-2.8 s per GiB here, so by default it runs on one background thread at the
// lowest CPU priority and kernels never wait for it; EmberTablePagesWait() lets a benchmark or a
// test wait until it is done. Mode (EMBER_XLA_TABLE_PAGES, or EmberSetTablePages()):
// 0 = off, 1 = collapse in the background (default), 2 = collapse on the calling thread before
// the call continues (reproducible timing). Tables below kTableBytes are left alone.
#ifndef EMBER_XLA_NATIVE_TABLE_PAGES_H_
#define EMBER_XLA_NATIVE_TABLE_PAGES_H_

#include <cstddef>

namespace ember {

// Below this size a table's page-table entries stay in the caches and the TLB misses are cheap.
constexpr size_t kTablePagesBytes = size_t{64} << 20;

void AdviseTable(const void* data, size_t bytes);

}  // namespace ember

#endif  // EMBER_XLA_NATIVE_TABLE_PAGES_H_
