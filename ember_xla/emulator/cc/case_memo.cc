// The static plan of the memoised callback firings (case_memo.h): per case, whether it may be
// memoised, its live-in registers, its pops and the registers a replay must restore.
#include "case_memo.h"

#include <algorithm>

namespace ember_emu {
namespace {

void AddUnique(std::vector<int32_t>* v, int32_t r) {
  if (std::find(v->begin(), v->end(), r) == v->end()) v->push_back(r);
}

// Registers `in` reads (inc reads the register it bumps).
template <typename Fn>
void ForReads(const Instr& in, Fn&& fn) {
  for (int32_t r : in.src) fn(r);
  if (in.op == Op::Inc) fn(in.dst[0]);
}

struct Walk {
  CaseMemo* memo;
  std::vector<int32_t> writes;  // every register written (with repeats: one per writer)

  // `killed`: the registers surely written since the firing began, as seen at `lo` (a loop
  // body or a branch walks a copy: it may run zero times; an instruction's write is whole).
  // A read of a register not killed is a read of its value at the firing's start: live-in.
  void Run(const std::vector<Instr>& code, size_t lo, size_t hi, bool top,
           std::vector<uint8_t>& killed) {
    size_t i = lo;
    while (i < hi) {
      const Instr& in = code[i];
      if (in.op == Op::Run || in.op == Op::Alloc || in.op == Op::Unique) memo->eligible = false;
      if (in.op == Op::Pop) {
        if (!top) memo->eligible = false;
        memo->pop_dst.push_back(in.dst[0]);
      }
      ForReads(in, [&](int32_t r) {
        if (!killed[r]) AddUnique(&memo->live_in, r);
      });
      for (int32_t d : in.dst) writes.push_back(d);
      if (in.op == Op::For) {  // each iteration writes the induction variable first
        const size_t n = (size_t)in.imm[0].i;
        std::vector<uint8_t> body = killed;
        for (int32_t d : in.dst) body[d] = 1;
        Run(code, i + 1, i + 1 + n, false, body);
        i += 1 + n;
      } else if (in.op == Op::If) {
        const size_t nt = (size_t)in.imm[0].i, ne = (size_t)in.imm[1].i;
        std::vector<uint8_t> then_k = killed, else_k = killed;
        Run(code, i + 1, i + 1 + nt, false, then_k);
        Run(code, i + 1 + nt, i + 1 + nt + ne, false, else_k);
        i += 1 + nt + ne;
      } else {
        for (int32_t d : in.dst) killed[d] = 1;
        ++i;
      }
    }
  }
};

void MarkReads(const std::vector<Instr>& code, std::vector<uint8_t>* read) {
  for (const Instr& in : code) ForReads(in, [&](int32_t r) { (*read)[r] = 1; });
}

}  // namespace

std::vector<CaseMemo> PlanCaseMemos(const Program& p) {
  const size_t nr = p.regs.size();
  // registers read outside the cases: top-level code, streams, engine variables
  std::vector<uint8_t> global(nr, 0);
  MarkReads(p.code, &global);
  for (const Engine& e : p.engines) {
    for (const Stream& s : e.streams)
      if (s.kind == StreamKind::Reg || s.kind == StreamKind::Mem || s.kind == StreamKind::VMem)
        if (!s.imm.empty() && s.imm[0].kind == Imm::kInt && s.imm[0].i >= 0 &&
            (size_t)s.imm[0].i < nr)
          global[(size_t)s.imm[0].i] = 1;
    for (const Var& v : e.vars)
      for (int32_t r : {v.reg, v.init, v.result})
        if (r >= 0) global[(size_t)r] = 1;
  }
  std::vector<const Case*> cases;
  for (const Engine& e : p.engines)
    for (const Case& c : e.cases) cases.push_back(&c);
  std::vector<std::vector<uint8_t>> reads(cases.size(), std::vector<uint8_t>(nr, 0));
  for (size_t k = 0; k < cases.size(); ++k) MarkReads(cases[k]->code, &reads[k]);

  std::vector<CaseMemo> out(cases.size());
  for (size_t k = 0; k < cases.size(); ++k) {
    CaseMemo& m = out[k];
    m.eligible = true;
    Walk w{&m, {}};
    std::vector<uint8_t> killed(nr, 0);
    w.Run(cases[k]->code, 0, cases[k]->code.size(), true, killed);
    for (int32_t d : m.pop_dst)  // a pop's destination must be written by that pop only
      if (std::count(w.writes.begin(), w.writes.end(), d) != 1) m.eligible = false;
    if (!m.eligible) continue;
    std::vector<int32_t> restore;
    for (int32_t d : w.writes) {
      if (std::find(m.pop_dst.begin(), m.pop_dst.end(), d) != m.pop_dst.end()) continue;
      bool needed = global[d] ||
                    std::find(m.live_in.begin(), m.live_in.end(), d) != m.live_in.end();
      for (size_t o = 0; o < cases.size() && !needed; ++o) needed = o != k && reads[o][d];
      if (needed) AddUnique(&restore, d);
    }
    m.restore = std::move(restore);
  }
  return out;
}

}  // namespace ember_emu
