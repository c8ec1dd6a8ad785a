#include "trace.hpp"

#include <algorithm>
#include <cstdio>
#include <map>
#include <ostream>

#include "emulator.hpp"

namespace wspipe::emu {

const char* to_string(EventKind k) {
  switch (k) {
    case EventKind::start: return "start";
    case EventKind::exit: return "exit";
    case EventKind::init: return "init";
    case EventKind::inval: return "inval";
    case EventKind::fence_init: return "fence_init";
    case EventKind::arrive: return "arrive";
    case EventKind::expect_tx: return "expect_tx";
    case EventKind::complete_tx: return "complete_tx";
    case EventKind::wait: return "wait";
    case EventKind::try_wait: return "try_wait";
    case EventKind::test_wait: return "test_wait";
    case EventKind::phase: return "phase";
    case EventKind::named_arrive: return "bar.arrive";
    case EventKind::named_pass: return "bar.sync";
    case EventKind::cluster_arrive: return "cluster.arrive";
    case EventKind::cluster_pass: return "cluster.wait";
    case EventKind::syncwarp: return "syncwarp";
    case EventKind::tmem_alloc: return "tcgen05.alloc";
    case EventKind::tmem_dealloc: return "tcgen05.dealloc";
    case EventKind::tmem_relinquish: return "tcgen05.relinquish_alloc_permit";
    case EventKind::tmem_ld: return "tcgen05.ld";
    case EventKind::tmem_st: return "tcgen05.st";
    case EventKind::tmem_wait: return "tcgen05.wait";
    case EventKind::mma_issue: return "tcgen05.mma";
    case EventKind::mma_done: return "mma.done";
    case EventKind::commit_issue: return "tcgen05.commit";
    case EventKind::tma_issue: return "tma.load";
    case EventKind::tma_done: return "tma.done";
    case EventKind::proxy_fence: return "fence.proxy.async";
    case EventKind::tma_store_issue: return "tma.store";
    case EventKind::tma_store_read: return "tma.store.read";
    case EventKind::tma_store_done: return "tma.store.done";
    case EventKind::bulk_commit: return "cp.async.bulk.commit_group";
    case EventKind::bulk_wait: return "cp.async.bulk.wait_group";
    case EventKind::smem_load: return "smem.load";
    case EventKind::smem_store: return "smem.store";
    case EventKind::violation: return "violation";
  }
  return "?";
}

namespace {

// The storage kept for this thread's next trace. `spare_alive` is trivially
// destructible, so that a Trace destroyed after this thread's spare (at
// thread or program exit) sees it gone and frees its own storage.
constexpr std::size_t kKeepEvents = (std::size_t{16} << 20) / sizeof(Event);  // 16 MiB
thread_local bool spare_alive = false;
struct Spare {
  std::vector<Event> events;
  Spare() { spare_alive = true; }
  ~Spare() { spare_alive = false; }
  Spare(const Spare&) = delete;
  Spare& operator=(const Spare&) = delete;
};
Spare& spare() {
  thread_local Spare s;
  return s;
}

}  // namespace

std::vector<Event> detail::take_event_storage() {
  std::vector<Event> v;
  v.swap(spare().events);
  return v;
}

Trace::~Trace() {
  if (!spare_alive || events.capacity() > kKeepEvents) return;
  std::vector<Event>& keep = spare().events;
  if (events.capacity() <= keep.capacity()) return;
  events.clear();
  keep.swap(events);
}

std::string json_quote(const std::string& s) {
  std::string out = "\"";
  for (char ch : s) {
    switch (ch) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (static_cast<unsigned char>(ch) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(static_cast<unsigned char>(ch)));
          out += buf;
        } else {
          out += ch;
        }
    }
  }
  return out + "\"";
}

std::string Trace::object_name(std::int32_t id) const {
  if (id < 0 || static_cast<std::size_t>(id) >= objects.size()) return "";
  return objects[id].name + (num_ctas > 1 ? "@cta" + std::to_string(objects[id].cta) : "");
}

std::string Trace::location(const Event& e) const {
  if (e.file == nullptr || e.line == 0) return "";
  std::string f = e.file;
  if (!strip_prefix.empty() && f.rfind(strip_prefix, 0) == 0) f = f.substr(strip_prefix.size());
  return f + ":" + std::to_string(e.line);
}

std::string Trace::describe(const Event& e) const {
  const std::string obj = object_name(e.object);
  auto n = [](std::int64_t v) { return std::to_string(v); };
  switch (e.kind) {
    case EventKind::start: return "start";
    case EventKind::exit: return "exit";
    case EventKind::init: return "init " + obj + " count=" + n(e.a);
    case EventKind::inval: return "inval " + obj;
    case EventKind::fence_init: return "fence_init (" + n(e.a) + " barriers published)";
    case EventKind::arrive:
      return std::string(e.remote ? "remote arrive " : "arrive ") + obj + " count=" + n(e.a) + " -> pending=" + n(e.b) +
             " tx=" + n(e.c);
    case EventKind::expect_tx: return "expect_tx " + obj + " +" + n(e.a) + " -> tx=" + n(e.c);
    case EventKind::complete_tx: return "complete_tx " + obj + " -" + n(e.a) + " -> tx=" + n(e.c);
    case EventKind::wait:
      return "wait " + obj + " parity=" + n(e.a) + " ok (phase " + n(e.b) + " done" +
             (e.step > e.begin ? ", blocked " + n(static_cast<std::int64_t>(e.step - e.begin)) + " steps)" : ")");
    case EventKind::try_wait: return "try_wait " + obj + " parity=" + n(e.a) + (e.c ? " -> true" : " -> false");
    case EventKind::test_wait: return "test_wait " + obj + " parity=" + n(e.a) + (e.c ? " -> true" : " -> false");
    case EventKind::phase: return "phase complete " + obj + " -> now phase " + n(e.a);
    case EventKind::named_arrive: return "bar.arrive id=" + n(e.a) + " threads=" + n(e.b) + " arrived=" + n(e.c);
    case EventKind::named_pass: return "bar.sync id=" + n(e.a) + " passed";
    case EventKind::cluster_arrive: return "cluster.arrive " + n(e.a) + "/" + n(e.b) + " threads";
    case EventKind::cluster_pass: return "cluster.wait passed";
    case EventKind::syncwarp: return "syncwarp";
    case EventKind::tmem_alloc:
      return "tcgen05.alloc columns [" + n(e.a) + ", " + n(e.a + e.b) + ") in cta" + n(e.c);
    case EventKind::tmem_dealloc:
      return "tcgen05.dealloc columns [" + n(e.a) + ", " + n(e.a + e.b) + ") in cta" + n(e.c);
    case EventKind::tmem_relinquish: return "tcgen05.relinquish_alloc_permit";
    case EventKind::tmem_ld:
      return "tcgen05.ld lane " + n(e.a) + " column " + n(e.b) + " (" + n(e.c) + " regs/thread)";
    case EventKind::tmem_st:
      return "tcgen05.st lane " + n(e.a) + " column " + n(e.b) + " (" + n(e.c) + " regs/thread)";
    case EventKind::tmem_wait: return e.a ? "tcgen05.wait::ld" : "tcgen05.wait::st";
    case EventKind::mma_issue:
      return "tcgen05.mma issued M=" + n(e.a) + " N=" + n(e.b) + (e.c ? " (accumulate)" : " (overwrite)");
    case EventKind::mma_done: return "mma complete (issued at step " + n(static_cast<std::int64_t>(e.begin)) + ")";
    case EventKind::commit_issue: return "tcgen05.commit -> " + obj + " (cta mask " + n(e.a) + ")";
    case EventKind::tma_issue: return "tma load issued " + n(e.a) + " bytes -> " + obj + " (cta mask " + n(e.b) + ")";
    case EventKind::tma_done:
      return "tma delivered " + n(e.a) + " bytes into cta" + n(e.c) + " (issued at step " +
             n(static_cast<std::int64_t>(e.begin)) + ")";
    case EventKind::proxy_fence: return "fence.proxy.async";
    case EventKind::tma_store_issue: return "tma store issued " + n(e.a) + " bytes (bulk group " + n(e.b) + ")";
    case EventKind::tma_store_read:
      return "tma store read " + n(e.a) + " bytes of shared memory (issued at step " +
             n(static_cast<std::int64_t>(e.begin)) + ")";
    case EventKind::tma_store_done:
      return "tma store wrote " + n(e.a) + " bytes to global memory (issued at step " +
             n(static_cast<std::int64_t>(e.begin)) + ")";
    case EventKind::bulk_commit: return "cp.async.bulk.commit_group: group " + n(e.a) + " (" + n(e.b) + " stores)";
    case EventKind::bulk_wait:
      return std::string(e.b ? "cp.async.bulk.wait_group.read " : "cp.async.bulk.wait_group ").append(n(e.a));
    case EventKind::smem_load:
    case EventKind::smem_store: {
      char range[64];
      std::snprintf(range, sizeof range, " shared memory [0x%llx, 0x%llx)", static_cast<unsigned long long>(e.a),
                    static_cast<unsigned long long>(e.b));
      return std::string(e.kind == EventKind::smem_load ? "load" : "store") + range +
             (e.c > 1 ? " (" + n(e.c) + " accesses)" : "");
    }
    case EventKind::violation:
      // One violation event per run: the one that stopped it.
      return ending.rule.empty() ? "VIOLATION" : "VIOLATION " + ending.rule + ": " + ending.message;
  }
  return "?";
}

namespace {

// "deadlock: no warp can move", the name of a noted ending's marker.
std::string ending_line(const TraceEnding& end) {
  if (end.status == "deadlock") return "deadlock: no warp can move";
  if (end.status == "livelock") return "livelock: the step budget ran out";
  return end.status + " " + end.rule + ": " + end.message;
}

// Waits span the steps they blocked; async operations the steps from issue
// to completion (on the engine's track).
constexpr std::int64_t kFlowPhases = 4;

bool spans(EventKind k) {
  return k == EventKind::wait || k == EventKind::named_pass || k == EventKind::cluster_pass ||
         k == EventKind::try_wait || k == EventKind::mma_done || k == EventKind::tma_done ||
         k == EventKind::tma_store_done || k == EventKind::bulk_wait;
}

}  // namespace

TraceWriter::TraceWriter(std::ostream& out, TraceFormat format) : out_(out), format_(format) {}

TraceWriter::~TraceWriter() = default;

void TraceWriter::start(const Trace& t) {
  started_ = true;
  named_.assign(t.warps.size(), false);
  free_from_.assign(t.warps.size(), 0);
  if (format_ == TraceFormat::text) {
    width_ = 8;
    for (const auto& w : t.warps) width_ = std::max(width_, w.name.size());
    return;
  }
  // Timestamps are steps: one step is one microsecond on the viewer's axis.
  out_ << "{\"displayTimeUnit\":\"ns\",\"otherData\":{\"generator\":\"wspipe emulator\",\"time_unit\":\"step\"},"
          "\"traceEvents\":[\n";
  for (std::uint32_t c = 0; c < t.num_ctas; ++c) {
    emit("{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":" + std::to_string(c) + ",\"tid\":0,\"args\":{\"name\":" +
         json_quote("CTA " + std::to_string(c)) + "}}");
  }
}

void TraceWriter::emit(const std::string& obj) {
  out_ << (first_ ? "" : ",\n") << obj;
  first_ = false;
}

void TraceWriter::text_line(const Trace& t, std::uint64_t at, std::int32_t warp, const std::string& what,
                            const std::string& loc) {
  char step[24];
  std::snprintf(step, sizeof step, "%8llu  ", static_cast<unsigned long long>(at));
  std::string who = warp >= 0 ? t.warps[warp].name : "";
  who.resize(width_, ' ');
  out_ << step << who << "  " << what;
  if (!loc.empty()) out_ << "    @ " << loc;
  out_ << '\n';
}

// A track per actor that did something (engines of a kernel without TMA or
// MMAs stay out of the view), named where it first shows.
void TraceWriter::name_track(const Trace& t, std::int32_t warp) {
  if (warp < 0 || named_[warp]) return;
  named_[warp] = true;
  emit("{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":" + std::to_string(t.warps[warp].cta) +
       ",\"tid\":" + std::to_string(warp) + ",\"args\":{\"name\":" + json_quote(t.warps[warp].name) + "}}");
}

void TraceWriter::write(const Trace& t, std::span<const Event> events) {
  if (!started_) start(t);
  for (const Event& e : events) {
    if (e.kind == EventKind::violation) saw_violation_ = true;
    if (e.warp >= 0) free_from_[e.warp] = std::max(free_from_[e.warp], e.step + 1);
    if (format_ == TraceFormat::text) {
      text_line(t, e.step, e.warp, t.describe(e), t.location(e));
      continue;
    }
    chrome_event(t, e);
  }
}

void TraceWriter::chrome_event(const Trace& t, const Event& e) {
  const TraceEnding& ending = t.ending;
  name_track(t, e.warp);
  const std::string pid = std::to_string(e.warp >= 0 ? t.warps[e.warp].cta : 0);
  const std::string tid = std::to_string(e.warp);
  const std::uint64_t begin = spans(e.kind) ? std::min(e.begin, e.step) : e.step;
  std::string args = "\"step\":" + std::to_string(e.step);
  const std::string loc = t.location(e);
  if (!loc.empty()) args += ",\"at\":" + json_quote(loc);
  if (e.kind == EventKind::violation && !ending.rule.empty())
    args += ",\"rule\":" + json_quote(ending.rule) + ",\"message\":" + json_quote(ending.message);
  if (e.kind == EventKind::phase) {
    // Flow ids: the arrive that completes a phase starts a flow that ends
    // at every wait that observed that phase after blocking on it.
    const std::uint32_t cta = t.objects[e.object].cta;
    emit("{\"ph\":\"C\",\"name\":" + json_quote(t.objects[e.object].name + " phase") +
         ",\"pid\":" + std::to_string(cta) + ",\"tid\":0,\"ts\":" + std::to_string(e.step) +
         ",\"args\":{\"phase\":" + std::to_string(e.a) + "}}");
    if (last_arrive_step_ && *last_arrive_step_ == e.step) {
      const std::uint64_t id = next_flow_++;
      completing_[{e.object, e.a - 1}] = id;
      // A wait shows the phase it blocked on soon after it completes: the
      // flows of a barrier's last few phases are enough, and a trace of any
      // length keeps a few per barrier.
      completing_.erase({e.object, e.a - 1 - kFlowPhases});
      emit("{\"ph\":\"s\",\"name\":\"release\",\"cat\":\"mbarrier\",\"id\":" + std::to_string(id) + ",\"pid\":" + pid +
           ",\"tid\":" + tid + ",\"ts\":" + std::to_string(e.step) + "}");
    }
    return;
  }
  if (e.kind == EventKind::arrive || e.kind == EventKind::complete_tx || e.kind == EventKind::expect_tx)
    last_arrive_step_ = e.step;
  // A violation's slice is named by its rule; its message is in the args.
  const std::string name =
      e.kind == EventKind::violation && !ending.rule.empty() ? "VIOLATION " + ending.rule : t.describe(e);
  emit("{\"ph\":\"X\",\"name\":" + json_quote(name) + ",\"cat\":" + json_quote(to_string(e.kind)) + ",\"pid\":" + pid +
       ",\"tid\":" + tid + ",\"ts\":" + std::to_string(begin) + ",\"dur\":" + std::to_string(e.step - begin + 1) +
       ",\"args\":{" + args + "}}");
  if (e.kind == EventKind::wait && e.step > e.begin) {
    auto it = completing_.find({e.object, e.b});
    if (it != completing_.end()) {
      emit("{\"ph\":\"f\",\"bp\":\"e\",\"name\":\"release\",\"cat\":\"mbarrier\",\"id\":" + std::to_string(it->second) +
           ",\"pid\":" + pid + ",\"tid\":" + tid + ",\"ts\":" + std::to_string(e.step) + "}");
    }
  }
}

// What the events do not show closes the trace: a deadlock's or livelock's
// open waits and its marker, or a violation found after the run
// (result.mismatch). A violation shows on its own event.
void TraceWriter::finish(const Trace& t) {
  if (!started_) start(t);
  const TraceEnding& ending = t.ending;
  const bool off_the_events = !ending.status.empty() && (ending.status != "violation" || !saw_violation_);
  if (format_ == TraceFormat::text) {
    if (!off_the_events) return;
    for (const TraceEnding::OpenWait& w : ending.open)
      text_line(t, ending.step, w.warp, "never ends: " + w.what + " (since step " + std::to_string(w.since) + "): " + w.state,
                w.location);
    text_line(t, ending.step, -1, ending_line(ending), "");
    return;
  }
  for (const TraceEnding::OpenWait& w : ending.open) name_track(t, w.warp);
  if (off_the_events) {
    // Each wait that never returned: a slice begun and never ended. It
    // starts after the warp's last slice, so that the two do not overlap.
    std::uint64_t last = ending.step;  // the marker comes after every slice's start
    for (const TraceEnding::OpenWait& w : ending.open) {
      if (w.warp < 0) continue;
      const std::uint64_t ts = std::max(w.since, free_from_[w.warp]);
      last = std::max(last, ts);
      std::string args = "\"since\":" + std::to_string(w.since) + ",\"state\":" + json_quote(w.state);
      if (!w.location.empty()) args += ",\"at\":" + json_quote(w.location);
      emit("{\"ph\":\"B\",\"name\":" + json_quote(w.what + " (never ends)") + ",\"cat\":\"open\",\"pid\":" +
           std::to_string(t.warps[w.warp].cta) + ",\"tid\":" + std::to_string(w.warp) + ",\"ts\":" + std::to_string(ts) +
           ",\"args\":{" + args + "}}");
    }
    std::string args = "\"step\":" + std::to_string(ending.step);
    if (!ending.rule.empty()) args += ",\"rule\":" + json_quote(ending.rule) + ",\"message\":" + json_quote(ending.message);
    if (!ending.open.empty()) args += ",\"unfinished_warps\":" + std::to_string(ending.open.size());
    emit("{\"ph\":\"i\",\"s\":\"g\",\"name\":" + json_quote(ending_line(ending)) + ",\"cat\":" + json_quote(ending.status) +
         ",\"pid\":0,\"tid\":0,\"ts\":" + std::to_string(last) + ",\"args\":{" + args + "}}");
  }
  out_ << "\n]}\n";
}

void Trace::write_text(std::ostream& out) const {
  TraceWriter w(out, TraceFormat::text);
  w.write(*this, events);
  w.finish(*this);
}

void Trace::write_chrome_json(std::ostream& out) const {
  TraceWriter w(out, TraceFormat::chrome);
  w.write(*this, events);
  w.finish(*this);
}

std::vector<const Event*> Trace::last_on_named(std::uint32_t cta, std::int64_t id, std::size_t n) const {
  std::vector<const Event*> found;
  for (auto it = events.rbegin(); it != events.rend() && found.size() < n; ++it)
    if ((it->kind == EventKind::named_arrive || it->kind == EventKind::named_pass) && it->a == id && it->warp >= 0 &&
        warps[it->warp].cta == cta)
      found.push_back(&*it);
  return {found.rbegin(), found.rend()};
}

std::vector<const Event*> Trace::last_on(std::int32_t object, std::size_t n) const {
  std::vector<const Event*> found;
  for (auto it = events.rbegin(); it != events.rend() && found.size() < n; ++it)
    if (it->object == object) found.push_back(&*it);
  return {found.rbegin(), found.rend()};
}

void note_ending(RunResult& run) {
  Trace& t = run.trace;
  if (t.warps.empty()) return;  // the run had no trace
  TraceEnding& end = t.ending;
  end = {};
  if (run.status == Status::ok) return;
  end.status = to_string(run.status);
  end.step = run.steps;
  if (!run.violations.empty()) {
    end.rule = run.violations.front().rule;
    end.message = run.violations.front().message;
  }
  for (const BlockedWarp& b : run.blocked) {
    TraceEnding::OpenWait w;
    for (std::size_t i = 0; i < t.warps.size(); ++i)
      if (t.warps[i].name == b.warp) w.warp = static_cast<std::int32_t>(i);
    w.what = b.op + (b.object.empty() ? "" : " on " + b.object);
    w.state = b.state;
    if (b.line != 0) w.location = b.file + ":" + std::to_string(b.line);
    w.since = b.since;
    end.open.push_back(std::move(w));
  }
}

}  // namespace wspipe::emu
