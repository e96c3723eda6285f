// The addresses mode's fast path of the access side (access_run.h): a TU that only loads rows
// of table data in contiguous chunks records the loads of its iterations in one tight loop.
#include <algorithm>
#include <vector>

#include "access_run.h"

namespace ember_emu {

int64_t AccessRun::FastRows(int32_t t, int64_t lb, int64_t ub, int64_t vl, int64_t stride) {
  int64_t base = lb;
  if (base >= ub || (ub - base <= stride && !tail_[t])) return base;
  RowsPlan& plan = plans_[t];
  if (!plan.built) PlanRows(t, vl);
  if (!plan.ok) return base;
  const size_t n = plan.n;
  RowLoad* const loads = plan.loads;
  for (size_t k = 0; k < n; ++k) {  // what may change from start to start
    RowLoad& ld = loads[k];
    const Value& bv = m_.val_[ld.reg];
    if (bv.lanes != -1 || bv.m.get() != ld.m) {  // (another buffer: checked as at the first)
      ld.m = &StreamBuffer(e_.streams[ld.s]);
      ld.keep = bv.m;
      if (!Skip(*ld.m) || ld.ni != ld.m->shape.size()) return base;
      ld.bytes = vl * ItemSize(ld.m->dtype);
      ld.last_dim = ld.m->shape[ld.ni - 1];
      ld.mbase = ld.m->base;
      ld.item = ItemSize(ld.m->dtype);
    }
    ld.dep = tu_src_[t];
    for (size_t o = 0; o < ld.n_other; ++o) {
      const int32_t x = ld.other[o];
      const Value& v = vals_[x];
      if (!v.set || v.lanes == -1 || !v.known) return base;
      ld.idx[ld.other_pos[o]] = v.I(0);
      ld.dep = std::max(ld.dep, src_[x]);
    }
    if (ld.lin) {
      int64_t pre = 0;
      ld.pre_ok = true;
      for (size_t d = 0; d + 1 < ld.ni; ++d) {
        const int64_t x = ld.idx[d], dim = ld.m->shape[d];
        if (x < 0 || x >= dim) ld.pre_ok = false;
        pre = pre * dim + x;
      }
      ld.pre = pre * ld.last_dim;
    }
  }
  const int layer = depth_[t];
  // the flat index of load k's first lane at `base` with `count` lanes, or -1 out of bounds
  auto flat_of = [&](RowLoad& ld, int64_t count) -> int64_t {
    if (ld.ind < ld.ni) ld.idx[ld.ind] = base;
    int64_t flat = 0;
    for (size_t d = 0; d < ld.ni; ++d) {
      const int64_t x = ld.idx[d], dim = ld.m->shape[d];
      const int64_t hi = d + 1 == ld.ni ? x + count - 1 : x;
      if (x < 0 || hi >= dim) return -1;
      flat = flat * dim + x;
    }
    return flat;
  };
  TraceBuffer& tr = *m_.trace_;
  bool all_lin = true;
  for (size_t k = 0; k < n; ++k) all_lin &= loads[k].lin;
  if (all_lin && base >= 0) {  // the bounds checked once for all iterations before the last
    int64_t iters = (ub - base - 1) / stride;  // the bases with ub - base > stride
    for (size_t k = 0; k < n; ++k) {
      const RowLoad& ld = loads[k];
      const int64_t room = ld.last_dim - vl - base;  // base + i*stride + vl - 1 < last_dim
      iters = std::min(iters, ld.pre_ok && room >= 0 ? room / stride + 1 : 0);
    }
    if (n == 1) {
      const RowLoad& ld = loads[0];
      int64_t at = ld.mbase + (ld.pre + base) * ld.item, ev = src_[ld.s];
      const int64_t by = stride * ld.item;
      for (int64_t i = 0; i < iters; ++i, at += by)
        ev = tr.Load(at, ld.bytes, ld.dep, ld.queued, layer);
      src_[ld.s] = ev;
    } else {
      for (int64_t i = 0; i < iters; ++i)
        for (size_t k = 0; k < n; ++k) {
          const RowLoad& ld = loads[k];
          src_[ld.s] = tr.Load(ld.mbase + (ld.pre + base + i * stride) * ld.item, ld.bytes,
                               ld.dep, ld.queued, layer);
        }
    }
    base += iters * stride;
    if (ub - base > stride) return base;  // a check fails there: the generic loop raises
  }
  for (; ub - base > stride; base += stride) {  // not the last: all vl lanes active
    for (size_t k = 0; k < n; ++k) {
      RowLoad& ld = loads[k];
      if (ld.lin) {  // flat_of without the loop over the dimensions: the same checks
        if (!ld.pre_ok || base < 0 || base + vl - 1 >= ld.last_dim) return base;
        src_[ld.s] = tr.Load(ld.mbase + (ld.pre + base) * ld.item, ld.bytes, ld.dep,
                             ld.queued, layer);
        continue;
      }
      const int64_t flat = flat_of(ld, vl);
      if (flat < 0) return base;
      src_[ld.s] = tr.Load(m_.Address(*ld.m, flat), ld.bytes, ld.dep, ld.queued, layer);
    }
  }
  if (!tail_[t]) return base;
  // the last iteration: its active lanes base + l*step < ub are a prefix of `active` lanes;
  // every load is checked before any is recorded (a failing one: the generic loop raises)
  const int64_t step = stride / vl, active = (ub - base + step - 1) / step;
  int64_t flats[8];
  for (size_t k = 0; k < n; ++k)
    if ((flats[k] = flat_of(loads[k], active)) < 0) return base;
  for (size_t k = 0; k < n; ++k) {
    RowLoad& ld = loads[k];
    src_[ld.s] = tr.Load(m_.Address(*ld.m, flats[k]), active * ItemSize(ld.m->dtype), ld.dep,
                         ld.queued, layer);
  }
  return ub;
}

void AccessRun::PlanRows(int32_t t, int64_t vl) {
  RowsPlan& plan = plans_[t];
  plan.built = true, plan.ok = false, plan.n = 0;
  for (int32_t s : owned_[t + 1]) {
    const Stream& st = e_.streams[s];
    if (st.kind != StreamKind::VMem) continue;
    if (plan.n == 8) return;
    RowLoad& ld = plan.loads[plan.n++];
    ld.s = s;
    ld.reg = (int32_t)st.imm[0].i;
    ld.m = &StreamBuffer(st);
    ld.keep = m_.val_[ld.reg].m;
    if (!Skip(*ld.m)) return;
    ld.ni = st.src.size() - 1;
    if (ld.ni == 0 || ld.ni > 8 || ld.ni != ld.m->shape.size()) return;
    ld.ind = ld.ni;
    ld.n_other = 0;
    for (size_t j = 0; j < ld.ni; ++j) {
      const int32_t x = st.src[j];
      if (e_.streams[x].owner == t) {
        ld.ind = j;
        continue;
      }
      ld.other[ld.n_other] = x;
      ld.other_pos[ld.n_other++] = j;
    }
    ld.bytes = vl * ItemSize(ld.m->dtype);
    ld.queued = queued_[s] != 0;
    ld.lin = ld.ind + 1 == ld.ni;
    ld.last_dim = ld.m->shape[ld.ni - 1];
    ld.mbase = ld.m->base;
    ld.item = ItemSize(ld.m->dtype);
  }
  plan.ok = true;
}

bool AccessRun::TailToo(int32_t t) const {
  // the generic loop's last iteration leaves the TU's stream values behind: nothing may read
  // them after it (a push of one of them, a stream of another TU), and its row buffers must
  // be of table data (never written in the addresses mode)
  for (const Registration& g : e_.regs) {
    if (g.what == kPushWhat && e_.streams[g.value].owner == t) return false;
    if (g.tu == t && g.what == kBufferWhat && !IsFloat(e_.streams[g.value].dtype)) return false;
  }
  for (const Stream& st : e_.streams) {
    if (st.owner == t) continue;
    for (int32_t x : st.src)
      if (e_.streams[x].owner == t) return false;
  }
  return true;
}

bool AccessRun::RowsOnly(int32_t t) const {
  const TU& u = e_.tus[t];
  if (!u.vl || !children_[t + 1].empty() || !at_[t * 3 + kIter].empty()) return false;
  std::vector<int32_t> seen;
  bool any = false;
  for (int32_t s : owned_[t + 1]) {
    const Stream& st = e_.streams[s];
    if (st.kind == StreamKind::VMem) {
      if (st.src.size() < 2 || st.imm.size() < 2 || st.imm[1].kind != Imm::kInt || !st.imm[1].i)
        return false;
      for (size_t j = 0; j < st.src.size(); ++j) {
        const int32_t x = st.src[j];
        const bool mine = e_.streams[x].owner == t;
        const bool last = j + 1 == st.src.size();
        if (mine && std::find(seen.begin(), seen.end(), x) == seen.end()) return false;
        if (last != (mine && e_.streams[x].kind == StreamKind::Mask)) return false;
        if (mine && !last && e_.streams[x].kind != StreamKind::Ind) return false;
      }
      any = true;
    } else if (st.kind != StreamKind::Ind && st.kind != StreamKind::Mask) {
      return false;
    }
    seen.push_back(s);
  }
  for (const Registration* g : at_[t * 3 + kEnd])
    if (g->what == kBufferWhat && e_.streams[g->value].kind != StreamKind::VMem) return false;
  return any;
}

}  // namespace ember_emu
