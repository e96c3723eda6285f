// Parser of the DAE program text form (docs/DAE_PROGRAM.md, "The text form"; the Python side
// is ember_xla/dae/text.py). Every index is checked, so a malformed program is
// a ProgramError, never an out-of-bounds access later.
#include <cerrno>
#include <cstdlib>
#include <unordered_map>

#include "program.h"

namespace ember_emu {
namespace {

const char* kDTypes[] = {"f64", "f32", "f16", "bf16", "i64", "i32", "i16", "i8", "i1", "index"};

const std::unordered_map<std::string_view, Op>& OpTable() {
  static const std::unordered_map<std::string_view, Op> t = {
      {"const", Op::Const}, {"dim", Op::Dim}, {"addf", Op::AddF}, {"subf", Op::SubF},
      {"mulf", Op::MulF}, {"divf", Op::DivF}, {"maxf", Op::MaxF}, {"minf", Op::MinF},
      {"addi", Op::AddI}, {"subi", Op::SubI}, {"muli", Op::MulI}, {"maxsi", Op::MaxSI},
      {"minsi", Op::MinSI}, {"andi", Op::AndI}, {"ori", Op::OrI}, {"xori", Op::XorI},
      {"sqrt", Op::Sqrt}, {"rsqrte", Op::RsqrtE}, {"negf", Op::NegF}, {"extf", Op::ExtF},
      {"truncf", Op::TruncF},
      {"sitofp", Op::SIToFP}, {"fptosi", Op::FPToSI}, {"index_cast", Op::IndexCast},
      {"cmpi", Op::CmpI}, {"cmpf", Op::CmpF}, {"select", Op::Select}, {"load", Op::Load},
      {"store", Op::Store}, {"maskedload", Op::MaskedLoad}, {"maskedstore", Op::MaskedStore},
      {"broadcast", Op::Broadcast}, {"reduce", Op::Reduce}, {"alloc", Op::Alloc},
      {"for", Op::For}, {"if", Op::If}, {"mov", Op::Mov}, {"inc", Op::Inc}, {"pop", Op::Pop},
      {"from_buffer", Op::FromBuffer}, {"vmask", Op::VMask}, {"first_lane", Op::FirstLane},
      {"unique", Op::Unique}, {"run", Op::Run}, {"fma", Op::Fma}};
  return t;
}

// (dst, src, imm) counts; -1 = variable (ops.py SHAPE)
void Shape(Op op, int* d, int* s, int* m) {
  *d = 1, *s = 2, *m = 0;
  switch (op) {
    case Op::Sqrt: case Op::RsqrtE: case Op::NegF: case Op::ExtF: case Op::TruncF: case Op::SIToFP:
    case Op::FPToSI: case Op::IndexCast: case Op::Broadcast: case Op::Mov:
    case Op::FirstLane: *s = 1; return;
    case Op::Const: *s = 0, *m = 1; return;
    case Op::Dim: *s = 1, *m = 1; return;
    case Op::CmpI: case Op::CmpF: *m = 1; return;
    case Op::Select: case Op::Fma: *s = 3; return;
    case Op::Load: case Op::MaskedLoad: *s = -1; return;
    case Op::Store: case Op::MaskedStore: *d = 0, *s = -1; return;
    case Op::Reduce: *s = 1, *m = 1; return;
    case Op::Alloc: *s = -1, *m = -1; return;
    case Op::For: *s = 3, *m = 1; return;
    case Op::If: *d = 0, *s = 1, *m = 2; return;
    case Op::Inc: case Op::Pop: *s = 0; return;
    case Op::VMask: *s = 4; return;
    case Op::Unique: *d = 3, *s = 1; return;
    case Op::Run: *d = 0, *s = 0, *m = 1; return;
    default: return;
  }
}

// The op class (target.OP_CLASSES order) of ops.py's op_class, before the integer-scalar rule.
int BaseClass(const Instr& in) {
  switch (in.op) {
    case Op::Load: case Op::MaskedLoad: case Op::FromBuffer: case Op::Pop: return 0;
    case Op::Store: case Op::MaskedStore: return 1;
    case Op::AddF: case Op::SubF: case Op::NegF: case Op::AddI: case Op::SubI: case Op::AndI:
    case Op::OrI: case Op::XorI: return 2;
    case Op::MulF: case Op::DivF: case Op::Sqrt: case Op::RsqrtE: case Op::MulI: case Op::Fma:
      return 3;
    case Op::MaxF: case Op::MinF: case Op::MaxSI: case Op::MinSI: return 4;
    case Op::ExtF: case Op::TruncF: case Op::SIToFP: case Op::FPToSI: case Op::IndexCast:
    case Op::Broadcast: case Op::FirstLane: return 5;
    case Op::CmpF: case Op::CmpI: case Op::VMask: return 6;
    case Op::Select: return 7;
    case Op::For: case Op::If: case Op::Inc: case Op::Dim: return kClassScalar;
    case Op::Reduce: return in.imm[0].w == "add" ? 2 : 4;
    case Op::Const: case Op::Mov: return -1;
    default: return -2;  // not an execute-unit instruction (unique, alloc, run)
  }
}

class Reader {
 public:
  explicit Reader(std::string_view text) {
    size_t i = 0;
    std::vector<std::string_view> rec;
    while (i <= text.size()) {
      if (i == text.size() || text[i] == '\n' || text[i] == ';') {
        if (!rec.empty()) recs_.push_back(rec);
        rec.clear();
        ++i;
        continue;
      }
      if (text[i] == ' ' || text[i] == '\t' || text[i] == '\r') {
        ++i;
        continue;
      }
      size_t j = i;
      while (j < text.size() && text[j] != ' ' && text[j] != '\t' && text[j] != '\r' &&
             text[j] != '\n' && text[j] != ';')
        ++j;
      rec.push_back(text.substr(i, j - i));
      i = j;
    }
  }
  bool done() const { return pos_ == recs_.size(); }
  bool Peek(const char* keyword) const {
    return pos_ < recs_.size() && recs_[pos_][0] == keyword;
  }
  const std::vector<std::string_view>& Next(const char* keyword) {
    if (pos_ >= recs_.size())
      throw ProgramError(std::string("DAE program text ends early (expected ") + keyword + ")");
    const auto& r = recs_[pos_++];
    if (*keyword && r[0] != keyword)
      Fail(std::string("expected '") + keyword + "', got '" + std::string(r[0]) + "'");
    return r;
  }
  [[noreturn]] void Fail(const std::string& msg) const {
    throw ProgramError("record " + std::to_string(pos_) + ": " + msg);
  }
  void Fields(const std::vector<std::string_view>& r, size_t n) const {
    if (r.size() != n)
      Fail("'" + std::string(r[0]) + "' record has " + std::to_string(r.size()) +
           " fields, expected " + std::to_string(n));
  }
  int64_t Int(std::string_view t) const {
    std::string s(t);
    char* end = nullptr;
    errno = 0;
    long long v = std::strtoll(s.c_str(), &end, 10);
    if (s.empty() || *end || errno) Fail("expected an integer, got '" + s + "'");
    return v;
  }
  int64_t Index(std::string_view t, int64_t lo, int64_t hi, const char* what) const {
    int64_t v = Int(t);
    if (v < lo || v >= hi)
      Fail(std::string(what) + " " + std::to_string(v) + " out of range [" +
           std::to_string(lo) + ", " + std::to_string(hi) + ")");
    return v;
  }
  Imm ParseImm(std::string_view t) const {
    Imm m;
    std::string s(t);
    char* end = nullptr;
    errno = 0;
    long long v = std::strtoll(s.c_str(), &end, 10);
    if (!s.empty() && !*end && !errno) {
      m.kind = Imm::kInt, m.i = v;
      return m;
    }
    bool ident = (std::isalpha((unsigned char)s[0]) || s[0] == '_' || s == "-");
    if (ident && s != "nan" && s != "inf") {
      m.kind = Imm::kWord, m.w = s;
      return m;
    }
    double d = std::strtod(s.c_str(), &end);
    if (*end) Fail("bad immediate '" + s + "'");
    m.kind = Imm::kFloat, m.f = d;
    return m;
  }
  DType DT(std::string_view t) const {
    for (int k = 0; k < 10; ++k)
      if (t == kDTypes[k]) return (DType)k;
    Fail("unknown dtype '" + std::string(t) + "'");
  }

 private:
  std::vector<std::vector<std::string_view>> recs_;
  size_t pos_ = 0;
};

std::vector<Instr> Instrs(Reader& r, int64_t n, int64_t n_regs, int64_t n_engines,
                          const std::vector<Reg>& regs) {
  std::vector<Instr> out;
  for (int64_t k = 0; k < n; ++k) {
    const auto& rec = r.Next("");
    auto it = OpTable().find(rec[0]);
    if (it == OpTable().end()) r.Fail("unknown instruction '" + std::string(rec[0]) + "'");
    if (rec.size() < 4) r.Fail("instruction record too short");
    int64_t nd = r.Int(rec[1]), ns = r.Int(rec[2]), nm = r.Int(rec[3]);
    if (nd < 0 || ns < 0 || nm < 0 || (int64_t)rec.size() != 4 + nd + ns + nm)
      r.Fail("'" + std::string(rec[0]) + "' record: field counts do not match");
    Instr in;
    in.op = it->second;
    int d, s, m;
    Shape(in.op, &d, &s, &m);
    if ((d >= 0 && d != nd) || (s >= 0 && s != ns) || (m >= 0 && m != nm))
      r.Fail(std::string(rec[0]) + ": wrong number of destinations, sources or immediates");
    size_t f = 4;
    for (int64_t j = 0; j < nd; ++j) in.dst.push_back((int32_t)r.Index(rec[f++], 0, n_regs, "register"));
    for (int64_t j = 0; j < ns; ++j) in.src.push_back((int32_t)r.Index(rec[f++], 0, n_regs, "register"));
    for (int64_t j = 0; j < nm; ++j) in.imm.push_back(r.ParseImm(rec[f++]));
    if (in.op == Op::Run && (in.imm[0].kind != Imm::kInt || in.imm[0].i < 0 ||
                             in.imm[0].i >= n_engines))
      r.Fail("run: no such engine");
    if ((in.op == Op::For && in.imm[0].kind != Imm::kInt) ||
        (in.op == Op::If && (in.imm[0].kind != Imm::kInt || in.imm[1].kind != Imm::kInt)) ||
        ((in.op == Op::Dim) && in.imm[0].kind != Imm::kInt))
      r.Fail(std::string(rec[0]) + ": expected integer immediates");
    if (in.op == Op::CmpI || in.op == Op::CmpF || in.op == Op::Reduce) {
      static const char* kPreds[] = {"eq", "ne", "slt", "sle", "sgt", "sge", "oeq", "olt",
                                     "ole", "ogt", "oge", "one", "une", "ord", "uno", "add",
                                     "max", "min"};
      in.pred = -1;
      for (int p = 0; p < 18; ++p)
        if (in.imm[0].kind == Imm::kWord && in.imm[0].w == kPreds[p]) in.pred = (int8_t)p;
      if (in.pred < 0) r.Fail(std::string(rec[0]) + ": unknown predicate or kind");
    }
    int cls = BaseClass(in);
    if (cls >= 2 && cls <= 7 && cls != kClassScalar) {  // integer scalars: address arithmetic
      bool all_int_scalar = true;
      for (auto* v : {&in.dst, &in.src})
        for (int32_t x : *v)
          all_int_scalar &= regs[x].cls == 's' && !IsFloat(regs[x].dtype);
      if (all_int_scalar) cls = kClassScalar;
    }
    in.cls = (int8_t)cls;
    out.push_back(std::move(in));
  }
  for (size_t i = 0; i < out.size(); ++i) {
    int64_t len = 1;
    if (out[i].op == Op::For) len += out[i].imm[0].i;
    if (out[i].op == Op::If) len += out[i].imm[0].i + out[i].imm[1].i;
    if (len < 1 || (int64_t)i + len > (int64_t)out.size())
      r.Fail("the body of instruction " + std::to_string(i) + " runs past its list");
  }
  return out;
}

Engine ParseEngine(Reader& r, int64_t k, int64_t n_regs, int64_t n_engines,
                   const std::vector<Reg>& regs) {
  const auto& h = r.Next("engine");
  r.Fields(h, 7);
  if (r.Int(h[1]) != k) r.Fail("expected engine " + std::to_string(k));
  int64_t n_tu = r.Int(h[2]), n_st = r.Int(h[3]), n_on = r.Int(h[4]), n_var = r.Int(h[5]),
          n_case = r.Int(h[6]);
  if (n_tu < 0 || n_st < 0 || n_on < 0 || n_var < 0 || n_case < 0) r.Fail("negative count");
  Engine e;
  for (int64_t t = 0; t < n_tu; ++t) {
    const auto& rec = r.Next("tu");
    r.Fields(rec, 7);
    if (r.Int(rec[1]) != t) r.Fail("expected tu " + std::to_string(t));
    TU u{(int32_t)r.Index(rec[2], -1, t, "parent tu"), (int32_t)r.Index(rec[3], 0, n_st, "stream"),
         (int32_t)r.Index(rec[4], 0, n_st, "stream"), (int32_t)r.Index(rec[5], 0, n_st, "stream"),
         r.Int(rec[6])};
    if (u.vl < 0) r.Fail("negative vl");
    e.tus.push_back(u);
  }
  static const char* kKinds[] = {"reg", "ind", "mask", "mem", "vmem", "alu", "valu"};
  static const char* kAlu[] = {"add", "sub", "mul", "min", "max", "wrapneg", "trunc32",
                               "clamp", "inrange", "cast"};
  for (int64_t s = 0; s < n_st; ++s) {
    const auto& rec = r.Next("stream");
    if (rec.size() < 8 || r.Int(rec[1]) != s) r.Fail("expected stream " + std::to_string(s));
    Stream st;
    st.owner = (int32_t)r.Index(rec[2], -1, n_tu, "owner tu");
    int kind = -1;
    for (int q = 0; q < 7; ++q)
      if (rec[3] == kKinds[q]) kind = q;
    if (kind < 0) r.Fail("unknown stream kind '" + std::string(rec[3]) + "'");
    st.kind = (StreamKind)kind;
    st.dtype = r.DT(rec[4]);
    st.lanes = r.Int(rec[5]);
    int64_t ns = r.Int(rec[6]), nm = r.Int(rec[7]);
    if (ns < 0 || nm < 0 || (int64_t)rec.size() != 8 + ns + nm || st.lanes < 0)
      r.Fail("'stream' record: field counts do not match");
    for (int64_t j = 0; j < ns; ++j) st.src.push_back((int32_t)r.Index(rec[8 + j], 0, n_st, "stream"));
    for (int64_t j = 0; j < nm; ++j) st.imm.push_back(r.ParseImm(rec[8 + ns + j]));
    const bool need_tu = st.kind == StreamKind::Ind || st.kind == StreamKind::Mask;
    const bool need_reg = st.kind == StreamKind::Reg || st.kind == StreamKind::Mem ||
                          st.kind == StreamKind::VMem;
    if ((need_tu || need_reg) &&
        (st.imm.empty() || st.imm[0].kind != Imm::kInt || st.imm[0].i < 0 ||
         st.imm[0].i >= (need_tu ? n_tu : n_regs)))
      r.Fail("stream " + std::to_string(s) + ": bad register or tu immediate");
    if (st.kind == StreamKind::VMem && (st.imm.size() < 2 || st.src.empty()))
      r.Fail("vmem stream needs a mask operand and a contiguous flag");
    if (st.kind == StreamKind::Alu || st.kind == StreamKind::VAlu) {
      int op = -1;
      for (int q = 0; q < 10; ++q)
        if (!st.imm.empty() && st.imm[0].kind == Imm::kWord && st.imm[0].w == kAlu[q]) op = q;
      if (op < 0) r.Fail("unknown alu op");
      st.alu = (AluOp)op;
      const bool unary = st.alu == AluOp::Trunc32 || st.alu == AluOp::Cast;
      if (st.src.size() != (unary ? 1u : 2u) && !(unary && st.src.size() == 2))
        r.Fail("alu stream: wrong number of operands");
    }
    e.streams.push_back(std::move(st));
  }
  for (int64_t j = 0; j < n_on; ++j) {
    const auto& rec = r.Next("on");
    r.Fields(rec, 5);
    Registration g;
    g.tu = (int32_t)r.Index(rec[1], 0, n_tu, "tu");
    if (rec[2] == "begin") g.event = kBegin;
    else if (rec[2] == "iter") g.event = kIter;
    else if (rec[2] == "end") g.event = kEnd;
    else r.Fail("unknown event");
    if (rec[3] == "push") g.what = kPushWhat;
    else if (rec[3] == "buffer") g.what = kBufferWhat;
    else if (rec[3] == "token") g.what = kTokenWhat;
    else r.Fail("unknown registration");
    g.value = g.what == kTokenWhat ? r.Int(rec[4]) : r.Index(rec[4], 0, n_st, "stream");
    e.regs.push_back(g);
  }
  for (int64_t j = 0; j < n_var; ++j) {
    const auto& rec = r.Next("var");
    r.Fields(rec, 5);
    e.vars.push_back(Var{std::string(rec[1]), (int32_t)r.Index(rec[2], 0, n_regs, "register"),
                         (int32_t)r.Index(rec[3], 0, n_regs, "register"),
                         (int32_t)r.Index(rec[4], -1, n_regs, "register")});
  }
  for (int64_t j = 0; j < n_case; ++j) {
    const auto& rec = r.Next("case");
    r.Fields(rec, 3);
    Case c;
    c.id = r.Int(rec[1]);
    int64_t n = r.Int(rec[2]);
    if (n < 0) r.Fail("negative count");
    c.code = Instrs(r, n, n_regs, n_engines, regs);
    for (const Instr& in : c.code)
      if (in.cls == -2) r.Fail("a case runs a non execute-unit instruction");
    e.cases.push_back(std::move(c));
  }
  for (const Registration& g : e.regs) {
    if (g.what != kTokenWhat) continue;
    bool found = false;
    for (const Case& c : e.cases) found |= c.id == g.value;
    if (!found) r.Fail("token " + std::to_string(g.value) + " has no case");
  }
  return e;
}

}  // namespace

DType ParseDType(std::string_view s) {
  for (int k = 0; k < 10; ++k)
    if (s == kDTypes[k]) return (DType)k;
  throw ProgramError("unknown dtype '" + std::string(s) + "'");
}
const char* DTypeName(DType d) { return kDTypes[(int)d]; }
int IntWidth(DType d) {
  static const int k[] = {0, 0, 0, 0, 64, 32, 16, 8, 1, 64};
  return k[(int)d];
}

Program ParseProgram(std::string_view text) {
  Reader r(text);
  const auto& h = r.Next("ember-dae");
  if (h.size() != 2 || h[1] != "1")
    throw ProgramError("unsupported DAE program version (this reader knows 1)");
  Program p;
  const auto& pr = r.Next("program");
  r.Fields(pr, 7);
  p.name = std::string(pr[1]);
  p.kind = std::string(pr[2]);
  p.num_inputs = r.Int(pr[3]);
  int64_t n_args = r.Int(pr[4]), n_regs = r.Int(pr[5]), n_eng = r.Int(pr[6]);
  if (n_args < 0 || n_regs < 0 || n_eng < 0 || p.num_inputs < 0 || p.num_inputs > n_args)
    r.Fail("bad counts");
  for (int64_t k = 0; k < n_args; ++k) {
    const auto& rec = r.Next("arg");
    if (rec.size() < 7 || r.Int(rec[1]) != k || (int64_t)rec.size() != 7 + r.Int(rec[6]))
      r.Fail("bad 'arg' record");
    Arg a;
    a.name = std::string(rec[2]);
    if (rec[3] != "in" && rec[3] != "out") r.Fail("arg role must be in or out");
    a.out = rec[3] == "out";
    a.reg = (int32_t)r.Index(rec[4], 0, n_regs, "register");
    a.dtype = r.DT(rec[5]);
    for (size_t j = 7; j < rec.size(); ++j) a.shape.push_back(r.Int(rec[j]));
    if (r.Peek("init")) {
      const auto& ini = r.Next("init");
      r.Fields(ini, 3);
      if (r.Int(ini[1]) != k) r.Fail("'init' record for another arg");
      a.init = r.Index(ini[2], 0, p.num_inputs, "init input");
      const Arg& src = p.args[a.init];
      if (!a.out || src.dtype != a.dtype || src.shape.size() != a.shape.size())
        r.Fail("an 'init' output must start as an input of its type and rank");
    }
    p.args.push_back(std::move(a));
  }
  for (int64_t k = 0; k < n_regs; ++k) {
    const auto& rec = r.Next("reg");
    r.Fields(rec, 5);
    if (r.Int(rec[1]) != k) r.Fail("expected reg " + std::to_string(k));
    if (rec[2] != "s" && rec[2] != "v" && rec[2] != "m") r.Fail("register class must be s, v or m");
    Reg g{rec[2][0], r.DT(rec[3]), r.Int(rec[4])};
    if (g.n < 0 || (g.cls == 'v' && g.n == 0) || g.n > (1 << 20)) r.Fail("bad register size");
    p.regs.push_back(g);
  }
  for (const Arg& a : p.args)
    if (p.regs[a.reg].cls != 'm' || p.regs[a.reg].dtype != a.dtype ||
        p.regs[a.reg].n != (int64_t)a.shape.size())
      throw ProgramError("arg " + a.name + ": its register is not a memref of its type");
  for (int64_t k = 0; k < n_eng; ++k) p.engines.push_back(ParseEngine(r, k, n_regs, n_eng, p.regs));
  const auto& c = r.Next("code");
  r.Fields(c, 2);
  p.code = Instrs(r, r.Int(c[1]), n_regs, n_eng, p.regs);
  r.Fields(r.Next("end"), 1);
  if (!r.done()) r.Fail("records after 'end'");
  return p;
}

}  // namespace ember_emu
