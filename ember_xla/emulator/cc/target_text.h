// The compact serialisation of a target for the C++ emulator (ember_xla/emulator/timing_cc.py:
// target_text), one line of whitespace-separated fields (floats as Python repr):
//   ember-target 1 NAME CLOCK_GHZ agen_step dram_latency transfer queue_bytes outstanding
//     ctrl_cap line_bytes dispatch OP_CYCLES*9 N_LEVELS (LEVEL_NAME sets ways latency)*N_LEVELS
//     [dram CHANNELS BANKS ROW_LINES ROW_HIT ROW_MISS]   (only for a DRAM with a bank model)
// op cycles in target.OP_CLASSES order. The derived values are computed in Python exactly as
// timing.py computes them, so both cores see the same doubles.
#ifndef EMBER_XLA_EMULATOR_NATIVE_TARGET_TEXT_H_
#define EMBER_XLA_EMULATOR_NATIVE_TARGET_TEXT_H_

#include <cstdlib>
#include <sstream>
#include <string>
#include <string_view>

#include "program.h"
#include "timing.h"

namespace ember_emu {

struct EmuTarget {
  std::string name;
  double clock_ghz = 0;
  TimingTarget timing;
  double dispatch = 0;
  double op_cycles[kNumOpClasses] = {};
};

inline EmuTarget ParseTargetText(std::string_view text) {
  std::istringstream in{std::string(text)};
  std::string head, version;
  EmuTarget t;
  auto fail = [](const std::string& what) -> void {
    throw ProgramError("target description: " + what + " (expected the text of "
                       "ember_xla.emulator.fast.target_text)");
  };
  in >> head >> version >> t.name >> t.clock_ghz;
  if (head != "ember-target" || version != "1") fail("bad header");
  TimingTarget& g = t.timing;
  in >> g.agen_step >> g.dram_latency >> g.transfer >> g.queue_bytes >> g.outstanding >>
      g.ctrl_cap >> g.line_bytes >> t.dispatch;
  for (double& c : t.op_cycles) in >> c;
  int64_t n = 0;
  in >> n;
  if (!in || n < 1 || n > kMaxLevels) fail("bad fields");
  for (int64_t i = 0; i < n; ++i) {
    CacheSpec s{};
    std::string level_name;
    in >> level_name >> s.sets >> s.ways >> s.latency;
    if (!in || s.sets <= 0 || s.ways <= 0 || s.latency < 0) fail("bad cache level");
    g.levels.push_back(s);
  }
  std::string rest;
  if (in >> rest) {
    if (rest != "dram") fail("trailing fields");
    in >> g.dram_channels >> g.dram_banks >> g.dram_row_lines >> g.dram_row_hit >>
        g.dram_row_miss;
    if (!in || g.dram_channels < 1 || g.dram_banks < 0 || g.dram_row_lines < 1 ||
        g.dram_row_hit < 0 || g.dram_row_miss < 0)
      fail("bad dram fields");
    if (in >> rest) fail("trailing fields");
  }
  if (g.agen_step <= 0 || g.transfer <= 0 || g.queue_bytes <= 0 || g.outstanding <= 0 ||
      g.ctrl_cap <= 0 || g.line_bytes <= 0)
    fail("non-positive parameter");
  return t;
}

}  // namespace ember_emu

#endif  // EMBER_XLA_EMULATOR_NATIVE_TARGET_TEXT_H_
