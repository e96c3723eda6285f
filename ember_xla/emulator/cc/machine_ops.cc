// The straight-line instructions of the DAE executor (semantics.py's step): arithmetic in
// numpy's types (f16/bf16 computed in float32 and rounded once, integers wrapped), XLA's NaN
// max/min, casts, compares, memory ops with bounds checks, alloc, unique.
#include <xmmintrin.h>
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>

#include "machine.h"
#include "machine_arith.h"

namespace ember_emu {

void Machine::Step(const Instr& in) {
  if (addresses_ && StepUnknown(in)) return;
  auto V = [&](size_t j) -> const Value& {
    const Value& v = val_[in.src[j]];
    if (!v.set)
      throw RunError("register " + std::to_string(in.src[j]) + " read before it is written");
    return v;
  };
  const int32_t d = in.dst.empty() ? -1 : in.dst[0];
  const Reg* dr = d >= 0 ? &p_.regs[d] : nullptr;
  const int64_t dl = dr && dr->cls == 'v' ? dr->n : 0;
  // results go straight into the destination register unless it is also a source
  bool aliased = false;
  for (int32_t x : in.src) aliased |= x == d;
  Value& out = (d >= 0 && !aliased) ? val_[d] : out_;
  auto commit = [&]() {
    if (&out == &out_) val_[d].Swap(out_);
  };
  switch (in.op) {
    case Op::Const: {
      out.Shape(dr->dtype, dl);
      const Imm& m = in.imm[0];
      if (m.kind == Imm::kInt) PutI(out, 0, m.i, false);
      else if (m.kind == Imm::kFloat) PutF(out, 0, m.f);
      else throw RunError("const: not a number");
      for (int64_t k = 1; k < out.n(); ++k) {  // a splat
        if (IsFloat(out.dt)) out.f[k] = out.f[0];
        else out.i[k] = out.i[0];
      }
      return commit();
    }
    case Op::AddF: case Op::SubF: case Op::MulF: case Op::DivF: case Op::MaxF: case Op::MinF: {
      const Value &a = V(0), &b = V(1);
      const DType ct = Promote(a.dt, b.dt);
      const int64_t n = std::max({a.lanes, b.lanes, dl, (int64_t)0});
      if (ct == DType::F32 && dr->dtype == DType::F32 && dl > 0 && a.lanes == dl &&
          b.lanes == dl && in.op <= Op::DivF) {  // f32 vectors: one float op per lane
        out.Shape(DType::F32, dl);
        const double *x = a.f.data(), *y = b.f.data();
        double* o = out.f.data();
        for (int64_t k = 0; k < dl; ++k) {
          const float u = (float)x[k], v = (float)y[k];
          o[k] = in.op == Op::AddF ? u + v : in.op == Op::SubF ? u - v
               : in.op == Op::MulF ? u * v : u / v;
        }
        return commit();
      }
      out.Shape(dr->dtype, dl ? dl : n);
      for (int64_t k = 0; k < out.n(); ++k) PutF(out, k, FloatOp(in.op, LF(a, k), LF(b, k), ct));
      return commit();
    }
    case Op::AddI: case Op::SubI: case Op::MulI: case Op::MaxSI: case Op::MinSI: case Op::AndI:
    case Op::OrI: case Op::XorI: {
      const Value &a = V(0), &b = V(1);
      out.Shape(dr->dtype, dl);
      for (int64_t k = 0; k < out.n(); ++k) PutI(out, k, IntOp(in.op, LI(a, k), LI(b, k)), false);
      return commit();
    }
    case Op::Fma: {  // f32 only (the arith.fma verifier): C's fmaf, rounded once
      const Value &a = V(0), &b = V(1), &c = V(2);
      out.Shape(dr->dtype, dl);
      for (int64_t k = 0; k < out.n(); ++k)
        PutF(out, k, (double)std::fmaf((float)LF(a, k), (float)LF(b, k), (float)LF(c, k)));
      return commit();
    }
    case Op::RsqrtE: {  // f32 only (the arith.rsqrte verifier): the host's rsqrtss
      const Value& a = V(0);
      out.Shape(dr->dtype, dl);
      for (int64_t k = 0; k < out.n(); ++k)
        PutF(out, k, (double)_mm_cvtss_f32(_mm_rsqrt_ss(_mm_set_ss((float)LF(a, k)))));
      return commit();
    }
    case Op::Sqrt: case Op::NegF: {
      const Value& a = V(0);
      const DType ct = IsFloat(a.dt) ? a.dt : DType::F64;
      out.Shape(dr->dtype, dl);
      for (int64_t k = 0; k < out.n(); ++k) {
        const double x = LF(a, k);
        double r;
        if (in.op == Op::NegF) r = -x;
        else if (ct == DType::F64) r = std::sqrt(x);
        else r = RoundTo((double)std::sqrt((float)x), ct);
        PutF(out, k, r);
      }
      return commit();
    }
    case Op::ExtF: case Op::TruncF: case Op::SIToFP: case Op::FPToSI: case Op::IndexCast: {
      const Value& a = V(0);
      out.Shape(dr->dtype, dl);
      for (int64_t k = 0; k < out.n(); ++k) {
        if (IsFloat(dr->dtype)) {
          PutF(out, k, IsFloat(a.dt) ? LF(a, k) : (double)LI(a, k));
        } else if (IsFloat(a.dt)) {
          const double t = std::trunc(LF(a, k));
          if (!std::isfinite(t) || std::fabs(t) >= 9.2233720368547758e18) {
            if (!dl) throw RunError("fptosi: cannot convert " + std::to_string(t) + " to an integer");
            PutI(out, k, std::numeric_limits<int64_t>::min(), true);
          } else {
            PutI(out, k, (int64_t)t, dl > 0);
          }
        } else {
          PutI(out, k, LI(a, k), dl > 0);
        }
      }
      return commit();
    }
    case Op::CmpI: case Op::CmpF: {
      const Value &a = V(0), &b = V(1);
      out.Shape(dr->dtype, dl);
      for (int64_t k = 0; k < out.n(); ++k) {
        const bool r = in.op == Op::CmpI ? CompareI(in.pred, LI(a, k), LI(b, k))
                                         : Compare(in.pred, LF(a, k), LF(b, k));
        PutI(out, k, r, true);
      }
      return commit();
    }
    case Op::Select: {
      const Value &c = V(0), &a = V(1), &b = V(2);
      if (!dl) {  // `a if bool(c) else b`, as is
        const bool t = IsFloat(c.dt) ? c.f[0] != 0.0 : c.i[0] != 0;
        out = t ? a : b;
        return commit();
      }
      out.Shape(dr->dtype, dl);
      for (int64_t k = 0; k < dl; ++k) {
        const bool t = IsFloat(c.dt) ? LF(c, k) != 0.0 : LI(c, k) != 0;
        const Value& s = t ? a : b;
        if (IsFloat(s.dt)) PutF(out, k, LF(s, k));
        else PutI(out, k, LI(s, k), true);
      }
      return commit();
    }
    case Op::Dim: {
      const Buffer& m = Mem(in.src[0], "dim");
      int64_t ax = in.imm[0].i;
      const int64_t rank = (int64_t)m.shape.size();
      if (ax < 0) ax += rank;
      if (ax < 0 || ax >= rank) throw RunError("dim: axis out of range");
      out.Shape(DType::I64, 0);
      out.i[0] = m.shape[ax];
      return commit();
    }
    case Op::Load: {
      const Buffer& m = Mem(in.src[0], "load");
      int64_t idx[8];
      if (in.src.size() - 1 > 8) throw RunError("load: rank > 8");
      for (size_t j = 1; j < in.src.size(); ++j) idx[j - 1] = V(j).I(0);
      const int64_t at = ElementIndex(m, idx, in.src.size() - 1, "load");
      out.Shape(m.dtype, 0);
      if (!m.data) out.known = false;  // addresses mode: contents not computed
      else if (IsFloat(m.dtype)) out.f[0] = m.GetF(at);
      else out.i[0] = m.GetI(at);
      return commit();
    }
    case Op::Store: {
      const Value& x = V(0);
      const Buffer& mc = Mem(in.src[1], "store");
      Buffer& m = const_cast<Buffer&>(mc);
      if (!SameNumpyType(x.dt, m.dtype) || x.lanes != 0)
        throw ProgramError(std::string("store: ") + DTypeName(x.dt) + " into " +
                           DTypeName(m.dtype) + " array");
      if (m.readonly) throw RunError("store into an input of the program");
      int64_t idx[8];
      if (in.src.size() - 2 > 8) throw RunError("store: rank > 8");
      for (size_t j = 2; j < in.src.size(); ++j) idx[j - 2] = V(j).I(0);
      const int64_t at = ElementIndex(m, idx, in.src.size() - 2, "store");
      if (!m.data) return;  // addresses mode: contents not computed
      if (!x.known) throw AddressesUnsupported("data stored into a buffer the access unit reads");
      if (addresses_) memo_off_ = true;  // memory the replays do not see changes
      if (IsFloat(m.dtype)) m.SetF(at, x.f[0]);
      else m.SetI(at, x.i[0]);
      return;
    }
    case Op::MaskedLoad: case Op::MaskedStore: {
      const bool load = in.op == Op::MaskedLoad;
      const Buffer& mc = Mem(in.src[0], load ? "maskedload" : "maskedstore");
      Buffer& m = const_cast<Buffer&>(mc);
      const size_t ni = in.src.size() - 3;
      if (ni == 0 || ni > 8) throw RunError("masked access: bad rank");
      int64_t idx[8];
      for (size_t j = 0; j < ni; ++j) idx[j] = V(1 + j).I(0);
      const Value& mask = V(1 + ni);
      const Value& x = V(2 + ni);  // passthru / the stored vector
      if (load) {
        out = x;
        out.set = true;
      } else if (m.readonly) {
        throw RunError("maskedstore into an input of the program");
      }
      const int64_t lanes = mask.n();
      if (x.lanes < lanes)
        throw RunError(std::string(load ? "maskedload: passthru" : "maskedstore: value") +
                       " has fewer lanes than the mask");
      const char* what = load ? "maskedload" : "maskedstore";
      if (m.shape.size() != ni) ElementIndex(m, idx, ni, what);  // rank error
      // the leading indices are fixed: check them once; lanes walk the last dimension
      int64_t row = 0;
      for (size_t j = 0; j + 1 < ni; ++j) {
        if (idx[j] < 0 || idx[j] >= m.shape[j]) {
          for (int64_t l = 0; l < lanes; ++l)
            if (LI(mask, l)) ElementIndex(m, idx, ni, what);  // throws the reference's error
          break;
        }
        row = row * m.shape[j] + idx[j];
      }
      const int64_t last = idx[ni - 1], width = m.shape[ni - 1];
      if (m.data && !x.known && !load)
        throw AddressesUnsupported("data stored into a buffer the access unit reads");
      if (addresses_ && m.data && !load) memo_off_ = true;  // memory the replays do not see
      if (m.data && m.dtype == DType::F32 && (load ? out.dt : x.dt) == DType::F32 &&
          (load ? out.lanes : x.lanes) == lanes && mask.lanes == lanes &&
          !IsFloat(mask.dt) && last >= 0 &&
          last + lanes <= width) {  // f32 rows, every lane inside: no per-lane checks
        float* p = reinterpret_cast<float*>(m.data) + row * width + last;
        for (int64_t l = 0; l < lanes; ++l) {
          if (!mask.i[l]) continue;
          if (load) out.f[l] = p[l];
          else p[l] = (float)x.f[l];
        }
        if (load) return commit();
        return;
      }
      if (!m.data && mask.lanes == lanes && last >= 0 && last + lanes <= width) {
        if (load) out.known = false;  // addresses mode, every lane inside: nothing to check
        if (load) return commit();
        return;
      }
      for (int64_t l = 0; l < lanes; ++l) {
        if (!LI(mask, l)) continue;
        const int64_t col = last + l;
        if (col < 0 || col >= width) {
          idx[ni - 1] = col;
          ElementIndex(m, idx, ni, what);
        }
        if (!m.data) continue;  // addresses mode: bounds checked, contents not computed
        const int64_t at = row * width + col;
        if (load) {
          if (IsFloat(out.dt)) out.f[out.lanes > 0 ? l : 0] = RoundTo(m.GetF(at), out.dt);
          else out.i[out.lanes > 0 ? l : 0] = Wrap(m.GetI(at), out.dt);
        } else {
          if (IsFloat(m.dtype)) m.SetF(at, RoundTo(LF(x, l), m.dtype));
          else m.SetI(at, Wrap(LI(x, l), m.dtype));
        }
      }
      if (load && !m.data) out.known = false;
      if (load) return commit();
      return;
    }
    case Op::Broadcast: case Op::FirstLane: {
      const Value& a = V(0);
      out.Shape(dr->dtype, dl);
      for (int64_t k = 0; k < out.n(); ++k) {
        if (IsFloat(a.dt)) PutF(out, k, a.F(0));
        else PutI(out, k, a.I(0), dl > 0);
      }
      return commit();
    }
    case Op::Reduce: {
      const Value& a = V(0);
      out.Shape(a.dt, 0);
      const int kind = in.pred;  // 15 add, 16 max, 17 min
      if (IsFloat(a.dt)) {
        double acc = a.f[0];
        for (int64_t k = 1; k < a.n(); ++k)
          acc = FloatOp(kind == 15 ? Op::AddF : kind == 16 ? Op::MaxF : Op::MinF, acc, a.f[k], a.dt);
        out.f[0] = acc;
      } else {
        int64_t acc = a.i[0];
        for (int64_t k = 1; k < a.n(); ++k)
          acc = Wrap(kind == 15 ? IntOp(Op::AddI, acc, a.i[k])
                                : kind == 16 ? std::max(acc, a.i[k]) : std::min(acc, a.i[k]),
                     a.dt);
        out.i[0] = acc;
      }
      return commit();
    }
    case Op::Alloc: {
      std::vector<int64_t> shape;
      size_t j = 0;
      for (const Imm& m : in.imm) {
        if (m.kind != Imm::kInt) throw RunError("alloc: bad shape");
        if (m.i < 0) {
          if (j >= in.src.size()) throw RunError("alloc: missing dynamic size");
          shape.push_back(V(j++).I(0));
        } else {
          shape.push_back(m.i);
        }
        if (shape.back() < 0) throw RunError("alloc: negative size");
      }
      BufferRef b = addresses_ ? ShapeOnlyBuffer(dr->dtype, shape) : NewBuffer(dr->dtype, shape);
      for (int64_t e = 0; b->data && e < b->numel(); ++e) {
        if (IsFloat(b->dtype)) b->SetF(e, std::numeric_limits<double>::quiet_NaN());
        else b->SetI(e, b->dtype == DType::I1 ? 0 : Wrap(-0x5EED, b->dtype));
      }
      Place(*b);
      out.Shape(dr->dtype, -1);
      out.m = b;
      return commit();
    }
    case Op::Mov:
      out = V(0);
      return commit();
    case Op::FromBuffer: {
      const Buffer& b = Mem(in.src[0], "from_buffer");
      const int64_t i = V(1).I(0);
      if (i < 0) throw ProgramError("from_buffer: negative position " + std::to_string(i));
      if (b.shape.size() != 1) throw RunError("from_buffer: the buffer is not 1-D");
      out.Shape(b.dtype, dl);
      if (!b.data) {  // addresses mode: contents not computed
        out.known = false;
        return commit();
      }
      if (b.dtype == DType::F32 && i + dl <= b.shape[0]) {
        const float* p = reinterpret_cast<const float*>(b.data) + i;
        for (int64_t k = 0; k < dl; ++k) out.f[k] = p[k];
        return commit();
      }
      for (int64_t k = 0; k < dl; ++k) {
        const int64_t at = i + k;
        if (IsFloat(b.dtype)) out.f[k] = at < b.shape[0] ? b.GetF(at) : 0.0;
        else out.i[k] = at < b.shape[0] ? b.GetI(at) : 0;
      }
      return commit();
    }
    case Op::VMask: {
      const int64_t i = V(0).I(0), lb = V(1).I(0), ub = V(2).I(0), st = V(3).I(0);
      out.Shape(DType::I1, dl);
      for (int64_t k = 0; k < dl; ++k) {
        const int64_t x = i + k * st;
        out.i[k] = x >= lb && x < ub;
      }
      return commit();
    }
    case Op::Unique: {
      const Buffer& ids = Mem(in.src[0], "unique");
      if (!ids.data) throw AddressesUnsupported("unique over a buffer the core writes");
      const int64_t n = ids.numel();
      for (int64_t k = 0; k < n; ++k)
        trace_->Load(Address(ids, k), ItemSize(ids.dtype), -1, false, 0);
      std::vector<int64_t> v(n);
      for (int64_t k = 0; k < n; ++k) v[k] = ids.GetI(k);
      std::vector<int64_t> u(v);
      std::sort(u.begin(), u.end());
      u.erase(std::unique(u.begin(), u.end()), u.end());
      BufferRef ub = NewBuffer(ids.dtype, {(int64_t)u.size()});
      for (size_t k = 0; k < u.size(); ++k) ub->SetI(k, u[k]);
      BufferRef inv = NewBuffer(DType::I64, ids.shape);
      for (int64_t k = 0; k < n; ++k)
        inv->SetI(k, std::lower_bound(u.begin(), u.end(), v[k]) - u.begin());
      Place(*ub);
      Place(*inv);
      Value a, b, c;
      a.Shape(ids.dtype, -1), a.m = ub;
      b.Shape(DType::I64, -1), b.m = inv;
      c.Shape(DType::I64, 0), c.i[0] = (int64_t)u.size();
      val_[in.dst[0]] = a, val_[in.dst[1]] = b, val_[in.dst[2]] = c;
      return;
    }
    default:
      throw RunError("instruction not supported here");
  }
}

}  // namespace ember_emu
