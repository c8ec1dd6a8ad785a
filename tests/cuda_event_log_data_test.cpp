// The event logs that the broken-variants suite saved on silicon
// (tests/data/event_logs/, docs/silicon.md "Broken variants on silicon"),
// read on the CPU with the file format's parser: every file parses, names
// the variant it came from, and each hanging variant's log names the
// watchdog's trap on a barrier, with the trapped warp's last event the wait
// that failed there; the correct ring's log names no trap and every wait
// passed. A name ending in .gz is read through `gzip -dc`.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "backends/cuda/event_log_file.hpp"

namespace {

using namespace wspipe::cuda;

const std::filesystem::path kDir = std::filesystem::path(WSPIPE_SOURCE_DIR) / "tests" / "data" / "event_logs";

// The variants whose launch hung on the H200 until the watchdog trapped.
const std::set<std::string> kHanging = {"ring/no-release", "ring/producer-phase-0", "tile-reduce/expect-own-half"};

// The file's text, decompressed where its name ends in .gz; empty when it
// cannot be read.
std::string read_text(const std::filesystem::path& path) {
  if (path.extension() != ".gz") {
    std::ifstream in(path);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  std::string text;
  FILE* gz = popen(("gzip -dc '" + path.string() + "' 2>/dev/null").c_str(), "r");
  if (gz == nullptr) return text;
  std::array<char, 1 << 16> buf;
  for (std::size_t n; (n = std::fread(buf.data(), 1, buf.size(), gz)) > 0;) text.append(buf.data(), n);
  if (pclose(gz) != 0) text.clear();
  return text;
}

// The variant a file's name names: <variant, '/' as '.'>.<launch>.log[.gz].
std::string variant_of(const std::filesystem::path& path) {
  std::string name = path.filename().string();
  if (name.ends_with(".gz")) name.resize(name.size() - 3);
  name.resize(name.size() - 4);         // .log
  name.resize(name.find_last_of('.'));  // .<launch>
  const auto dot = name.find('.');
  if (dot != std::string::npos) name[dot] = '/';
  return name;
}

struct Saved {
  std::filesystem::path path;
  EventLogFile log;
};

std::vector<Saved> saved_logs() {
  std::vector<Saved> all;
  for (const auto& entry : std::filesystem::directory_iterator(kDir)) {
    const std::string name = entry.path().filename().string();
    if (!name.ends_with(".log") && !name.ends_with(".log.gz")) continue;
    const std::string text = read_text(entry.path());
    EXPECT_FALSE(text.empty()) << "cannot read " << entry.path() << " (is gzip installed?)";
    std::istringstream in(text);
    try {
      all.push_back({entry.path(), parse_event_log(in)});
    } catch (const EventLogParseError& e) {
      ADD_FAILURE() << entry.path() << ": " << e.what();
    }
  }
  return all;
}

TEST(CudaEventLogData, EveryFileParsesAndNamesItsVariant) {
  const std::vector<Saved> all = saved_logs();
  std::set<std::string> variants;
  for (const Saved& s : all) {
    const std::string variant = variant_of(s.path);
    variants.insert(variant);
    EXPECT_TRUE(s.log.config.starts_with("scenario=" + variant + " ")) << s.path << ": config " << s.log.config;
    EXPECT_EQ(s.log.kernel.substr(0, s.log.kernel.find('<')), variant.starts_with("ring") ? "ring_kernel"
                                                                                        : "tile_reduce_kernel")
        << s.path;
    EXPECT_EQ(s.path.filename().string().find("." + std::to_string(s.log.launch) + ".log"),
              variant_of(s.path).size())
        << s.path << ": the name's launch is the file's";
    EXPECT_FALSE(s.log.warps.empty()) << s.path;
  }
  for (const std::string& v : kHanging) EXPECT_TRUE(variants.count(v)) << "no saved log of " << v;
  EXPECT_TRUE(variants.count("ring")) << "no saved log of the correct ring";
}

TEST(CudaEventLogData, EachHangNamesTheTrappedWait) {
  for (const Saved& s : saved_logs()) {
    if (!kHanging.count(variant_of(s.path))) continue;
    SCOPED_TRACE(s.path.string());
    ASSERT_TRUE(s.log.trap.has_value()) << "the log names no trap";
    const Trap& t = *s.log.trap;
    EXPECT_EQ(t.reason, TrapReason::watchdog);
    EXPECT_NE(t.bar, 0u) << "the trap names no barrier";
    EXPECT_NE(t.line, 0u);
    EXPECT_EQ(s.log.source_name(t.file), variant_of(s.path).starts_with("ring") ? "ring.hpp" : "tile_reduce.hpp");
    // The trapped warp: its own header holds the trap, and its last event
    // is the wait that failed, on that barrier and parity.
    const EventLogWarp* warp = nullptr;
    for (const EventLogWarp& w : s.log.warps)
      if (w.warp == t.warp) warp = &w;
    ASSERT_NE(warp, nullptr) << "warp " << t.warp << " did not log";
    ASSERT_TRUE(warp->trap.has_value());
    EXPECT_EQ(warp->trap->bar, t.bar);
    EXPECT_EQ(warp->trap->parity, t.parity);
    ASSERT_FALSE(warp->events.empty());
    const LoggedEvent& last = warp->events.back();
    EXPECT_EQ(last.op, EventOp::wait);
    EXPECT_EQ(last.bar, t.bar);
    EXPECT_EQ(last.parity, std::optional<std::uint32_t>(t.parity));
    EXPECT_EQ(last.answer, std::optional<bool>(false));
    EXPECT_EQ(last.line, t.line);
    // Some warp initialised the barrier.
    bool initialised = false;
    for (const EventLogWarp& w : s.log.warps)
      for (const LoggedEvent& e : w.events) initialised |= e.op == EventOp::init && e.bar == t.bar;
    EXPECT_TRUE(initialised) << "no init of barrier 0x" << std::hex << t.bar;
  }
}

TEST(CudaEventLogData, TheCorrectRingPassedEveryWait) {
  bool found = false;
  for (const Saved& s : saved_logs()) {
    if (variant_of(s.path) != "ring") continue;
    found = true;
    SCOPED_TRACE(s.path.string());
    EXPECT_FALSE(s.log.trap.has_value());
    ASSERT_EQ(s.log.warps.size(), 2u);
    for (const EventLogWarp& w : s.log.warps) {
      EXPECT_FALSE(w.trap.has_value());
      EXPECT_EQ(w.events.size(), std::min<std::size_t>(w.total, s.log.capacity));
      for (const LoggedEvent& e : w.events) {
        if (e.op == EventOp::wait) {
          EXPECT_EQ(e.answer, std::optional<bool>(true)) << "event " << e.seq;
        }
      }
    }
  }
  EXPECT_TRUE(found);
}

}  // namespace
