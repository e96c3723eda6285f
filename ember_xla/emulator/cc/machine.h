// The C++ executor of DAE programs: the semantics of ember_xla/emulator/reference.py (core,
// machine.cc) and reference_access.py (access engine, access.cc), value for value and trace
// event for event, recording into a TraceBuffer the timing core replays directly.
//
// Two modes. Full: every value is computed (the outputs are the program's results). Addresses:
// only what decides addresses, loop bounds, branches and bounds checks is computed; table rows,
// outputs and scratch buffers are never read or written (their values are "unknown"), so the
// run yields the full mode's trace and per-case op counts without executing the arithmetic.
// Whenever an unknown value would decide an address, a bound, a branch or an index, the run
// stops with AddressesUnsupported (the program needs the full mode); it never guesses.
#ifndef EMBER_XLA_EMULATOR_NATIVE_MACHINE_H_
#define EMBER_XLA_EMULATOR_NATIVE_MACHINE_H_

#include <cstdint>
#include <stdexcept>
#include <utility>
#include <vector>

#include "program.h"
#include "timing.h"
#include "values.h"

namespace ember_emu {

// A register's or a queue entry's value: a scalar (lanes 0), a vector, or a buffer reference.
struct Value {
  DType dt = DType::F32;
  int64_t lanes = 0;       // 0 scalar, n vector, -1 buffer
  std::vector<double> f;   // float lanes (float dtypes)
  std::vector<int64_t> i;  // integer lanes (integer dtypes, i1 as 0/1)
  BufferRef m;
  bool set = false;
  bool known = true;       // addresses mode: false when the value was not computed
  int64_t n() const { return lanes > 0 ? lanes : 1; }
  double F(int64_t k) const { return IsFloat(dt) ? f[k] : (double)i[k]; }
  int64_t I(int64_t k) const { return IsFloat(dt) ? (int64_t)f[k] : i[k]; }
  void Shape(DType d, int64_t l) {
    dt = d, lanes = l, set = true, known = true, m.reset();
    if (IsFloat(d)) f.resize((size_t)std::max<int64_t>(l, 1));
    else i.resize((size_t)std::max<int64_t>(l, 1));
  }
  // exchanges the two values field by field (no temporary Value)
  void Swap(Value& o) noexcept {
    std::swap(dt, o.dt), std::swap(lanes, o.lanes), std::swap(set, o.set);
    std::swap(known, o.known);
    f.swap(o.f), i.swap(o.i), m.swap(o.m);
  }
  // Shape(b->dtype, -1) then m = b, without touching the reference count when m is b already.
  void SetBuffer(const BufferRef& b) {
    dt = b->dtype, lanes = -1, set = true, known = true;
    if (m != b) m = b;
    if (IsFloat(dt)) f.resize(1);
    else i.resize(1);
  }
};

struct CaseStats {
  std::vector<double> total;     // by op class
  std::vector<int8_t> order;     // classes in first-counted order (the reference's Counter)
  int64_t fired = 0, pops = 0;
  void Count(int cls, double n = 1.0) {
    if (total.empty()) total.assign(kNumOpClasses, 0.0);
    if (total[cls] == 0.0) {
      bool seen = false;
      for (int8_t c : order) seen |= c == cls;
      if (!seen) order.push_back((int8_t)cls);
    }
    total[cls] += n;
  }
};

struct CaseMemo;  // case_memo.h

class Machine {
 public:
  Machine(const Program& p, TraceBuffer* trace, bool addresses = false);
  ~Machine();
  // Inputs are read in place (read-only); outputs are written in place (poisoned with NaN).
  // Addresses mode: outputs are not touched (data may be null).
  void BindArg(int64_t k, const std::vector<int64_t>& shape, void* data, int64_t nbytes);
  void Run();
  const std::vector<CaseStats>& cases() const { return stats_; }
  // Cycles of one firing of each callback (timing.case_cycles): dispatch + mean ops x cycles.
  std::vector<double> CaseCycles(double dispatch, const double* op_cycles) const;
  std::vector<int64_t> CasePops() const;

 private:
  friend class AccessRun;
  void Place(Buffer& b);
  void RunCode(const std::vector<Instr>& code, size_t lo, size_t hi, CaseStats* cnt);
  void Step(const Instr& in);
  bool StepUnknown(const Instr& in);  // addresses mode: true when `in` was skipped
  bool ReplayMemo(CaseMemo& memo, CaseStats& s);  // addresses mode: true on a replay
  void RunEngine(int64_t k);
  int64_t CaseIndex(int64_t engine, int64_t case_id) const;  // RunError when there is none
  void RunCase(int64_t engine, int64_t c);  // the engine's case c (CaseIndex), one firing
  const Buffer& Mem(int32_t r, const char* what) const;
  int64_t Address(const Buffer& b, int64_t flat) const { return b.base + flat * ItemSize(b.dtype); }

  const Program& p_;
  TraceBuffer* trace_;
  const bool addresses_;
  std::vector<Value> val_;
  Value out_;  // scratch result
  int64_t next_base_ = 4096;
  std::vector<std::vector<int64_t>> cb_;  // per engine: case index -> callback number
  std::vector<CaseStats> stats_;          // per callback number
  std::vector<CaseMemo> memo_;            // addresses mode: per callback number
  bool memo_off_ = false;                 // a store of known data: no firing is replayed
  // bumped whenever registers may change other than by a memoised firing's replay of itself
  // (any interpreted code, any replay, an engine's start and end): a memo whose last firing
  // left reg_epoch_ as it is now finds the registers as that firing left them
  uint64_t reg_epoch_ = 0;
  // the data queue of the running engine: a ring of reusable slots (empty or a power of two
  // of them: it starts at 8 and doubles, so a position wraps with a mask)
  std::vector<Value> queue_;
  size_t QueueAt(size_t j) const { return (q_head_ + j) & (queue_.size() - 1); }
  size_t q_head_ = 0, q_size_ = 0;
  std::vector<int8_t> bound_;
};

// Addresses mode: an unknown value would decide an address, a bound, a branch or an index.
struct AddressesUnsupported : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Flat index of `idx` (one per dim) into b, checked like element_index (RunError outside).
int64_t ElementIndex(const Buffer& b, const int64_t* idx, size_t n, const char* what);

}  // namespace ember_emu

#endif  // EMBER_XLA_EMULATOR_NATIVE_MACHINE_H_
