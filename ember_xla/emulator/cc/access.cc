// The access side of the DAE executor (reference_access.py): one run of an engine walks its
// traversal units, evaluates streams, pushes data-queue entries and control tokens, and records
// the trace in program order. A control token runs its case at once (the reference's core
// consumes each token as soon as the access generator yields it).
#include <algorithm>
#include <string>

#include "access_run.h"

namespace ember_emu {

void AccessRun::Start(int32_t t) {
  const TU& u = e_.tus[t];
  const int64_t lb = Int(vals_[u.lb], "tu bounds"), ub = Int(vals_[u.ub], "tu bounds"),
                st = Int(vals_[u.step], "tu bounds");
  if (st <= 0)
    throw RunError("tu " + std::to_string(t) + ": step must be positive, got " +
                   std::to_string(st));
  tu_src_[t] = std::max({src_[u.lb], src_[u.ub], src_[u.step]});
  std::vector<RowBuffer>& buffers = row_buffers_[t];  // a TU never starts inside itself
  // addresses mode: row buffers of table data kept from the last start when of the same length
  const int64_t len = std::max<int64_t>(ub, 0);
  const bool keep =
      m_.addresses_ && shape_only_rows_[t] && !buffers.empty() && rows_len_[t] == len;
  if (!keep) buffers.clear(), rows_len_[t] = m_.addresses_ && shape_only_rows_[t] ? len : -1;
  for (const Registration* g : keep ? kNoRegs : at_[t * 3 + kEnd]) {
    if (g->what != kBufferWhat) continue;
    const int32_t s = (int32_t)g->value;
    bool have = false;
    for (RowBuffer& rb : buffers) have |= rb.stream == s;
    const DType dt = e_.streams[s].dtype;
    // addresses mode: a row of table data is never computed (its buffer has no data)
    BufferRef b = m_.addresses_ && IsFloat(dt) ? ShapeOnly(dt, std::max<int64_t>(ub, 0))
                                               : NewBuffer(dt, {std::max<int64_t>(ub, 0)});
    if (!have) buffers.push_back({s, b});
    else for (RowBuffer& rb : buffers)
      if (rb.stream == s) rb.buf = b;
  }
  Fire(t, kBegin, buffers);
  const int64_t vl = u.vl;
  const int64_t stride = vl ? st * vl : st;
  const int64_t from = fast_[t] && lb >= 0 ? FastRows(t, lb, ub, vl, stride) : lb;
  for (int64_t base = from; base < ub; base += stride) {
    for (int32_t s : owned_[t + 1]) {
      const Stream& ss = e_.streams[s];
      if (ss.kind == StreamKind::Ind || ss.kind == StreamKind::Mask) {
        Value& v = vals_[s];
        const bool mask = ss.kind == StreamKind::Mask;
        v.Shape(mask ? DType::I1 : DType::I64, vl);
        for (int64_t l = 0; l < v.n(); ++l) {
          const int64_t iv = base + l * st;
          v.i[l] = mask ? iv < ub : iv;
        }
        src_[s] = tu_src_[t];
      } else {
        Eval(s, depth_[t]);
      }
    }
    for (RowBuffer& rb : buffers) {
      if (!vl) throw RunError("a row buffer on a scalar tu");
      const Value& v = vals_[rb.stream];
      if (!v.set || v.lanes == -1 || (v.lanes > 0 && v.lanes < vl))
        throw RunError("row buffer: its stream has no value of " + std::to_string(vl) +
                       " lanes");
      Buffer& b = *rb.buf;
      if (b.data && !v.known)
        throw AddressesUnsupported("a row buffer of integers depends on data");
      if (!b.data && base >= 0 && std::min(ub - 1, base + (vl - 1) * st) < b.shape[0])
        continue;  // addresses mode: every lane in bounds, nothing to write
      for (int64_t l = 0; l < vl; ++l) {
        const int64_t iv = base + l * st;
        if (iv >= ub) continue;
        if (iv < 0 || iv >= b.shape[0])
          throw RunError("row buffer: index " + std::to_string(iv) +
                         " out of bounds for dimension 0 (size " +
                         std::to_string(b.shape[0]) + ")");
        if (!b.data) continue;
        const int64_t k = v.lanes > 0 ? l : 0;
        if (IsFloat(b.dtype)) b.SetF(iv, RoundTo(v.F(k), b.dtype));
        else b.SetI(iv, Wrap(v.I(k), b.dtype));
      }
    }
    for (int32_t c : children_[t + 1]) Start(c);
    Fire(t, kIter, buffers);
    if (ub - base <= stride) break;
  }
  Fire(t, kEnd, buffers);
}

void AccessRun::Fire(int32_t t, Event ev, std::vector<RowBuffer>& buffers) {
  for (const Registration* g : at_[t * 3 + ev]) {
    if (g->what == kTokenWhat) {
      const size_t j = (size_t)(g - e_.regs.data());
      const int64_t c = token_case_[j];
      m_.trace_->Token(token_number_[j]);
      m_.RunCase(k_, c >= 0 ? c : m_.CaseIndex(k_, g->value));  // (-1: raises "no case")
      continue;
    }
    // push onto the ring (grow it when full, keeping FIFO order)
    if (m_.q_size_ == m_.queue_.size()) {
      std::vector<Value> grown(std::max<size_t>(8, m_.queue_.size() * 2));
      for (size_t j = 0; j < m_.q_size_; ++j)
        std::swap(grown[j], m_.queue_[(m_.q_head_ + j) % m_.queue_.size()]);
      m_.queue_.swap(grown);
      m_.q_head_ = 0;
    }
    Value& slot = m_.queue_[m_.QueueAt(m_.q_size_)];
    int64_t nbytes;
    if (g->what == kBufferWhat) {
      const BufferRef* b = nullptr;  // (no reference-count traffic)
      for (RowBuffer& rb : buffers)
        if (rb.stream == g->value) b = &rb.buf;
      if (!b || !*b) throw RunError("a buffer registration outside its tu's end event");
      slot.SetBuffer(*b);
      nbytes = (*b)->nbytes();
    } else {
      const Value& v = vals_[g->value];
      if (!v.set) throw RunError("push of a stream that has no value");
      slot = v;
      nbytes = v.lanes == -1 ? v.m->nbytes() : v.n() * ItemSize(v.dt);
    }
    ++m_.q_size_;
    m_.trace_->Push(nbytes);
  }
}

void AccessRun::Eval(int32_t s, int layer) {
  const Stream& st = e_.streams[s];
  int64_t dep = -1;
  for (int32_t x : st.src) dep = std::max(dep, src_[x]);
  src_[s] = dep;
  Value& out = vals_[s];
  switch (st.kind) {
    case StreamKind::Reg:
      out = m_.val_[st.imm[0].i];
      return;
    case StreamKind::Alu: {
      const int64_t a = Int(vals_[st.src[0]], "alu stream");
      const int64_t b = st.src.size() > 1 ? Int(vals_[st.src[1]], "alu stream") : 0;
      const int64_t r = AluStep(st.alu, a, b);
      out.Shape(st.dtype, 0);
      if (IsFloat(st.dtype)) out.f[0] = RoundTo((double)r, st.dtype);
      else out.i[0] = Wrap(r, st.dtype);
      return;
    }
    case StreamKind::VAlu: {
      const Value& a = vals_[st.src[0]];
      const Value* b = st.src.size() > 1 ? &vals_[st.src[1]] : nullptr;
      if (!a.set || (b && !b->set)) throw RunError("valu stream: operand without a value");
      Value& tmp = scratch_;
      tmp.Shape(st.dtype, st.lanes);
      for (int64_t l = 0; l < st.lanes; ++l) {
        const int64_t x = LaneI(a, l, "valu stream");
        const int64_t y = b ? LaneI(*b, l, "valu stream") : 0;
        const int64_t r = AluStep(st.alu, x, y);
        if (IsFloat(st.dtype)) tmp.f[l] = RoundTo((double)r, st.dtype);
        else tmp.i[l] = Wrap(r, st.dtype);
      }
      out.Swap(tmp);
      return;
    }
    case StreamKind::Mem: {
      const Buffer& m = StreamBuffer(st);
      int64_t idx[8];
      if (st.src.size() > 8) throw RunError("mem stream: rank > 8");
      for (size_t j = 0; j < st.src.size(); ++j) idx[j] = Int(vals_[st.src[j]], "mem stream");
      const int64_t at = ElementIndex(m, idx, st.src.size(), "mem stream");
      out.Shape(m.dtype, 0);
      if (Skip(m)) out.known = false;
      else if (IsFloat(m.dtype)) out.f[0] = m.GetF(at);
      else out.i[0] = m.GetI(at);
      src_[s] = m_.trace_->Load(m_.Address(m, at), ItemSize(m.dtype), dep, queued_[s], layer);
      return;
    }
    case StreamKind::VMem:
      return VMem(s, st, dep, layer);
    default:
      throw RunError("stream " + std::to_string(s) + ": kind is set by its TU");
  }
}

void AccessRun::VMem(int32_t s, const Stream& st, int64_t dep, int layer) {
  const Buffer& m = StreamBuffer(st);
  const Value& mask = vals_[st.src.back()];
  if (!mask.set || mask.lanes <= 0 || IsFloat(mask.dt))
    throw RunError("vmem stream: the mask is not a vector of i1");
  if (!mask.known) throw AddressesUnsupported("a vmem stream's mask depends on data");
  const bool skip = Skip(m);
  const int64_t vl = mask.lanes;
  const size_t ni = st.src.size() - 1;
  if (ni > 8 || ni != m.shape.size()) throw RunError("vmem stream: wrong number of indices");
  auto lane_idx = [&](int64_t l, int64_t* idx) {
    for (size_t j = 0; j < ni; ++j) idx[j] = LaneI(vals_[st.src[j]], l, "vmem stream");
  };
  Value& tmp = scratch_;  // swapped in below: no allocation per evaluation
  tmp.Shape(m.dtype, vl);
  if (skip) tmp.known = false;
  else if (IsFloat(m.dtype)) std::fill(tmp.f.begin(), tmp.f.end(), 0.0);  // inactive lanes: 0
  else std::fill(tmp.i.begin(), tmp.i.end(), 0);
  int64_t first = -1, last = -1;
  for (int64_t l = 0; l < vl; ++l)
    if (mask.i[l]) {
      if (first < 0) first = l;
      last = l;
    }
  int64_t idx[8];
  if (st.imm[1].kind == Imm::kInt && st.imm[1].i && first >= 0) {
    const int64_t count = last - first + 1;
    lane_idx(first, idx);
    const int64_t at = ElementIndex(m, idx, ni, "vmem stream");
    idx[ni - 1] += count - 1;
    ElementIndex(m, idx, ni, "vmem stream");
    if (skip) {
    } else if (m.dtype == DType::F32) {
      const float* p = reinterpret_cast<const float*>(m.data) + at - first;
      for (int64_t l = first; l <= last; ++l) tmp.f[l] = mask.i[l] ? p[l] : 0.0f;
    } else {
      for (int64_t l = first; l <= last; ++l) {
        const bool on = mask.i[l] != 0;
        if (IsFloat(m.dtype)) tmp.f[l] = on ? m.GetF(at + (l - first)) : 0.0;
        else tmp.i[l] = on ? m.GetI(at + (l - first)) : 0;
      }
    }
    src_[s] = m_.trace_->Load(m_.Address(m, at), count * ItemSize(m.dtype), dep, queued_[s],
                              layer);
  } else {
    for (int64_t l = first < 0 ? vl : first; l <= last; ++l) {
      if (!mask.i[l]) continue;
      lane_idx(l, idx);
      const int64_t at = ElementIndex(m, idx, ni, "vmem stream");
      if (skip) {
      } else if (IsFloat(m.dtype)) tmp.f[l] = m.GetF(at);
      else tmp.i[l] = m.GetI(at);
      src_[s] = m_.trace_->Load(m_.Address(m, at), ItemSize(m.dtype), dep, queued_[s], layer);
    }
  }
  vals_[s].Swap(tmp);
}

void Machine::RunEngine(int64_t k) {
  const Engine& e = p_.engines[k];
  ++reg_epoch_;  // (the engine's variables, and whatever top-level code wrote before)
  for (const Var& v : e.vars) val_[v.reg] = val_[v.init];
  q_head_ = 0, q_size_ = 0;
  AccessRun(*this, k).Run();
  if (q_size_)
    throw RunError("engine " + std::to_string(k) + ": " + std::to_string(q_size_) +
                   " operands left in the data queue (registered but never popped)");
  ++reg_epoch_;
  for (const Var& v : e.vars)
    if (v.result >= 0) val_[v.result] = val_[v.reg];
}

}  // namespace ember_emu
