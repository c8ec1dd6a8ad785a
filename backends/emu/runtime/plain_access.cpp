// Plain C++ accesses to shared memory (`smem.slot[i] = v`, a struct's field,
// std::copy into a tile), seen without a change to the kernel's source: the
// code that links wspipe::emu is compiled with the ThreadSanitizer
// instrumentation ABI (-fsanitize=thread at compile time only; see
// WSPIPE_INSTRUMENT_ACCESSES in CMakeLists.txt), which calls __tsan_read4(p)
// before each 4-byte load and so on. This file defines those entry points.
// Each returns at once unless the calling thread runs a warp of an
// emulated CTA and the bytes are in that CTA's shared memory; those go to
// the race checker exactly as an SmemView access does (race.cpp), located by
// the instruction's source line (code_line). Atomics are performed (and not
// checked: the model has no ordering through them); function entry and exit
// are empty. In lane 31's fiber (lane-divergence mode) stores and atomics
// to shared memory and to the launch's global memory are also kept, to be
// undone (lanes.cpp). docs/emulator-models.md, "Plain accesses", says what
// is seen.
//
// Under a real ThreadSanitizer build (the tsan preset) the sanitizer's
// runtime owns these names: they are not defined here, and plain accesses
// are not checked by wspipe.
#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <filesystem>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "backends/emu/runtime/world.hpp"

#if defined(WSPIPE_LIBBACKTRACE_HEADER)
#include WSPIPE_LIBBACKTRACE_HEADER
#endif

namespace wspipe::emu::detail {

// ------------------------------------------------------------- source lines

namespace {

// Headers of the compiler and the system (the standard library's algorithms
// inlined into the kernel): the line reported is the kernel's that called them.
bool system_header(const char* file) {
  return std::strncmp(file, "/usr/include/", 13) == 0 || std::strncmp(file, "/usr/lib/", 9) == 0 ||
         std::strncmp(file, "/usr/local/include/", 19) == 0;
}

class LineTable {
 public:
  static LineTable& instance() {
    static LineTable t;
    return t;
  }
  CodeLine at(std::uintptr_t pc) {
    const std::lock_guard<std::mutex> lock(mutex_);
    if (auto it = known_.find(pc); it != known_.end()) return it->second;
    CodeLine l = resolve(pc);
    known_.emplace(pc, l);
    return l;
  }

 private:
  // File names live as long as the process: reports and traces keep the pointers.
  const char* intern(const std::string& s) { return files_.insert(s).first->c_str(); }

  // Frames come innermost first: the first outside the system's headers
  // wins, else the innermost.
  struct Frames {
    LineTable* table;
    CodeLine first, chosen;
    // Takes one frame; true once chosen.
    bool take(std::string_view file, int line) {
      if (file.empty() || line <= 0) return false;
      // GCC 12's libbacktrace prefixes the compilation directory to the
      // absolute file names of clang's DWARF 5 ("/dir//abs/file.cpp").
      if (const auto k = file.rfind("//"); k != std::string_view::npos) file.remove_prefix(k + 1);
      const CodeLine l{table->intern(std::filesystem::path(file).lexically_normal().string()),
                       static_cast<std::uint32_t>(line)};
      if (first.line == 0) first = l;
      if (system_header(l.file)) return false;
      chosen = l;
      return true;
    }
    CodeLine result() const { return chosen.line != 0 ? chosen : first; }
  };

  CodeLine resolve(std::uintptr_t pc) {
#if defined(WSPIPE_LIBBACKTRACE_HEADER)
    if (state_ == nullptr) state_ = backtrace_create_state(nullptr, 1, [](void*, const char*, int) {}, nullptr);
    Frames frames{this, {}, {}};
    backtrace_pcinfo(
        state_, pc,
        [](void* data, std::uintptr_t, const char* file, int line, const char*) {
          return static_cast<Frames*>(data)->take(file != nullptr ? file : "", line) ? 1 : 0;
        },
        [](void*, const char*, int) {}, &frames);
    if (frames.result().line != 0) return frames.result();
#endif
    // libbacktrace absent, or silent on this object's line table (GCC 12's
    // on some DWARF 5 units of a Debug build): binutils' addr2line.
    Dl_info info{};
    if (dladdr(reinterpret_cast<void*>(pc), &info) == 0) return {intern("(no line table)"), 0};
    if (const CodeLine l = from_addr2line(pc, info); l.line != 0) return l;
    return {intern(std::string("(no line table) ") + (info.dli_sname != nullptr ? info.dli_sname : "")), 0};
  }

  CodeLine from_addr2line(std::uintptr_t pc, const Dl_info& info) {
    const std::string object = info.dli_fname != nullptr ? info.dli_fname : "";
    if (object.empty() || object.find('\'') != std::string::npos) return {};
    // A position-independent object's addresses are offsets from its base;
    // a fixed-address executable's are absolute (ELF e_type 2, ET_EXEC).
    std::uint16_t type = 0;
    if (std::FILE* f = std::fopen(object.c_str(), "rb")) {
      if (std::fseek(f, 16, SEEK_SET) != 0 || std::fread(&type, sizeof type, 1, f) != 1) type = 0;
      std::fclose(f);
    }
    const std::uintptr_t address = type == 2 ? pc : pc - reinterpret_cast<std::uintptr_t>(info.dli_fbase);
    char command[4200];
    std::snprintf(command, sizeof command, "addr2line -i -e '%s' 0x%llx 2>/dev/null", object.c_str(),
                  static_cast<unsigned long long>(address));
    std::FILE* out = popen(command, "r");
    if (out == nullptr) return {};
    Frames frames{this, {}, {}};
    char line[4096];
    bool done = false;
    while (std::fgets(line, sizeof line, out) != nullptr) {  // "file:line" or "file:line (discriminator n)"
      std::string_view l(line);
      l = l.substr(0, l.find_first_of(" \n"));
      const auto colon = l.rfind(':');
      if (done || colon == std::string_view::npos) continue;
      done = frames.take(l.substr(0, colon), std::atoi(std::string(l.substr(colon + 1)).c_str()));
    }
    pclose(out);
    return frames.result();
  }

  std::mutex mutex_;
  std::unordered_map<std::uintptr_t, CodeLine> known_;
  std::unordered_set<std::string> files_;
#if defined(WSPIPE_LIBBACKTRACE_HEADER)
  backtrace_state* state_ = nullptr;
#endif
};

}  // namespace

CodeLine code_line(std::uintptr_t pc) { return LineTable::instance().at(pc); }

namespace {

// code_line through a small per-thread cache in front of the table's lock.
CodeLine cached_line(std::uintptr_t pc) {
  struct Slot {
    std::uintptr_t pc = 0;
    CodeLine line;
  };
  thread_local std::array<Slot, 256> cache{};
  Slot& s = cache[(pc >> 1) % cache.size()];
  if (s.pc != pc) s = {pc, code_line(pc)};
  return s.line;
}

bool same_line(const CodeLine& a, const CodeLine& b) {
  return a.line != 0 && a.line == b.line && (a.file == b.file || std::strcmp(a.file, b.file) == 0);
}

}  // namespace

// ------------------------------------------------------------ the checking

void World::plain_access(std::uintptr_t p, std::size_t bytes, bool write, std::uintptr_t pc) {
  // The common case first, inline in the entry points: not the running
  // warp's CTA's shared memory (the stack, the heap, global buffers; no
  // warp running). One compare, unsigned.
  const std::uintptr_t offset = p - smem_base_;
  if (offset >= smem_bytes_) [[likely]] {
    // Lane 31's store elsewhere: undone when it parks if it is to the
    // launch's global memory (lanes.cpp).
    if (in_lane_ && write) [[unlikely]]
      keep_lane_global_store(p, bytes);
    return;
  }
  // The next access of a loop over a tile: the instruction's range
  // widened, nothing else (plain_smem_access made the entry).
  const PlainHot& h = plain_hot_[plain_hash(pc)];
  if (h.pc == pc && h.epoch == plain_epoch_ && h.write == write && h.active == lanes_->active &&
      offset + bytes <= smem_bytes_) [[likely]] {
    PendingPlain& r = pending_plain_[h.slot];
    const auto lo = static_cast<std::uint32_t>(offset), hi = static_cast<std::uint32_t>(offset + bytes);
    if (lo <= r.hi && hi >= r.lo) [[likely]] {
      r.lo = std::min(r.lo, lo);
      r.hi = std::max(r.hi, hi);
      return;
    }
  }
  plain_smem_access(static_cast<std::uint32_t>(offset), bytes, write, pc);
}

void World::lane_atomic(std::uintptr_t p, std::size_t bytes) {
  const std::uintptr_t offset = p - smem_base_;
  if (offset >= smem_bytes_) {
    keep_lane_global_store(p, bytes);
  } else if (!killing_) {
    keep_lane_store(static_cast<std::uint32_t>(offset), bytes);
  }
}

void World::plain_smem_access(std::uint32_t offset, std::size_t bytes, bool write, std::uintptr_t pc) {
  if (in_lane_ && write && !killing_) keep_lane_store(offset, bytes);
  if (in_lane_ || killing_ || stopping_) return;
  Warp& w = *current_;
  const auto n = static_cast<std::uint32_t>(std::min<std::size_t>(bytes, ctas_[w.cta].smem_bytes - offset));
  if (!options_.race_check) {
    touch_smem(w.cta, offset, n, write);
    return;
  }
  // One record per source line and step: a loop's accesses share it, also
  // where the compiler unrolled it into several instructions, so that the
  // records grow with the steps, not with the accesses (a million-item ring
  // held 8 a item). Named as SmemView's accesses are (both are the generic
  // proxy's ordinary accesses; the line tells them apart): an element read
  // through a view's read_range is the plain load that follows it, which
  // then stands for both. (Only the running warp makes plain accesses
  // within a step: the instruction and the step name the record.)
  std::uint32_t info;
  PlainMemo& memo = plain_memo_[plain_hash(pc)];
  if (memo.pc == pc && memo.step == step_ && memo.write == write) [[likely]] {
    info = memo.info;
  } else {
    info = plain_info(w, write, pc);
    memo = {.pc = pc, .step = step_, .info = info, .write = write};
  }
  if (options_.trace) trace_smem(w, offset, n, write, code_line(pc));
  // The same line, kind and lanes as accesses pending, touching or
  // overlapping their bytes: one range with them.
  std::size_t slot = 0;
  while (slot < pending_plains_) {
    PendingPlain& p = pending_plain_[slot];
    if (p.info == info && p.active == w.active && offset <= p.hi && offset + n >= p.lo) {
      p.lo = std::min(p.lo, offset);
      p.hi = std::max(p.hi, offset + n);
      break;
    }
    ++slot;
  }
  if (slot == pending_plains_) {
    if (n == 0) return;
    if (pending_plains_ == kPendingPlain) {
      check_pending_plain();
      if (stopping_) return;
      slot = 0;
    }
    pending_plain_[pending_plains_++] = {.lo = offset, .hi = offset + n, .info = info, .active = w.active, .write = write};
  }
  // Where this instruction's next access goes (the inline path,
  // plain_access); not while tracing, which records each access.
  if (!options_.trace)
    plain_hot_[plain_hash(pc)] = {.pc = pc, .epoch = plain_epoch_, .slot = static_cast<std::uint32_t>(slot),
                                  .active = w.active, .write = write};
}

std::uint32_t World::plain_info(const Warp& w, bool write, std::uintptr_t pc) {
  if (step_lines_step_ != step_) {
    step_lines_step_ = step_;
    step_lines_used_ = 0;
  }
  const CodeLine at = cached_line(pc);
  for (std::size_t i = 0; i < step_lines_used_; ++i) {
    const StepLine& l = step_lines_[i];
    if (l.write == write && (l.pc == pc || same_line(l.at, at))) return l.info;
  }
  const auto actor = static_cast<std::int32_t>(w.id);
  access_infos_.push_back({.actor = actor, .issuer = actor, .what = write ? "ordinary store" : "ordinary load",
                           .step = step_, .loc = {}, .pc = pc});
  const auto info = static_cast<std::uint32_t>(access_infos_.size() - 1);
  if (step_lines_used_ < step_lines_.size()) step_lines_[step_lines_used_++] = {.at = at, .pc = pc, .info = info, .write = write};
  return info;
}

void World::check_pending_plain() {
  const std::size_t n = std::exchange(pending_plains_, 0);
  ++plain_epoch_;  // the inline path's entries name ranges that are gone
  if (killing_ || stopping_) return;
  // Checked with the lanes of the accesses active (per-lane code changes
  // them without an operation: for_each_lane), in the order the ranges
  // began: a race is reported at its first.
  Warp& w = *current_;
  const std::uint32_t active = w.active;
  for (std::size_t i = 0; i < n && !stopping_; ++i) {
    const PendingPlain& p = pending_plain_[i];
    w.active = p.active;
    // (The location argument serves the async proxy's reads only; a race of
    // this access is reported at the line of `info`'s pc.)
    smem_range_access(w.cta, p.lo, p.hi - p.lo, p.write, true, w.id, p.info, SourceLoc::current(), nullptr);
  }
  w.active = active;
}

void World::trace_smem(const Warp& w, std::uint32_t offset, std::uint32_t bytes, bool write, const CodeLine& at) {
  // Aggregated per warp, kind and source line within a step: a loop over a
  // slot is one event covering the bytes it touched, so the trace grows
  // with the steps and the lines, not with the accesses. Within a step
  // only this warp records, so the search back is short. Events a trace
  // sink already has are not merged into (RunOptions::trace_sink).
  const EventKind kind = write ? EventKind::smem_store : EventKind::smem_load;
  auto& events = result_.trace.events;
  const auto sent = static_cast<std::ptrdiff_t>(std::min(result_.trace.streamed, events.size()));
  for (auto it = events.rbegin(); it != events.rend() - sent && it->step == step_; ++it) {
    if (it->warp != static_cast<std::int32_t>(w.id) || it->kind != kind || it->line != at.line ||
        it->file != at.file)
      continue;
    it->a = std::min<std::int64_t>(it->a, offset);
    it->b = std::max<std::int64_t>(it->b, std::int64_t{offset} + bytes);
    ++it->c;
    return;
  }
  record({.step = step_, .begin = step_, .warp = static_cast<std::int32_t>(w.id), .kind = kind, .a = offset,
          .b = std::int64_t{offset} + bytes, .c = 1, .file = at.file, .line = at.line});
}

}  // namespace wspipe::emu::detail

// ------------------------------------------------- the instrumentation's ABI

#if defined(__SANITIZE_THREAD__)
#define WSPIPE_REAL_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define WSPIPE_REAL_TSAN 1
#endif
#endif

#if !defined(WSPIPE_REAL_TSAN)

namespace {

using wspipe::emu::detail::World;

// The return address is the instruction after the call: one byte back is
// inside the access's line.
[[gnu::always_inline]] inline void seen(const void* p, std::size_t bytes, bool write, void* ret) {
  if (World* const w = World::on_this_thread())
    w->plain_access(reinterpret_cast<std::uintptr_t>(p), bytes, write, reinterpret_cast<std::uintptr_t>(ret) - 1);
}

// An atomic about to write `bytes` at `a`: in lane 31's fiber (lane-
// divergence mode) the bytes it overwrites are kept, to be undone as a
// plain store's are (lanes.cpp). Nothing else is looked at.
[[gnu::always_inline]] inline void atomic_writes(const volatile void* a, std::size_t bytes) {
  if (World* const w = World::on_this_thread(); w != nullptr && w->in_lane()) [[unlikely]]
    w->lane_atomic(reinterpret_cast<std::uintptr_t>(a), bytes);
}

// The atomics: performed, sequentially consistent whatever order was asked
// (stronger is always allowed); the 16-byte ones under a lock, so that no
// libatomic is needed.
std::mutex& atomic128_lock() {
  static std::mutex m;
  return m;
}

}  // namespace

// The ABI's names, as the compilers call them (sanitizer/tsan_interface.h,
// tsan_interface_atomic.h).
extern "C" {

using __tsan_atomic8 = char;
using __tsan_atomic16 = short;
using __tsan_atomic32 = int;
using __tsan_atomic64 = long;
__extension__ typedef __int128 __tsan_atomic128;
using __tsan_memory_order = int;

void __tsan_init() {}
void __tsan_func_entry(void*) {}
void __tsan_func_exit() {}
void __tsan_ignore_thread_begin() {}
void __tsan_ignore_thread_end() {}
void __tsan_vptr_read(void**) {}
void __tsan_vptr_update(void**, void*) {}

#define WSPIPE_TSAN_ACCESS(N)                                                                                   \
  void __tsan_read##N(void* p) { seen(p, N, false, __builtin_return_address(0)); }                              \
  void __tsan_write##N(void* p) { seen(p, N, true, __builtin_return_address(0)); }                              \
  void __tsan_unaligned_read##N(void* p) { seen(p, N, false, __builtin_return_address(0)); }                    \
  void __tsan_unaligned_write##N(void* p) { seen(p, N, true, __builtin_return_address(0)); }                    \
  void __tsan_read##N##_pc(void* p, void* pc) { seen(p, N, false, static_cast<char*>(pc) + 1); }                \
  void __tsan_write##N##_pc(void* p, void* pc) { seen(p, N, true, static_cast<char*>(pc) + 1); }                \
  void __tsan_volatile_read##N(void* p) { seen(p, N, false, __builtin_return_address(0)); }                     \
  void __tsan_volatile_write##N(void* p) { seen(p, N, true, __builtin_return_address(0)); }
WSPIPE_TSAN_ACCESS(1)
WSPIPE_TSAN_ACCESS(2)
WSPIPE_TSAN_ACCESS(4)
WSPIPE_TSAN_ACCESS(8)
WSPIPE_TSAN_ACCESS(16)
#undef WSPIPE_TSAN_ACCESS

void __tsan_read_range(void* p, unsigned long size) { seen(p, size, false, __builtin_return_address(0)); }
void __tsan_write_range(void* p, unsigned long size) { seen(p, size, true, __builtin_return_address(0)); }

// Newer compilers call these for memcpy, memset and memmove in instrumented code.
void* __tsan_memcpy(void* dst, const void* src, unsigned long size) {
  seen(src, size, false, __builtin_return_address(0));
  seen(dst, size, true, __builtin_return_address(0));
  return std::memcpy(dst, src, size);
}
void* __tsan_memmove(void* dst, const void* src, unsigned long size) {
  seen(src, size, false, __builtin_return_address(0));
  seen(dst, size, true, __builtin_return_address(0));
  return std::memmove(dst, src, size);
}
void* __tsan_memset(void* dst, int value, unsigned long size) {
  seen(dst, size, true, __builtin_return_address(0));
  return std::memset(dst, value, size);
}

#define WSPIPE_TSAN_ATOMIC(N)                                                                                    \
  __tsan_atomic##N __tsan_atomic##N##_load(const volatile __tsan_atomic##N* a, __tsan_memory_order) {          \
    return __atomic_load_n(a, __ATOMIC_SEQ_CST);                                                                 \
  }                                                                                                              \
  void __tsan_atomic##N##_store(volatile __tsan_atomic##N* a, __tsan_atomic##N v, __tsan_memory_order) {       \
    atomic_writes(a, sizeof *a);                                                                                 \
    __atomic_store_n(a, v, __ATOMIC_SEQ_CST);                                                                    \
  }                                                                                                              \
  __tsan_atomic##N __tsan_atomic##N##_exchange(volatile __tsan_atomic##N* a, __tsan_atomic##N v,                \
                                               __tsan_memory_order) {                                            \
    atomic_writes(a, sizeof *a);                                                                                 \
    return __atomic_exchange_n(a, v, __ATOMIC_SEQ_CST);                                                          \
  }                                                                                                              \
  __tsan_atomic##N __tsan_atomic##N##_fetch_add(volatile __tsan_atomic##N* a, __tsan_atomic##N v,               \
                                                __tsan_memory_order) {                                           \
    atomic_writes(a, sizeof *a);                                                                                 \
    return __atomic_fetch_add(a, v, __ATOMIC_SEQ_CST);                                                           \
  }                                                                                                              \
  __tsan_atomic##N __tsan_atomic##N##_fetch_sub(volatile __tsan_atomic##N* a, __tsan_atomic##N v,               \
                                                __tsan_memory_order) {                                           \
    atomic_writes(a, sizeof *a);                                                                                 \
    return __atomic_fetch_sub(a, v, __ATOMIC_SEQ_CST);                                                           \
  }                                                                                                              \
  __tsan_atomic##N __tsan_atomic##N##_fetch_and(volatile __tsan_atomic##N* a, __tsan_atomic##N v,               \
                                                __tsan_memory_order) {                                           \
    atomic_writes(a, sizeof *a);                                                                                 \
    return __atomic_fetch_and(a, v, __ATOMIC_SEQ_CST);                                                           \
  }                                                                                                              \
  __tsan_atomic##N __tsan_atomic##N##_fetch_or(volatile __tsan_atomic##N* a, __tsan_atomic##N v,                \
                                               __tsan_memory_order) {                                            \
    atomic_writes(a, sizeof *a);                                                                                 \
    return __atomic_fetch_or(a, v, __ATOMIC_SEQ_CST);                                                            \
  }                                                                                                              \
  __tsan_atomic##N __tsan_atomic##N##_fetch_xor(volatile __tsan_atomic##N* a, __tsan_atomic##N v,               \
                                                __tsan_memory_order) {                                           \
    atomic_writes(a, sizeof *a);                                                                                 \
    return __atomic_fetch_xor(a, v, __ATOMIC_SEQ_CST);                                                           \
  }                                                                                                              \
  __tsan_atomic##N __tsan_atomic##N##_fetch_nand(volatile __tsan_atomic##N* a, __tsan_atomic##N v,              \
                                                 __tsan_memory_order) {                                          \
    atomic_writes(a, sizeof *a);                                                                                 \
    return __atomic_fetch_nand(a, v, __ATOMIC_SEQ_CST);                                                          \
  }                                                                                                              \
  int __tsan_atomic##N##_compare_exchange_strong(volatile __tsan_atomic##N* a, __tsan_atomic##N* c,             \
                                                 __tsan_atomic##N v, __tsan_memory_order, __tsan_memory_order) { \
    atomic_writes(a, sizeof *a);                                                                                 \
    return __atomic_compare_exchange_n(a, c, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);                      \
  }                                                                                                              \
  int __tsan_atomic##N##_compare_exchange_weak(volatile __tsan_atomic##N* a, __tsan_atomic##N* c,               \
                                               __tsan_atomic##N v, __tsan_memory_order, __tsan_memory_order) {   \
    atomic_writes(a, sizeof *a);                                                                                 \
    return __atomic_compare_exchange_n(a, c, v, true, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);                       \
  }                                                                                                              \
  __tsan_atomic##N __tsan_atomic##N##_compare_exchange_val(volatile __tsan_atomic##N* a, __tsan_atomic##N c,    \
                                                           __tsan_atomic##N v, __tsan_memory_order,              \
                                                           __tsan_memory_order) {                                \
    atomic_writes(a, sizeof *a);                                                                                 \
    __atomic_compare_exchange_n(a, &c, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);                            \
    return c;                                                                                                    \
  }
WSPIPE_TSAN_ATOMIC(8)
WSPIPE_TSAN_ATOMIC(16)
WSPIPE_TSAN_ATOMIC(32)
WSPIPE_TSAN_ATOMIC(64)
#undef WSPIPE_TSAN_ATOMIC

// 16 bytes: under a lock (see atomic128_lock).
#define WSPIPE_TSAN_ATOMIC128_RMW(op, expr)                                                                     \
  __tsan_atomic128 __tsan_atomic128_##op(volatile __tsan_atomic128* a, __tsan_atomic128 v, __tsan_memory_order) { \
    atomic_writes(a, sizeof *a);                                                                                \
    const std::lock_guard<std::mutex> lock(atomic128_lock());                                                   \
    const __tsan_atomic128 old = *a;                                                                            \
    *a = (expr);                                                                                                \
    return old;                                                                                                 \
  }
WSPIPE_TSAN_ATOMIC128_RMW(exchange, v)
WSPIPE_TSAN_ATOMIC128_RMW(fetch_add, old + v)
WSPIPE_TSAN_ATOMIC128_RMW(fetch_sub, old - v)
WSPIPE_TSAN_ATOMIC128_RMW(fetch_and, old & v)
WSPIPE_TSAN_ATOMIC128_RMW(fetch_or, old | v)
WSPIPE_TSAN_ATOMIC128_RMW(fetch_xor, old ^ v)
WSPIPE_TSAN_ATOMIC128_RMW(fetch_nand, ~(old & v))
#undef WSPIPE_TSAN_ATOMIC128_RMW
__tsan_atomic128 __tsan_atomic128_load(const volatile __tsan_atomic128* a, __tsan_memory_order) {
  const std::lock_guard<std::mutex> lock(atomic128_lock());
  return *a;
}
void __tsan_atomic128_store(volatile __tsan_atomic128* a, __tsan_atomic128 v, __tsan_memory_order) {
  atomic_writes(a, sizeof *a);
  const std::lock_guard<std::mutex> lock(atomic128_lock());
  *a = v;
}
__tsan_atomic128 __tsan_atomic128_compare_exchange_val(volatile __tsan_atomic128* a, __tsan_atomic128 c,
                                                       __tsan_atomic128 v, __tsan_memory_order, __tsan_memory_order) {
  atomic_writes(a, sizeof *a);
  const std::lock_guard<std::mutex> lock(atomic128_lock());
  const __tsan_atomic128 old = *a;
  if (old == c) *a = v;
  return old;
}
int __tsan_atomic128_compare_exchange_strong(volatile __tsan_atomic128* a, __tsan_atomic128* c, __tsan_atomic128 v,
                                             __tsan_memory_order mo, __tsan_memory_order fail) {
  const __tsan_atomic128 old = __tsan_atomic128_compare_exchange_val(a, *c, v, mo, fail);
  if (old == *c) return 1;
  *c = old;
  return 0;
}
int __tsan_atomic128_compare_exchange_weak(volatile __tsan_atomic128* a, __tsan_atomic128* c, __tsan_atomic128 v,
                                           __tsan_memory_order mo, __tsan_memory_order fail) {
  return __tsan_atomic128_compare_exchange_strong(a, c, v, mo, fail);
}

void __tsan_atomic_thread_fence(__tsan_memory_order) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
void __tsan_atomic_signal_fence(__tsan_memory_order) { __atomic_signal_fence(__ATOMIC_SEQ_CST); }

}  // extern "C"

#endif  // !WSPIPE_REAL_TSAN
