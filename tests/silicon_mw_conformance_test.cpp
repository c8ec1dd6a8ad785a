// The emulator against silicon on multi-warp mbarrier programs
// (tools/gpu/mw_program.hpp; docs/silicon.md, "Multi-warp conformance"):
// every outcome silicon showed for a program must be one the emulator can
// reach. The record is tests/data/h100_mbarrier_mw_conformance.txt.gz,
// written by `wspipe_silicon conformance-mw` and read through `gzip -dc`;
// WSPIPE_MW_RECORD names a plain-text one instead (a fresh run's). The test
// skips when there is none.
//
// The emulator runs the same program (one warp per silicon warp, its
// elected lane issuing, copies through the TMA engine); the race checker is
// off, since the racy loads are the point. Each load and store is a
// scheduling point of its own (a test_wait on a barrier nothing arrives
// on), so that it can fall between any two steps of the other warps.
// Per program a targeted search (Search, decide()) decides for each silicon
// outcome whether the emulator reaches it: a depth-first search over every
// schedule, try_wait time-outs included, that drops a run as soon as its
// observations agree with no outcome still sought and that does not search
// twice below one state. Random schedules (reach()) sample the emulator's
// outcomes that silicon never showed, and
// EveryOutcomeOnlyTheEmulatorReachesIsExplained classifies each of those by
// the least permissive mode of the model that reaches it
// (docs/silicon/emulator-only-outcomes.md).
//
// The table: per program, silicon's outcomes the search reached, those it
// proved unreachable and those its budget left undecided, the emulator's
// outcomes silicon never showed, the search's runs and states; then the
// totals and every outcome not reached, with its program.

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
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <sstream>
#include <string>
#include <unordered_set>
#include <utility>
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
  std::uint32_t generator = 1;  // mw_program's (a record without the line: 1)
  std::map<std::uint32_t, RecordedProgram> programs;
};

Recorded parse_record(std::istream& in) {
  Recorded r;
  std::string line;
  RecordedProgram* current = nullptr;
  while (std::getline(in, line)) {
    if (line.rfind("# device: ", 0) == 0) r.device = line.substr(10);
    if (line.rfind("# seed: ", 0) == 0) r.seed = std::stoull(line.substr(8));
    if (line.rfind("# reps: ", 0) == 0) r.reps = std::stoull(line.substr(8));
    if (line.rfind("# generator: ", 0) == 0) r.generator = static_cast<std::uint32_t>(std::stoul(line.substr(13)));
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

// The records in tests/data: generator 1's on an H200 (named h100_ after
// the suite), and generator 2's.
constexpr const char* kRecord1 = "h100_mbarrier_mw_conformance.txt.gz";
constexpr const char* kRecord2 = "h200_mbarrier_mw_conformance_g2.txt.gz";

// A record: WSPIPE_MW_RECORD names a plain-text one (a fresh run's);
// else the repository's `name`, gzip-compressed, read through `gzip -dc`.
// Nullopt, with why, when there is none to read.
std::optional<Recorded> load_record(std::string* why, const char* name = kRecord1) {
  const char* env = std::getenv("WSPIPE_MW_RECORD");
  if (env != nullptr && *env != '\0') {
    std::ifstream in(env);
    if (!in) {
      *why = std::string("WSPIPE_MW_RECORD names ") + env + ", which cannot be read";
      return std::nullopt;
    }
    return parse_record(in);
  }
  const std::string path = std::string(WSPIPE_SOURCE_DIR) + "/tests/data/" + name;
  if (!std::ifstream(path)) {
    *why = "no multi-warp silicon record at " + path + " (docs/silicon.md, \"Multi-warp conformance\")";
    return std::nullopt;
  }
  std::string text;
  FILE* gz = popen(("gzip -dc '" + path + "' 2>/dev/null").c_str(), "r");
  if (gz != nullptr) {
    std::array<char, 1 << 16> buf;
    for (std::size_t n; (n = std::fread(buf.data(), 1, buf.size(), gz)) > 0;) text.append(buf.data(), n);
  }
  if (gz == nullptr || pclose(gz) != 0 || text.empty()) {
    *why = "cannot read " + path + ": `gzip -dc` failed (is gzip installed?); WSPIPE_MW_RECORD can name the record "
           "as plain text";
    return std::nullopt;
  }
  std::istringstream in(text);
  return parse_record(in);
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

class Search;

// One program as an emulator kernel. `obs` holds the last run's
// observations per warp; a blocking wait notes kMwNoPass first and 1 once
// it passes, so a run that ends in a deadlock leaves "X" there. With a
// search attached (decide() below), the body tells it every value an
// operation returned and every step that queued a copy.
struct MwKernel {
  MwProgram p;
  std::array<std::vector<std::uint32_t>, silicon::kMwMaxWarps> obs;
  Search* search = nullptr;

  emu::Kernel kernel() {
    emu::Kernel k;
    k.launch.warps_per_cta = p.warps;
    k.launch.smem_bytes = sizeof(Storage);
    k.body = [this] { body(); };
    return k;
  }

  void body();
};

// The silicon outcomes of one program, as each warp's observations (an "X"
// ends a warp's list: its wait never passed), in one trie per warp: a run
// is worth going on while some outcome not yet reached agrees with every
// warp's observations so far.
class Targets {
 public:
  Targets(const MwProgram& p, const std::vector<std::string>& outcomes) : warps_(p.warps), reached_(outcomes.size()) {
    for (std::uint32_t w = 0; w < warps_; ++w) trie_[w].emplace_back();
    for (std::uint32_t t = 0; t < outcomes.size(); ++t) {
      const auto values = parse(outcomes[t]);
      for (std::uint32_t w = 0; w < warps_; ++w) {
        std::vector<std::int32_t>& path = path_[w].emplace_back(1, 0);
        for (const std::uint32_t v : values[w]) {
          auto& next = trie_[w][static_cast<std::size_t>(path.back())].next;
          const auto [it, added] = next.emplace(v, static_cast<std::int32_t>(trie_[w].size()));
          path.push_back(it->second);
          if (added) trie_[w].emplace_back();  // last: it may move `next`
        }
        for (const std::int32_t node : path) trie_[w][static_cast<std::size_t>(node)].outcomes.push_back(t);
      }
    }
    left_ = outcomes.size();
  }

  void restart() {
    cursor_.fill(0);
    depth_.fill(0);
  }
  // Warp w observed v; false once no outcome left agrees with the run.
  bool observe(std::uint32_t w, std::uint32_t v) {
    if (cursor_[w] >= 0) {
      const auto& next = trie_[w][static_cast<std::size_t>(cursor_[w])].next;
      const auto it = next.find(v);
      cursor_[w] = it == next.end() ? -1 : it->second;
      ++depth_[w];
    }
    return alive();
  }
  bool alive() const {
    std::uint32_t fewest = 0;
    for (std::uint32_t w = 0; w < warps_; ++w) {
      if (cursor_[w] < 0) return false;
      if (node(w).outcomes.size() < node(fewest).outcomes.size()) fewest = w;
    }
    for (const std::uint32_t t : node(fewest).outcomes) {
      if (reached_[t]) continue;
      bool agrees = true;
      for (std::uint32_t w = 0; w < warps_ && agrees; ++w) {
        const auto& path = path_[w][t];
        agrees = depth_[w] < path.size() && path[depth_[w]] == cursor_[w];
      }
      if (agrees) return true;
    }
    return false;
  }
  void reached(std::uint32_t t) {
    if (!reached_[t]) --left_;
    reached_[t] = 1;
  }
  bool is_reached(std::uint32_t t) const { return reached_[t] != 0; }
  std::size_t left() const { return left_; }

 private:
  struct Node {
    std::map<std::uint32_t, std::int32_t> next;
    std::vector<std::uint32_t> outcomes;  // that pass through it
  };
  const Node& node(std::uint32_t w) const { return trie_[w][static_cast<std::size_t>(cursor_[w])]; }
  // "w0:1 s2 v1003 | w1:X": per warp, the values ("1", "s2" and "v1003" are
  // 1, 2 and 1003), up to an "X".
  std::array<std::vector<std::uint32_t>, silicon::kMwMaxWarps> parse(const std::string& text) const {
    std::array<std::vector<std::uint32_t>, silicon::kMwMaxWarps> values;
    std::istringstream in(text);
    std::string token;
    std::int32_t w = -1;
    bool stopped = false;
    while (in >> token) {
      if (token == "|") continue;
      const auto colon = token.find(':');
      if (token[0] == 'w' && colon != std::string::npos) {
        w = std::stoi(token.substr(1, colon - 1));
        stopped = false;
        token.erase(0, colon + 1);
        if (token.empty()) continue;
      }
      if (w < 0 || static_cast<std::uint32_t>(w) >= warps_) throw std::runtime_error("bad outcome: " + text);
      if (token == "X") stopped = true;
      if (stopped) continue;
      const std::size_t digits = token[0] == 's' || token[0] == 'v' || token[0] == 'f' ? 1 : 0;
      values[static_cast<std::size_t>(w)].push_back(static_cast<std::uint32_t>(std::stoul(token.substr(digits))));
    }
    return values;
  }

  std::uint32_t warps_;
  std::array<std::vector<Node>, silicon::kMwMaxWarps> trie_;
  std::array<std::vector<std::vector<std::int32_t>>, silicon::kMwMaxWarps> path_;  // [warp][outcome]: nodes
  std::vector<std::uint8_t> reached_;
  std::size_t left_ = 0;
  std::array<std::int32_t, silicon::kMwMaxWarps> cursor_{};  // -1: no outcome agrees
  std::array<std::size_t, silicon::kMwMaxWarps> depth_{};
};

std::uint64_t mix(std::uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// A depth-first search over the schedules of one program for the outcomes
// silicon showed: a strategy shared by the runs (StrategyParams::shared)
// that re-runs the kernel from the start for each branch, following the
// branch's choices and then the default policy's pick at each new choice
// point (preferred first, then the others in id order); advance() moves to
// the deepest choice point with an alternative left. No preemption bound:
// the programs are straight-line and their spins bounded, so the tree is
// finite; try_wait time-outs are choices like any other (a spinning actor).
//
// Two prunings keep it small:
//  - A run ends as soon as no silicon outcome not yet reached agrees with
//    every warp's observations so far (each warp observes in program order).
//  - A run ends at a state an earlier run has been in: the subtree below it
//    was searched in full then (depth first), with the outcomes sought then,
//    a superset of those sought now. The state is what decides every
//    continuation: each actor's step count, each warp's values returned
//    (they decide its path through its straight-line code), the bytes of the
//    slots and copy destinations, and the order in which copies were queued
//    and landed (per resource of the steps' footprints: the engine's queue,
//    the barriers the copies complete on). A barrier's own state (phase,
//    pending arrivals, tx-count) follows from the step counts: under the
//    programs' protocol (mw_program.hpp) a phase's arrivals and bytes all
//    come after the previous phase completed, each warp's bytes after its
//    own expectation, so the phase completes at its last event whatever the
//    order of the others. Reads of a barrier change nothing but the
//    emulator's record of whether a completion was observed, which only a
//    rule checks, and no run of these programs breaks one. Kept as 64-bit
//    hashes: a collision (odds about n^2 / 2^65 for n states) could hide a
//    state.
// The search is complete when no branch is left: a silicon outcome not
// reached then is unreachable in the model.
class Search final : public emu::Strategy {
 public:
  Search(const MwProgram& p, Targets& targets) : warps_(p.warps), targets_(targets) {}

  // --- the kernel's side
  void started(Storage* s) { storage_ = s; }
  void value(std::uint32_t w, std::uint32_t v) { trace_[w] = mix(trace_[w] ^ (v + 0x9e3779b97f4a7c15ull)); }
  void observation(std::uint32_t w, std::uint32_t v) {
    value(w, v);
    if (!targets_.observe(w, v)) dead_ = true;
  }
  void queued(std::uint32_t w) { queued_[w] = true; }

  // --- the scheduler's side
  void new_execution(std::uint32_t num_actors) override {
    steps_.assign(num_actors, 0);
    trace_.fill(0);
    queued_.fill(false);
    order_.clear();
    order_sum_ = 0;
    choices_ = 0;
    dead_ = pruned_ = false;
    storage_ = nullptr;
    targets_.restart();
  }
  bool wants_footprints() const override { return true; }
  bool pruned() const override { return pruned_; }

  std::optional<std::uint32_t> pick(const emu::Choice& c) override {
    if (dead_) return prune();
    const bool fresh = choices_ >= stack_.size();  // past the branch's prefix: a state not seen in this branch
    if (fresh && storage_ != nullptr && !visited_.insert(key()).second) return prune();
    std::uint32_t actor = c.enabled[0];
    if (c.n >= 2) {
      if (!fresh) {
        const Node& n = stack_[choices_];
        if (!std::equal(c.enabled, c.enabled + c.n, n.enabled.begin(), n.enabled.end()))
          throw std::runtime_error("targeted search: the kernel took another path under the same schedule");
        actor = n.order[n.at];
      } else {
        Node n;
        n.enabled.assign(c.enabled, c.enabled + c.n);
        n.order.push_back(c.preferred);
        for (const std::uint32_t a : n.enabled)
          if (a != c.preferred) n.order.push_back(a);
        actor = c.preferred;
        stack_.push_back(std::move(n));
      }
      ++choices_;
    }
    return actor;
  }
  void stepped(std::uint32_t actor, const emu::Footprint& fp) override {
    ++steps_[actor];
    // A warp's step that queued a copy (the body says so), and every step
    // of an engine (a copy lands: bytes and tx).
    if (actor < warps_ && !queued_[actor]) return;
    if (actor < warps_) queued_[actor] = false;
    for (const std::uint64_t r : fp) {
      std::uint64_t& h = order_[r];
      order_sum_ -= mix(r ^ h);
      h = mix(h ^ (actor + 1));
      order_sum_ += mix(r ^ h);
    }
  }

  // After a run: to the next branch; false when the search is complete.
  bool advance() {
    while (!stack_.empty() && ++stack_.back().at == stack_.back().order.size()) stack_.pop_back();
    return !stack_.empty();
  }
  std::size_t states() const { return visited_.size(); }

 private:
  struct Node {
    std::vector<std::uint32_t> enabled;
    std::vector<std::uint32_t> order;  // the picks to try: the default's first
    std::size_t at = 0;                // the one being explored
  };
  std::optional<std::uint32_t> prune() {
    pruned_ = true;
    return std::nullopt;
  }
  std::uint64_t key() const {
    std::uint64_t k = mix(order_sum_);
    for (const std::uint32_t n : steps_) k = mix(k ^ n);
    for (std::uint32_t w = 0; w < warps_; ++w) k = mix(k ^ trace_[w]);
    const auto* words = reinterpret_cast<const unsigned char*>(storage_->slot);
    const auto* end = reinterpret_cast<const unsigned char*>(&storage_->dst[silicon::kMwMaxBars]);
    for (; words + 8 <= end; words += 8) {
      std::uint64_t v = 0;
      std::memcpy(&v, words, 8);
      k = mix(k ^ v);
    }
    return k;
  }

  std::uint32_t warps_;
  Targets& targets_;
  std::vector<Node> stack_;
  std::unordered_set<std::uint64_t> visited_;
  // The run in progress.
  Storage* storage_ = nullptr;
  std::vector<std::uint32_t> steps_;
  std::array<std::uint64_t, silicon::kMwMaxWarps> trace_{};
  std::array<bool, silicon::kMwMaxWarps> queued_{};
  std::map<std::uint64_t, std::uint64_t> order_;  // resource -> hash of the actors of its copy steps, in order
  std::uint64_t order_sum_ = 0;
  std::size_t choices_ = 0;
  bool dead_ = false, pruned_ = false;
};

void MwKernel::body() {
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
    if (search != nullptr) search->started(&s);
  }
  B::named_sync(0, 32 * p.warps);
  // What the operation returned: a value, or an observation (which the
  // outcome shows).
  auto value = [&](std::uint32_t v) {
    if (search != nullptr) search->value(w, v);
    return v;
  };
  auto observe = [&](std::uint32_t v) {
    out.push_back(v);
    if (search != nullptr) search->observation(w, v);
  };
  auto queued = [&] {
    if (search != nullptr) search->queued(w);
  };
  for (const MwOp& op : p.ops[w]) {
    // Operations in a row call try_wait from different lines, as a kernel
    // does: two spins in a row at one barrier are two loops, not one
    // (RunOptions::spin_out_limit tells loops apart by their call sites).
    const bool odd = ((&op - p.ops[w].data()) & 1) != 0;
    wspipe::SharedMemBarrier& bar = s.bar[op.bar];
    auto try_wait = [&] {
      if (odd) return B::try_wait(bar, op.arg);
      return B::try_wait(bar, op.arg);
    };
    const bool access = op.kind == MwOpKind::store || op.kind == MwOpKind::load || op.kind == MwOpKind::load_copy;
    // The slots and copy destinations through views, so that the reduced
    // search sees the accesses (footprints) although the race checker is off.
    const wspipe::SmemView<B, std::uint32_t> slots(s.slot, silicon::kMwSlots);
    auto copied_word = [&](std::uint32_t word) {
      std::uint32_t v = 0;
      std::memcpy(&v, wspipe::SmemView<B, const std::uint8_t>(s.dst[op.bar], silicon::kMwCopyBytes).read_range(4 * word, 4), 4);
      return v;
    };
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
          queued();
          break;
        }
        case MwOpKind::try_wait: observe(try_wait() ? 1 : 0); break;
        case MwOpKind::test_wait: observe(B::test_wait(bar, op.arg) ? 1 : 0); break;
        case MwOpKind::spin: {
          std::uint32_t passed = 0;
          for (std::uint32_t t = 1; t <= op.tries && passed == 0; ++t) passed = value(try_wait()) ? t : 0;
          observe(passed);
          break;
        }
        case MwOpKind::spin_or_load: {  // the fallback's load is a scheduling point of its own, as a load is
          std::uint32_t passed = 0;
          for (std::uint32_t t = 1; t <= op.tries && passed == 0; ++t) passed = value(try_wait()) ? t : 0;
          observe(passed);
          if (passed == 0) {
            (void)B::test_wait(s.tick, 0);
            observe(copied_word(op.value));
          }
          break;
        }
        case MwOpKind::wait:
          out.push_back(silicon::kMwNoPass);
          B::wait(bar, op.arg);
          out.back() = 1;
          break;
        case MwOpKind::store: slots.store(op.arg, op.value); break;
        case MwOpKind::load: observe(slots.load(op.arg)); break;
        case MwOpKind::load_copy: observe(copied_word(op.arg)); break;
      }
    });
  }
}

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

// What the emulator may do beyond running the warps' program-ordered
// steps in some interleaving: time a try_wait out while another actor
// could still complete its phase (RunOptions::spurious_try_wait), and
// complete TMA loads out of issue order or in pieces
// (RunOptions::async_reorder). Both on is the model as a user runs it;
// both off leaves plain interleavings, each load landing whole in issue
// order and a try_wait timing out only when no other actor can move.
struct Mode {
  bool time_outs = true;
  bool reorder = true;
  void apply(emu::RunOptions& o) const {
    o.spurious_try_wait = time_outs;
    o.async_reorder = reorder;
  }
};

// The complete search as a user runs it (`wspipe explore --strategy
// exhaustive`: unbounded, reduced, one job), collecting every run's
// outcome; under `mode`, the search with the choices it turns off left
// out. The race checker is off, as everywhere here (the racy loads are the
// point); the footprints that the reduction needs are still taken (the
// kernel's accesses go through views).
struct Complete {
  std::set<std::string> outcomes;
  std::map<std::string, std::uint64_t> rules;
  std::uint64_t runs = 0;
  bool complete = false;
  std::vector<std::string> assumptions;
};

Complete complete_search(const MwProgram& p, std::uint64_t max_runs, double max_seconds, Mode mode = {}) {
  MwKernel k{p, {}};
  const emu::Kernel kernel = k.kernel();
  Complete got;
  emu::ExploreOptions xo;
  xo.race_check = false;
  mode.apply(xo);
  xo.portfolio = {{emu::StrategyKind::exhaustive}};
  xo.runs = max_runs;
  xo.seconds = max_seconds;
  xo.jobs = 1;
  xo.shrink = false;
  xo.reduce = env_or("WSPIPE_MW_COMPLETE_REDUCE", 1) != 0;  // 0: compare with the unreduced search
  xo.on_run = [&](std::uint64_t, const emu::RunResult& r) {
    ++got.runs;
    if (r.status == emu::Status::violation) {
      ++got.rules[r.violations[0].rule];
    } else if (r.status == emu::Status::livelock) {
      ++got.rules["livelock"];
    } else {
      got.outcomes.insert(silicon::outcome_text(p, k.obs));
    }
  };
  const emu::ExploreResult r = emu::explore(kernel, xo);
  got.complete = r.complete && r.ok();
  got.assumptions = r.assumptions;
  return got;
}

// What the targeted search decided for one program's silicon outcomes.
struct Decided {
  std::vector<std::string> reached, unreachable, undecided;  // undecided: the budget ran out first
  std::map<std::string, std::uint64_t> rules;                // runs a violation ended, by rule
  std::uint64_t runs = 0, states = 0;
  std::uint64_t found = 0;  // reached by the search (not known before)
  bool complete = false;    // no branch left: what was not reached is unreachable
};

// Runs bound it (the same decisions on every machine); seconds only guard.
struct DecideBudget {
  std::uint64_t max_runs = 100'000;
  double max_seconds = 30;
};

// Searches `p`'s schedules for each of `outcomes` (Search), until every one
// is reached, the search is complete, or the budget is spent. Those in
// `known` (reached by other runs) are not sought. Under `mode`, only the
// schedules it allows.
Decided decide(const MwProgram& p, const std::vector<std::string>& outcomes, const DecideBudget& budget,
               const std::set<std::string>& known = {}, Mode mode = {}) {
  Targets targets(p, outcomes);
  for (std::uint32_t t = 0; t < outcomes.size(); ++t) {
    if (known.count(outcomes[t]) != 0) targets.reached(t);
  }
  const std::size_t known_count = outcomes.size() - targets.left();
  Search search(p, targets);
  MwKernel k{p, {}, &search};
  const emu::Kernel kernel = k.kernel();
  std::map<std::string, std::uint32_t> index;
  for (std::uint32_t t = 0; t < outcomes.size(); ++t) index.emplace(outcomes[t], t);
  emu::RunOptions ro;
  ro.race_check = false;
  mode.apply(ro);
  ro.max_steps = 100'000;
  ro.strategy.kind = emu::StrategyKind::custom;
  ro.strategy.shared = &search;
  Decided d;
  const auto start = std::chrono::steady_clock::now();
  bool more = targets.left() > 0;
  while (more) {
    const emu::RunResult r = emu::run(kernel, ro);
    ++d.runs;
    if (r.status == emu::Status::violation) {
      ++d.rules[r.violations[0].rule];
    } else if (r.status == emu::Status::livelock) {
      ++d.rules["livelock"];
    } else if (!r.pruned) {
      const auto it = index.find(silicon::outcome_text(p, k.obs));
      if (it != index.end()) targets.reached(it->second);
    }
    d.complete = !search.advance();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    more = !d.complete && targets.left() > 0 && d.runs < budget.max_runs && seconds < budget.max_seconds;
  }
  d.states = search.states();
  d.found = outcomes.size() - known_count - targets.left();
  for (std::uint32_t t = 0; t < outcomes.size(); ++t) {
    auto& to = targets.is_reached(t) ? d.reached : d.complete ? d.unreachable : d.undecided;
    to.push_back(outcomes[t]);
  }
  return d;
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
  for (std::uint32_t generator = 1; generator <= silicon::kMwGenerators; ++generator) {
    std::uint64_t runs = 0;
    for (std::uint32_t i = 0; i < kPrograms; ++i) {
      const MwProgram p = silicon::mw_program(1, i, generator);
      const std::uint32_t max_ops = generator == 1 ? silicon::kMwMaxOps : silicon::kMwMaxOps2;
      for (std::uint32_t w = 0; w < p.warps; ++w) {
        EXPECT_LE(p.ops[w].size(), max_ops) << "program " << i << ", generator " << generator;
        EXPECT_LE(silicon::observation_count(p, w), silicon::kMwMaxObs) << "program " << i;
      }
      const Reached got = reach(p, budget);
      runs += got.exhaustive_runs + got.random_runs;
      EXPECT_TRUE(got.rules.empty()) << "program " << i << ": " << join_rules(got.rules) << "\n  " << to_string(p);
      for (const std::string& o : got.outcomes) {
        EXPECT_EQ(o.find('X'), std::string::npos) << "program " << i << " deadlocks: " << o << "\n  " << to_string(p);
      }
    }
    std::printf("%u programs of seed 1, generator %u: %llu runs\n", kPrograms, generator,
                static_cast<unsigned long long>(runs));
  }
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
  // Generator 2's, with a burst of six copies in flight to b2, one of four
  // to b1, and a counted spin with a fallback load.
  EXPECT_EQ(to_string(silicon::mw_program(1, 5, 2)),
            "b0(1) b1(1) b2(2) | w0: arrive_expect_tx(b2,96); bulk_copy(b2,16@0<-1680); bulk_copy(b2,16@0<-848); "
            "bulk_copy(b2,16@0<-912); bulk_copy(b2,16@128<-3184); bulk_copy(b2,16@0<-2336); "
            "bulk_copy(b2,16@0<-2768); spin(b0,0,x3); try_wait(b2,0); try_wait(b0,1); load_copy(b2,32); "
            "arrive_expect_tx(b1,80); bulk_copy(b1,16@0<-2608); bulk_copy(b1,32@128<-2784); "
            "bulk_copy(b1,16@0<-4032); bulk_copy(b1,16@128<-160); wait(b1,0); wait(b2,0) | w1: "
            "spin_or_load(b2,1,x2,w1); spin(b0,1,x2) | w2: load(s0); load(s3); spin(b1,0,x2); arrive(b2); wait(b2,0)");
}

// Outcomes of program 1 of seed 1 that PTX allows (below).
const std::vector<std::string> kProgram1Allowed = {
    "w0:0 s0 | w1:v0 | w2:v0 v0 | w3:v0 1",
    "w0:0 s0 | w1:v1835 | w2:v0 v0 | w3:v0 1",
    "w0:1 s1 | w1:v0 | w2:v0 v4 | w3:v0 1",
};

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
  const std::set<std::string> allowed(kProgram1Allowed.begin(), kProgram1Allowed.end());
  const Reached got = reach(p, SearchBudget{}, allowed);
  for (const std::string& o : allowed) EXPECT_EQ(got.outcomes.count(o), 1u) << o;
  for (const std::string& o : got.outcomes) {
    EXPECT_EQ(o.substr(o.size() - 2), " 1") << "w3's try_wait(b0, 1) failed: " << o;
    EXPECT_TRUE(o.find("w1:v0 |") != std::string::npos || o.find("w1:v1835 |") != std::string::npos)
        << "w1 read a value that no copy writes to its word: " << o;
  }
  EXPECT_TRUE(got.rules.empty()) << join_rules(got.rules);
}

// The targeted search decides, on the same program: the outcomes above
// that PTX allows are reached, and those it forbids are unreachable, the
// search complete: w3's try_wait(b0, 1) failing; w1 reading a value no
// copy writes to its word; w2 reading its own copy's word 32 (source word
// 992 / 4 = 248, value 1248) before it issued the copy; w0's spin on parity 0 not passing at once after its try_wait
// saw phase 0 complete (the phase stays complete: nothing arrives on b0
// again).
TEST(SiliconMwConformance, TheSearchDecidesWhatPtxAllowsAndForbids) {
  const MwProgram p = silicon::mw_program(1, 1);
  const std::vector<std::string>& allowed = kProgram1Allowed;
  const std::vector<std::string> forbidden = {
      "w0:0 s0 | w1:v0 | w2:v0 v0 | w3:v0 0",
      "w0:0 s0 | w1:v7 | w2:v0 v0 | w3:v0 1",
      "w0:0 s0 | w1:v0 | w2:v1248 v0 | w3:v0 1",
      "w0:1 s2 | w1:v0 | w2:v0 v0 | w3:v0 1",
  };
  std::vector<std::string> sought = allowed;
  sought.insert(sought.end(), forbidden.begin(), forbidden.end());
  const Decided d = decide(p, sought, DecideBudget{.max_runs = 10'000'000, .max_seconds = 60});
  EXPECT_TRUE(d.complete);
  EXPECT_EQ(std::set<std::string>(d.reached.begin(), d.reached.end()),
            std::set<std::string>(allowed.begin(), allowed.end()));
  EXPECT_EQ(std::set<std::string>(d.unreachable.begin(), d.unreachable.end()),
            std::set<std::string>(forbidden.begin(), forbidden.end()));
  EXPECT_TRUE(d.rules.empty()) << join_rules(d.rules);
  std::printf("%llu runs, %llu states\n", static_cast<unsigned long long>(d.runs),
              static_cast<unsigned long long>(d.states));
}

// The search's prunings lose nothing: on the first programs, it reaches
// every outcome that random schedules reach (a state wrongly taken for one
// seen before would hide some).
TEST(SiliconMwConformance, TheSearchReachesWhatRandomSchedulesReach) {
  constexpr std::uint32_t kPrograms = 20;
  SearchBudget sampling;
  sampling.max_runs = 0;
  sampling.min_random = sampling.max_random = 500;
  std::uint64_t outcomes = 0, runs = 0;
  for (std::uint32_t i = 0; i < kPrograms; ++i) {
    const MwProgram p = silicon::mw_program(1, i);
    const Reached got = reach(p, sampling);
    const std::vector<std::string> sought(got.outcomes.begin(), got.outcomes.end());
    const Decided d = decide(p, sought, DecideBudget{.max_runs = 10'000'000, .max_seconds = 60});
    EXPECT_EQ(d.reached.size(), sought.size()) << "program " << i << ": " << d.unreachable.size() << " unreachable, "
                                               << d.undecided.size() << " undecided\n  " << to_string(p);
    outcomes += sought.size();
    runs += d.runs;
  }
  std::printf("%u programs, %llu outcomes, %llu search runs\n", kPrograms, static_cast<unsigned long long>(outcomes),
              static_cast<unsigned long long>(runs));
}

// The programs of each record that CI compares: the first 100 (20 in a
// sanitizer build: WSPIPE_MW_CI_PROGRAMS, tests/CMakeLists.txt).
#ifdef WSPIPE_MW_CI_PROGRAMS
constexpr std::uint64_t kCiPrograms = WSPIPE_MW_CI_PROGRAMS;
#else
constexpr std::uint64_t kCiPrograms = 100;
#endif

// Every outcome silicon showed is reached by the emulator: decided per
// program by the targeted search (decide()); the emulator's outcomes that
// silicon never showed are sampled (reach(), random schedules). By default
// the first kCiPrograms programs of the record; WSPIPE_MW_PROGRAMS=N the
// first N (all: 1000); WSPIPE_MW_SEARCH_RUNS and WSPIPE_MW_MILLIS the
// search's budget per program (docs/silicon.md).
void compare_record(const char* name) {
  std::string why;
  const auto rec = load_record(&why, name);
  if (!rec) GTEST_SKIP() << why;
  SearchBudget sampling = budget_from_env();
  sampling.max_runs = 0;  // random schedules only
  DecideBudget budget;
  budget.max_seconds = static_cast<double>(env_or("WSPIPE_MW_MILLIS", 30'000)) / 1000.0;
  budget.max_runs = env_or("WSPIPE_MW_SEARCH_RUNS", budget.max_runs);
  const std::uint64_t limit = env_or("WSPIPE_MW_PROGRAMS", kCiPrograms);
  const bool verbose = env_or("WSPIPE_MW_VERBOSE", 0) != 0;  // list the emulator's outcomes silicon never showed
  std::uint64_t hw_total = 0, reached_total = 0, found_total = 0, emu_only_total = 0, programs = 0, failed = 0;
  std::uint64_t runs_total = 0;
  std::map<std::string, std::uint64_t> rules_total;
  std::map<std::string, std::uint64_t> unreachable_by_cause;
  std::vector<std::string> unreachable, undecided;
  std::printf("multi-warp conformance against %s (seed %llu, generator %u, %llu repetitions per program); emulator: "
              "targeted search, up to %llu runs or %.1f s per program; %llu random schedules for its own outcomes\n",
              rec->device.c_str(), static_cast<unsigned long long>(rec->seed), rec->generator,
              static_cast<unsigned long long>(rec->reps), static_cast<unsigned long long>(budget.max_runs),
              budget.max_seconds, static_cast<unsigned long long>(sampling.min_random));
  std::printf("program | silicon | reached (by random schedules + by the search) | unreachable | undecided | emulator "
              "only | search runs | states | seconds | rules\n");
  const auto start = std::chrono::steady_clock::now();
  for (const auto& entry : rec->programs) {
    const std::uint32_t index = entry.first;  // not bindings: the lambda below captures them
    const RecordedProgram& hw = entry.second;
    if (programs >= limit) break;
    ++programs;
    if (!hw.failed.empty()) {
      ++failed;
      std::printf("%u | failed on silicon: %s\n", index, hw.failed.c_str());
      continue;
    }
    const MwProgram p = silicon::mw_program(rec->seed, index, rec->generator);
    std::vector<std::string> sought;
    for (const auto& [outcome, runs] : hw.outcomes) sought.push_back(outcome);
    // Random schedules first: they reach most outcomes at once, and give
    // the emulator's outcomes silicon never showed; the search decides the rest.
    const auto program_start = std::chrono::steady_clock::now();
    const Reached got = reach(p, sampling, std::set<std::string>(sought.begin(), sought.end()));
    const Decided d = decide(p, sought, budget, got.outcomes);
    auto note = [&](std::vector<std::string>& to, const std::string& outcome) {
      to.push_back("program " + std::to_string(index) + ": " + outcome + "  (" +
                   std::to_string(hw.outcomes.at(outcome)) + " of " + std::to_string(rec->reps) + " runs; " +
                   suspects(p) + ")\n    " + to_string(p));
    };
    for (const std::string& o : d.unreachable) {
      note(unreachable, o);
      ++unreachable_by_cause[suspects(p)];
    }
    for (const std::string& o : d.undecided) note(undecided, o);
    std::uint64_t emu_only = 0;
    for (const std::string& o : got.outcomes) {
      if (hw.outcomes.count(o) != 0) continue;
      ++emu_only;
      if (verbose) std::printf("  %u, emulator only: %s\n", index, o.c_str());
    }
    hw_total += hw.outcomes.size();
    reached_total += d.reached.size();
    found_total += d.found;
    emu_only_total += emu_only;
    runs_total += d.runs;
    for (const auto& [rule, n] : d.rules) rules_total[rule] += n;
    for (const auto& [rule, n] : got.rules) rules_total[rule] += n;
    const double program_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - program_start).count();
    std::printf("%u | %zu | %zu (%zu + %llu) | %zu | %zu | %llu | %llu | %llu | %.2f | %s\n", index, hw.outcomes.size(),
                d.reached.size(), d.reached.size() - d.found, static_cast<unsigned long long>(d.found),
                d.unreachable.size(), d.undecided.size(), static_cast<unsigned long long>(emu_only),
                static_cast<unsigned long long>(d.runs), static_cast<unsigned long long>(d.states), program_seconds,
                join_rules(d.rules).c_str());
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("total: %llu programs (%llu failed on silicon), %llu silicon outcomes: %llu reached (%.1f%%; %llu of "
              "them by the search), %zu unreachable, %zu undecided; %llu emulator outcomes silicon never showed "
              "(sampled); %llu search runs, %.1f s; rules: %s\n",
              static_cast<unsigned long long>(programs), static_cast<unsigned long long>(failed),
              static_cast<unsigned long long>(hw_total), static_cast<unsigned long long>(reached_total),
              hw_total ? 100.0 * static_cast<double>(reached_total) / static_cast<double>(hw_total) : 100.0,
              static_cast<unsigned long long>(found_total),
              unreachable.size(), undecided.size(), static_cast<unsigned long long>(emu_only_total),
              static_cast<unsigned long long>(runs_total), seconds, join_rules(rules_total).c_str());
  for (const auto& [cause, n] : unreachable_by_cause)
    std::printf("unreachable, %s: %llu\n", cause.c_str(), static_cast<unsigned long long>(n));
  auto list = [](const std::vector<std::string>& v) {
    std::string s;
    for (std::size_t i = 0; i < v.size() && i < 100; ++i) s += v[i] + "\n";
    if (v.size() > 100) s += "... and " + std::to_string(v.size() - 100) + " more\n";
    return s;
  };
  if (!undecided.empty()) std::printf("undecided (the search's budget ran out):\n%s", list(undecided).c_str());
  EXPECT_TRUE(unreachable.empty()) << unreachable.size() << " silicon outcomes the emulator cannot reach:\n"
                                   << list(unreachable);
  EXPECT_TRUE(rules_total.empty()) << join_rules(rules_total);
}


// The search behind `verified` against silicon: for each sampled program of
// each record, the complete search (complete_search: unbounded, reduced, as
// a user runs it), where it completes within its budget, reaches every
// outcome silicon showed. A reduction that loses schedules, or a modelling
// bound that silicon exceeds, shows here as a silicon outcome the complete
// search does not reach. By default the first kCiPrograms programs of each
// record (20 in a sanitizer build); WSPIPE_MW_COMPLETE_PROGRAMS=N the first
// N, WSPIPE_MW_COMPLETE_RUNS the runs per program (default 20,000);
// WSPIPE_MW_COMPLETE_REDUCE=0 runs the unreduced search instead.
// Calls `each(name, record)` for each committed record that can be read
// (kRecord1, kRecord2); skips the test, saying why, when none can.
void for_each_record(const std::function<void(const char*, const Recorded&)>& each) {
  std::uint32_t records = 0;
  std::string skipped;
  for (const char* name : {kRecord1, kRecord2}) {
    std::string why;
    const auto rec = load_record(&why, name);
    if (!rec) {
      skipped += why + "\n";
      continue;
    }
    ++records;
    each(name, *rec);
  }
  if (records == 0) GTEST_SKIP() << skipped;
}

// Calls `each(index, recorded, program)` for the first `limit` programs of
// `rec` that ran on silicon.
void for_each_program(const Recorded& rec, std::uint64_t limit,
                      const std::function<void(std::uint32_t, const RecordedProgram&, const MwProgram&)>& each) {
  std::uint64_t programs = 0;
  for (const auto& [index, hw] : rec.programs) {
    if (programs++ >= limit) break;
    if (hw.failed.empty()) each(index, hw, silicon::mw_program(rec.seed, index, rec.generator));
  }
}

TEST(SiliconMwConformance, TheCompleteSearchReachesEveryOutcomeSiliconShowed) {
  const std::uint64_t limit = env_or("WSPIPE_MW_COMPLETE_PROGRAMS", kCiPrograms);
  const std::uint64_t max_runs = env_or("WSPIPE_MW_COMPLETE_RUNS", 20'000);
  for_each_record([&](const char* name, const Recorded& record) {
    const Recorded* const rec = &record;
    const std::uint64_t programs = std::min<std::uint64_t>(limit, rec->programs.size());
    std::uint64_t completed = 0, hw_total = 0, hw_covered = 0, runs = 0;
    std::set<std::string> assumed;
    std::vector<std::string> missed;
    const auto start = std::chrono::steady_clock::now();
    for_each_program(*rec, limit, [&](std::uint32_t index, const RecordedProgram& hw, const MwProgram& p) {
      const Complete got = complete_search(p, max_runs, 60);
      runs += got.runs;
      EXPECT_TRUE(got.rules.empty()) << "program " << index << ": " << join_rules(got.rules);
      if (!got.complete) return;
      ++completed;
      assumed.insert(got.assumptions.begin(), got.assumptions.end());
      hw_total += hw.outcomes.size();
      for (const auto& [outcome, n] : hw.outcomes) {
        if (got.outcomes.count(outcome) != 0) {
          ++hw_covered;
        } else {
          missed.push_back("program " + std::to_string(index) + ": " + outcome + "  (" + std::to_string(n) + " of " +
                           std::to_string(rec->reps) + " runs; the search: " + std::to_string(got.runs) +
                           " runs)\n    " + to_string(p));
        }
      }
    });
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("%s (generator %u): %llu programs, the complete search completed on %llu within %llu runs each; of "
                "their %llu silicon outcomes it reached %llu; %llu runs, %.1f s\n",
                name, rec->generator, static_cast<unsigned long long>(programs),
                static_cast<unsigned long long>(completed), static_cast<unsigned long long>(max_runs),
                static_cast<unsigned long long>(hw_total), static_cast<unsigned long long>(hw_covered),
                static_cast<unsigned long long>(runs), seconds);
    for (const std::string& a : assumed) std::printf("  assumed: %s\n", a.c_str());
    std::string list;
    for (std::size_t i = 0; i < missed.size() && i < 50; ++i) list += missed[i] + "\n";
    EXPECT_TRUE(missed.empty()) << missed.size() << " silicon outcomes the complete search did not reach:\n" << list;
  });
}

// The sampled strategies against silicon: the default portfolio, as a
// user runs it (`wspipe explore` with the race checker off, one job,
// kPortfolioRuns runs a program), over the sampled programs of each
// record: the share of silicon's outcomes it reaches, and those silicon
// showed in at least 1% of its repetitions that it misses (listed). The
// goal is 99.5% and none missed; the portfolio is far from it
// (docs/silicon.md, "The sampled strategies"), so the test holds the
// shares measured (the first 100 programs; the runs are seeded, so the
// shares are exact) against a regression.
// WSPIPE_MW_PORTFOLIO_PROGRAMS=N samples the first N programs;
// WSPIPE_MW_PORTFOLIO=P measures another portfolio (`--strategy` syntax).
constexpr std::uint64_t kPortfolioRuns = 2000;

TEST(SiliconMwConformance, TheDefaultPortfolioReachesWhatSiliconShows) {
  const std::uint64_t limit = env_or("WSPIPE_MW_PORTFOLIO_PROGRAMS", kCiPrograms);
  for_each_record([&](const char* name, const Recorded& record) {
    const Recorded* const rec = &record;
    const double floor = name == kRecord1 ? 68.2 : 39.4;  // the shares measured (docs/silicon.md)
    const std::uint64_t programs = std::min<std::uint64_t>(limit, rec->programs.size());
    std::uint64_t hw_total = 0, reached = 0, common = 0, common_reached = 0;
    std::vector<std::string> missed_common;
    const auto start = std::chrono::steady_clock::now();
    for_each_program(*rec, limit, [&](std::uint32_t index, const RecordedProgram& hw, const MwProgram& p) {
      MwKernel k{p, {}};
      std::set<std::string> got;
      emu::ExploreOptions xo;
      xo.race_check = false;
      xo.runs = kPortfolioRuns;
      xo.seconds = 0;
      xo.jobs = 1;
      xo.shrink = false;
      if (const char* pf = std::getenv("WSPIPE_MW_PORTFOLIO")) {
        std::string why;
        const auto parsed = emu::parse_portfolio(pf, &why);
        ASSERT_TRUE(parsed) << "WSPIPE_MW_PORTFOLIO: " << why;
        xo.portfolio = *parsed;
      }
      xo.on_run = [&](std::uint64_t, const emu::RunResult& r) {
        if (r.status == emu::Status::ok) got.insert(silicon::outcome_text(p, k.obs));
      };
      const emu::ExploreResult r = emu::explore(k.kernel(), xo);
      EXPECT_TRUE(r.ok()) << "program " << index << ": " << r.report();
      EXPECT_EQ(r.runs, kPortfolioRuns) << "program " << index << ": " << r.report();
      for (const auto& [outcome, n] : hw.outcomes) {
        ++hw_total;
        const bool hit = got.count(outcome) != 0;
        reached += hit;
        if (n * 100 < rec->reps) continue;
        ++common;
        common_reached += hit;
        if (!hit)
          missed_common.push_back("program " + std::to_string(index) + ": " + outcome + "  (" + std::to_string(n) +
                                  " of " + std::to_string(rec->reps) + " runs)\n    " + to_string(p));
      }
    });
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double share = hw_total ? 100.0 * static_cast<double>(reached) / static_cast<double>(hw_total) : 100.0;
    std::printf("%s (generator %u): %llu programs, %llu runs each: %llu of %llu silicon outcomes reached (%.2f%%); "
                "of those silicon showed in at least 1%% of its runs, %llu of %llu; %.1f s\n",
                name, rec->generator, static_cast<unsigned long long>(programs),
                static_cast<unsigned long long>(kPortfolioRuns), static_cast<unsigned long long>(reached),
                static_cast<unsigned long long>(hw_total), share, static_cast<unsigned long long>(common_reached),
                static_cast<unsigned long long>(common), seconds);
    if (limit == kCiPrograms && std::getenv("WSPIPE_MW_RECORD") == nullptr) {
      EXPECT_GE(share, floor) << name;
    }
    for (std::size_t i = 0; i < missed_common.size() && i < 10; ++i)
      std::printf("  missed (silicon: at least 1%%): %s\n", missed_common[i].c_str());
  });
}

TEST(SiliconMwConformance, EmulatorReachesEveryOutcomeSiliconShowed) { compare_record(kRecord1); }

// The same on generator 2's record: counted spins with a fallback load,
// straight-line try_wait/test_wait, bursts of copies in flight, and
// silicon runs that hold one warp back for a long stretch.
TEST(SiliconMwConformance, EmulatorReachesEveryOutcomeSiliconShowedInTheWiderPrograms) { compare_record(kRecord2); }

}  // namespace

namespace {

// A gap of the reduced complete search, found by the comparison with
// silicon (generator 2's program 531) and cut down to three warps: w1
// expects bytes on b2, times out once on b0 (which never completes) and
// copies into b2; w2 copies into b1 with a TMA load. Silicon can land w1's
// copy, let w0 see b2 complete and time out on b1 before w2's copy lands
// ("w0:1 s0 | w1:s0 | w2:"), which needs w1's copy to overtake w2's. In
// the first run w2's copy lands before w1 issues its own, so the
// alternative that lands w1's first is never enabled and no race names
// it; the mark on the engine's order (Touch::issue) makes the
// search explore the issue before that completion too
// (docs/exploration.md, "Why the relation is sound"). Without the mark,
// the complete search completes without the outcome.
TEST(SiliconMwConformance, TheCompleteSearchReachesATimeOutBeforeAnotherWarpsCopyLands) {
  using K = MwOpKind;
  MwProgram p;
  p.generator = 2;
  p.warps = 3;
  p.bars = 3;
  p.count = {1, 1, 1};
  p.ops[0] = {{K::test_wait, 2, 0, 0, 0, 0}, {K::spin, 1, 1, 0, 0, 0}};
  p.ops[1] = {{K::arrive_expect_tx, 2, 0, 0, 32, 0}, {K::spin, 0, 1, 0, 0, 0}, {K::bulk_copy, 2, 0, 8, 32, 1248},
              {K::wait, 2, 0, 0, 0, 0}};
  p.ops[2] = {{K::arrive_expect_tx, 1, 0, 0, 64, 0}, {K::tma_copy, 1, 0, 0, 64, 2832}, {K::wait, 1, 0, 0, 0, 0}};
  const std::string target = "w0:1 s0 | w1:s0 | w2:";
  const Decided d = decide(p, {target}, DecideBudget{}, {});
  ASSERT_EQ(d.reached, std::vector<std::string>{target}) << to_string(p);
  const Complete got = complete_search(p, 100'000, 60);
  ASSERT_TRUE(got.complete);
  EXPECT_EQ(got.outcomes.count(target), 1u) << to_string(p);
}

}  // namespace

namespace {

// Why the emulator reaches an outcome silicon never showed, by the least
// permissive mode (Mode) under which it is reached, in this order:
enum class Needs : std::uint8_t {
  interleaving,  // some interleaving of the warps' steps, loads whole in issue order, no early time-out
  time_out,      // a try_wait timing out while its phase could still complete
  reorder,       // a TMA load completing out of issue order or in pieces
  both,          // a time-out and a load out of order or in pieces
  unexplained,   // a random run reached it; the complete search of the full model completed without it
};
constexpr std::size_t kNeeds = 5;
constexpr std::array<const char*, kNeeds> kNeedsName = {"interleaving", "time-out", "reorder", "both",
                                                        "unexplained"};
// The modes below the full model, in the order above.
constexpr std::array<Mode, 3> kLesserModes = {Mode{false, false}, Mode{true, false}, Mode{false, true}};

struct ClassifyBudget {
  std::uint64_t random_runs = 1000;      // the random schedules that sample the emulator's outcomes
  std::uint64_t complete_runs = 20'000;  // per program and mode, the complete search
  double complete_seconds = 60;
  DecideBudget decide;  // per program and mode, the targeted search where the complete one did not finish
};

// What the searches under one mode decided about the outcomes sought.
struct ModeVerdict {
  std::set<std::string> reached;   // a run under the mode produced it
  std::set<std::string> excluded;  // a search under the mode completed without it
  bool complete = false;           // the complete search completed (else the targeted one decided what it could)
};

// The complete search under `mode`; what it leaves undecided, the targeted
// search under `mode` (decide(): unreduced, with its own prunings) tries.
ModeVerdict decide_under(const MwProgram& p, const std::set<std::string>& sought, Mode mode,
                         const ClassifyBudget& budget) {
  ModeVerdict v;
  const Complete c = complete_search(p, budget.complete_runs, budget.complete_seconds, mode);
  v.complete = c.complete;
  std::vector<std::string> left;
  for (const std::string& o : sought) {
    if (c.outcomes.count(o) != 0) {
      v.reached.insert(o);
    } else if (c.complete) {
      v.excluded.insert(o);
    } else {
      left.push_back(o);
    }
  }
  if (left.empty()) return v;
  const Decided d = decide(p, left, budget.decide, {}, mode);
  v.reached.insert(d.reached.begin(), d.reached.end());
  v.excluded.insert(d.unreachable.begin(), d.unreachable.end());
  return v;
}

// "w0:1 s2 | w1:v0" -> {"w0:1 s2", "w1:v0"}: what each warp observed.
std::vector<std::string> per_warp(const std::string& outcome) {
  std::vector<std::string> parts;
  for (std::size_t at = 0;;) {
    const std::size_t bar = outcome.find(" | ", at);
    parts.push_back(outcome.substr(at, bar - at));
    if (bar == std::string::npos) return parts;
    at = bar + 3;
  }
}

// One program's emulator-only outcomes, classified.
struct Classified {
  std::map<std::string, Needs> needs;
  // Those in which every warp observed what it observed in some silicon
  // run of the program: a combination silicon showed in parts, never whole.
  std::set<std::string> recombined;
  std::set<std::string> open;  // the category is an upper bound: a lesser mode's searches did not decide it
  // Per mode (the lesser ones, then the full model): searched for this
  // program, and its complete search completed.
  std::array<bool, 4> searched{}, complete{};
  std::map<std::string, std::uint64_t> rules;
};

Classified classify(const MwProgram& p, const RecordedProgram& hw, const ClassifyBudget& budget) {
  Classified got;
  // The emulator's outcomes: random schedules and the complete search.
  std::set<std::string> random;
  {
    MwKernel k{p, {}};
    const emu::Kernel kernel = k.kernel();
    emu::RunOptions ro;
    ro.race_check = false;
    ro.trace = false;
    ro.max_steps = 100'000;
    ro.strategy.kind = emu::StrategyKind::random;
    for (std::uint64_t i = 0; i < budget.random_runs; ++i) {
      ro.strategy.seed = emu::run_seed(1, i);
      const emu::RunResult r = emu::run(kernel, ro);
      if (r.status == emu::Status::violation) {
        ++got.rules[r.violations[0].rule];
      } else if (r.status == emu::Status::livelock) {
        ++got.rules["livelock"];
      } else {
        random.insert(silicon::outcome_text(p, k.obs));
      }
    }
  }
  const Complete full = complete_search(p, budget.complete_runs, budget.complete_seconds);
  for (const auto& [rule, n] : full.rules) got.rules[rule] += n;
  got.searched[3] = true;
  got.complete[3] = full.complete;
  std::set<std::string> only;
  std::set<std::string> reached = random;
  reached.insert(full.outcomes.begin(), full.outcomes.end());
  for (const std::string& o : reached) {
    if (hw.outcomes.count(o) == 0) only.insert(o);
  }
  // Least permissive first; a mode is searched only for what the ones
  // before it did not reach.
  std::array<ModeVerdict, kLesserModes.size()> v;
  std::set<std::string> left = only;
  for (std::size_t m = 0; m < kLesserModes.size() && !left.empty(); ++m) {
    v[m] = decide_under(p, left, kLesserModes[m], budget);
    got.searched[m] = true;
    got.complete[m] = v[m].complete;
    for (const std::string& o : v[m].reached) left.erase(o);
  }
  std::set<std::string> warp_seen;  // each warp's observations in some silicon run
  for (const auto& [outcome, runs] : hw.outcomes) {
    for (const std::string& w : per_warp(outcome)) warp_seen.insert(w);
  }
  for (const std::string& o : only) {
    const auto parts = per_warp(o);
    if (std::all_of(parts.begin(), parts.end(), [&](const std::string& w) { return warp_seen.count(w) != 0; }))
      got.recombined.insert(o);
    if (full.complete && full.outcomes.count(o) == 0) {
      got.needs[o] = Needs::unexplained;
      continue;
    }
    std::size_t m = 0;
    while (m < kLesserModes.size() && v[m].reached.count(o) == 0) ++m;
    got.needs[o] = static_cast<Needs>(m);
    for (std::size_t lesser = 0; lesser < m; ++lesser) {
      if (v[lesser].excluded.count(o) == 0) got.open.insert(o);
    }
  }
  return got;
}

// Every outcome the emulator reaches that silicon never showed, classified
// by what it needs beyond an interleaving of the warps' program-ordered
// steps (Needs; docs/silicon/emulator-only-outcomes.md argues each
// category's PTX legality). The emulator's outcomes are those of
// `random_runs` random schedules and of the complete search of the full
// model (as a user runs it); each silicon never showed is sought by the
// complete search under the lesser modes, least permissive first, and
// where that does not complete within its budget, by the targeted search
// under the same mode. An outcome in a category is reached under its mode;
// it needs that mode where every lesser one's search completed without it
// (else it counts as open: the category is an upper bound). Unexplained:
// reached by a random run, while the full model's complete search
// completed without it (a gap of the reduction), which fails the test.
// By default a CI-sized sample: the first kClassifyCiPrograms programs of
// each record, with small budgets. WSPIPE_MW_CLASSIFY_PROGRAMS=N the first
// N programs with the budgets of a whole run; WSPIPE_MW_CLASSIFY_SHARD=k/n
// only every n-th of them from the k-th (the totals of the shards add up);
// WSPIPE_MW_VERBOSE=1 lists every outcome with its category.
constexpr std::uint64_t kClassifyCiPrograms = 8;

TEST(SiliconMwConformance, EveryOutcomeOnlyTheEmulatorReachesIsExplained) {
  const std::uint64_t asked = env_or("WSPIPE_MW_CLASSIFY_PROGRAMS", 0);
  const std::uint64_t limit = asked != 0 ? asked : kClassifyCiPrograms;
  ClassifyBudget budget;
  if (asked == 0) {
    budget.random_runs = 200;
    budget.complete_runs = 2'000;
    budget.decide.max_runs = 5'000;
  }
  budget.random_runs = env_or("WSPIPE_MW_RANDOM", budget.random_runs);
  budget.complete_runs = env_or("WSPIPE_MW_COMPLETE_RUNS", budget.complete_runs);
  budget.decide.max_runs = env_or("WSPIPE_MW_SEARCH_RUNS", budget.decide.max_runs);
  budget.decide.max_seconds = static_cast<double>(env_or("WSPIPE_MW_MILLIS", 10'000)) / 1000.0;
  unsigned long long shard = 0, shards = 1;
  if (const char* s = std::getenv("WSPIPE_MW_CLASSIFY_SHARD"); s != nullptr && *s != '\0') {
    ASSERT_EQ(std::sscanf(s, "%llu/%llu", &shard, &shards), 2) << "WSPIPE_MW_CLASSIFY_SHARD=k/n";
    ASSERT_LT(shard, shards);
  }
  const bool verbose = env_or("WSPIPE_MW_VERBOSE", 0) != 0;
  for_each_record([&](const char* name, const Recorded& record) {
    const Recorded* const rec = &record;
    std::array<std::uint64_t, kNeeds> count{}, open{}, recombined{};
    std::array<std::uint64_t, 4> searched{}, completed{};
    std::uint64_t programs = 0, with_only = 0, only = 0, ordinal = 0;
    std::map<std::string, std::uint64_t> rules;
    std::array<std::vector<std::string>, kNeeds> examples;
    const auto start = std::chrono::steady_clock::now();
    for_each_program(*rec, limit, [&](std::uint32_t index, const RecordedProgram& hw, const MwProgram& p) {
      if (ordinal++ % shards != shard) return;
      ++programs;
      const Classified c = classify(p, hw, budget);
      for (const auto& [rule, n] : c.rules) rules[rule] += n;
      for (std::size_t m = 0; m < completed.size(); ++m) {
        searched[m] += c.searched[m];
        completed[m] += c.complete[m];
      }
      with_only += !c.needs.empty();
      only += c.needs.size();
      for (const auto& [outcome, needs] : c.needs) {
        const auto n = static_cast<std::size_t>(needs);
        ++count[n];
        open[n] += c.open.count(outcome);
        recombined[n] += c.recombined.count(outcome);
        const std::string line = "program " + std::to_string(index) + ": " + outcome +
                                 (c.open.count(outcome) != 0 ? "  (open)" : "") +
                                 (c.recombined.count(outcome) != 0 ? "  (parts seen)" : "");
        if (verbose) std::printf("  %s: %s\n", kNeedsName[n], line.c_str());
        if (examples[n].size() < 3 || needs == Needs::unexplained)
          examples[n].push_back(line + "\n    " + to_string(p));
      }
    });
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("%s (generator %u), shard %llu/%llu: %llu programs, %llu with emulator-only outcomes; %llu "
                "emulator-only outcomes (%llu random runs a program and the complete search):\n",
                name, rec->generator, shard, shards,
                static_cast<unsigned long long>(programs), static_cast<unsigned long long>(with_only),
                static_cast<unsigned long long>(only), static_cast<unsigned long long>(budget.random_runs));
    for (std::size_t n = 0; n < kNeeds; ++n)
      std::printf("  needs %s: %llu (open: %llu; each warp's part seen on silicon: %llu)\n", kNeedsName[n],
                  static_cast<unsigned long long>(count[n]), static_cast<unsigned long long>(open[n]),
                  static_cast<unsigned long long>(recombined[n]));
    std::printf("  the complete search completed on (of the programs searched under the mode):");
    for (std::size_t m = 0; m < completed.size(); ++m)
      std::printf(" %s %llu of %llu;", m < 3 ? kNeedsName[m] : "full model",
                  static_cast<unsigned long long>(completed[m]), static_cast<unsigned long long>(searched[m]));
    std::printf(" %.1f s\n", seconds);
    for (std::size_t n = 0; n < kNeeds; ++n) {
      for (const std::string& e : examples[n]) std::printf("  e.g. %s: %s\n", kNeedsName[n], e.c_str());
    }
    EXPECT_TRUE(rules.empty()) << name << ": " << join_rules(rules);
    const auto& unexplained = examples[static_cast<std::size_t>(Needs::unexplained)];
    std::string list;
    for (std::size_t i = 0; i < unexplained.size() && i < 50; ++i) list += unexplained[i] + "\n";
    EXPECT_TRUE(unexplained.empty()) << name << ": " << unexplained.size()
                                     << " outcomes random schedules reach and the completed search does not:\n"
                                     << list;
  });
}

}  // namespace
