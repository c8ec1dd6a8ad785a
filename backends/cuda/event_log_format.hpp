// The CUDA backend's event log in memory: what the device writes and the
// host reads (docs/event-log.md). Plain C++20 that also compiles as device
// code: the kernel side (event_log_device.hpp), the host object that owns
// the memory (event_log.hpp) and the text file's reader and writer
// (event_log_file.hpp) share these definitions, and the last needs no CUDA.
//
// The block, in device memory (and, copied there by a warp that traps, in
// its host-mapped mirror):
//
//   LogHeader                     64 bytes: magic, version, warps, capacity, a trap
//   warp 0: WarpHeader            64 bytes: where the warp is, its own trap, its event count
//           EventRecord[capacity] 32 bytes each, a ring: event n (from 0) in slot n % capacity
//   warp 1: ...
//
// A warp is numbered across the grid: its CTA's linear index (x fastest)
// times the warps per CTA, plus its warp in the CTA.
#pragma once

#include <cstddef>
#include <cstdint>

#if defined(__CUDACC__)
#define WSPIPE_EVENT_LOG_HD __host__ __device__
#else
#define WSPIPE_EVENT_LOG_HD
#endif

namespace wspipe::cuda {

// What a record says happened. The numbers are the file format's too (by
// name there): add at the end, never renumber.
enum class EventOp : std::uint8_t {
  init = 1,          // mbarrier.init; arg: the arrival count
  inval,             // mbarrier.inval
  arrive,            // mbarrier.arrive; remote: on CTA `cta` of the cluster
  arrive_expect_tx,  // arrive.expect_tx; arg: the bytes
  expect_tx,         // arg: the bytes
  complete_tx,       // arg: the bytes
  try_wait,          // parity asked, answer observed
  test_wait,         // parity asked, answer observed
  wait,              // parity asked; arg: try_waits that failed before the one that passed (answer 1) or
                     // before the watchdog fired (answer 0)
  named_sync,        // bar.sync; bar: the barrier id, arg: the thread count
  named_arrive,      // bar.arrive; bar: the barrier id, arg: the thread count
  cluster_arrive,    // barrier.cluster.arrive
  cluster_wait,      // barrier.cluster.wait
  tma_load,          // a TMA load issued; bar: its barrier, arg: the multicast mask (0: none)
  tma_store,         // a TMA store issued
  bulk_commit,       // cp.async.bulk.commit_group
  bulk_wait,         // cp.async.bulk.wait_group[.read]; arg: the groups left pending
  mma,               // tcgen05.mma issued; arg: 1 if it accumulates
  mma_commit,        // tcgen05.commit; bar: its barrier, arg: the multicast mask (0: none)
  tmem_alloc,        // tcgen05.alloc; arg: the columns
  tmem_dealloc,      // tcgen05.dealloc; arg: the columns
  tmem_relinquish,   // tcgen05.relinquish_alloc_permit
  clc_try_cancel,    // clusterlaunchcontrol.try_cancel; bar: its barrier, arg: 1 if multicast
  check_failed,      // B::check failed here (then the warp traps)
};
inline constexpr std::uint8_t kEventOpLast = static_cast<std::uint8_t>(EventOp::check_failed);

// The name each op has in the file.
WSPIPE_EVENT_LOG_HD constexpr const char* event_op_name(EventOp op) {
  switch (op) {
    case EventOp::init: return "init";
    case EventOp::inval: return "inval";
    case EventOp::arrive: return "arrive";
    case EventOp::arrive_expect_tx: return "arrive_expect_tx";
    case EventOp::expect_tx: return "expect_tx";
    case EventOp::complete_tx: return "complete_tx";
    case EventOp::try_wait: return "try_wait";
    case EventOp::test_wait: return "test_wait";
    case EventOp::wait: return "wait";
    case EventOp::named_sync: return "named_sync";
    case EventOp::named_arrive: return "named_arrive";
    case EventOp::cluster_arrive: return "cluster_arrive";
    case EventOp::cluster_wait: return "cluster_wait";
    case EventOp::tma_load: return "tma_load";
    case EventOp::tma_store: return "tma_store";
    case EventOp::bulk_commit: return "bulk_commit";
    case EventOp::bulk_wait: return "bulk_wait";
    case EventOp::mma: return "mma";
    case EventOp::mma_commit: return "mma_commit";
    case EventOp::tmem_alloc: return "tmem_alloc";
    case EventOp::tmem_dealloc: return "tmem_dealloc";
    case EventOp::tmem_relinquish: return "tmem_relinquish";
    case EventOp::clc_try_cancel: return "clc_try_cancel";
    case EventOp::check_failed: return "check_failed";
  }
  return nullptr;
}

// EventRecord::flags.
inline constexpr std::uint8_t kEventParity = 1u << 0;     // the parity asked (waits)
inline constexpr std::uint8_t kEventAnswer = 1u << 1;     // the answer observed: passed (waits)
inline constexpr std::uint8_t kEventHasParity = 1u << 2;  // a wait: parity and answer mean something
inline constexpr std::uint8_t kEventRemote = 1u << 3;     // on another CTA of the cluster: rank in bits 4-7
inline constexpr unsigned kEventRemoteShift = 4;

// One event, 32 bytes, written by the lowest active lane of the warp.
struct alignas(16) EventRecord {
  std::uint32_t seq;    // 1 + the warp's event number (0: slot never written)
  std::uint8_t op;      // EventOp
  std::uint8_t flags;   // kEvent*
  std::uint16_t line;   // source line of the kernel's call (65535: that or later)
  std::uint32_t file;   // event_log_file_id of the source file's name
  std::uint32_t bar;    // the barrier's shared-memory address (named barriers: the id); 0: none
  std::uint32_t arg;    // per op (EventOp)
  std::uint32_t lanes;  // __activemask() where the warp made the call
  std::uint64_t time;   // %globaltimer, nanoseconds
};
static_assert(sizeof(EventRecord) == 32);

// Why a warp trapped (WarpHeader::trap, LogHeader::trap).
enum class TrapReason : std::uint32_t { none = 0, watchdog = 1, check = 2 };

// A warp's header: written with its first event (magic, where), with each
// event (head) and when it traps (the trap fields).
struct alignas(16) WarpHeader {
  std::uint32_t magic;  // kWarpMagic once the warp logged
  std::uint32_t block[3];
  std::uint32_t warp;      // in its CTA
  std::uint32_t cta_rank;  // in its cluster
  std::uint32_t trap;      // TrapReason
  std::uint32_t trap_line;
  std::uint32_t trap_file;
  std::uint32_t trap_bar;     // watchdog: the barrier
  std::uint32_t trap_parity;  // watchdog: the parity waited for
  std::uint32_t trap_tries;   // watchdog: the try_waits that failed
  std::uint32_t trap_thread;  // the thread (in its CTA) that wrote the trap
  std::uint32_t head;         // the warp's events so far: its next slot is head % capacity
  std::uint32_t name_key;     // the device: the low 32 bits of the address of its last event's file name,
  std::uint32_t name_id;      // and that name's event_log_file_id (a cache: hashing costs a loop)
};
static_assert(sizeof(WarpHeader) == 64);
static_assert(offsetof(WarpHeader, head) == 52 && offsetof(WarpHeader, name_id) == 60);

// The block's header: the host writes the first four words; a warp that
// traps writes the rest into the mirror (where several trap, one wins; each
// warp's own header keeps its trap).
struct alignas(16) LogHeader {
  std::uint32_t magic;  // kLogMagic
  std::uint32_t version;
  std::uint32_t warps;
  std::uint32_t capacity;
  std::uint32_t trap;         // TrapReason
  std::uint32_t trap_warp;    // the trapping warp's number
  std::uint32_t trap_line;
  std::uint32_t trap_file;
  std::uint32_t trap_bar;
  std::uint32_t trap_parity;
  std::uint32_t reserved[6];
};
static_assert(sizeof(LogHeader) == 64);

inline constexpr std::uint32_t kLogMagic = 0x57535045u;   // "WSPE"
inline constexpr std::uint32_t kWarpMagic = 0x57535057u;  // "WSPW"
inline constexpr std::uint32_t kEventLogVersion = 1;

// Bytes of one warp's part, and of the whole block.
WSPIPE_EVENT_LOG_HD constexpr std::size_t event_log_warp_bytes(std::uint32_t capacity) {
  return sizeof(WarpHeader) + std::size_t{capacity} * sizeof(EventRecord);
}
WSPIPE_EVENT_LOG_HD constexpr std::size_t event_log_bytes(std::uint32_t warps, std::uint32_t capacity) {
  return sizeof(LogHeader) + std::size_t{warps} * event_log_warp_bytes(capacity);
}

// A source file's id: FNV-1a (32 bits) of its name after the last '/', so
// that a path as the compiler saw it and the bare name agree. Evaluated on
// the device at each call site, it folds to a constant.
WSPIPE_EVENT_LOG_HD constexpr std::uint32_t event_log_file_id(const char* path) {
  constexpr std::uint32_t kBasis = 2166136261u;
  std::uint32_t h = kBasis;
  for (; *path != '\0'; ++path) {
    h = *path == '/' ? kBasis : (h ^ static_cast<unsigned char>(*path)) * 16777619u;
  }
  return h;
}

}  // namespace wspipe::cuda
