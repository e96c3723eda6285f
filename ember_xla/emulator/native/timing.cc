// Fast core of the DAE timing model: the same algorithm as ember_xla/emulator/timing.py (the
// Python reference), operation for operation, so both give the same cycle counts. C ABI,
// called through ctypes (ember_xla/emulator/fast.py).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <queue>
#include <vector>

namespace {

struct Level {
  int64_t sets, ways, latency;
  std::vector<std::vector<int64_t>> lines;  // per set, LRU first
  int64_t hits = 0, misses = 0;
  bool lookup(int64_t line) {
    auto& s = lines[line % sets];
    for (size_t i = 0; i < s.size(); ++i) {
      if (s[i] == line) {
        s.erase(s.begin() + i);
        s.push_back(line);
        ++hits;
        return true;
      }
    }
    ++misses;
    return false;
  }
  void fill(int64_t line) {
    auto& s = lines[line % sets];
    if ((int64_t)s.size() >= ways) s.erase(s.begin());
    s.push_back(line);
  }
};

}  // namespace

extern "C" {

struct EmberTimingTarget {
  double agen_step, dram_latency, transfer;
  int64_t queue_bytes, outstanding, ctrl_cap, line_bytes, n_levels;
  const int64_t* level_sets;
  const int64_t* level_ways;
  const int64_t* level_latency;
};

struct EmberTimingResult {
  double cycles, access_busy, execute_busy, queue_full, queue_empty, dram_busy;
  int64_t dram_lines, tokens, entries;
  int64_t level_hits[8], level_misses[8];
};

// kind: 0 LOAD, 1 PUSH, 2 TOKEN. case_cycles/case_pops indexed by case id (< n_cases).
// Returns 0 on success; 1 with a message in err when the program does not fit.
int ember_timing_simulate(const EmberTimingTarget* tg, int64_t n, const int8_t* kind,
                          const int64_t* a, const int64_t* b, const int64_t* c,
                          const int64_t* layer, const uint8_t* queued, int64_t n_cases,
                          const double* case_cycles, const int64_t* case_pops,
                          EmberTimingResult* out, char* err, int64_t errlen) {
  std::vector<Level> levels(tg->n_levels);
  for (int64_t i = 0; i < tg->n_levels; ++i) {
    levels[i].sets = tg->level_sets[i];
    levels[i].ways = tg->level_ways[i];
    levels[i].latency = tg->level_latency[i];
    levels[i].lines.assign(levels[i].sets, {});
  }
  double dram_free = 0, dram_busy = 0;
  int64_t dram_lines = 0;
  auto mem_access = [&](int64_t line, double t) -> double {
    for (size_t i = 0; i < levels.size(); ++i) {
      if (levels[i].lookup(line)) {
        for (size_t u = 0; u < i; ++u) levels[u].fill(line);
        return t + (double)levels[i].latency;
      }
    }
    for (auto& lv : levels) lv.fill(line);
    double start = std::max(t, dram_free);
    dram_free = start + tg->transfer;
    ++dram_lines;
    dram_busy += tg->transfer;
    return start + tg->transfer + tg->dram_latency;
  };

  // -- structure ----------------------------------------------------------------------------
  // layers in first-appearance order (the Python reference's dict order); dense indices
  std::map<int64_t, int64_t> layer_index;
  std::vector<std::vector<int64_t>> layers;
  std::vector<size_t> head;
  std::vector<int64_t> entry_of(n, -1);
  std::vector<int64_t> entry_bytes, entry_remaining;
  std::vector<double> entry_max;
  std::vector<int64_t> token_case, token_after;
  std::vector<int64_t> pending;
  for (int64_t i = 0; i < n; ++i) {
    if (kind[i] == 0) {
      auto it = layer_index.find(layer[i]);
      if (it == layer_index.end()) {
        it = layer_index.emplace(layer[i], (int64_t)layers.size()).first;
        layers.emplace_back();
        head.push_back(0);
      }
      layers[it->second].push_back(i);
      if (queued[i]) pending.push_back(i);
    } else if (kind[i] == 1) {
      int64_t e = (int64_t)entry_bytes.size();
      for (int64_t p : pending) entry_of[p] = e;
      entry_remaining.push_back((int64_t)pending.size());
      entry_max.push_back(0.0);
      entry_bytes.push_back(a[i]);
      if (a[i] > tg->queue_bytes) {
        std::snprintf(err, errlen, "a data-queue entry of %lld bytes does not fit the %lld-byte "
                      "data queue", (long long)a[i], (long long)tg->queue_bytes);
        return 1;
      }
      pending.clear();
    } else {
      if (a[i] < 0 || a[i] >= n_cases) {
        std::snprintf(err, errlen, "control token %lld has no case cost", (long long)a[i]);
        return 1;
      }
      token_case.push_back(a[i]);
      token_after.push_back((int64_t)entry_bytes.size());
    }
  }
  const int64_t n_e = (int64_t)entry_bytes.size();
  const int64_t n_tok = (int64_t)token_case.size();
  std::vector<double> done(n, 0.0);
  std::vector<char> is_done(n, 0);
  std::vector<double> pop_time(n_e, 0.0);
  std::vector<char> popped(n_e, 0);
  int64_t reserved = 0, used = 0;
  std::deque<int64_t> in_queue;
  std::vector<double> tok_time, tok_start;
  double exec_free = 0, queue_full = 0, queue_empty = 0, exec_busy = 0, access_busy = 0;
  int64_t data_ptr = 0;
  bool fatal = false;

  auto pushed = [&](int64_t e, double* t) -> bool {
    if (entry_remaining[e] > 0) return false;
    *t = entry_max[e];
    return true;
  };
  auto exec_next = [&]() -> bool {
    int64_t k = (int64_t)tok_start.size();
    if (k >= n_tok) return false;
    int64_t before = token_after[k];
    double t_tok = tok_time.empty() ? 0.0 : tok_time.back();
    if (before) {
      double p;
      if (!pushed(before - 1, &p)) return false;
      t_tok = std::max(t_tok, p);
    }
    if (k >= tg->ctrl_cap) t_tok = std::max(t_tok, tok_start[k - tg->ctrl_cap]);
    int64_t cs = token_case[k];
    int64_t pops = case_pops[cs];
    double ready = t_tok;
    for (int64_t e = data_ptr; e < data_ptr + pops; ++e) {
      if (e >= n_e) {
        std::snprintf(err, errlen, "callback %lld pops more data than was pushed",
                      (long long)cs);
        fatal = true;
        return false;
      }
      double p;
      if (!pushed(e, &p)) return false;
      ready = std::max(ready, p);
    }
    double start = std::max(exec_free, ready);
    if (ready > exec_free) queue_empty += ready - exec_free;
    double cost = case_cycles[cs];
    exec_free = start + cost;
    exec_busy += cost;
    for (int64_t e = data_ptr; e < data_ptr + pops; ++e) {
      pop_time[e] = exec_free;
      popped[e] = 1;
    }
    data_ptr += pops;
    tok_time.push_back(t_tok);
    tok_start.push_back(start);
    return true;
  };
  auto pop_of = [&](int64_t e, double* t) -> bool {
    while (!popped[e]) {
      if (!exec_next()) return false;
    }
    *t = pop_time[e];
    return true;
  };
  auto reserve = [&](int64_t e, double t, double* room) -> bool {
    if (e != reserved) return false;
    int64_t need = entry_bytes[e];
    double t_free = t;
    while (used + need > tg->queue_bytes) {
      double p;
      if (!pop_of(in_queue.front(), &p)) return false;
      t_free = std::max(t_free, p);
      used -= entry_bytes[in_queue.front()];
      in_queue.pop_front();
    }
    *room = t_free;
    return true;
  };

  std::vector<double> agen(layers.size(), 0.0);
  std::priority_queue<double, std::vector<double>, std::greater<double>> heap;
  const int64_t lb = tg->line_bytes;
  for (;;) {
    bool any = false;
    int64_t best = 0;
    bool have = false;
    double best_t = INFINITY, best_wait = 0;
    for (int64_t l = 0; l < (int64_t)layers.size(); ++l) {
      if (head[l] >= layers[l].size()) continue;
      any = true;
      int64_t i = layers[l][head[l]];
      double t = agen[l];
      if (c[i] >= 0) {
        if (!is_done[c[i]]) continue;
        t = std::max(t, done[c[i]]);
      }
      double wait = 0;
      int64_t e = entry_of[i];
      if (e >= 0 && e == reserved) {
        double room;
        if (!reserve(e, t, &room)) {
          if (fatal) return 1;
          continue;
        }
        wait = std::max(0.0, room - t);
        t += wait;
      } else if (e >= 0 && e > reserved) {
        continue;
      }
      if (t < best_t) {
        best = l;
        best_t = t;
        best_wait = wait;
        have = true;
      }
    }
    if (fatal) return 1;
    if (!any) break;
    if (!have) {
      std::snprintf(err, errlen, "the access unit deadlocks: the data queue (%lld B) cannot "
                    "hold the entries one callback needs before its control token is pushed",
                    (long long)tg->queue_bytes);
      return 1;
    }
    // issue
    int64_t i = layers[best][head[best]++];
    double t = best_t;
    int64_t e = entry_of[i];
    if (e >= 0 && e == reserved) {
      queue_full += best_wait;
      in_queue.push_back(e);
      used += entry_bytes[e];
      ++reserved;
    }
    int64_t nb = std::max<int64_t>(b[i], 1);
    double d = t;
    for (int64_t line = a[i] / lb; line <= (a[i] + nb - 1) / lb; ++line) {
      while (!heap.empty() && heap.top() <= t) heap.pop();
      if ((int64_t)heap.size() >= tg->outstanding) {
        t = std::max(t, heap.top());
        heap.pop();
      }
      double cmp = mem_access(line, t);
      heap.push(cmp);
      d = std::max(d, cmp);
      t += tg->agen_step;
      access_busy += tg->agen_step;
    }
    done[i] = d;
    is_done[i] = 1;
    if (e >= 0) {
      entry_max[e] = std::max(entry_max[e], d);
      --entry_remaining[e];
    }
    agen[best] = t;
  }
  while (exec_next()) {
  }
  if (fatal) return 1;
  if ((int64_t)tok_start.size() != n_tok) {
    std::snprintf(err, errlen, "callbacks wait for data that is never pushed");
    return 1;
  }
  double end = std::max(exec_free, 0.0);
  for (int64_t i = 0; i < n; ++i)
    if (is_done[i]) end = std::max(end, done[i]);
  for (double x : tok_time) end = std::max(end, x);
  out->cycles = end;
  out->access_busy = access_busy;
  out->execute_busy = exec_busy;
  out->queue_full = queue_full;
  out->queue_empty = queue_empty;
  out->dram_busy = dram_busy;
  out->dram_lines = dram_lines;
  out->tokens = n_tok;
  out->entries = n_e;
  for (size_t i = 0; i < levels.size() && i < 8; ++i) {
    out->level_hits[i] = levels[i].hits;
    out->level_misses[i] = levels[i].misses;
  }
  return 0;
}

}  // extern "C"
