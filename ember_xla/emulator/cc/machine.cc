// The core side of the DAE executor (reference.py's Machine and semantics.py's step): the
// top-level code, case bodies and every straight-line instruction, with numpy's rounding per
// dtype so the outputs equal the Python reference bit for bit.
#include "machine.h"

#include "case_memo.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <string>

namespace ember_emu {

int64_t ElementIndex(const Buffer& b, const int64_t* idx, size_t n, const char* what) {
  if (n != b.shape.size())
    throw RunError(std::string(what) + ": " + std::to_string(n) + " indices for a rank-" +
                   std::to_string(b.shape.size()) + " buffer");
  int64_t flat = 0;
  for (size_t d = 0; d < n; ++d) {
    if (idx[d] < 0 || idx[d] >= b.shape[d])
      throw RunError(std::string(what) + ": index " + std::to_string(idx[d]) +
                     " out of bounds for dimension " + std::to_string(d) + " (size " +
                     std::to_string(b.shape[d]) + ")");
    flat = flat * b.shape[d] + idx[d];
  }
  return flat;
}

Machine::Machine(const Program& p, TraceBuffer* trace, bool addresses)
    : p_(p), trace_(trace), addresses_(addresses), val_(p.regs.size()),
      bound_(p.args.size(), 0) {
  int64_t n = 0;
  for (const Engine& e : p.engines) {
    std::vector<int64_t> cb;
    for (const Case& c : e.cases) {
      cb.push_back(n++);
      CaseStats s;
      for (const Instr& in : c.code) s.pops += in.op == Op::Pop;
      stats_.push_back(s);
    }
    cb_.push_back(cb);
  }
  if (addresses_) memo_ = PlanCaseMemos(p);
}

Machine::~Machine() = default;

void Machine::Place(Buffer& b) {
  b.base = next_base_;
  const int64_t end = next_base_ + std::max<int64_t>(b.nbytes(), 1);
  next_base_ = (end + 4095) / 4096 * 4096;
}

void Machine::BindArg(int64_t k, const std::vector<int64_t>& shape, void* data, int64_t nbytes) {
  const Arg& a = p_.args[k];
  if (shape.size() != a.shape.size())
    throw RunError("argument " + std::to_string(k) + " (" + a.name + "): rank " +
                   std::to_string(shape.size()) + ", the program wants " +
                   std::to_string(a.shape.size()));
  for (size_t d = 0; d < shape.size(); ++d)
    if (a.shape[d] >= 0 && a.shape[d] != shape[d])
      throw RunError("argument " + std::to_string(k) + " (" + a.name + "): dimension " +
                     std::to_string(d) + " is " + std::to_string(shape[d]) +
                     ", the program wants " + std::to_string(a.shape[d]));
  auto b = std::make_shared<Buffer>();
  b->dtype = a.dtype;
  b->shape = shape;
  if (b->nbytes() != nbytes) throw RunError("argument " + a.name + ": buffer size mismatch");
  b->data = static_cast<uint8_t*>(data);
  b->readonly = !a.out;
  if (a.out && addresses_) {  // never read nor written in addresses mode
    b->data = nullptr;
  } else if (a.out && a.init >= 0) {  // updated in place: starts as its input (a copy unless aliased)
    if (!bound_[a.init]) throw RunError("argument " + a.name + ": its input is not bound");
    const Buffer& src = *val_[p_.args[a.init].reg].m;
    if (src.shape != b->shape)
      throw RunError("argument " + a.name + ": shape differs from the input it starts as");
    if (src.data != b->data) std::memcpy(b->data, src.data, (size_t)nbytes);
  } else if (a.out)
    for (int64_t e = 0; e < b->numel(); ++e) {
      if (IsFloat(a.dtype)) b->SetF(e, std::numeric_limits<double>::quiet_NaN());
      else b->SetI(e, 0);
    }
  val_[a.reg].Shape(a.dtype, -1);
  val_[a.reg].m = b;
  bound_[k] = 1;
}

const Buffer& Machine::Mem(int32_t r, const char* what) const {
  const Value& v = val_[r];
  if (v.lanes != -1 || !v.m)
    throw RunError(std::string(what) + ": register " + std::to_string(r) + " holds no buffer");
  return *v.m;
}

void Machine::Run() {
  for (size_t k = 0; k < p_.args.size(); ++k)
    if (!bound_[k]) throw RunError("argument " + p_.args[k].name + " is not bound");
  // addresses in argument order
  for (const Arg& a : p_.args) Place(*val_[a.reg].m);
  RunCode(p_.code, 0, p_.code.size(), nullptr);
}

void Machine::RunCode(const std::vector<Instr>& code, size_t lo, size_t hi, CaseStats* cnt) {
  ++reg_epoch_;
  size_t i = lo;
  while (i < hi) {
    const Instr& in = code[i];
    if (cnt && in.cls >= 0 && in.op != Op::For) cnt->Count(in.cls);
    switch (in.op) {
      case Op::For: {
        for (int32_t r : in.src)
          if (!val_[r].set || val_[r].lanes != 0)
            throw RunError("for: bound register " + std::to_string(r) + " is not a scalar value");
        if (addresses_)
          for (int32_t r : in.src)
            if (!val_[r].known) throw AddressesUnsupported("a core loop's bounds depend on data");
        const int64_t lb = val_[in.src[0]].I(0), ub = val_[in.src[1]].I(0),
                      st = val_[in.src[2]].I(0);
        const size_t n = (size_t)in.imm[0].i;
        if (st <= 0) throw RunError("for: step must be positive, got " + std::to_string(st));
        for (int64_t k = lb; k < ub; k += st) {
          Value& iv = val_[in.dst[0]];
          iv.Shape(DType::I64, 0);  // np.int64(k)
          iv.i[0] = k;
          if (cnt) cnt->Count(kClassScalar);
          RunCode(code, i + 1, i + 1 + n, cnt);
          if (ub - k <= st) break;  // no overflow past ub
        }
        i += 1 + n;
        continue;
      }
      case Op::If: {
        const size_t nt = (size_t)in.imm[0].i, ne = (size_t)in.imm[1].i;
        const Value& c = val_[in.src[0]];
        if (!c.set || c.lanes == -1) throw RunError("if: condition is not a value");
        if (!c.known) throw AddressesUnsupported("a core branch depends on data");
        if (IsFloat(c.dt) ? c.f[0] != 0.0 : c.i[0] != 0)
          RunCode(code, i + 1, i + 1 + nt, cnt);
        else
          RunCode(code, i + 1 + nt, i + 1 + nt + ne, cnt);
        i += 1 + nt + ne;
        continue;
      }
      case Op::Run:
        RunEngine(in.imm[0].i);
        break;
      case Op::Pop: {
        if (q_size_ == 0)
          throw RunError("pop: the data queue is empty (operand not registered before the "
                         "control token)");
        Value& e = queue_[q_head_];
        const Reg& r = p_.regs[in.dst[0]];
        const int64_t want = r.cls == 's' ? 0 : r.cls == 'v' ? r.n : -1;
        bool ok = SameNumpyType(e.dt, r.dtype) && e.lanes == want;
        if (ok && want == -1) ok = (int64_t)e.m->shape.size() == r.n;
        if (!ok)
          throw RunError(std::string("pop: the queue holds ") + DTypeName(e.dt) +
                         " entry, the case expects " + DTypeName(r.dtype));
        val_[in.dst[0]].Swap(e);
        q_head_ = QueueAt(1);
        --q_size_;
        break;
      }
      case Op::Inc: {
        Value& v = val_[in.dst[0]];
        if (!v.set || v.lanes != 0) throw RunError("inc: register is not a scalar value");
        if (!v.known) break;  // addresses mode: stays unknown
        const DType d = p_.regs[in.dst[0]].dtype;
        const int64_t x = v.I(0);
        v.Shape(d, 0);
        if (IsFloat(d)) v.f[0] = RoundTo((double)(x + 1), d);
        else v.i[0] = Wrap((int64_t)((uint64_t)x + 1), d);
        break;
      }
      default:
        Step(in);
    }
    ++i;
  }
}

// Addresses mode: skips an instruction whose result would be unknown (true: its destinations
// become unknown), refuses one whose index, size or mask is unknown, and leaves the rest to
// Step (false), which reads and writes nothing in buffers without data.
bool Machine::StepUnknown(const Instr& in) {
  const size_t n = in.src.size();
  auto unknown = [&](size_t j) {
    const Value& v = val_[in.src[j]];
    return v.set && !v.known;
  };
  auto need = [&](size_t from, size_t to, const char* what) {
    for (size_t j = from; j < to && j < n; ++j)
      if (unknown(j)) throw AddressesUnsupported(std::string("a core ") + what + " depends on data");
    return false;
  };
  switch (in.op) {
    case Op::Load: return need(1, n, "load's index");
    case Op::Store: return need(2, n, "store's index");
    case Op::MaskedLoad: case Op::MaskedStore:
      return need(1, n - 1, "masked access's index or mask");
    case Op::FromBuffer: return need(1, n, "from_buffer position");
    case Op::Alloc: return need(0, n, "alloc's size");
    case Op::VMask: return need(0, n, "mask");
    case Op::Dim: case Op::Unique: return false;
    default: break;
  }
  bool any = false;
  for (size_t j = 0; j < n; ++j) any |= unknown(j);
  if (!any) return false;
  for (int32_t d : in.dst) {
    const Reg& r = p_.regs[d];
    if (r.cls == 'm') throw AddressesUnsupported("a buffer computed from data");
    Value& v = val_[d];
    v.Shape(r.dtype, r.cls == 'v' ? r.n : 0);
    v.known = false;
  }
  return true;
}

int64_t Machine::CaseIndex(int64_t engine, int64_t case_id) const {
  const Engine& e = p_.engines[engine];
  for (size_t c = 0; c < e.cases.size(); ++c)
    if (e.cases[c].id == case_id) return (int64_t)c;
  throw RunError("no case " + std::to_string(case_id));
}

void Machine::RunCase(int64_t engine, int64_t c) {
  const Case& cs = p_.engines[engine].cases[c];
  const int64_t num = cb_[engine][c];
  CaseStats& s = stats_[num];
  CaseMemo* mm = addresses_ && !memo_off_ && memo_[num].eligible ? &memo_[num] : nullptr;
  if (mm && ReplayMemo(*mm, s)) return;
  const bool record = mm && q_size_ >= mm->pop_dst.size();
  const size_t trace_before = trace_->kind.size();
  const int64_t base_before = next_base_;
  if (record) {  // the key, into the memo's kept storage (no allocation once it has lanes)
    mm->valid = false;
    mm->key_regs.resize(mm->live_in.size());
    for (size_t j = 0; j < mm->live_in.size(); ++j) AssignValue(mm->key_regs[j], val_[mm->live_in[j]]);
    mm->key_entries.resize(mm->pop_dst.size());
    for (size_t j = 0; j < mm->pop_dst.size(); ++j)
      AssignValue(mm->key_entries[j], queue_[QueueAt(j)]);
    mm->delta = s.total;
    mm->delta.resize(kNumOpClasses, 0.0);
  }
  ++s.fired;
  RunCode(cs.code, 0, cs.code.size(), &s);
  if (!record || memo_off_) return;
  if (trace_->kind.size() != trace_before || next_base_ != base_before) {
    mm->eligible = false;  // effects beyond registers: never replayed
    return;
  }
  mm->result.resize(mm->restore.size());
  for (size_t j = 0; j < mm->restore.size(); ++j) AssignValue(mm->result[j], val_[mm->restore[j]]);
  for (int k = 0; k < kNumOpClasses; ++k)
    mm->delta[k] = (s.total.empty() ? 0.0 : s.total[k]) - mm->delta[k];
  mm->idempotent = true;
  for (size_t j = 0; j < mm->live_in.size(); ++j)
    mm->idempotent &= SameValue(val_[mm->live_in[j]], mm->key_regs[j]);
  mm->epoch = ++reg_epoch_;
  mm->valid = true;
}

bool Machine::ReplayMemo(CaseMemo& mm, CaseStats& s) {
  if (!mm.valid || q_size_ < mm.pop_dst.size()) return false;
  if (!mm.idempotent || mm.epoch != reg_epoch_)  // (else the registers are as it left them)
    for (size_t j = 0; j < mm.live_in.size(); ++j)
      if (!SameValue(val_[mm.live_in[j]], mm.key_regs[j])) return false;
  for (size_t j = 0; j < mm.pop_dst.size(); ++j)
    if (!SameEntry(queue_[QueueAt(j)], mm.key_entries[j])) return false;
  for (int32_t d : mm.pop_dst) {
    val_[d].Swap(queue_[q_head_]);
    q_head_ = QueueAt(1);
    --q_size_;
  }
  for (size_t j = 0; j < mm.restore.size(); ++j) AssignValue(val_[mm.restore[j]], mm.result[j]);
  if (s.total.empty()) s.total.assign(kNumOpClasses, 0.0);
  for (int k = 0; k < kNumOpClasses; ++k) s.total[k] += mm.delta[k];
  ++s.fired;
  mm.epoch = ++reg_epoch_;
  return true;
}

std::vector<double> Machine::CaseCycles(double dispatch, const double* op_cycles) const {
  std::vector<double> out;
  for (const CaseStats& s : stats_) {
    double sum = 0.0;
    for (int8_t c : s.order) {
      const double mean = s.total[c] / (double)s.fired;
      sum += mean * op_cycles[c];
    }
    out.push_back(dispatch + sum);
  }
  return out;
}

std::vector<int64_t> Machine::CasePops() const {
  std::vector<int64_t> out;
  for (const CaseStats& s : stats_) out.push_back(s.pops);
  return out;
}

}  // namespace ember_emu
