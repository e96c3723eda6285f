// Several DAE cores replayed together (timing.h: SimulateCores): one detail::Sim per core over
// its trace, their memory systems sharing the target's shared cache levels and DRAM; at each
// step the core whose next load is earliest issues it, so the shared levels see every core's
// requests in time order. One core is exactly Simulate.
#include <memory>
#include <string>
#include <vector>

#include "timing.h"
#include "timing_sim.h"

namespace ember_emu {

bool SimulateCores(const TimingTarget& target, size_t n_private,
                   const std::vector<TraceView>& traces, std::vector<TimingResult>* out,
                   std::string* err, const std::vector<std::vector<int64_t>>* marks,
                   std::vector<std::vector<double>>* mark_times) {
  if (!CheckTarget(target, err)) return false;
  if (n_private > target.levels.size())
    return (*err = "more private cache levels than levels"), false;
  const size_t n = traces.size();
  SharedMemory shared(target, n_private);
  std::vector<std::string> errs(n);
  std::vector<std::unique_ptr<detail::Sim>> sims;
  for (size_t k = 0; k < n; ++k) {
    sims.push_back(std::make_unique<detail::Sim>(target, traces[k], &errs[k], &shared, n_private));
    if (marks && k < marks->size()) sims[k]->SetMarks(&(*marks)[k]);
  }
  auto fail = [&](size_t k) { return (*err = "core " + std::to_string(k) + ": " + errs[k]), false; };
  // next[k]: the cycle of core k's next load; state 1 has one, 0 done issuing
  std::vector<double> next(n, 0.0);
  std::vector<int> state(n, 0);
  for (size_t k = 0; k < n; ++k) {
    if (!sims[k]->Start()) return fail(k);
    state[k] = sims[k]->Next(&next[k]);
    if (state[k] < 0) return fail(k);
  }
  // the shared levels and DRAM see the cores' requests in time order (ties: lower core first)
  for (;;) {
    size_t best = n;
    for (size_t k = 0; k < n; ++k)
      if (state[k] == 1 && (best == n || next[k] < next[best])) best = k;
    if (best == n) break;
    sims[best]->IssueNext();
    state[best] = sims[best]->Next(&next[best]);
    if (state[best] < 0) return fail(best);
  }
  out->assign(n, TimingResult{});
  for (size_t k = 0; k < n; ++k) {
    if (!sims[k]->Drain()) return fail(k);
    sims[k]->Report(&(*out)[k]);
    if (mark_times) mark_times->push_back(sims[k]->mark_times());
  }
  return true;
}

}  // namespace ember_emu
