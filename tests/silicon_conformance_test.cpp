// The emulator's mbarrier model against silicon: every program of the
// conformance suite (tools/gpu/mbar_program.hpp) runs in the emulator,
// and its observations are compared with those an H100 recorded
// (tests/data/h100_mbarrier_conformance.txt, written by
// `wspipe_silicon conformance`; docs/silicon.md).
//
// Agreement, per program:
//  - the emulator runs clean: silicon observed exactly the same waits, and
//    did not trap;
//  - the emulator reports mbarrier.over-arrival: silicon trapped (docs/hardware.md);
//  - the emulator reports another rule: the program did something the PTX ISA
//    leaves undefined (or that silicon does nondeterministically); silicon's
//    waits before that point match, and what it did after is tallied per
//    rule, not compared (the emulator's stricter verdict is deliberate,
//    docs/silicon.md says why for each rule).
// Anything else is a disagreement, printed with the program.
#include <algorithm>
#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "tools/gpu/mbar_program.hpp"
#include "backends/emu/emu.hpp"
#include "emu_test_util.hpp"

namespace {

namespace emu = wspipe::emu;
namespace silicon = wspipe::silicon;
using silicon::MbarOp;
using silicon::MbarOpKind;
using wspipe::test::B;

struct Recorded {
  std::string device;
  std::uint64_t seed = 0;
  std::vector<std::string> results;  // per program: waits as '1'/'0', "-" none, "T" trapped
};

std::optional<Recorded> load(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  Recorded r;
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("# device: ", 0) == 0) r.device = line.substr(10);
    if (line.rfind("# seed: ", 0) == 0) r.seed = std::stoull(line.substr(8));
    if (line.empty() || line[0] == '#') continue;
    std::istringstream s(line);
    std::size_t i = 0;
    std::string obs;
    s >> i >> obs;
    if (r.results.size() <= i) r.results.resize(i + 1);
    r.results[i] = obs;
  }
  return r;
}

// Engines first: an async copy delivers as soon as it is issued, whole,
// before the issuing warp goes on, which the silicon runner's settle after
// each copy makes true there (the engine, the last actor before its
// alternatives, which would land it in pieces). Otherwise the default: the
// one warp.
class EnginesFirst final : public emu::Strategy {
 public:
  std::optional<std::uint32_t> pick(const emu::Choice& c) override {
    const std::size_t n = static_cast<std::size_t>(
        std::lower_bound(c.enabled, c.enabled + c.n, c.first_alternative) - c.enabled);
    return c.enabled[n - 1];
  }
};

struct Storage {
  wspipe::SharedMemBarrier bar;
  alignas(128) std::uint8_t dst[silicon::kMaxCopyBytes];
};

struct EmuOutcome {
  std::string observations;  // up to the violation, if any
  std::string rule;          // the violation's rule; empty: clean
  std::string message;
};

// Runs program `p` in the emulator as silicon.cu does on the GPU: one warp,
// one lane issuing (arrive(c) is a warp-level arrive with c lanes active,
// which the hardware aggregates into one arrive of count c), copies through
// the emulator's TMA engine over a 1-D byte tensor. A try_wait on a phase
// that nothing else can complete times out and returns false, as on silicon.
EmuOutcome run_in_emulator(const std::vector<MbarOp>& p) {
  static const std::vector<std::uint8_t> source(4096, 0x5a);
  EmuOutcome out;
  emu::RunOptions opts;
  opts.strategy.kind = emu::StrategyKind::custom;
  opts.strategy.make = [](std::uint32_t) { return std::make_unique<EnginesFirst>(); };
  emu::LaunchConfig launch;
  launch.warps_per_cta = 1;
  launch.smem_bytes = sizeof(Storage);
  const emu::RunResult r = emu::run(
      launch,
      [&] {
        auto& s = B::shared_storage<Storage>();
        for (const MbarOp& op : p) {
          switch (op.kind) {
            case MbarOpKind::init: B::elect_one([&] { B::init(s.bar, op.arg, {"bar"}); }); break;
            case MbarOpKind::inval: B::elect_one([&] { B::inval(s.bar); }); break;
            case MbarOpKind::arrive: {
              // op.arg lanes arrive: the recorded program's active mask.
              std::uint32_t& active = wspipe::emu::detail::RunningWarp::current().active_lanes();
              const std::uint32_t saved = active;
              active = op.arg >= 32 ? ~0u : (1u << op.arg) - 1u;
              B::arrive(s.bar);
              active = saved;
              break;
            }
            case MbarOpKind::arrive_expect_tx: B::elect_one([&] { B::arrive_expect_tx(s.bar, op.arg); }); break;
            case MbarOpKind::expect_tx: B::elect_one([&] { B::expect_tx(s.bar, op.arg); }); break;
            case MbarOpKind::complete_tx: B::elect_one([&] { B::complete_tx(s.bar, op.arg); }); break;
            case MbarOpKind::bulk_copy:
            case MbarOpKind::tma_copy: {
              wspipe::TensorMap m;
              m.global = source.data();
              m.dtype = wspipe::ElemType::u8;
              m.rank = 1;
              m.dims[0] = source.size();
              m.box[0] = op.arg;
              B::elect_one([&] { B::tma_load<1, 1>(m, s.dst, s.bar, wspipe::TmaCoords{}); });
              break;
            }
            case MbarOpKind::try_wait:
            case MbarOpKind::test_wait: {
              bool ok = false;
              B::elect_one([&] {
                ok = op.kind == MbarOpKind::try_wait ? B::try_wait(s.bar, op.arg) : B::test_wait(s.bar, op.arg);
              });
              if (!wspipe::emu::detail::RunningWarp::current().ended()) out.observations += ok ? '1' : '0';
              break;
            }
          }
        }
      },
      opts);
  if (!r.violations.empty()) {
    out.rule = r.violations[0].rule;
    out.message = r.violations[0].message;
  } else if (r.status != emu::Status::ok) {
    out.rule = std::string(emu::to_string(r.status));
  }
  return out;
}

// The program cut after the wait whose answer first differs between the
// two observation strings (the whole program when none does: a trap, or a
// rule where silicon went on): the shortest prefix that shows the
// disagreement, since nothing after that wait can change it.
std::vector<MbarOp> shortest(const std::vector<MbarOp>& p, const std::string& a, const std::string& b) {
  std::size_t differ = 0;
  while (differ < a.size() && differ < b.size() && a[differ] == b[differ]) ++differ;
  if (differ >= a.size() || differ >= b.size() || a == "T" || b == "T") return p;
  std::size_t waits = 0;
  for (std::size_t i = 0; i < p.size(); ++i) {
    if (silicon::is_wait(p[i].kind) && waits++ == differ) return {p.begin(), p.begin() + static_cast<std::ptrdiff_t>(i) + 1};
  }
  return p;
}

std::string data_path() { return std::string(WSPIPE_SOURCE_DIR) + "/tests/data/h100_mbarrier_conformance.txt"; }

TEST(SiliconConformance, EmulatorAgreesWithH100OnEveryProgram) {
  const auto rec = load(data_path());
  ASSERT_TRUE(rec.has_value()) << "no silicon record at " << data_path();
  ASSERT_GE(rec->results.size(), 10000u);
  std::map<std::string, std::map<std::string, int>> undefined;  // rule -> silicon outcome -> programs
  std::uint32_t clean = 0, traps = 0;
  std::vector<std::string> disagreements;
  for (std::uint32_t i = 0; i < rec->results.size(); ++i) {
    const auto p = silicon::program(rec->seed, i);
    const std::string& hw = rec->results[i];
    const EmuOutcome e = run_in_emulator(p);
    const std::string emu_obs = e.observations.empty() ? "-" : e.observations;
    bool agree = false;
    if (e.rule.empty()) {
      agree = hw == emu_obs;
      clean += agree;
    } else if (e.rule == "mbarrier.over-arrival") {
      agree = hw == "T";
      traps += agree;
    } else {
      // Undefined from here on: what silicon saw before must match.
      agree = hw == "T" || (hw == "-" ? e.observations.empty() : hw.compare(0, e.observations.size(), e.observations) == 0);
      if (agree) {
        ++undefined[e.rule][hw == "T" ? "trapped" : (hw.size() > e.observations.size() ? "went on" : "ended")];
      }
    }
    if (!agree && disagreements.size() < 10) {
      disagreements.push_back("program " + std::to_string(i) + " (seed " + std::to_string(rec->seed) +
                              "), up to the first wait that differs: " + silicon::to_string(shortest(p, hw, emu_obs)) +
                              "\n    silicon: " + hw + "\n    emulator: " + emu_obs +
                              (e.rule.empty() ? "" : " then " + e.rule) + " " + e.message);
    }
  }
  std::printf("conformance against %s (seed %llu): %zu programs, %u agree exactly, %u over-arrivals trapped on both\n",
              rec->device.c_str(), static_cast<unsigned long long>(rec->seed), rec->results.size(), clean, traps);
  for (const auto& [rule, outcomes] : undefined) {
    for (const auto& [what, n] : outcomes) std::printf("  %s (undefined): %d programs; silicon %s\n", rule.c_str(), n, what.c_str());
  }
  std::string all;
  for (const std::string& d : disagreements) all += d + "\n";
  EXPECT_TRUE(disagreements.empty()) << all;
}

// The named case of a try_wait true before its bytes: try_wait is false until the last complete_tx
// lands, with the bytes from a thread, a bulk copy or a TMA tensor copy.
TEST(SiliconConformance, TryWaitFalseUntilTheLastBytes) {
  const auto rec = load(data_path());
  ASSERT_TRUE(rec.has_value());
  for (std::uint32_t i = 0; i < 3; ++i) {
    EXPECT_EQ(rec->results[i], "001") << "silicon, named program " << i;
    EXPECT_EQ(run_in_emulator(silicon::named_program(i)).observations, "001") << "emulator, named program " << i;
  }
}

}  // namespace
