// The event log's host side (docs/event-log.md): EventLog owns the memory a
// kernel built with WSPIPE_CUDA_EVENT_LOG logs into, reads it back and
// saves it as a file, one per launch.
//
//   wspipe::cuda::EventLog log(warps, WSPIPE_CUDA_EVENT_LOG);  // every warp of the grid
//   wspipe::cuda::attach_event_log(log);  // event_log_device.hpp: this translation unit's kernels log into it
//   log.reset();                          // before each launch
//   ... launch; synchronise (a trap included) ...
//   log.save("ring.0.wslog", {.kernel = "ring", .launch = 0, .grid = ..., .config = "stages=4"});
//
// The rings live in device memory (cudaMalloc), where a record costs a
// warp two stores to L2 and a load that hits its L1. A kernel that traps
// leaves its context unusable, device memory included: so a warp that traps
// through the log (the watchdog, a failed B::check) first copies the whole
// block into a host-mapped pinned mirror of it (cudaHostAlloc with
// cudaHostAllocMapped), which the host reads with no CUDA call. After a
// launch that ended normally, the host copies the device block with
// cudaMemcpy.
//
// Host C++ over the CUDA runtime API: usable from .cu and .cpp files.
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "backends/cuda/event_log_file.hpp"
#include "backends/cuda/event_log_format.hpp"

namespace wspipe::cuda {

// What the device sees of a log: set into each kernel translation unit by
// attach_event_log (event_log_device.hpp).
// An aggregate, so that a __constant__ variable may hold it.
struct EventLogView {
  unsigned char* base;    // the block in device memory (LogHeader first)
  unsigned char* mirror;  // device address of its host-mapped mirror, written before a trap
  std::uint32_t warps;
  std::uint32_t capacity;
};

// What a saved file says of the launch, besides the events.
struct EventLogLaunch {
  std::string kernel;
  std::uint32_t launch = 0;
  Dim3 grid{}, block{}, cluster{1, 1, 1};
  std::uint64_t smem_bytes = 0;
  std::string config;  // free-form, one line: the caller's configuration
  // Source files whose names the file's `file` lines resolve (event ids are
  // hashes of names: event_log_file_id).
  std::vector<std::string> sources;
};

class EventLog {
 public:
  // `warps` warps (every warp of the grid the launches use), `capacity`
  // events each (the last `capacity` are kept). Throws std::runtime_error
  // naming the CUDA call that failed.
  EventLog(std::uint32_t warps, std::uint32_t capacity) : warps_(warps), capacity_(capacity) {
    if (warps == 0 || capacity == 0) throw std::invalid_argument("EventLog: warps and capacity must be positive");
    bytes_ = event_log_bytes(warps, capacity);
    void* host = nullptr;
    check(cudaHostAlloc(&host, bytes_, cudaHostAllocMapped), "cudaHostAlloc(cudaHostAllocMapped)");
    host_ = static_cast<unsigned char*>(host);
    void* mapped = nullptr;
    if (cudaError_t e = cudaHostGetDevicePointer(&mapped, host_, 0); e != cudaSuccess) {
      release();
      check(e, "cudaHostGetDevicePointer");
    }
    mirror_ = static_cast<unsigned char*>(mapped);
    void* dev = nullptr;
    if (cudaError_t e = cudaMalloc(&dev, bytes_); e != cudaSuccess) {
      release();
      check(e, "cudaMalloc (event log)");
    }
    device_ = static_cast<unsigned char*>(dev);
    reset();
  }
  EventLog(const EventLog&) = delete;
  EventLog& operator=(const EventLog&) = delete;
  ~EventLog() { release(); }

  std::uint32_t warps() const { return warps_; }
  std::uint32_t capacity() const { return capacity_; }
  EventLogView view() const { return {device_, mirror_, warps_, capacity_}; }

  // Empties the log (the mirror, and the device block with a synchronous
  // cudaMemset and cudaMemcpy): call it before a launch, not while one runs.
  void reset() {
    std::memset(host_, 0, bytes_);
    LogHeader h{};
    h.magic = kLogMagic;
    h.version = kEventLogVersion;
    h.warps = warps_;
    h.capacity = capacity_;
    std::memcpy(host_, &h, sizeof h);
    check(cudaMemset(device_, 0, bytes_), "cudaMemset (event log)");
    check(cudaMemcpy(device_, &h, sizeof h, cudaMemcpyHostToDevice), "cudaMemcpy (event log header)");
  }

  // What the device wrote, as the file's contents; call it once the launch
  // has ended (synchronised). After a trap through the log, the mirror, with
  // no CUDA call; otherwise the device block, copied with cudaMemcpy. Throws
  // std::runtime_error where that copy fails: the launch ended in an error
  // that did not go through the log (an illegal address, a __trap() of the
  // kernel's own), which leaves device memory unreadable and the mirror
  // empty.
  EventLogFile read(const EventLogLaunch& launch) const {
    LogHeader h;
    std::memcpy(&h, host_, sizeof h);
    if (h.trap != 0) return decode(host_, launch);
    std::vector<unsigned char> block(bytes_);
    check(cudaMemcpy(block.data(), device_, bytes_, cudaMemcpyDeviceToHost),
          "cudaMemcpy (event log; no trap went through the log)");
    return decode(block.data(), launch);
  }

  // read(launch) written to `path` (event_log_file.hpp's format). Throws
  // std::runtime_error if the file cannot be written, or as read.
  void save(const std::string& path, const EventLogLaunch& launch) const {
    const EventLogFile f = read(launch);
    std::ofstream out(path);
    if (!out) throw std::runtime_error("EventLog::save: cannot open " + path);
    write_event_log(out, f);
    if (!out.flush()) throw std::runtime_error("EventLog::save: cannot write " + path);
  }

 private:
  // The file's contents from an image of the block (the mirror, or a copy
  // of the device block), whose log header holds the trap if any.
  EventLogFile decode(const unsigned char* block, const EventLogLaunch& launch) const {
    EventLogFile f;
    f.kernel = launch.kernel;
    f.launch = launch.launch;
    f.grid = launch.grid;
    f.block = launch.block;
    f.cluster = launch.cluster;
    f.smem_bytes = launch.smem_bytes;
    f.config = launch.config;
    f.capacity = capacity_;
    for (const std::string& s : launch.sources) f.add_source(s);
    LogHeader h;
    std::memcpy(&h, block, sizeof h);
    if (h.trap != 0) {
      f.trap = Trap{trap_reason(h.trap), h.trap_warp, h.trap_bar, h.trap_parity, h.trap_line, h.trap_file, 0, 0};
    }
    for (std::uint32_t w = 0; w < warps_; ++w) {
      const unsigned char* part = block + sizeof(LogHeader) + w * event_log_warp_bytes(capacity_);
      WarpHeader wh;
      std::memcpy(&wh, part, sizeof wh);
      if (wh.magic != kWarpMagic) continue;  // never logged
      EventLogWarp lw;
      lw.warp = w;
      lw.block = {wh.block[0], wh.block[1], wh.block[2]};
      lw.warp_in_cta = wh.warp;
      lw.cta_rank = wh.cta_rank;
      if (wh.trap != 0) {
        lw.trap = Trap{trap_reason(wh.trap), w, wh.trap_bar, wh.trap_parity, wh.trap_line, wh.trap_file, wh.trap_tries,
                       wh.trap_thread};
      }
      std::vector<EventRecord> recs;
      for (std::uint32_t s = 0; s < capacity_; ++s) {
        EventRecord r;
        std::memcpy(&r, part + sizeof(WarpHeader) + s * sizeof(EventRecord), sizeof r);
        // A slot holds event seq - 1 only where seq - 1 maps to it; else
        // it was torn or never written.
        if (r.seq != 0 && (r.seq - 1) % capacity_ == s) recs.push_back(r);
      }
      std::sort(recs.begin(), recs.end(), [](const EventRecord& a, const EventRecord& b) { return a.seq < b.seq; });
      for (const EventRecord& r : recs) {
        lw.total = std::max(lw.total, r.seq);
        lw.events.push_back(event_from_record(r));
      }
      f.warps.push_back(std::move(lw));
    }
    return f;
  }

  static void check(cudaError_t e, const char* call) {
    if (e != cudaSuccess) throw std::runtime_error(std::string("EventLog: ") + call + ": " + cudaGetErrorString(e));
  }
  static TrapReason trap_reason(std::uint32_t v) {
    return v == static_cast<std::uint32_t>(TrapReason::watchdog) ? TrapReason::watchdog : TrapReason::check;
  }
  void release() noexcept {
    if (device_ != nullptr) (void)cudaFree(device_);
    if (host_ != nullptr) (void)cudaFreeHost(host_);
    device_ = nullptr;
    host_ = nullptr;
    mirror_ = nullptr;
  }

  std::uint32_t warps_, capacity_;
  std::size_t bytes_ = 0;
  unsigned char* host_ = nullptr;    // the mirror, host address
  unsigned char* mirror_ = nullptr;  // the mirror, device address
  unsigned char* device_ = nullptr;  // the block in device memory
};

}  // namespace wspipe::cuda
