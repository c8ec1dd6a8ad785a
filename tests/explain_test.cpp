// emu::explain and `wspipe explain` on the event logs an H200 saved
// (tests/data/event_logs): the hangs and the correct ring match, each hang
// with the waits its trap names; logs edited so that no emulator run can
// do what they say are refused, naming the warp and the event.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "backends/emu/explain.hpp"
#include "examples/scenarios.hpp"
#include "tools/cli.hpp"

namespace {

using namespace wspipe;

const std::filesystem::path kLogs = std::filesystem::path(WSPIPE_SOURCE_DIR) / "tests" / "data" / "event_logs";

// The catalogue's kernel of `name` ("ring/no-release") with the ring's
// options as the logs' config lines give them.
emu::KernelFactory ring_kernel(const std::string& name) {
  static const emu::Catalogue cat = examples::catalogue();
  const auto slash = name.find('/');
  const std::string scenario = name.substr(0, slash), variant = slash == std::string::npos ? "" : name.substr(slash + 1);
  const auto s = std::find_if(cat.begin(), cat.end(), [&](const emu::Scenario& x) { return x.name == scenario; });
  EXPECT_NE(s, cat.end());
  emu::OptionValues values;
  for (const emu::OptionSpec& o : s->options) values[o.name] = o.def;
  values["stages"] = 4;
  values["items"] = 1000;
  values["release"] = 0;  // lanes
  return [s, variant, values] { return s->prepare(variant, values); };
}

std::string text_of(const std::string& file) {
  std::ifstream in(kLogs / file);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

cuda::EventLogFile parsed(const std::string& text) {
  std::istringstream in(text);
  return cuda::parse_event_log(in);
}

// `text` with its one line starting `from` replaced by `to`.
std::string edited(std::string text, const std::string& from, const std::string& to) {
  const auto at = text.find("\n" + from);
  EXPECT_NE(at, std::string::npos) << from;
  const auto end = text.find('\n', at + 1);
  text.replace(at + 1, end - at - 1, to);
  return text;
}

emu::ExplainOptions quick() {
  emu::ExplainOptions o;
  o.seconds = 60;
  return o;
}

// The emulator's barrier a blocked warp waits on, by name.
std::string blocked_on(const emu::RunResult& r, const std::string& warp) {
  for (const emu::BlockedWarp& b : r.blocked)
    if (b.warp == warp && b.barrier >= 0) return r.trace.objects.at(static_cast<std::size_t>(b.barrier)).name;
  return "";
}

TEST(Explain, NoReleaseHangMatchesWithTheTrappedWaits) {
  const cuda::EventLogFile log = emu::read_event_log((kLogs / "ring.no-release.0.log").string());
  const emu::ExplainResult r = emu::explain(ring_kernel("ring/no-release"), log, quick());
  ASSERT_TRUE(r.matched) << r.report();
  EXPECT_EQ(r.run.status, emu::Status::deadlock);
  // The log's traps: warp 0 in wait 0x420 (empty[0]) parity 0 at ring.hpp:73,
  // warp 1 in wait 0x400 (full[0]) parity 1 at ring.hpp:85.
  ASSERT_EQ(r.run.blocked.size(), 2u);
  EXPECT_EQ(blocked_on(r.run, "cta0/w0 producer"), "empty[0]");
  EXPECT_EQ(blocked_on(r.run, "cta0/w1 consumer"), "full[0]");
  for (const emu::BlockedWarp& b : r.run.blocked) {
    const bool producer = b.warp == "cta0/w0 producer";
    EXPECT_EQ(b.parity, producer ? 0 : 1);
    EXPECT_EQ(b.line, producer ? 73u : 85u);
    EXPECT_TRUE(b.file.ends_with("ring.hpp")) << b.file;
  }
  // Every kept event but the two trapped waits ran, at a step of its own warp.
  EXPECT_EQ(r.events.size(), 19u + 7u - 2u);
  ASSERT_EQ(r.trapped.size(), 2u);
  EXPECT_NE(r.trapped[0].find("wait on 0x420 parity 0 at ring.hpp:73"), std::string::npos) << r.trapped[0];
  EXPECT_NE(r.trapped[0].find("empty[0] (cta0) parity 0"), std::string::npos) << r.trapped[0];

  // The schedule replays the same deadlock.
  const emu::RunResult again = emu::replay(ring_kernel("ring/no-release")(), r.run.schedule, emu::RunOptions{});
  EXPECT_EQ(again.status, emu::Status::deadlock);
  EXPECT_EQ(blocked_on(again, "cta0/w0 producer"), "empty[0]");
}

TEST(Explain, ProducerPhaseZeroHangMatchesWithTheTrappedWaits) {
  const cuda::EventLogFile log = emu::read_event_log((kLogs / "ring.producer-phase-0.0.log").string());
  const emu::ExplainResult r = emu::explain(ring_kernel("ring/producer-phase-0"), log, quick());
  ASSERT_TRUE(r.matched) << r.report();
  EXPECT_EQ(r.run.status, emu::Status::deadlock);
  EXPECT_EQ(blocked_on(r.run, "cta0/w0 producer"), "empty[0]");
  EXPECT_EQ(blocked_on(r.run, "cta0/w1 consumer"), "full[0]");
  for (const emu::BlockedWarp& b : r.run.blocked) EXPECT_EQ(b.parity, 0);
}

TEST(Explain, CorrectRingMatchesAsACleanRunThroughItsKeptWindows) {
  const cuda::EventLogFile log = emu::read_event_log((kLogs / "ring.0.log.gz").string());
  const emu::ExplainResult r = emu::explain(ring_kernel("ring"), log, quick());
  ASSERT_TRUE(r.matched) << r.report();
  EXPECT_EQ(r.run.status, emu::Status::ok);
  EXPECT_EQ(r.log_events, 2010u + 2002u);
  EXPECT_EQ(r.events.size(), 512u + 512u);  // the kept windows, compared event by event
  EXPECT_NE(r.report().find("known by count only"), std::string::npos);
}

// A matcher that accepted any run would pass the tests above; these logs
// no emulator run can produce.
TEST(Explain, ARunThatLeavesTheLogIsNoMatchNamingWarpAndEvent) {
  const std::string text = text_of("ring.no-release.0.log");
  // The producer's second wait asks parity 0: the emulator's asks 1.
  const cuda::EventLogFile log = parsed(edited(
      text, "event 13 1795949687982903456",
      "event 13 1795949687982903456 wait bar=0x428 parity=0 answer=1 arg=0 lanes=0xffffffff cta=- at=ring.hpp:73"));
  const emu::ExplainResult r = emu::explain(ring_kernel("ring/no-release"), log, quick());
  EXPECT_FALSE(r.matched);
  EXPECT_TRUE(r.searched_all) << r.report();
  ASSERT_TRUE(r.closest.has_value());
  EXPECT_EQ(r.closest->log_warp, 0u);
  EXPECT_EQ(r.closest->seq, 13u);
  EXPECT_NE(r.closest->message().find("warp 0 (cta0/w0 producer), event 13 of 19: the log has wait on 0x428 parity 0"),
            std::string::npos)
      << r.closest->message();
  EXPECT_NE(r.closest->message().find("empty[1] parity=1"), std::string::npos) << r.closest->message();
}

TEST(Explain, AnOperationNoRunDoesThereIsNoMatch) {
  // The consumer arrives where it waits.
  const cuda::EventLogFile log = parsed(edited(
      text_of("ring.no-release.0.log"), "event 3 1795949687982903456",
      "event 3 1795949687982903456 arrive bar=0x400 parity=- answer=- arg=0 lanes=0xffffffff cta=- at=ring.hpp:85"));
  const emu::ExplainResult r = emu::explain(ring_kernel("ring/no-release"), log, quick());
  EXPECT_FALSE(r.matched);
  EXPECT_TRUE(r.searched_all);
  ASSERT_TRUE(r.closest.has_value());
  EXPECT_EQ(r.closest->log_warp, 1u);
  EXPECT_EQ(r.closest->seq, 3u);
  EXPECT_NE(r.closest->message().find("another operation"), std::string::npos) << r.closest->message();
}

TEST(Explain, AFlippedWaitAnswerIsRefusedBeforeAnyRun) {
  const cuda::EventLogFile log = parsed(edited(
      text_of("ring.no-release.0.log"), "event 5 1795949687982904000",
      "event 5 1795949687982904000 wait bar=0x410 parity=0 answer=0 arg=0 lanes=0xffffffff cta=- at=ring.hpp:85"));
  const emu::ExplainResult r = emu::explain(ring_kernel("ring/no-release"), log, quick());
  EXPECT_FALSE(r.matched);
  EXPECT_TRUE(r.searched_all);
  EXPECT_EQ(r.runs, 0u);
  ASSERT_TRUE(r.closest.has_value());
  EXPECT_EQ(r.closest->log_warp, 1u);
  EXPECT_EQ(r.closest->seq, 5u);
  EXPECT_NE(r.closest->message().find("cannot do that in any run"), std::string::npos) << r.closest->message();
}

TEST(Explain, ATrapInAnotherWaitIsNoMatch) {
  // The producer's trapped wait names parity 1: the emulator's producer
  // blocks for parity 0 there.
  std::string text = text_of("ring.producer-phase-0.0.log");
  text = edited(text, "event 11 1795949697462715744",
                "event 11 1795949697462715744 wait bar=0x420 parity=1 answer=0 arg=1000000 lanes=0xffffffff cta=- "
                "at=ring.hpp:73");
  const emu::ExplainResult r = emu::explain(ring_kernel("ring/producer-phase-0"), parsed(text), quick());
  EXPECT_FALSE(r.matched);
  ASSERT_TRUE(r.closest.has_value());
  EXPECT_EQ(r.closest->seq, 11u);
  EXPECT_NE(r.closest->message().find("parity"), std::string::npos) << r.closest->message();
}

TEST(Explain, TheCorrectRingsLogIsNotTheHangsKernel) {
  const cuda::EventLogFile log = emu::read_event_log((kLogs / "ring.0.log.gz").string());
  const emu::ExplainResult r = emu::explain(ring_kernel("ring/no-release"), log, quick());
  EXPECT_FALSE(r.matched);
  EXPECT_TRUE(r.searched_all) << r.report();
}

TEST(Explain, ALaunchOtherThanTheLogsIsRefused) {
  std::string text = edited(text_of("ring.no-release.0.log"), "grid ", "grid 2 1 1");
  EXPECT_THROW(emu::explain(ring_kernel("ring/no-release"), parsed(text), quick()), std::invalid_argument);
}

TEST(Explain, TheTraceShowsTheLogsEventsBesideTheEmulators) {
  const cuda::EventLogFile log = emu::read_event_log((kLogs / "ring.no-release.0.log").string());
  const emu::ExplainResult r = emu::explain(ring_kernel("ring/no-release"), log, quick());
  ASSERT_TRUE(r.matched);
  const auto file = std::filesystem::temp_directory_path() / "wspipe_explain_test_trace.json";
  emu::write_explained_trace(file.string(), r, log);
  std::ifstream in(file);
  std::ostringstream s;
  s << in.rdbuf();
  const std::string json = s.str();
  std::filesystem::remove(file);
  EXPECT_NE(json.find("\"CTA 0: GPU event log\""), std::string::npos);
  EXPECT_NE(json.find("\"GPU warp 1 (cta0/w1 consumer)\""), std::string::npos);
  EXPECT_NE(json.find("\"wait 0x420 (the watchdog's trap)\""), std::string::npos);
  EXPECT_NE(json.find("\"gpu_time_ns\":1795949687982903104"), std::string::npos);
  EXPECT_TRUE(json.ends_with("\n]}\n"));
}

// `wspipe explain` end to end.
int cli(const std::vector<std::string>& args, std::string& out, std::string& err) {
  std::vector<std::string> argv = {"wspipe"};
  argv.insert(argv.end(), args.begin(), args.end());
  std::ostringstream o, e;
  const int rc = cli::main(argv, examples::catalogue(), o, e);
  out = o.str();
  err = e.str();
  return rc;
}

TEST(ExplainCli, AHangPrintsTheReportAndTheReplayLine) {
  std::string out, err;
  const int rc = cli({"explain", (kLogs / "ring.no-release.0.log").string()}, out, err);
  EXPECT_EQ(rc, 0) << out << err;
  EXPECT_NE(out.find("ring/no-release stages=4 items=1000 release=lanes"), std::string::npos) << out;
  EXPECT_NE(out.find("matched: run 1"), std::string::npos) << out;
  EXPECT_NE(out.find("deadlock"), std::string::npos) << out;
  EXPECT_NE(out.find("replay:   wspipe replay ring/no-release --stages 4 --items 1000 --release lanes"),
            std::string::npos)
      << out;
}

TEST(ExplainCli, BadInputIsAUsageError) {
  std::string out, err;
  EXPECT_EQ(cli({"explain", "/no/such/file.log"}, out, err), 2);
  EXPECT_NE(err.find("no such file"), std::string::npos) << err;

  const auto dir = std::filesystem::temp_directory_path();
  const std::string text = text_of("ring.no-release.0.log");
  const auto write = [&](const std::string& name, const std::string& body) {
    std::ofstream(dir / name) << body;
    return (dir / name).string();
  };
  const std::string v2 = write("wspipe_explain_v2.log", "wspipe-event-log 2" + text.substr(text.find('\n')));
  EXPECT_EQ(cli({"explain", v2}, out, err), 2);
  EXPECT_NE(err.find("expected format version 1, found 2"), std::string::npos) << err;

  const std::string unknown =
      write("wspipe_explain_unknown.log", edited(text, "config ", "config scenario=spiral stages=4"));
  EXPECT_EQ(cli({"explain", unknown}, out, err), 2);
  EXPECT_NE(err.find("spiral, which is not in this program's catalogue"), std::string::npos) << err;

  EXPECT_EQ(cli({"explain", (kLogs / "ring.no-release.0.log").string(), "--items", "5"}, out, err), 2);
  EXPECT_NE(err.find("--items is the log's"), std::string::npos) << err;
  std::filesystem::remove(v2);
  std::filesystem::remove(unknown);
}

TEST(ExplainCli, ALogSavedUnderDelaysNamesThemAndStillMatches) {
  // explore's logs end their config line with the delays they ran under.
  const auto dir = std::filesystem::temp_directory_path();
  const std::string text = text_of("ring.no-release.0.log");
  const std::string config = parsed(text).config;
  const std::string spec = "seed:7,density:64,max_ns:65536,sites:wait@ring.hpp:73+arrive@ring.hpp:78";
  const auto path = dir / "wspipe_explain_delays.log";
  std::ofstream(path) << edited(text, "config ", "config " + config + " delays=" + spec);
  std::string out, err;
  EXPECT_EQ(cli({"explain", path.string()}, out, err), 0) << out << err;
  EXPECT_NE(out.find("matched: run 1"), std::string::npos) << out;
  EXPECT_NE(out.find("seeded delays (" + spec + ")"), std::string::npos) << out;
  EXPECT_NE(out.find("replay:   wspipe replay ring/no-release --stages 4 --items 1000 --release lanes"),
            std::string::npos)
      << out;

  const cuda::EventLogFile log = emu::read_event_log(path.string());
  EXPECT_EQ(log.config, config);
  EXPECT_EQ(log.delays, spec);
  std::filesystem::remove(path);

  std::string c = "scenario=ring stages=4 delays=off items=1000", d = "x";
  emu::take_delays(c, d);
  EXPECT_EQ(c, "scenario=ring stages=4 items=1000");
  EXPECT_EQ(d, "");
}

}  // namespace
