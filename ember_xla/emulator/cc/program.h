// The DAE program (format version 1, docs/DAE_PROGRAM.md) in C++: the data model of
// ember_xla/dae/model.py and a parser of its text form (text.py). Errors are
// one-line messages (ProgramError) naming the record.
#ifndef EMBER_XLA_EMULATOR_NATIVE_PROGRAM_H_
#define EMBER_XLA_EMULATOR_NATIVE_PROGRAM_H_

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace ember_emu {

struct ProgramError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
// A run-time error of the program (out-of-bounds access, empty queue, ...): the reference
// raises InterpretError.
struct RunError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

enum class DType : int8_t { F64, F32, F16, BF16, I64, I32, I16, I8, I1, Index };
DType ParseDType(std::string_view s);
const char* DTypeName(DType d);
inline bool IsFloat(DType d) { return d <= DType::BF16; }
inline int ItemSize(DType d) {
  static constexpr int k[] = {8, 4, 2, 2, 8, 4, 2, 1, 1, 8};
  return k[(int)d];
}
int IntWidth(DType d);  // 64 for index

enum class Op : int8_t {
  Const, Dim, AddF, SubF, MulF, DivF, MaxF, MinF, AddI, SubI, MulI, MaxSI, MinSI, AndI, OrI,
  XorI, Sqrt, RsqrtE, NegF, ExtF, TruncF, SIToFP, FPToSI, IndexCast, CmpI, CmpF, Select, Load, Store,
  MaskedLoad, MaskedStore, Broadcast, Reduce, Alloc, For, If, Mov, Inc, Pop, FromBuffer,
  VMask, FirstLane, Unique, Run, Fma
};

// An immediate: an integer, a float or an identifier.
struct Imm {
  enum Kind : int8_t { kInt, kFloat, kWord } kind = kInt;
  int64_t i = 0;
  double f = 0.0;
  std::string w;
};

struct Instr {
  Op op;
  std::vector<int32_t> dst, src;
  std::vector<Imm> imm;
  int8_t cls = -1;   // op class index (OP_CLASSES order) counted in cases, -1 free; see ops.py
  int8_t pred = 0;   // cmp predicate / reduce kind, decoded
};

enum class StreamKind : int8_t { Reg, Ind, Mask, Mem, VMem, Alu, VAlu };
enum class AluOp : int8_t { Add, Sub, Mul, Min, Max, WrapNeg, Trunc32, Clamp, InRange, Cast };

struct Reg {
  char cls;   // 's' 'v' 'm'
  DType dtype;
  int64_t n;  // lanes (v) or rank (m)
};
struct Arg {
  std::string name;
  bool out;
  int32_t reg;
  DType dtype;
  std::vector<int64_t> shape;  // -1 unknown
  int64_t init = -1;           // an output starting as a copy of input arg `init`; -1 poisoned
};
struct TU {
  int32_t parent, lb, ub, step;
  int64_t vl;
};
struct Stream {
  int32_t owner;
  StreamKind kind;
  DType dtype;
  int64_t lanes;
  std::vector<int32_t> src;
  std::vector<Imm> imm;
  AluOp alu = AluOp::Add;
};
enum Event : int8_t { kBegin = 0, kIter = 1, kEnd = 2 };
enum What : int8_t { kPushWhat = 0, kBufferWhat = 1, kTokenWhat = 2 };
struct Registration {
  int32_t tu;
  Event event;
  What what;
  int64_t value;
};
struct Var {
  std::string name;
  int32_t reg, init, result;
};
struct Case {
  int64_t id;
  std::vector<Instr> code;
};
struct Engine {
  std::vector<TU> tus;
  std::vector<Stream> streams;
  std::vector<Registration> regs;
  std::vector<Var> vars;
  std::vector<Case> cases;
};
struct Program {
  std::string name, kind;
  int64_t num_inputs = 0;
  std::vector<Arg> args;
  std::vector<Reg> regs;
  std::vector<Engine> engines;
  std::vector<Instr> code;
};

constexpr int kNumOpClasses = 9;  // load store add mul max convert compare select scalar
constexpr int kClassScalar = 8;

// Parses the text form (records separated by newlines or ';'). Throws ProgramError.
Program ParseProgram(std::string_view text);

}  // namespace ember_emu

#endif  // EMBER_XLA_EMULATOR_NATIVE_PROGRAM_H_
