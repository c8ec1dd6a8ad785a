// The emulator's trace: one event per step, and its exporters.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace wspipe::emu {

enum class EventKind : std::uint8_t {
  start,         // a warp begins
  exit,          // a warp returns from its role function
  init,          // mbarrier.init            a = count
  inval,         // mbarrier.inval
  fence_init,    // fence.mbarrier_init      a = barriers it published
  arrive,        // arrive (a = count), then pending b, tx c; local or remote
  expect_tx,     // a = bytes; b = pending, c = tx after
  complete_tx,   // a = bytes; b = pending, c = tx after
  wait,          // parity wait succeeded    a = parity, b = phase it observed
  try_wait,      // try_wait returned        a = parity, b = phase observed or -1, c = result (0/1)
  test_wait,     // test_wait returned       a = parity, b = phase observed or -1, c = result (0/1)
  phase,         // a phase completed        a = the new phase number
  named_arrive,  // bar.arrive / bar.sync    a = id, b = threads expected, c = arrived so far
  named_pass,    // bar.sync returned        a = id
  cluster_arrive,
  cluster_pass,
  syncwarp,
  tmem_alloc,       // tcgen05.alloc             a = first column, b = columns, c = CTA
  tmem_dealloc,     // tcgen05.dealloc           a = first column, b = columns, c = CTA
  tmem_relinquish,  // tcgen05.relinquish_alloc_permit
  tmem_ld,          // tcgen05.ld issued         a = lane, b = column, c = registers per thread
  tmem_st,          // tcgen05.st issued         a = lane, b = column, c = registers per thread
  tmem_wait,        // tcgen05.wait::ld (a = 1) or ::st (a = 0)
  mma_issue,        // tcgen05.mma issued        a = M, b = N, c = accumulate
  mma_done,         // the tensor core completed it (begin = issue step)
  commit_issue,     // tcgen05.commit issued     a = CTA mask
  tma_issue,        // TMA load issued           a = bytes, b = CTA mask
  tma_done,         // TMA delivered             a = bytes, c = destination CTA (begin = issue step)
  proxy_fence,      // fence.proxy.async
  tma_store_issue,  // TMA store issued          a = bytes, b = bulk group
  tma_store_read,   // it read its shared-memory source  a = bytes (begin = issue step)
  tma_store_done,   // its global writes done    a = bytes (begin = issue step)
  bulk_commit,      // cp.async.bulk.commit_group  a = the group, b = stores in it
  bulk_wait,        // cp.async.bulk.wait_group returned  a = N, b = .read (1/0)
  smem_load,        // ordinary loads of shared memory (SmemView, plain C++) by one warp at one line in one
  smem_store,       // step, merged: bytes [a, b) of its CTA's shared memory, c = accesses
  violation,     // the run stopped on a broken rule
};

const char* to_string(EventKind k);

struct Event {
  std::uint64_t step = 0;   // when it took effect
  std::uint64_t begin = 0;  // for waits: the step the warp started waiting
  std::int32_t warp = -1;   // actor id (global warp index), -1 for none
  std::int32_t object = -1; // barrier id (index into Trace::objects), or -1
  EventKind kind = EventKind::start;
  bool remote = false;      // arrive issued from another CTA
  std::int64_t a = 0, b = 0, c = 0;
  const char* file = "";    // the kernel's source location
  std::uint32_t line = 0;
};

struct TraceWarp {
  std::string name;  // "cta0/w1 producer"
  std::uint32_t cta = 0;
};
struct TraceObject {
  std::string name;  // "full[3]"
  std::uint32_t cta = 0;
};

// How a run ended, as its trace shows it: the violation's rule and message
// (on the violation's event), or, at a deadlock or livelock, each unfinished
// warp's wait that never ends. Copied from the run's result by
// emu::note_ending (emulator.hpp).
struct TraceEnding {
  struct OpenWait {
    std::int32_t warp = -1;  // index into Trace::warps
    std::string what;        // "wait on empty[0] (cta0)"
    std::string state;       // what it waits for, and the object's state
    std::string location;    // "examples/ring.hpp:69"
    std::uint64_t since = 0;
  };
  std::string status;  // "violation", "deadlock", "livelock"; empty: ok, or not noted
  std::string rule, message;  // the first violation's
  std::uint64_t step = 0;     // the run's last step
  std::vector<OpenWait> open;
};

struct Trace;

enum class TraceFormat { text, chrome };

// Writes a trace as its events come, so that a long run's trace need not
// be held whole: the text log or the Chrome JSON (Trace::write_text and
// write_chrome_json are a TraceWriter given every event at once). `t`
// supplies the warps and barrier names, as they are when each batch is
// written; finish writes what the events do not show (t.ending) and closes
// the JSON. The stream's errors are the caller's to check.
class TraceWriter {
 public:
  TraceWriter(std::ostream& out, TraceFormat format);
  TraceWriter(const TraceWriter&) = delete;
  TraceWriter& operator=(const TraceWriter&) = delete;
  ~TraceWriter();
  void write(const Trace& t, std::span<const Event> events);
  void finish(const Trace& t);

 private:
  void start(const Trace& t);
  void emit(const std::string& obj);
  void text_line(const Trace& t, std::uint64_t at, std::int32_t warp, const std::string& what,
                 const std::string& loc);
  void name_track(const Trace& t, std::int32_t warp);
  void chrome_event(const Trace& t, const Event& e);

  std::ostream& out_;
  TraceFormat format_;
  bool started_ = false, first_ = true, saw_violation_ = false;
  std::size_t width_ = 8;                // text: the warp column
  std::vector<bool> named_;              // chrome: the tracks named so far
  std::vector<std::uint64_t> free_from_;  // each warp's step after its last event
  // chrome: (object, phase done) -> flow id, from the arrive that completed it
  std::map<std::pair<std::int32_t, std::int64_t>, std::uint64_t> completing_;
  std::uint64_t next_flow_ = 1;
  std::optional<std::uint64_t> last_arrive_step_;
};

// Receives a traced run's events while it runs (RunOptions::trace_sink):
// take() gets them in batches, oldest first, each event once, and finish()
// the ending. The run keeps only the latest events (Trace::dropped says how
// many it let go), so a run of any length holds a bounded trace.
class TraceSink {
 public:
  virtual ~TraceSink() = default;
  virtual void take(const Trace& t, std::span<const Event> events) = 0;
  // The events not given yet (t.events from t.streamed) and the ending.
  // emu::run(const Kernel&, ...) calls it after the run; a caller of the
  // lower-level run(launch, body, options) calls it itself.
  virtual void finish(const Trace& t) = 0;
};

struct Trace {
  Trace() = default;
  Trace(const Trace&) = default;
  Trace(Trace&&) noexcept = default;
  Trace& operator=(const Trace&) = default;
  Trace& operator=(Trace&&) noexcept = default;
  // Hands the events' storage (not the events) to the next traced run on
  // this thread, so that a thread's runs write their events into memory
  // that is already allocated and mapped (detail::take_event_storage).
  ~Trace();

  std::vector<TraceWarp> warps;
  std::vector<TraceObject> objects;
  std::vector<Event> events;
  std::uint32_t num_ctas = 0;
  // With a TraceSink: how many of `events` (from the front) it was given,
  // and how many earlier events it was given that `events` no longer holds.
  std::size_t streamed = 0;
  std::uint64_t dropped = 0;

  // Paths printed relative to this prefix (the source tree), so that the
  // output does not depend on where the project was checked out.
  std::string strip_prefix;

  TraceEnding ending;

  std::string describe(const Event& e) const;  // one line, no step or warp
  std::string location(const Event& e) const;  // "examples/ring.hpp:42"
  std::string object_name(std::int32_t id) const;

  void write_text(std::ostream& out) const;
  // Chrome trace / Perfetto JSON: process = CTA, thread = warp; every event
  // a slice at ts = step (waits span the steps they blocked), flows from
  // the arrive that completed a phase to the waits it released, and a
  // counter per barrier with its phase. With an ending noted, the
  // violation's slice names its rule and carries its message, and a
  // deadlock or livelock ends with an instant event naming it and an
  // unfinished slice ("Did not end" in Perfetto) for each wait that never
  // returned. The text log ends with the same.
  void write_chrome_json(std::ostream& out) const;

  // The last `n` events on barrier `object`, oldest first.
  std::vector<const Event*> last_on(std::int32_t object, std::size_t n) const;
  // The last `n` bar.arrive / bar.sync events on named barrier `id` of CTA
  // `cta`, oldest first.
  std::vector<const Event*> last_on_named(std::uint32_t cta, std::int64_t id, std::size_t n) const;
};

namespace detail {
// An empty event vector for a new trace: the storage of the largest trace
// destroyed on this thread since its last call (storage over 16 MiB is
// freed, not kept), or none. The emulator calls it once per traced run.
std::vector<Event> take_event_storage();
}  // namespace detail

// JSON string literal with escapes.
std::string json_quote(const std::string& s);

}  // namespace wspipe::emu
