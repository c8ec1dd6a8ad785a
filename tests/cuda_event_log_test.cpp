// The CUDA backend's event log file (backends/cuda/event_log_file.hpp), on
// the CPU: a log written and read back is the same log, the file ids of
// paths and names agree, records decode as the device wrote them, and
// malformed files are refused with the line and what was expected there.
#include <gtest/gtest.h>

#include <cstring>
#include <sstream>
#include <string>

#include "backends/cuda/event_log_file.hpp"

namespace {

using namespace wspipe::cuda;

LoggedEvent event(std::uint32_t seq, EventOp op, std::uint32_t bar, std::uint32_t file, std::uint32_t line) {
  LoggedEvent e;
  e.seq = seq;
  e.time = 1'718'000'000'000ull + seq * 40;
  e.op = op;
  e.bar = bar;
  e.lanes = 0xffffffffu;
  e.file = file;
  e.line = line;
  return e;
}

// Two warps of a ring, the consumer trapped by the watchdog; one event
// from a file that no `source` line names.
EventLogFile sample() {
  EventLogFile f;
  f.kernel = "wspipe_event_log_hang";
  f.launch = 3;
  f.grid = {1, 1, 1};
  f.block = {64, 1, 1};
  f.cluster = {1, 1, 1};
  f.smem_bytes = 96;
  f.config = "stages=4 items=100 planted=consumer waits on a barrier nobody arrives on";
  f.capacity = 256;
  f.add_source("/src/tools/gpu/event_log_gpu.cu");
  f.add_source("pipeline.hpp");
  const std::uint32_t kernel = event_log_file_id("event_log_gpu.cu");
  const std::uint32_t pipeline = event_log_file_id("pipeline.hpp");

  EventLogWarp producer;
  producer.warp = 0;
  producer.block = {0, 0, 0};
  producer.total = 300;  // more than kept: the ring wrapped
  LoggedEvent init = event(297, EventOp::init, 0x400, pipeline, 179);
  init.arg = 1;
  init.lanes = 0x1;
  LoggedEvent remote = event(298, EventOp::arrive_expect_tx, 0x408, kernel, 90);
  remote.arg = 4096;
  remote.cta = 3;
  LoggedEvent wait = event(299, EventOp::wait, 0x410, kernel, 77);
  wait.parity = 1;
  wait.answer = true;
  wait.arg = 12;
  LoggedEvent elsewhere = event(300, EventOp::named_sync, 1, 0x12345678u, 5);
  elsewhere.arg = 160;
  producer.events = {init, remote, wait, elsewhere};

  EventLogWarp consumer;
  consumer.warp = 1;
  consumer.block = {0, 0, 0};
  consumer.warp_in_cta = 1;
  consumer.cta_rank = 0;
  consumer.total = 1;
  LoggedEvent hung = event(1, EventOp::wait, 0x418, kernel, 120);
  hung.parity = 0;
  hung.answer = false;
  hung.arg = 100000;
  consumer.events = {hung};
  consumer.trap = Trap{TrapReason::watchdog, 1, 0x418, 0, 120, kernel, 100000, 32};
  f.warps = {producer, consumer};
  f.trap = Trap{TrapReason::watchdog, 1, 0x418, 0, 120, kernel, 0, 0};
  return f;
}

std::string text_of(const EventLogFile& f) {
  std::ostringstream out;
  write_event_log(out, f);
  return out.str();
}

EventLogFile parse(const std::string& text) {
  std::istringstream in(text);
  return parse_event_log(in);
}

// The text with the first occurrence of `from` replaced by `to`.
std::string with(std::string text, const std::string& from, const std::string& to) {
  const auto at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

// What parsing `text` throws ("" if nothing).
std::string error_of(const std::string& text) {
  try {
    (void)parse(text);
  } catch (const EventLogParseError& e) {
    return e.what();
  }
  return "";
}

TEST(CudaEventLogFile, RoundTrips) {
  const EventLogFile f = sample();
  const std::string text = text_of(f);
  const EventLogFile back = parse(text);
  EXPECT_EQ(back, f);
  EXPECT_EQ(text_of(back), text);
}

TEST(CudaEventLogFile, NamesTheHungWait) {
  const std::string text = text_of(sample());
  EXPECT_NE(text.find("trap watchdog warp=1 bar=0x418 parity=0 at=event_log_gpu.cu:120\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("event 1 1718000000040 wait bar=0x418 parity=0 answer=0 arg=100000 lanes=0xffffffff cta=- "
                      "at=event_log_gpu.cu:120\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("at=#12345678:5"), std::string::npos) << text;
  EXPECT_NE(text.find(" cta=3 "), std::string::npos) << text;
}

TEST(CudaEventLogFile, EmptyLogRoundTrips) {
  EventLogFile f;
  f.kernel = "k";
  f.capacity = 8;
  EXPECT_EQ(parse(text_of(f)), f);
}

TEST(CudaEventLogFile, FileIdIsTheNameAfterTheLastSlash) {
  EXPECT_EQ(event_log_file_id("/work/x/core/pipeline.hpp"), event_log_file_id("pipeline.hpp"));
  EXPECT_NE(event_log_file_id("pipeline.hpp"), event_log_file_id("ring.hpp"));
  EXPECT_EQ(event_log_file_id(""), 2166136261u);  // FNV-1a's basis
  EXPECT_EQ(event_log_file_id("a"), 0xe40c292cu);  // FNV-1a 32 of "a"
}

TEST(CudaEventLogFile, DecodesARecordAsTheDeviceWritesIt) {
  // Two 16-byte stores, as event_log_device.hpp writes them.
  const std::uint32_t words[8] = {7,          static_cast<std::uint32_t>(EventOp::arrive) |
                                                  ((kEventRemote | (5u << kEventRemoteShift)) << 8) | (88u << 16),
                                  0xabcdef01u, 0x420,
                                  0,          0x0000ffffu,
                                  0x89abcdefu, 0x1u};
  EventRecord r;
  static_assert(sizeof words == sizeof r);
  std::memcpy(&r, words, sizeof r);
  const LoggedEvent e = event_from_record(r);
  EXPECT_EQ(e.seq, 7u);
  EXPECT_EQ(e.op, EventOp::arrive);
  EXPECT_EQ(e.line, 88u);
  EXPECT_EQ(e.file, 0xabcdef01u);
  EXPECT_EQ(e.bar, 0x420u);
  EXPECT_EQ(e.lanes, 0xffffu);
  EXPECT_EQ(e.time, 0x189abcdefull);
  EXPECT_EQ(e.cta, 5u);
  EXPECT_FALSE(e.parity.has_value());

  std::uint32_t wait_words[8] = {1, static_cast<std::uint32_t>(EventOp::try_wait) |
                                        ((kEventHasParity | kEventParity) << 8) | (9u << 16),
                                 0, 0x400, 0, 1, 0, 0};
  std::memcpy(&r, wait_words, sizeof r);
  const LoggedEvent w = event_from_record(r);
  EXPECT_EQ(w.parity, 1u);
  EXPECT_EQ(w.answer, false);
  EXPECT_FALSE(w.cta.has_value());
}

TEST(CudaEventLogFile, EveryOpHasAName) {
  for (std::uint8_t i = 1; i <= kEventOpLast; ++i) {
    ASSERT_NE(event_op_name(static_cast<EventOp>(i)), nullptr) << int{i};
  }
}

struct Malformed {
  const char* name;
  std::string from, to;
  std::string expected;  // what the error says
};

TEST(CudaEventLogFile, RejectsMalformedInputNamingTheLine) {
  const std::string good = text_of(sample());
  const Malformed cases[] = {
      {"version", "wspipe-event-log 1", "wspipe-event-log 2", "event log line 1: expected format version 1, found 2"},
      {"magic", "wspipe-event-log 1", "event-log 1", "event log line 1: expected 'wspipe-event-log', found 'event-log'"},
      {"keyword", "kernel ", "kernal ", "event log line 2: expected 'kernel', found 'kernal'"},
      {"number", "grid 1 1 1", "grid 1 x 1", "event log line 4: expected a grid dimension (a decimal number), found 'x'"},
      {"missing dimension", "block 64 1 1", "block 64 1",
       "event log line 5: expected a block dimension, found the end of the line"},
      {"extra word", "smem 96", "smem 96 bytes", "event log line 7: expected the end of the line, found 'bytes'"},
      {"clock", "clock globaltimer-ns", "clock clock64", "event log line 10: expected 'globaltimer-ns', found 'clock64'"},
      {"source id", "source ", "source 12 ", "event log line 11: expected a file id (8 hex digits), found '12'"},
      {"trap reason", "trap watchdog", "trap hang",
       "event log line 13: expected a trap reason (none, watchdog, check), found 'hang'"},
      {"op", " init ", " initialise ", "event log line 16: expected an event op (init, arrive, wait, ...), found "
                                        "'initialise'"},
      {"field", " bar=0x400 ", " barrier=0x400 ", "event log line 16: expected 'bar=...', found 'barrier=0x400'"},
      {"hex", " bar=0x400 ", " bar=400 ", "event log line 16: expected bar (0x and at most 8 hex digits), found '400'"},
      {"parity", "parity=1 answer=1", "parity=2 answer=1",
       "event log line 18: expected parity at most 1 or '-', found '2'"},
      {"parity without answer", "parity=1 answer=1", "parity=1 answer=-",
       "event log line 18: expected parity and answer both given or both '-'"},
      {"unknown file", "at=pipeline.hpp:179", "at=ring.hpp:179",
       "event log line 16: expected a file named by a 'source' line, found 'ring.hpp'"},
      {"no line", "at=pipeline.hpp:179", "at=pipeline.hpp",
       "event log line 16: expected 'at=<file>:<line>', found 'at=pipeline.hpp'"},
      {"order", "event 298 ", "event 296 ", "event log line 17: expected an event number above 297 and at most 300, "
                                            "found 296"},
      {"kept", "kept=4", "kept=5", "event log line 20: expected 'event' (event 5 of the 5 kept of warp 0), found 'warp 1 "},
      {"end", "end\n", "", "event log line 22: expected 'end', found the end of the file"},
      {"kept over events", "events=1 kept=1", "events=1 kept=2", "event log line 20: expected kept <= events, found "
                                                                 "kept=2"},
  };
  for (const Malformed& c : cases) {
    const std::string error = error_of(with(good, c.from, c.to));
    EXPECT_NE(error.find(c.expected), std::string::npos) << c.name << ": " << error;
  }
  EXPECT_NE(error_of("").find("event log line 1: expected the first line"), std::string::npos) << error_of("");
  EXPECT_EQ(error_of(good), "");
}

TEST(CudaEventLogFile, ParseErrorCarriesTheLineNumber) {
  try {
    (void)parse("wspipe-event-log 1\nkernel k\nlaunch -1\n");
    FAIL() << "no error";
  } catch (const EventLogParseError& e) {
    EXPECT_EQ(e.line(), 3u);
  }
}

}  // namespace
