// The C++ emulate path: program text -> executor -> timing core, with no Python in the loop.
// (a) a C ABI for ember_xla/emulator/timing_cc.py (run a program on numpy buffers, read its trace,
//     simulate it), (b) the XLA typed-FFI target "ember.emulate" (symbol EmberEmulate): the
//     operands of the cluster in, its results out, attributes `program` (the one-line program
//     text), `target` (fast.target_text) and `cluster` (a name); each call appends its timing
//     result to a per-process report log that Python reads and clears (fast.take_reports).
#include <cstdio>
#include <exception>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <vector>

#include "machine.h"
#include "program.h"
#include "target_text.h"
#include "timing.h"
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace ember_emu {
namespace {

// A freed run's trace, kept cleared for the next run: its columns' pages stay mapped, so a run
// no longer than it records without page faults (one trace of at most kKeptEvents events,
// ~34 bytes each; a longer one is freed as before, into timing.cc's kept mappings).
constexpr size_t kKeptTraces = 1, kKeptEvents = (size_t)8 << 20;
std::mutex g_trace_mu;
std::vector<std::unique_ptr<TraceBuffer>> g_traces;

std::unique_ptr<TraceBuffer> TakeTrace() {
  {
    std::lock_guard<std::mutex> lock(g_trace_mu);
    if (!g_traces.empty()) {
      std::unique_ptr<TraceBuffer> t = std::move(g_traces.back());
      g_traces.pop_back();
      return t;
    }
  }
  return std::make_unique<TraceBuffer>();
}

void KeepTrace(std::unique_ptr<TraceBuffer> t) {
  if (!t || t->kind.size() > kKeptEvents) return;
  t->Clear();
  std::lock_guard<std::mutex> lock(g_trace_mu);
  if (g_traces.size() < kKeptTraces) g_traces.push_back(std::move(t));
}

struct Run {
  Program program;
  std::unique_ptr<TraceBuffer> trace_owned = TakeTrace();
  TraceBuffer& trace = *trace_owned;
  std::unique_ptr<Machine> machine;
  Run() = default;
  Run(const Run&) = delete;
  Run& operator=(const Run&) = delete;
  ~Run() {
    machine.reset();
    KeepTrace(std::move(trace_owned));
  }
};

// Simulates a finished run on a target; false with a message when it does not fit.
bool SimulateRun(const Run& r, const EmuTarget& t, TimingResult* out, std::string* err) {
  const std::vector<double> cyc = r.machine->CaseCycles(t.dispatch, t.op_cycles);
  const std::vector<int64_t> pops = r.machine->CasePops();
  return Simulate(t.timing, r.trace.View((int64_t)cyc.size(), cyc.data(), pops.data()), out, err);
}

struct Report {
  std::string cluster, target;
  TimingResult result;
};
std::mutex g_log_mu;
std::vector<Report> g_log;

void Copy(const std::string& msg, char* err, int64_t errlen) {
  if (err && errlen > 0) std::snprintf(err, (size_t)errlen, "%s", msg.c_str());
}

template <typename Fn>
int Guard(char* err, int64_t errlen, Fn&& fn) {
  try {
    fn();
    return 0;
  } catch (const ProgramError& e) {
    Copy(std::string("program: ") + e.what(), err, errlen);
    return 2;
  } catch (const RunError& e) {
    Copy(e.what(), err, errlen);
    return 3;
  } catch (const AddressesUnsupported& e) {
    Copy(std::string("addresses: ") + e.what(), err, errlen);
    return 6;
  } catch (const std::bad_alloc&) {
    Copy("out of memory", err, errlen);
    return 4;
  } catch (const std::exception& e) {
    Copy(e.what(), err, errlen);
    return 5;
  }
}

}  // namespace
}  // namespace ember_emu

using ember_emu::Run;

#define EMBER_EMU_EXPORT extern "C" __attribute__((visibility("default")))

// Parses `program` and runs it on n_args buffers (the program's arguments in order; inputs are
// read, outputs written in place). `addresses`: the addresses mode (machine.h; outputs are not
// written and their data may be null). Returns a handle (free it with ember_run_free) or null
// with the reason in err (rc: 2 malformed program, 3 run-time error, 6 the addresses mode
// cannot run it).
EMBER_EMU_EXPORT void* ember_run_program_mode(const char* program, int64_t addresses,
                                              int64_t n_args, const int64_t* ranks,
                                              const int64_t* dims, void* const* data,
                                              const int64_t* nbytes, char* err, int64_t errlen) {
  Run* run = nullptr;
  const int rc = ember_emu::Guard(err, errlen, [&] {
    auto r = std::make_unique<Run>();
    r->program = ember_emu::ParseProgram(program);
    if ((int64_t)r->program.args.size() != n_args)
      throw ember_emu::RunError("the program takes " + std::to_string(r->program.args.size()) +
                                " arguments, got " + std::to_string(n_args));
    r->machine = std::make_unique<ember_emu::Machine>(r->program, &r->trace, addresses != 0);
    int64_t at = 0;
    for (int64_t k = 0; k < n_args; ++k) {
      std::vector<int64_t> shape(dims + at, dims + at + ranks[k]);
      at += ranks[k];
      r->machine->BindArg(k, shape, data[k], nbytes[k]);
    }
    r->machine->Run();
    run = r.release();
  });
  return rc ? nullptr : run;
}

// ember_run_program_mode in the full mode.
EMBER_EMU_EXPORT void* ember_run_program(const char* program, int64_t n_args,
                                         const int64_t* ranks, const int64_t* dims,
                                         void* const* data, const int64_t* nbytes, char* err,
                                         int64_t errlen) {
  return ember_run_program_mode(program, 0, n_args, ranks, dims, data, nbytes, err, errlen);
}

EMBER_EMU_EXPORT void ember_run_free(void* h) { delete static_cast<Run*>(h); }

EMBER_EMU_EXPORT int64_t ember_run_trace_size(void* h) {
  return (int64_t) static_cast<Run*>(h)->trace.kind.size();
}

// Copies the trace into arrays of ember_run_trace_size elements.
EMBER_EMU_EXPORT void ember_run_trace_copy(void* h, int8_t* kind, int64_t* a, int64_t* b,
                                           int64_t* c, int64_t* layer, uint8_t* queued) {
  const auto& t = static_cast<Run*>(h)->trace;
  const size_t n = t.kind.size();
  std::copy(t.kind.begin(), t.kind.end(), kind);
  std::copy(t.a.begin(), t.a.end(), a);
  std::copy(t.b.begin(), t.b.end(), b);
  std::copy(t.c.begin(), t.c.end(), c);
  std::copy(t.layer.begin(), t.layer.end(), layer);
  std::copy(t.queued.begin(), t.queued.end(), queued);
  (void)n;
}

EMBER_EMU_EXPORT int64_t ember_run_n_cases(void* h) {
  return (int64_t) static_cast<Run*>(h)->machine->cases().size();
}

// Case `k` (callback number): pops, firings, the op classes in counted order (n_order of them,
// into order[9]) and their totals by class (totals[9]).
EMBER_EMU_EXPORT void ember_run_case(void* h, int64_t k, int64_t* pops, int64_t* fired,
                                     int64_t* n_order, int64_t* order, double* totals) {
  const ember_emu::CaseStats& s = static_cast<Run*>(h)->machine->cases()[k];
  *pops = s.pops, *fired = s.fired, *n_order = (int64_t)s.order.size();
  for (size_t j = 0; j < s.order.size(); ++j) order[j] = s.order[j];
  for (int j = 0; j < ember_emu::kNumOpClasses; ++j) totals[j] = s.total.empty() ? 0.0 : s.total[j];
}

// Replays the run's trace on a target (fast.target_text). 0, or 1 with the reason (the program
// does not fit the target) / 2 for a malformed target text.
EMBER_EMU_EXPORT int ember_run_simulate(void* h, const char* target,
                                        ember_emu::TimingResult* out, char* err,
                                        int64_t errlen) {
  int fit = 0;
  const int rc = ember_emu::Guard(err, errlen, [&] {
    const ember_emu::EmuTarget t = ember_emu::ParseTargetText(target);
    std::string msg;
    if (!ember_emu::SimulateRun(*static_cast<Run*>(h), t, out, &msg)) {
      ember_emu::Copy(msg, err, errlen);
      fit = 1;
    }
  });
  return rc ? rc : fit;
}

// -- several runs on the cores of one machine -------------------------------------------------
// Replays runs together on n_cores cores (timing.h: SimulateCores): run p goes to core
// piece_core[p], its load addresses shifted by piece_offset[p] (runs of different clusters get
// disjoint address ranges; shares of one cluster the same); a core runs its runs one after the
// other in the given order (their traces concatenated, callbacks renumbered). The target text
// gives the timing parameters; n_private: how many of its cache levels each core has of its
// own. out: n_cores results; piece_end[p]: the cycle core piece_core[p]'s execute unit finished
// run p. 0, 1 with the reason (does not fit), 2.. malformed input.
EMBER_EMU_EXPORT int ember_cores_simulate(const char* target, int64_t n_private, int64_t n_cores,
                                          int64_t n_pieces, void* const* runs,
                                          const int64_t* piece_core,
                                          const int64_t* piece_offset,
                                          ember_emu::TimingResult* out, double* piece_end,
                                          char* err, int64_t errlen) {
  int fit = 0;
  const int rc = ember_emu::Guard(err, errlen, [&] {
    const ember_emu::EmuTarget t = ember_emu::ParseTargetText(target);
    if (n_cores < 1) throw ember_emu::RunError("no cores");
    std::vector<ember_emu::TraceBuffer> traces((size_t)n_cores);
    std::vector<std::vector<double>> cyc((size_t)n_cores);
    std::vector<std::vector<int64_t>> pops((size_t)n_cores), marks((size_t)n_cores);
    std::vector<int64_t> tokens((size_t)n_cores, 0), slot((size_t)n_pieces, 0);
    for (int64_t p = 0; p < n_pieces; ++p) {
      const int64_t k = piece_core[p];
      if (k < 0 || k >= n_cores) throw ember_emu::RunError("a piece's core is out of range");
      const Run& r = *static_cast<const Run*>(runs[p]);
      ember_emu::TraceBuffer& tb = traces[(size_t)k];
      const int64_t base = (int64_t)tb.kind.size(), case_base = (int64_t)cyc[(size_t)k].size();
      const ember_emu::TraceBuffer& src = r.trace;
      for (size_t i = 0; i < src.kind.size(); ++i) {
        const int8_t kind = src.kind[i];
        if (kind == ember_emu::kLoad)
          tb.Load(src.a[i] + piece_offset[p], src.b[i], src.c[i] < 0 ? -1 : src.c[i] + base,
                  src.queued[i] != 0, src.layer[i]);
        else if (kind == ember_emu::kPush)
          tb.Push(src.a[i]);
        else
          tb.Token(src.a[i] + case_base), ++tokens[(size_t)k];
      }
      slot[(size_t)p] = (int64_t)marks[(size_t)k].size();
      marks[(size_t)k].push_back(tokens[(size_t)k]);
      const std::vector<double> c = r.machine->CaseCycles(t.dispatch, t.op_cycles);
      const std::vector<int64_t> q = r.machine->CasePops();
      cyc[(size_t)k].insert(cyc[(size_t)k].end(), c.begin(), c.end());
      pops[(size_t)k].insert(pops[(size_t)k].end(), q.begin(), q.end());
    }
    std::vector<ember_emu::TraceView> views;
    for (int64_t k = 0; k < n_cores; ++k)
      views.push_back(traces[(size_t)k].View((int64_t)cyc[(size_t)k].size(),
                                             cyc[(size_t)k].data(), pops[(size_t)k].data()));
    std::vector<ember_emu::TimingResult> res;
    std::vector<std::vector<double>> ends;
    std::string msg;
    if (!ember_emu::SimulateCores(t.timing, (size_t)n_private, views, &res, &msg, &marks,
                                  &ends)) {
      ember_emu::Copy(msg, err, errlen);
      fit = 1;
      return;
    }
    std::copy(res.begin(), res.end(), out);
    for (int64_t p = 0; p < n_pieces; ++p) {
      const auto& e = ends[(size_t)piece_core[p]];
      piece_end[p] = (size_t)slot[(size_t)p] < e.size() ? e[(size_t)slot[(size_t)p]] : 0.0;
    }
  });
  return rc ? rc : fit;
}

// -- the report log ------------------------------------------------------------------------------
EMBER_EMU_EXPORT int64_t ember_emulate_report_count() {
  std::lock_guard<std::mutex> lock(ember_emu::g_log_mu);
  return (int64_t)ember_emu::g_log.size();
}

// Report i of the log: its cluster name and target text (NUL-terminated, truncated to len) and
// its result. Returns 0, or 1 when i is out of range.
EMBER_EMU_EXPORT int ember_emulate_report(int64_t i, char* cluster, int64_t cluster_len,
                                          char* target, int64_t target_len,
                                          ember_emu::TimingResult* out) {
  std::lock_guard<std::mutex> lock(ember_emu::g_log_mu);
  if (i < 0 || i >= (int64_t)ember_emu::g_log.size()) return 1;
  const auto& r = ember_emu::g_log[i];
  ember_emu::Copy(r.cluster, cluster, cluster_len);
  ember_emu::Copy(r.target, target, target_len);
  *out = r.result;
  return 0;
}

// Drops the first n reports (those read).
EMBER_EMU_EXPORT void ember_emulate_report_drop(int64_t n) {
  std::lock_guard<std::mutex> lock(ember_emu::g_log_mu);
  auto& log = ember_emu::g_log;
  log.erase(log.begin(), log.begin() + std::min<int64_t>(std::max<int64_t>(n, 0), log.size()));
}

// -- the XLA FFI target ----------------------------------------------------------------------------
namespace ember_emu {
namespace {

DType FromFfi(ffi::DataType t, bool* ok) {
  *ok = true;
  switch (t) {
    case ffi::DataType::F64: return DType::F64;
    case ffi::DataType::F32: return DType::F32;
    case ffi::DataType::F16: return DType::F16;
    case ffi::DataType::BF16: return DType::BF16;
    case ffi::DataType::S64: return DType::I64;
    case ffi::DataType::S32: return DType::I32;
    case ffi::DataType::S16: return DType::I16;
    case ffi::DataType::S8: return DType::I8;
    case ffi::DataType::PRED: return DType::I1;
    default: *ok = false; return DType::F32;
  }
}

ffi::Error CheckBuffer(const Arg& a, ffi::AnyBuffer b, const std::string& where) {
  bool ok;
  const DType d = FromFfi(b.element_type(), &ok);
  if (!ok || !SameNumpyType(d, a.dtype))
    return ffi::Error::InvalidArgument(where + " (" + a.name + "): element type does not match "
                                       "the program's " + DTypeName(a.dtype));
  return ffi::Error::Success();
}

ffi::Error EmulateImpl(ffi::RemainingArgs args, ffi::RemainingRets rets,
                       std::string_view program, std::string_view target,
                       std::string_view cluster) {
  std::string where = "ember.emulate (" + std::string(cluster) + ")";
  try {
    Run r;
    r.program = ParseProgram(program);
    const EmuTarget t = ParseTargetText(target);
    const Program& p = r.program;
    const int64_t n_out = (int64_t)p.args.size() - p.num_inputs;
    if ((int64_t)args.size() != p.num_inputs || (int64_t)rets.size() != n_out)
      return ffi::Error::InvalidArgument(
          where + ": the program takes " + std::to_string(p.num_inputs) + " operands and " +
          std::to_string(n_out) + " results, the call has " + std::to_string(args.size()) +
          " and " + std::to_string(rets.size()));
    r.machine = std::make_unique<Machine>(r.program, &r.trace);
    int64_t in = 0, out = 0;
    for (size_t k = 0; k < p.args.size(); ++k) {
      const Arg& a = p.args[k];
      if (!a.out) {
        auto b = args.get<ffi::AnyBuffer>(in++);
        if (b.has_error()) return b.error();
        if (auto e = CheckBuffer(a, *b, where + ": operand " + std::to_string(in - 1)); e.failure())
          return e;
        auto dims = b->dimensions();
        r.machine->BindArg((int64_t)k, std::vector<int64_t>(dims.begin(), dims.end()),
                           b->untyped_data(), (int64_t)b->size_bytes());
      } else {
        auto b = rets.get<ffi::AnyBuffer>(out++);
        if (b.has_error()) return b.error();
        if (auto e = CheckBuffer(a, **b, where + ": result " + std::to_string(out - 1)); e.failure())
          return e;
        auto dims = (*b)->dimensions();
        r.machine->BindArg((int64_t)k, std::vector<int64_t>(dims.begin(), dims.end()),
                           (*b)->untyped_data(), (int64_t)(*b)->size_bytes());
      }
    }
    r.machine->Run();
    Report rep;
    std::string msg;
    if (!SimulateRun(r, t, &rep.result, &msg))
      return ffi::Error::InvalidArgument(where + ": the program does not fit target " + t.name +
                                         ": " + msg);
    rep.cluster = std::string(cluster);
    rep.target = std::string(target);
    std::lock_guard<std::mutex> lock(g_log_mu);
    g_log.push_back(std::move(rep));
    return ffi::Error::Success();
  } catch (const ProgramError& e) {
    return ffi::Error::InvalidArgument(where + ": " + e.what());
  } catch (const RunError& e) {
    return ffi::Error::InvalidArgument(where + ": " + e.what());
  } catch (const std::bad_alloc&) {
    return ffi::Error(ffi::ErrorCode::kResourceExhausted, where + ": out of memory");
  } catch (const std::exception& e) {
    return ffi::Error::Internal(where + ": " + e.what());
  }
}

}  // namespace
}  // namespace ember_emu

EMBER_EMU_EXPORT XLA_FFI_Error* EmberEmulate(XLA_FFI_CallFrame* call_frame);

XLA_FFI_DEFINE_HANDLER_SYMBOL(EmberEmulate, ember_emu::EmulateImpl,
                              xla::ffi::Ffi::Bind()
                                  .RemainingArgs()
                                  .RemainingRets()
                                  .Attr<std::string_view>("program")
                                  .Attr<std::string_view>("target")
                                  .Attr<std::string_view>("cluster"));
