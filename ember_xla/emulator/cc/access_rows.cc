// The addresses mode's fast path of the access side (access_run.h): a TU that only loads rows
// of table data in contiguous chunks records the loads of its iterations in one tight loop.
#include <algorithm>
#include <vector>

#include "access_run.h"

namespace ember_emu {

int64_t AccessRun::FastRows(int32_t t, int64_t lb, int64_t ub, int64_t vl, int64_t stride) {
  int64_t base = lb;
  if (base >= ub || (ub - base <= stride && !tail_[t])) return base;
  struct Load {
    const Buffer* m;
    int64_t idx[8], dep;
    size_t ni, ind;  // ind: position of the TU's index among the indices, or ni (none)
    int64_t bytes;
    bool queued;
    int32_t s;
    // the TU's index is the last dimension (lin): the flat index at x is pre + x, the other
    // dimensions' indices in range or not (pre_ok); the buffer's address and item size
    bool lin, pre_ok;
    int64_t pre, last_dim, mbase, item;
  };
  Load loads[8];
  size_t n = 0;
  for (int32_t s : owned_[t + 1]) {
    const Stream& st = e_.streams[s];
    if (st.kind != StreamKind::VMem) continue;
    if (n == 8) return base;
    Load& ld = loads[n++];
    ld.m = &StreamBuffer(st);
    if (!Skip(*ld.m)) return base;
    ld.ni = st.src.size() - 1;
    if (ld.ni == 0 || ld.ni > 8 || ld.ni != ld.m->shape.size()) return base;
    ld.ind = ld.ni;
    ld.dep = tu_src_[t];
    for (size_t j = 0; j < ld.ni; ++j) {
      const int32_t x = st.src[j];
      if (e_.streams[x].owner == t) {
        ld.ind = j;
        continue;
      }
      const Value& v = vals_[x];
      if (!v.set || v.lanes == -1 || !v.known) return base;
      ld.idx[j] = v.I(0);
      ld.dep = std::max(ld.dep, src_[x]);
    }
    ld.bytes = vl * ItemSize(ld.m->dtype);
    ld.queued = queued_[s] != 0;
    ld.s = s;
    ld.lin = ld.ind + 1 == ld.ni;
    if (ld.lin) {
      int64_t pre = 0;
      ld.pre_ok = true;
      for (size_t d = 0; d + 1 < ld.ni; ++d) {
        const int64_t x = ld.idx[d], dim = ld.m->shape[d];
        if (x < 0 || x >= dim) ld.pre_ok = false;
        pre = pre * dim + x;
      }
      ld.last_dim = ld.m->shape[ld.ni - 1];
      ld.pre = pre * ld.last_dim;
      ld.mbase = ld.m->base;
      ld.item = ItemSize(ld.m->dtype);
    }
  }
  const int layer = depth_[t];
  // the flat index of load k's first lane at `base` with `count` lanes, or -1 out of bounds
  auto flat_of = [&](Load& ld, int64_t count) -> int64_t {
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
      const Load& ld = loads[k];
      const int64_t room = ld.last_dim - vl - base;  // base + i*stride + vl - 1 < last_dim
      iters = std::min(iters, ld.pre_ok && room >= 0 ? room / stride + 1 : 0);
    }
    if (n == 1) {
      const Load& ld = loads[0];
      int64_t at = ld.mbase + (ld.pre + base) * ld.item, ev = src_[ld.s];
      const int64_t by = stride * ld.item;
      for (int64_t i = 0; i < iters; ++i, at += by)
        ev = tr.Load(at, ld.bytes, ld.dep, ld.queued, layer);
      src_[ld.s] = ev;
    } else {
      for (int64_t i = 0; i < iters; ++i)
        for (size_t k = 0; k < n; ++k) {
          const Load& ld = loads[k];
          src_[ld.s] = tr.Load(ld.mbase + (ld.pre + base + i * stride) * ld.item, ld.bytes,
                               ld.dep, ld.queued, layer);
        }
    }
    base += iters * stride;
    if (ub - base > stride) return base;  // a check fails there: the generic loop raises
  }
  for (; ub - base > stride; base += stride) {  // not the last: all vl lanes active
    for (size_t k = 0; k < n; ++k) {
      Load& ld = loads[k];
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
    Load& ld = loads[k];
    src_[ld.s] = tr.Load(m_.Address(*ld.m, flats[k]), active * ItemSize(ld.m->dtype), ld.dep,
                         ld.queued, layer);
  }
  return ub;
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
