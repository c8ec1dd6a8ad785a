// The emulator against silicon on multi-warp mbarrier programs
// (tools/gpu/mw_program.hpp; docs/silicon.md, "Multi-warp conformance"):
// every outcome an H100 showed for a program must be one the emulator can
// reach. The record is tests/data/h100_mbarrier_mw_conformance.txt, written
// by `wspipe_silicon conformance-mw`; WSPIPE_MW_RECORD names another file
// (a fresh run's), and the test skips when there is none.
//
// Per program the emulator runs the same program (one warp per silicon
// warp, its elected lane issuing, copies through the TMA engine) under the
// bounded exhaustive search with try_wait time-outs as choices
// (spurious_try_wait), without the sleep-set reduction (its footprints do
// not see the slot accesses), then random schedules; the race checker is
// off, since the racy loads are the point. Each load and store is a
// scheduling point of its own (a test_wait on a barrier nothing arrives
// on), so that it can fall between any two steps of the other warps.
//
// The table: per program, silicon's outcomes the emulator reached and did
// not, the emulator's outcomes silicon never showed, and the runs a rule
// ended; then the totals and every outcome not reached, with its program.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <bit>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "backends/emu/emu.hpp"
#include "emu_test_util.hpp"
#include "tools/gpu/mw_program.hpp"

namespace {

namespace emu = wspipe::emu;
namespace silicon = wspipe::silicon;
using silicon::MwOp;
using silicon::MwOpKind;
using silicon::MwProgram;
using wspipe::test::B;

struct RecordedProgram {
  std::map<std::string, std::uint64_t> outcomes;  // outcome -> runs
  std::string failed;                             // why its launch failed; empty: it ran
};

struct Recorded {
  std::string device;
  std::uint64_t seed = 0, reps = 0;
  std::map<std::uint32_t, RecordedProgram> programs;
};

std::optional<Recorded> load(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  Recorded r;
  std::string line;
  RecordedProgram* current = nullptr;
  while (std::getline(in, line)) {
    if (line.rfind("# device: ", 0) == 0) r.device = line.substr(10);
    if (line.rfind("# seed: ", 0) == 0) r.seed = std::stoull(line.substr(8));
    if (line.rfind("# reps: ", 0) == 0) r.reps = std::stoull(line.substr(8));
    if (line.rfind("P ", 0) == 0) {
      std::istringstream s(line.substr(2));
      std::uint32_t i = 0;
      s >> i;
      current = &r.programs[i];
      const auto failed = line.find(" failed: ");
      if (failed != std::string::npos) current->failed = line.substr(failed + 9);
    } else if (line.rfind("O ", 0) == 0 && current != nullptr) {
      const auto space = line.find(' ', 2);
      current->outcomes[line.substr(space + 1)] += std::stoull(line.substr(2, space - 2));
    }
  }
  return r;
}

std::string record_path() {
  const char* env = std::getenv("WSPIPE_MW_RECORD");
  return env != nullptr && *env != '\0' ? env : std::string(WSPIPE_SOURCE_DIR) + "/tests/data/h100_mbarrier_mw_conformance.txt";
}

std::uint64_t env_or(const char* name, std::uint64_t fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::strtoull(v, nullptr, 10) : fallback;
}

struct Storage {
  wspipe::SharedMemBarrier bar[silicon::kMwMaxBars];
  wspipe::SharedMemBarrier tick;  // nothing arrives on it: its test_waits are scheduling points
  std::uint32_t slot[silicon::kMwSlots];
  alignas(128) std::uint8_t dst[silicon::kMwMaxBars][silicon::kMwCopyBytes];
};

const std::vector<std::uint32_t>& source_words() {
  static const std::vector<std::uint32_t> words = [] {
    std::vector<std::uint32_t> v(silicon::kMwSourceBytes / 4);
    for (std::uint32_t i = 0; i < v.size(); ++i) v[i] = silicon::kMwSourceBase + i;
    return v;
  }();
  return words;
}

// One program as an emulator kernel. `obs` holds the last run's
// observations per warp; a blocking wait notes kMwNoPass first and 1 once
// it passes, so a run that ends in a deadlock leaves "X" there.
struct MwKernel {
  MwProgram p;
  std::array<std::vector<std::uint32_t>, silicon::kMwMaxWarps> obs;

  emu::Kernel kernel() {
    emu::Kernel k;
    k.launch.warps_per_cta = p.warps;
    k.launch.smem_bytes = sizeof(Storage);
    k.body = [this] { body(); };
    return k;
  }

  void body() {
    auto& s = B::shared_storage<Storage>();
    const std::uint32_t w = B::warp_idx();
    std::vector<std::uint32_t>& out = obs[w];
    out.clear();
    if (w == 0) {
      B::elect_one([&] {
        for (std::uint32_t b = 0; b < p.bars; ++b) B::init(s.bar[b], p.count[b], {"bar", static_cast<int>(b)});
        B::init(s.tick, 1, {"tick"});
      });
      for (std::uint32_t& v : s.slot) v = 0;
      for (auto& d : s.dst) std::fill(std::begin(d), std::end(d), std::uint8_t{0});
      B::fence_proxy_async();
    }
    B::named_sync(0, 32 * p.warps);
    for (const MwOp& op : p.ops[w]) {
      wspipe::SharedMemBarrier& bar = s.bar[op.bar];
      const bool access = op.kind == MwOpKind::store || op.kind == MwOpKind::load || op.kind == MwOpKind::load_copy;
      B::elect_one([&] {
        if (access) (void)B::test_wait(s.tick, 0);
        switch (op.kind) {
          case MwOpKind::arrive: B::arrive(bar); break;
          case MwOpKind::arrive_expect_tx: B::arrive_expect_tx(bar, op.arg); break;
          case MwOpKind::expect_tx: B::expect_tx(bar, op.arg); break;
          case MwOpKind::complete_tx: B::complete_tx(bar, op.arg); break;
          case MwOpKind::bulk_copy:
          case MwOpKind::tma_copy: {
            wspipe::TensorMap m;
            m.global = source_words().data();
            m.dtype = wspipe::ElemType::u8;
            m.rank = 1;
            m.dims[0] = silicon::kMwSourceBytes;
            m.box[0] = op.arg;
            wspipe::TmaCoords at;
            at.c[0] = static_cast<std::int32_t>(op.value);
            B::tma_load<1, 1>(m, s.dst[op.bar] + 16 * op.dst, bar, at);
            break;
          }
          case MwOpKind::try_wait: out.push_back(B::try_wait(bar, op.arg) ? 1 : 0); break;
          case MwOpKind::test_wait: out.push_back(B::test_wait(bar, op.arg) ? 1 : 0); break;
          case MwOpKind::spin: {
            std::uint32_t passed = 0;
            for (std::uint32_t t = 1; t <= op.tries && passed == 0; ++t) passed = B::try_wait(bar, op.arg) ? t : 0;
            out.push_back(passed);
            break;
          }
          case MwOpKind::wait:
            out.push_back(silicon::kMwNoPass);
            B::wait(bar, op.arg);
            out.back() = 1;
            break;
          case MwOpKind::store: s.slot[op.arg] = op.value; break;
          case MwOpKind::load: out.push_back(s.slot[op.arg]); break;
          case MwOpKind::load_copy: {
            std::uint32_t v = 0;
            std::memcpy(&v, s.dst[op.bar] + 4 * op.arg, 4);
            out.push_back(v);
            break;
          }
        }
      });
    }
  }
};

// What the emulator reached for one program.
struct Reached {
  std::set<std::string> outcomes;              // runs that ended ok or in a deadlock (its waits "X")
  std::map<std::string, std::uint64_t> rules;  // runs a violation ended, by rule
  std::uint64_t exhaustive_runs = 0, random_runs = 0;
  bool complete = false;  // the exhaustive search covered its bound
};

struct SearchBudget {
  std::uint32_t bound = 2;          // preemptions (time-outs included) per schedule
  std::uint64_t max_runs = 2000;    // exhaustive schedules at most
  double max_seconds = 1;           // per program, the exhaustive part
  // Then random schedules: at least min_random, and on until every outcome
  // sought is reached or max_random have run. A bounded search that stops
  // early explores variations of the end of one schedule (depth first);
  // random schedules reach the rest sooner.
  std::uint64_t min_random = 1000, max_random = 10000;
};

SearchBudget budget_from_env() {
  SearchBudget b;
  b.bound = static_cast<std::uint32_t>(env_or("WSPIPE_MW_BOUND", b.bound));
  b.max_runs = env_or("WSPIPE_MW_RUNS", b.max_runs);
  b.min_random = env_or("WSPIPE_MW_RANDOM", b.min_random);
  b.max_random = std::max(b.min_random, env_or("WSPIPE_MW_MAX_RANDOM", b.max_random));
  return b;
}

// The outcomes the emulator reaches for `p`, searching on until it has
// reached every one of `sought` (silicon's) or its budget is spent.
Reached reach(const MwProgram& p, const SearchBudget& budget, const std::set<std::string>& sought = {}) {
  MwKernel k{p, {}};
  const emu::Kernel kernel = k.kernel();
  Reached got;
  std::size_t found = 0;  // of `sought`
  auto note = [&](const emu::RunResult& r) {
    const std::string text = silicon::outcome_text(p, k.obs);
    if (r.status == emu::Status::violation) {
      ++got.rules[r.violations[0].rule];
    } else if (r.status == emu::Status::livelock) {
      ++got.rules["livelock"];
    } else if (got.outcomes.insert(text).second && sought.count(text) != 0) {
      ++found;
    }
  };
  // The exhaustive search through explore(), which stops at a failure (a
  // deadlock or a rule): the programs have none (ProgramsAreDefined...), and
  // the random runs below go on regardless.
  emu::ExploreOptions xo;
  xo.race_check = false;
  xo.spurious_try_wait = true;
  xo.max_steps = 100'000;
  xo.portfolio = {{emu::StrategyKind::exhaustive}};
  xo.preemptions = budget.bound;
  xo.reduce = false;
  xo.runs = budget.max_runs;
  xo.seconds = budget.max_seconds;
  xo.jobs = 1;
  xo.shrink = false;
  xo.on_run = [&](std::uint64_t, const emu::RunResult& r) {
    ++got.exhaustive_runs;
    note(r);
  };
  got.complete = emu::explore(kernel, xo).complete;
  emu::RunOptions ro = xo.run_options();
  ro.strategy.kind = emu::StrategyKind::random;
  for (std::uint64_t i = 0; i < budget.max_random && (i < budget.min_random || found < sought.size()); ++i) {
    ro.strategy.seed = emu::run_seed(1, i);
    note(emu::run(kernel, ro));
    ++got.random_runs;
  }
  return got;
}

// What in a program could explain a silicon outcome the emulator does not
// reach, by the emulator's known limits (docs/silicon.md, "Gaps expected"):
// copies in flight to two barriers at once (silicon may complete them out of
// issue order), a load of a copy's destination (its bytes may show before
// their complete-tx, or in pieces), a slot one warp loads and another stores
// (silicon's racy accesses need not be sequentially consistent).
std::string suspects(const MwProgram& p) {
  std::uint32_t copy_bars = 0, stored = 0;
  bool load_copy = false;
  for (std::uint32_t w = 0; w < p.warps; ++w) {
    for (const MwOp& op : p.ops[w]) {
      if (op.kind == MwOpKind::bulk_copy || op.kind == MwOpKind::tma_copy) copy_bars |= 1u << op.bar;
      if (op.kind == MwOpKind::load_copy) load_copy = true;
      if (op.kind == MwOpKind::store) stored |= 1u << (silicon::kMwSlots * w + op.arg);
    }
  }
  bool racy_slot = false;
  for (std::uint32_t w = 0; w < p.warps; ++w) {
    for (const MwOp& op : p.ops[w]) {
      if (op.kind != MwOpKind::load) continue;
      for (std::uint32_t other = 0; other < p.warps; ++other) {
        racy_slot = racy_slot || (other != w && (stored >> (silicon::kMwSlots * other + op.arg) & 1u) != 0);
      }
    }
  }
  std::string s;
  if (std::popcount(copy_bars) > 1) s += "copies to several barriers";
  if (load_copy) s += std::string(s.empty() ? "" : ", ") + "copy words loaded";
  if (racy_slot) s += std::string(s.empty() ? "" : ", ") + "a slot stored and loaded by different warps";
  return s.empty() ? "none of the known limits applies" : s;
}

std::string join_rules(const std::map<std::string, std::uint64_t>& rules) {
  std::string s;
  for (const auto& [rule, n] : rules) s += (s.empty() ? "" : ", ") + rule + " x" + std::to_string(n);
  return s.empty() ? "-" : s;
}

// The programs are defined on every schedule (mw_program.hpp's protocol):
// in the emulator no run of the first programs deadlocks or breaks a rule.
// Without this, an "X" or a rule in the table below could be the
// generator's doing.
TEST(SiliconMwConformance, ProgramsAreDefinedOnEverySchedule) {
  constexpr std::uint32_t kPrograms = 300;
  SearchBudget budget;
  budget.max_runs = 300;
  budget.min_random = 100;
  std::uint64_t runs = 0;
  for (std::uint32_t i = 0; i < kPrograms; ++i) {
    const MwProgram p = silicon::mw_program(1, i);
    const Reached got = reach(p, budget);
    runs += got.exhaustive_runs + got.random_runs;
    EXPECT_TRUE(got.rules.empty()) << "program " << i << ": " << join_rules(got.rules) << "\n  " << to_string(p);
    for (const std::string& o : got.outcomes) {
      EXPECT_EQ(o.find('X'), std::string::npos) << "program " << i << " deadlocks: " << o << "\n  " << to_string(p);
    }
  }
  std::printf("%u programs of seed 1, %llu runs\n", kPrograms, static_cast<unsigned long long>(runs));
}

// The generator is what the record means: a change to it must not go
// unnoticed (program(seed, i) must stay the program silicon ran).
TEST(SiliconMwConformance, TheDrawIsStable) {
  const MwProgram p = silicon::mw_program(1, 1);
  EXPECT_EQ(to_string(p),
            "b0(3) | w0: try_wait(b0,0); spin(b0,0,x3) | w1: store(s0=1); load_copy(b0,3); arrive(b0); wait(b0,0) | "
            "w2: store(s0=2); load_copy(b0,32); arrive_expect_tx(b0,48); load(s2); bulk_copy(b0,32@128<-992); "
            "complete_tx(b0,16); wait(b0,0) | w3: expect_tx(b0,32); load_copy(b0,1); store(s1=3); "
            "arrive_expect_tx(b0,48); try_wait(b0,1); bulk_copy(b0,16@0<-3328); store(s2=4); complete_tx(b0,64); "
            "wait(b0,0)");
}

// The search on a program whose outcomes are worked out by hand (program 1
// of seed 1, TheDrawIsStable): what PTX allows is reached, what it forbids
// is not. w3's try_wait(b0, 1) comes before its own bytes are in, so phase 0
// is incomplete and parity 1 names the phase before it: it passes, always.
// w1 can read word 3 of b0's destination before or after w3's copy lands
// (1000 + 3328 / 4 + 3). w0 can see the phase complete while w2 read w3's
// store to s2 and w1 read the word before the copy landed: the copy is
// issued, w1 loads, w3 stores, w2 loads, then the copy lands and the rest
// follows, which takes more preemptions than the exhaustive bound.
TEST(SiliconMwConformance, ReachesWhatPtxAllowsAndNotWhatItForbids) {
  const MwProgram p = silicon::mw_program(1, 1);
  const std::set<std::string> allowed = {
      "w0:0 s0 | w1:v0 | w2:v0 v0 | w3:v0 1",
      "w0:0 s0 | w1:v1835 | w2:v0 v0 | w3:v0 1",
      "w0:1 s1 | w1:v0 | w2:v0 v4 | w3:v0 1",
  };
  const Reached got = reach(p, SearchBudget{}, allowed);
  for (const std::string& o : allowed) EXPECT_EQ(got.outcomes.count(o), 1u) << o;
  for (const std::string& o : got.outcomes) {
    EXPECT_EQ(o.substr(o.size() - 2), " 1") << "w3's try_wait(b0, 1) failed: " << o;
    EXPECT_TRUE(o.find("w1:v0 |") != std::string::npos || o.find("w1:v1835 |") != std::string::npos)
        << "w1 read a value that no copy writes to its word: " << o;
  }
  EXPECT_TRUE(got.rules.empty()) << join_rules(got.rules);
}

// Every outcome silicon showed is reached by the emulator.
TEST(SiliconMwConformance, EmulatorReachesEveryOutcomeSiliconShowed) {
  const std::string path = record_path();
  const auto rec = load(path);
  if (!rec) GTEST_SKIP() << "no multi-warp silicon record at " << path << " (docs/silicon.md, \"Multi-warp conformance\")";
  const SearchBudget budget = budget_from_env();
  const std::uint64_t limit = env_or("WSPIPE_MW_PROGRAMS", rec->programs.size());
  const bool verbose = env_or("WSPIPE_MW_VERBOSE", 0) != 0;  // list the emulator's outcomes silicon never showed
  std::uint64_t hw_total = 0, reached_total = 0, emu_only_total = 0, complete = 0, programs = 0, failed = 0;
  std::map<std::string, std::uint64_t> rules_total;
  std::vector<std::string> missing;
  std::printf("multi-warp conformance against %s (seed %llu, %llu repetitions per program); emulator: exhaustive, "
              "bound %u, up to %llu schedules, then %llu to %llu random\n",
              rec->device.c_str(), static_cast<unsigned long long>(rec->seed),
              static_cast<unsigned long long>(rec->reps), budget.bound, static_cast<unsigned long long>(budget.max_runs),
              static_cast<unsigned long long>(budget.min_random), static_cast<unsigned long long>(budget.max_random));
  std::printf("program | silicon | reached | not reached | emulator only | search | rules\n");
  for (const auto& [index, hw] : rec->programs) {
    if (programs >= limit) break;
    ++programs;
    if (!hw.failed.empty()) {
      ++failed;
      std::printf("%u | failed on silicon: %s\n", index, hw.failed.c_str());
      continue;
    }
    const MwProgram p = silicon::mw_program(rec->seed, index);
    std::set<std::string> sought;
    for (const auto& [outcome, runs] : hw.outcomes) sought.insert(outcome);
    const Reached got = reach(p, budget, sought);
    std::uint64_t reached = 0;
    for (const auto& [outcome, runs] : hw.outcomes) {
      if (got.outcomes.count(outcome) != 0) {
        ++reached;
      } else {
        missing.push_back("program " + std::to_string(index) + ": " + outcome + "  (" + std::to_string(runs) +
                          " of " + std::to_string(rec->reps) + " runs; " + suspects(p) + ")\n    " + to_string(p));
      }
    }
    std::uint64_t emu_only = 0;
    for (const std::string& o : got.outcomes) {
      if (hw.outcomes.count(o) != 0) continue;
      ++emu_only;
      if (verbose) std::printf("  %u, emulator only: %s\n", index, o.c_str());
    }
    hw_total += hw.outcomes.size();
    reached_total += reached;
    emu_only_total += emu_only;
    complete += got.complete;
    for (const auto& [rule, n] : got.rules) rules_total[rule] += n;
    std::printf("%u | %zu | %llu | %llu | %llu | %s %llu | %s\n", index, hw.outcomes.size(),
                static_cast<unsigned long long>(reached), static_cast<unsigned long long>(hw.outcomes.size() - reached),
                static_cast<unsigned long long>(emu_only), got.complete ? "complete+random" : "capped+random",
                static_cast<unsigned long long>(got.exhaustive_runs + got.random_runs), join_rules(got.rules).c_str());
  }
  std::printf("total: %llu programs (%llu failed on silicon), %llu silicon outcomes, %llu reached (%.1f%%), %llu not "
              "reached; %llu emulator outcomes silicon never showed; exhaustive search complete in %llu; rules: %s\n",
              static_cast<unsigned long long>(programs), static_cast<unsigned long long>(failed),
              static_cast<unsigned long long>(hw_total), static_cast<unsigned long long>(reached_total),
              hw_total ? 100.0 * static_cast<double>(reached_total) / static_cast<double>(hw_total) : 100.0,
              static_cast<unsigned long long>(hw_total - reached_total), static_cast<unsigned long long>(emu_only_total),
              static_cast<unsigned long long>(complete), join_rules(rules_total).c_str());
  std::string list;
  for (std::size_t i = 0; i < missing.size() && i < 100; ++i) list += missing[i] + "\n";
  if (missing.size() > 100) list += "... and " + std::to_string(missing.size() - 100) + " more\n";
  EXPECT_TRUE(missing.empty()) << missing.size() << " silicon outcomes the emulator does not reach:\n" << list;
}

}  // namespace
