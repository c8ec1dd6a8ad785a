// The event log's file: one launch's log as text, version 1
// (docs/event-log.md has the grammar). Its writer and its parser, host
// C++20 with no CUDA, so that a reader of saved logs (tests, a later
// `wspipe explain`) needs neither a GPU nor the toolkit.
//
//   wspipe-event-log 1
//   kernel wspipe_event_log_ring
//   launch 0
//   grid 1 1 1
//   block 64 1 1
//   cluster 1 1 1
//   smem 96
//   config stages=4 items=100
//   capacity 256
//   clock globaltimer-ns
//   source 7f3c2a10 event_log_gpu.cu
//   trap watchdog warp=1 bar=0x400 parity=0 at=event_log_gpu.cu:120
//   warps 2
//   warp 0 block=0,0,0 rank=0 warp=0 events=205 kept=205 trap=none
//   event 1 1718000000000 init bar=0x400 parity=- answer=- arg=1 lanes=0x00000001 cta=- at=pipeline.hpp:179
//   ...
//   end
//
// One `warp` line per warp that logged, then its kept events, oldest
// first. A file id that no `source` line names is written `#<8 hex>`.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <istream>
#include <optional>
#include <ostream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "backends/cuda/event_log_format.hpp"

namespace wspipe::cuda {

struct Dim3 {
  std::uint32_t x = 0, y = 0, z = 0;
  friend bool operator==(const Dim3&, const Dim3&) = default;
};

// A trap, as a warp's header or the log's header records it.
struct Trap {
  TrapReason reason = TrapReason::none;
  std::uint32_t warp = 0;
  std::uint32_t bar = 0;
  std::uint32_t parity = 0;
  std::uint32_t line = 0;
  std::uint32_t file = 0;
  std::uint32_t tries = 0;   // warp traps only
  std::uint32_t thread = 0;  // warp traps only
  friend bool operator==(const Trap&, const Trap&) = default;
};

// One event as the file holds it.
struct LoggedEvent {
  std::uint32_t seq = 0;  // 1 + the warp's event number
  std::uint64_t time = 0;
  EventOp op = EventOp::init;
  std::uint32_t bar = 0;
  std::optional<std::uint32_t> parity;  // waits only
  std::optional<bool> answer;           // waits only
  std::uint32_t arg = 0;
  std::uint32_t lanes = 0;
  std::optional<std::uint32_t> cta;  // remote operations: the cluster rank
  std::uint32_t file = 0;
  std::uint32_t line = 0;
  friend bool operator==(const LoggedEvent&, const LoggedEvent&) = default;
};

struct EventLogWarp {
  std::uint32_t warp = 0;  // across the grid
  Dim3 block{};
  std::uint32_t cta_rank = 0;
  std::uint32_t warp_in_cta = 0;
  std::uint32_t total = 0;  // events logged; the last `events.size()` are kept
  std::optional<Trap> trap;
  std::vector<LoggedEvent> events;
  friend bool operator==(const EventLogWarp&, const EventLogWarp&) = default;
};

struct EventLogFile {
  std::uint32_t version = kEventLogVersion;
  std::string kernel;
  std::uint32_t launch = 0;
  Dim3 grid{}, block{}, cluster{1, 1, 1};
  std::uint64_t smem_bytes = 0;
  std::string config;
  // The seeded delays the launch ran under (docs/delays.md): the config
  // line's `delays=` token, which emu::read_event_log takes out of `config`
  // (it says how the GPU's schedule was pushed, not which kernel ran; "off"
  // and an empty string: none). parse_event_log leaves it in `config`.
  std::string delays;
  std::uint32_t capacity = 0;
  std::vector<std::pair<std::uint32_t, std::string>> sources;  // file id, name
  std::optional<Trap> trap;                                     // the log header's (the last warp to trap)
  std::vector<EventLogWarp> warps;
  friend bool operator==(const EventLogFile&, const EventLogFile&) = default;

  // Names `path`'s file id (by its name after the last '/').
  void add_source(std::string_view path) {
    const auto slash = path.rfind('/');
    const std::string name(slash == std::string_view::npos ? path : path.substr(slash + 1));
    const std::uint32_t id = event_log_file_id(name.c_str());
    for (const auto& s : sources) {
      if (s.first == id) return;
    }
    sources.emplace_back(id, name);
  }
  // The name of file id `id`, or "#<8 hex>".
  std::string source_name(std::uint32_t id) const {
    for (const auto& s : sources) {
      if (s.first == id) return s.second;
    }
    char buf[16];
    std::snprintf(buf, sizeof buf, "#%08x", id);
    return buf;
  }
};

inline LoggedEvent event_from_record(const EventRecord& r) {
  LoggedEvent e;
  e.seq = r.seq;
  e.time = r.time;
  e.op = static_cast<EventOp>(r.op);
  e.bar = r.bar;
  if ((r.flags & kEventHasParity) != 0) {
    e.parity = (r.flags & kEventParity) != 0 ? 1u : 0u;
    e.answer = (r.flags & kEventAnswer) != 0;
  }
  e.arg = r.arg;
  e.lanes = r.lanes;
  if ((r.flags & kEventRemote) != 0) e.cta = static_cast<std::uint32_t>(r.flags >> kEventRemoteShift);
  e.file = r.file;
  e.line = r.line;
  return e;
}

namespace event_log_detail {

inline const char* reason_name(TrapReason r) {
  switch (r) {
    case TrapReason::none: return "none";
    case TrapReason::watchdog: return "watchdog";
    case TrapReason::check: return "check";
  }
  return "none";
}

inline std::string hex(std::uint32_t v, int width = 0) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%0*x", width, v);
  return buf;
}

inline std::string at(const EventLogFile& f, std::uint32_t file, std::uint32_t line) {
  return "at=" + f.source_name(file) + ":" + std::to_string(line);
}

}  // namespace event_log_detail

// Writes `f` in the version 1 format.
inline void write_event_log(std::ostream& out, const EventLogFile& f) {
  namespace d = event_log_detail;
  out << "wspipe-event-log " << f.version << "\n";
  out << "kernel " << f.kernel << "\n";
  out << "launch " << f.launch << "\n";
  out << "grid " << f.grid.x << " " << f.grid.y << " " << f.grid.z << "\n";
  out << "block " << f.block.x << " " << f.block.y << " " << f.block.z << "\n";
  out << "cluster " << f.cluster.x << " " << f.cluster.y << " " << f.cluster.z << "\n";
  out << "smem " << f.smem_bytes << "\n";
  out << "config " << f.config << "\n";
  out << "capacity " << f.capacity << "\n";
  out << "clock globaltimer-ns\n";
  for (const auto& s : f.sources) {
    char id[16];
    std::snprintf(id, sizeof id, "%08x", s.first);
    out << "source " << id << " " << s.second << "\n";
  }
  if (f.trap) {
    const Trap& t = *f.trap;
    out << "trap " << d::reason_name(t.reason) << " warp=" << t.warp << " bar=" << d::hex(t.bar)
        << " parity=" << t.parity << " " << d::at(f, t.file, t.line) << "\n";
  }
  out << "warps " << f.warps.size() << "\n";
  for (const EventLogWarp& w : f.warps) {
    out << "warp " << w.warp << " block=" << w.block.x << "," << w.block.y << "," << w.block.z
        << " rank=" << w.cta_rank << " warp=" << w.warp_in_cta << " events=" << w.total << " kept=" << w.events.size()
        << " trap=" << d::reason_name(w.trap ? w.trap->reason : TrapReason::none);
    if (w.trap) {
      const Trap& t = *w.trap;
      out << " bar=" << d::hex(t.bar) << " parity=" << t.parity << " tries=" << t.tries << " thread=" << t.thread
          << " " << d::at(f, t.file, t.line);
    }
    out << "\n";
    for (const LoggedEvent& e : w.events) {
      const char* name = event_op_name(e.op);
      out << "event " << e.seq << " " << e.time << " " << (name != nullptr ? name : "?") << " bar=" << d::hex(e.bar)
          << " parity=" << (e.parity ? std::to_string(*e.parity) : "-")
          << " answer=" << (e.answer ? (*e.answer ? "1" : "0") : "-") << " arg=" << e.arg
          << " lanes=" << d::hex(e.lanes, 8) << " cta=" << (e.cta ? std::to_string(*e.cta) : "-") << " "
          << d::at(f, e.file, e.line) << "\n";
    }
  }
  out << "end\n";
}

// A malformed file: what() is "event log line N: expected ..., found '...'".
class EventLogParseError : public std::runtime_error {
 public:
  EventLogParseError(std::size_t line, const std::string& what)
      : std::runtime_error("event log line " + std::to_string(line) + ": " + what), line_(line) {}
  std::size_t line() const { return line_; }

 private:
  std::size_t line_;
};

namespace event_log_detail {

class Reader {
 public:
  explicit Reader(std::istream& in) : in_(in) {}

  // The next line, split at spaces; `rest` keeps the text after the first word.
  void next(const char* expected) {
    ++number_;
    if (!std::getline(in_, text_)) fail(std::string("expected ") + expected + ", found the end of the file");
    if (!text_.empty() && text_.back() == '\r') text_.pop_back();
    words_.clear();
    std::istringstream s(text_);
    for (std::string w; s >> w;) words_.push_back(w);
    pos_ = 0;
  }
  const std::string& text() const { return text_; }
  std::size_t number() const { return number_; }
  bool at_word(std::string_view w) const { return !words_.empty() && words_[0] == w; }

  [[noreturn]] void fail(const std::string& what) const { throw EventLogParseError(number_, what); }

  std::string word(const char* expected) {
    if (pos_ >= words_.size()) fail(std::string("expected ") + expected + ", found the end of the line");
    return words_[pos_++];
  }
  void keyword(std::string_view k) {
    const std::string w = word(std::string("'").append(k).append("'").c_str());
    if (w != k) fail("expected '" + std::string(k) + "', found '" + w + "'");
  }
  void end_of_line() {
    if (pos_ < words_.size()) fail("expected the end of the line, found '" + words_[pos_] + "'");
  }

  static bool parse_u64(std::string_view s, std::uint64_t& v, int base = 10) {
    if (s.empty() || s.size() > 20) return false;
    std::uint64_t r = 0;
    for (char c : s) {
      int digit;
      if (c >= '0' && c <= '9') {
        digit = c - '0';
      } else if (base == 16 && c >= 'a' && c <= 'f') {
        digit = c - 'a' + 10;
      } else if (base == 16 && c >= 'A' && c <= 'F') {
        digit = c - 'A' + 10;
      } else {
        return false;
      }
      if (digit >= base) return false;
      if (r > (UINT64_MAX - static_cast<std::uint64_t>(digit)) / static_cast<std::uint64_t>(base)) return false;
      r = r * static_cast<std::uint64_t>(base) + static_cast<std::uint64_t>(digit);
    }
    v = r;
    return true;
  }
  std::uint64_t u64(std::string_view s, const char* what) const {
    std::uint64_t v;
    if (!parse_u64(s, v)) fail(std::string("expected ") + what + " (a decimal number), found '" + std::string(s) + "'");
    return v;
  }
  std::uint32_t u32(std::string_view s, const char* what) const {
    const std::uint64_t v = u64(s, what);
    if (v > UINT32_MAX) fail(std::string("expected ") + what + " (at most 4294967295), found '" + std::string(s) + "'");
    return static_cast<std::uint32_t>(v);
  }
  std::uint32_t hex32(std::string_view s, const char* what) const {
    std::uint64_t v;
    if (s.substr(0, 2) != "0x" || !parse_u64(s.substr(2), v, 16) || v > UINT32_MAX) {
      fail(std::string("expected ") + what + " (0x and at most 8 hex digits), found '" + std::string(s) + "'");
    }
    return static_cast<std::uint32_t>(v);
  }
  // "key=value": the value.
  std::string value(std::string_view key) {
    const std::string k = std::string(key) + "=";
    const std::string w = word(("'" + k + "...'").c_str());
    if (w.compare(0, k.size(), k) != 0) fail("expected '" + k + "...', found '" + w + "'");
    return w.substr(k.size());
  }
  std::uint32_t u32_field(const char* key) { return u32(value(key), key); }
  std::uint64_t u64_field(const char* key) { return u64(value(key), key); }
  // "key=N" or "key=-".
  std::optional<std::uint32_t> optional_u32_field(const char* key, std::uint32_t max) {
    const std::string v = value(key);
    if (v == "-") return std::nullopt;
    const std::uint32_t n = u32(v, key);
    if (n > max) fail(std::string("expected ") + key + " at most " + std::to_string(max) + " or '-', found '" + v + "'");
    return n;
  }
  // "at=<name>:<line>": the file id (a `source` name or #<8 hex>) and the line.
  std::pair<std::uint32_t, std::uint32_t> at(const EventLogFile& f) {
    const std::string v = value("at");
    const auto colon = v.rfind(':');
    if (colon == std::string::npos || colon == 0) fail("expected 'at=<file>:<line>', found 'at=" + v + "'");
    const std::string name = v.substr(0, colon);
    const std::uint32_t line = u32(std::string_view(v).substr(colon + 1), "a source line");
    if (name[0] == '#') {
      std::uint64_t id;
      if (name.size() != 9 || !parse_u64(std::string_view(name).substr(1), id, 16)) {
        fail("expected a file as a source name or '#' and 8 hex digits, found '" + name + "'");
      }
      return {static_cast<std::uint32_t>(id), line};
    }
    for (const auto& s : f.sources) {
      if (s.second == name) return {s.first, line};
    }
    fail("expected a file named by a 'source' line, found '" + name + "'");
  }
  Dim3 dim3_words(const char* what) {
    Dim3 d;
    d.x = u32(word(what), what);
    d.y = u32(word(what), what);
    d.z = u32(word(what), what);
    return d;
  }
  TrapReason reason(const std::string& s) const {
    if (s == "watchdog") return TrapReason::watchdog;
    if (s == "check") return TrapReason::check;
    if (s == "none") return TrapReason::none;
    fail("expected a trap reason (none, watchdog, check), found '" + s + "'");
  }
  EventOp op(const std::string& s) const {
    for (std::uint8_t i = 1; i <= kEventOpLast; ++i) {
      if (s == event_op_name(static_cast<EventOp>(i))) return static_cast<EventOp>(i);
    }
    fail("expected an event op (init, arrive, wait, ...), found '" + s + "'");
  }

 private:
  std::istream& in_;
  std::string text_;
  std::vector<std::string> words_;
  std::size_t pos_ = 0;
  std::size_t number_ = 0;
};

}  // namespace event_log_detail

// Reads a version 1 file. Throws EventLogParseError at the first line that
// is not what the format expects there, naming the line and what was
// expected.
inline EventLogFile parse_event_log(std::istream& in) {
  event_log_detail::Reader r(in);
  EventLogFile f;
  r.next("the first line, 'wspipe-event-log 1'");
  r.keyword("wspipe-event-log");
  f.version = r.u32(r.word("the format version"), "the format version");
  if (f.version != kEventLogVersion) {
    r.fail("expected format version " + std::to_string(kEventLogVersion) + ", found " + std::to_string(f.version));
  }
  r.end_of_line();
  r.next("'kernel <name>'");
  r.keyword("kernel");
  f.kernel = r.word("the kernel's name");
  r.end_of_line();
  r.next("'launch <n>'");
  r.keyword("launch");
  f.launch = r.u32(r.word("the launch number"), "the launch number");
  r.end_of_line();
  // "<key> <x> <y> <z>" lines.
  for (auto [key, dims] : {std::pair{"grid", &f.grid}, {"block", &f.block}, {"cluster", &f.cluster}}) {
    r.next(("'" + std::string(key) + " <x> <y> <z>'").c_str());
    r.keyword(key);
    *dims = r.dim3_words(("a " + std::string(key) + " dimension").c_str());
    r.end_of_line();
  }
  r.next("'smem <bytes>'");
  r.keyword("smem");
  f.smem_bytes = r.u64(r.word("the shared-memory bytes"), "the shared-memory bytes");
  r.end_of_line();
  r.next("'config <text>'");
  if (r.text() != "config" && r.text().compare(0, 7, "config ") != 0) {
    r.fail("expected 'config <text>', found '" + r.text() + "'");
  }
  f.config = r.text().size() > 7 ? r.text().substr(7) : "";
  r.next("'capacity <events per warp>'");
  r.keyword("capacity");
  f.capacity = r.u32(r.word("the capacity"), "the capacity");
  r.end_of_line();
  r.next("'clock globaltimer-ns'");
  r.keyword("clock");
  r.keyword("globaltimer-ns");
  r.end_of_line();
  r.next("'source', 'trap' or 'warps'");
  while (r.at_word("source")) {
    r.keyword("source");
    const std::string id = r.word("a file id (8 hex digits)");
    std::uint64_t v;
    if (id.size() != 8 || !event_log_detail::Reader::parse_u64(id, v, 16)) {
      r.fail("expected a file id (8 hex digits), found '" + id + "'");
    }
    const std::string name = r.word("a file name");
    r.end_of_line();
    f.sources.emplace_back(static_cast<std::uint32_t>(v), name);
    r.next("'source', 'trap' or 'warps'");
  }
  if (r.at_word("trap")) {
    r.keyword("trap");
    Trap t;
    t.reason = r.reason(r.word("a trap reason"));
    if (t.reason == TrapReason::none) r.fail("expected a trap reason (watchdog, check), found 'none'");
    t.warp = r.u32_field("warp");
    t.bar = r.hex32(r.value("bar"), "bar");
    t.parity = r.u32_field("parity");
    std::tie(t.file, t.line) = r.at(f);
    r.end_of_line();
    f.trap = t;
    r.next("'warps <count>'");
  }
  r.keyword("warps");
  const std::uint32_t warps = r.u32(r.word("the number of warps"), "the number of warps");
  r.end_of_line();
  for (std::uint32_t i = 0; i < warps; ++i) {
    r.next("'warp <n> ...'");
    r.keyword("warp");
    EventLogWarp w;
    w.warp = r.u32(r.word("the warp's number"), "the warp's number");
    {
      const std::string b = r.value("block");
      unsigned x = 0, y = 0, z = 0;
      char tail = 0;
      if (std::sscanf(b.c_str(), "%u,%u,%u%c", &x, &y, &z, &tail) != 3 || b.find('-') != std::string::npos) {
        r.fail("expected 'block=<x>,<y>,<z>', found 'block=" + b + "'");
      }
      w.block = {x, y, z};
    }
    w.cta_rank = r.u32_field("rank");
    w.warp_in_cta = r.u32_field("warp");
    w.total = r.u32_field("events");
    const std::uint32_t kept = r.u32_field("kept");
    if (kept > w.total) r.fail("expected kept <= events, found kept=" + std::to_string(kept));
    if (f.capacity != 0 && kept > f.capacity) r.fail("expected kept <= capacity, found kept=" + std::to_string(kept));
    const TrapReason reason = r.reason(r.value("trap"));
    if (reason != TrapReason::none) {
      Trap t;
      t.reason = reason;
      t.warp = w.warp;
      t.bar = r.hex32(r.value("bar"), "bar");
      t.parity = r.u32_field("parity");
      t.tries = r.u32_field("tries");
      t.thread = r.u32_field("thread");
      std::tie(t.file, t.line) = r.at(f);
      w.trap = t;
    }
    r.end_of_line();
    std::uint32_t last = 0;
    for (std::uint32_t k = 0; k < kept; ++k) {
      r.next("'event ...' (the warp's kept events)");
      if (!r.at_word("event")) {
        r.fail("expected 'event' (event " + std::to_string(k + 1) + " of the " + std::to_string(kept) +
               " kept of warp " + std::to_string(w.warp) + "), found '" + r.text() + "'");
      }
      r.keyword("event");
      LoggedEvent e;
      e.seq = r.u32(r.word("the event's number"), "the event's number");
      if (e.seq <= last || e.seq > w.total) {
        r.fail("expected an event number above " + std::to_string(last) + " and at most " + std::to_string(w.total) +
               ", found " + std::to_string(e.seq));
      }
      last = e.seq;
      e.time = r.u64(r.word("the time"), "the time");
      e.op = r.op(r.word("an event op"));
      e.bar = r.hex32(r.value("bar"), "bar");
      e.parity = r.optional_u32_field("parity", 1);
      const auto answer = r.optional_u32_field("answer", 1);
      if (answer) e.answer = *answer != 0;
      if (e.parity.has_value() != e.answer.has_value()) {
        r.fail("expected parity and answer both given or both '-'");
      }
      e.arg = r.u32_field("arg");
      e.lanes = r.hex32(r.value("lanes"), "lanes");
      e.cta = r.optional_u32_field("cta", 15);
      std::tie(e.file, e.line) = r.at(f);
      r.end_of_line();
      w.events.push_back(e);
    }
    f.warps.push_back(std::move(w));
  }
  r.next("'end'");
  r.keyword("end");
  r.end_of_line();
  return f;
}

}  // namespace wspipe::cuda
