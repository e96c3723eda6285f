// The access side of the DAE executor (reference_access.py): one run of an engine walks its
// traversal units, evaluates streams, pushes data-queue entries and control tokens, and records
// the trace in program order (access.cc); in the addresses mode a TU that only loads rows of
// table data records its loads in one tight loop (access_rows.cc). Internal to the library.
#ifndef EMBER_XLA_EMULATOR_NATIVE_ACCESS_RUN_H_
#define EMBER_XLA_EMULATOR_NATIVE_ACCESS_RUN_H_

#include <algorithm>
#include <string>
#include <vector>

#include "machine.h"

namespace ember_emu {

class AccessRun {
 public:
  AccessRun(Machine& m, int64_t k) : m_(m), k_(k), e_(m.p_.engines[k]) {
    const size_t nt = e_.tus.size(), ns = e_.streams.size();
    vals_.resize(ns);
    src_.assign(ns, -1);
    owned_.resize(nt + 1);
    children_.resize(nt + 1);
    at_.resize(nt * 3);
    queued_.assign(ns, 0);
    depth_.assign(nt, 0);
    row_buffers_.resize(nt);
    tu_src_.assign(nt, -1);
    for (size_t s = 0; s < ns; ++s) owned_[e_.streams[s].owner + 1].push_back((int32_t)s);
    for (size_t t = 0; t < nt; ++t) {
      children_[e_.tus[t].parent + 1].push_back((int32_t)t);
      int d = 0;
      for (int32_t u = e_.tus[t].parent; u >= 0; u = e_.tus[u].parent) ++d;
      depth_[t] = d;
    }
    token_case_.assign(e_.regs.size(), -1);
    token_number_.assign(e_.regs.size(), -1);
    for (const Registration& g : e_.regs) {
      at_[g.tu * 3 + g.event].push_back(&g);
      if (g.what != kTokenWhat) queued_[g.value] = 1;
      const size_t j = (size_t)(&g - e_.regs.data());
      for (size_t c = e_.cases.size(); g.what == kTokenWhat && c-- > 0;)
        if (e_.cases[c].id == g.value) {
          token_case_[j] = (int64_t)c;
          if (token_number_[j] < 0) token_number_[j] = m.cb_[k][c];
        }
    }
    shape_only_rows_.assign(nt, 1);
    rows_len_.assign(nt, -1);
    for (size_t t = 0; t < nt; ++t) {  // its row buffers: distinct streams, of table data
      std::vector<int32_t> seen;
      for (const Registration* g : at_[t * 3 + kEnd]) {
        if (g->what != kBufferWhat) continue;
        const bool again = std::find(seen.begin(), seen.end(), (int32_t)g->value) != seen.end();
        if (again || !IsFloat(e_.streams[g->value].dtype)) shape_only_rows_[t] = 0;
        seen.push_back((int32_t)g->value);
      }
    }
    fast_.assign(nt, 0);
    tail_.assign(nt, 0);
    plans_.resize(nt);
    for (size_t t = 0; m.addresses_ && t < nt; ++t) {
      fast_[t] = RowsOnly((int32_t)t);
      tail_[t] = fast_[t] && TailToo((int32_t)t);
    }
  }

  void Run() {
    for (int32_t s : owned_[0]) Eval(s, 0);
    for (int32_t t : children_[0]) Start(t);
  }

 private:
  struct RowBuffer {
    int32_t stream;
    BufferRef buf;
  };

  static int64_t Int(const Value& v, const char* what) {
    if (!v.set || v.lanes == -1)
      throw RunError(std::string(what) + ": a stream read before it has a value");
    if (!v.known) throw AddressesUnsupported(std::string(what) + " depends on data");
    return v.I(0);
  }
  // Lane l of an index/operand value (a scalar broadcasts; too few lanes is an error).
  static int64_t LaneI(const Value& v, int64_t l, const char* what) {
    if (!v.set || v.lanes == -1 || (v.lanes > 0 && l >= v.lanes))
      throw RunError(std::string(what) + ": operand without a value for lane " +
                     std::to_string(l));
    if (!v.known) throw AddressesUnsupported(std::string(what) + " depends on data");
    return v.I(v.lanes > 0 ? l : 0);
  }

  static int64_t AluStep(AluOp op, int64_t a, int64_t b) {
    const uint64_t x = (uint64_t)a, y = (uint64_t)b;
    switch (op) {
      case AluOp::Trunc32: return (int32_t)(uint32_t)x;
      case AluOp::Cast: return a;
      case AluOp::Add: return (int64_t)(x + y);
      case AluOp::Sub: return (int64_t)(x - y);
      case AluOp::Mul: return (int64_t)(x * y);
      case AluOp::Min: return std::min(a, b);
      case AluOp::Max: return std::max(a, b);
      case AluOp::WrapNeg: return a < 0 ? (int64_t)(x + y) : a;
      case AluOp::InRange: return 0 <= a && a < b;
      default: return std::min(std::max(a, (int64_t)0), (int64_t)(y - 1));  // clamp
    }
  }

  // Addresses mode: one buffer without data per dtype and length, shared by every row of that
  // shape (such buffers cannot be told apart: no data, no address).
  const BufferRef& ShapeOnly(DType dt, int64_t n) {
    for (const BufferRef& b : shape_only_)
      if (b->dtype == dt && b->shape[0] == n) return b;
    shape_only_.push_back(ShapeOnlyBuffer(dt, {n}));
    return shape_only_.back();
  }

  // Addresses mode: the stream's values are not read (table data, or a buffer the core writes).
  bool Skip(const Buffer& m) const { return m_.addresses_ && (IsFloat(m.dtype) || !m.data); }

  const Buffer& StreamBuffer(const Stream& st) {
    const Value& v = m_.val_[st.imm[0].i];
    if (v.lanes != -1 || !v.m) throw RunError("a mem stream reads a register without a buffer");
    if (v.m->base < 0) throw RunError("a stream loads from a buffer without an address");
    return *v.m;
  }

  void Start(int32_t t);
  void Fire(int32_t t, Event ev, std::vector<RowBuffer>& buffers);
  // Addresses mode, a TU that only loads rows of table data in contiguous chunks (fast_[t]):
  // the iterations before the last, where every lane is active, record their loads in one
  // tight loop (the values are unknown anyway), and the last one too where nothing reads the
  // stream values it leaves (tail_[t]). Returns the base where the generic loop goes on: ub
  // (done), the last iteration (not tail_[t]), or one whose bounds check fails (the generic
  // loop raises the error).
  int64_t FastRows(int32_t t, int64_t lb, int64_t ub, int64_t vl, int64_t stride);
  // One vmem stream of a fast TU as FastRows records it: what is fixed is planned at the TU's
  // first start (PlanRows); the buffer is checked again when its register's changes; the
  // other TUs' index values, the dependency and `pre` are read at every start.
  struct RowLoad {
    int32_t s, reg;  // the stream, the register of its buffer
    const Buffer* m;
    BufferRef keep;  // m alive (a pointer compared with the register's is never stale)
    int64_t idx[8], dep;
    size_t ni, ind;  // ind: position of the TU's index among the indices, or ni (none)
    int32_t other[8];  // the other indices' streams (values of other TUs) and their positions
    size_t other_pos[8], n_other;
    int64_t bytes;
    bool queued;
    // the TU's index is the last dimension (lin): the flat index at x is pre + x, the other
    // dimensions' indices in range or not (pre_ok); the buffer's address and item size
    bool lin, pre_ok;
    int64_t pre, last_dim, mbase, item;
  };
  struct RowsPlan {
    bool built = false, ok = false;  // ok: FastRows applies (else the generic loop runs)
    size_t n = 0;
    RowLoad loads[8];
  };
  void PlanRows(int32_t t, int64_t vl);
  // FastRows may run the last iteration of fast TU t too (see FastRows).
  bool TailToo(int32_t t) const;
  // FastRows applies to TU t: a vector TU without children or iteration events whose streams
  // are its index and mask and contiguous vmem streams reading at (values of other TUs...,
  // its index) under its mask, each stream after those it reads; its row buffers are filled
  // from those vmem streams.
  bool RowsOnly(int32_t t) const;
  void Eval(int32_t s, int layer);
  void VMem(int32_t s, const Stream& st, int64_t dep, int layer);

  Machine& m_;
  const int64_t k_;
  const Engine& e_;
  std::vector<Value> vals_;
  Value scratch_;
  std::vector<int64_t> src_, tu_src_;
  std::vector<std::vector<int32_t>> owned_, children_;
  std::vector<std::vector<const Registration*>> at_;
  std::vector<uint8_t> queued_;
  // per registration, a token's: case index (the first of its id) and callback number (the
  // last's: as the trace always numbered it), or -1 (no such case)
  std::vector<int64_t> token_case_, token_number_;
  std::vector<int> depth_;
  std::vector<std::vector<RowBuffer>> row_buffers_;  // per TU: the buffers of its running start
  std::vector<BufferRef> shape_only_;
  std::vector<uint8_t> fast_;  // per TU: FastRows applies (addresses mode)
  std::vector<uint8_t> tail_;  // per TU: FastRows runs its last iteration too
  std::vector<RowsPlan> plans_;  // per TU: FastRows' plan
  std::vector<uint8_t> shape_only_rows_;  // per TU: its row buffers are data-less (addresses)
  // per TU, with shape_only_rows_ in the addresses mode: the length of the data-less row
  // buffers row_buffers_ holds (kept from start to start while it does not change), or -1
  std::vector<int64_t> rows_len_;
  const std::vector<const Registration*> kNoRegs;
};

}  // namespace ember_emu

#endif  // EMBER_XLA_EMULATOR_NATIVE_ACCESS_RUN_H_
