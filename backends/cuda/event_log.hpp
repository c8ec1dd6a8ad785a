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
// The records live in host-mapped pinned memory (cudaHostAlloc with
// cudaHostAllocMapped): a kernel that traps leaves its context unusable,
// and the host still reads this memory, with no CUDA call, to save the log.
// Each warp's next slot is counted in device memory (a counter per warp,
// never read by the host), so that logging never reads across the bus.
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
  unsigned char* base;    // device address of the block (LogHeader first)
  std::uint32_t* heads;   // device memory: each warp's events so far
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
    void* dev = nullptr;
    if (cudaError_t e = cudaHostGetDevicePointer(&dev, host_, 0); e != cudaSuccess) {
      release();
      check(e, "cudaHostGetDevicePointer");
    }
    device_ = static_cast<unsigned char*>(dev);
    void* heads = nullptr;
    if (cudaError_t e = cudaMalloc(&heads, std::size_t{warps} * sizeof(std::uint32_t)); e != cudaSuccess) {
      release();
      check(e, "cudaMalloc (event log heads)");
    }
    heads_ = static_cast<std::uint32_t*>(heads);
    reset();
  }
  EventLog(const EventLog&) = delete;
  EventLog& operator=(const EventLog&) = delete;
  ~EventLog() { release(); }

  std::uint32_t warps() const { return warps_; }
  std::uint32_t capacity() const { return capacity_; }
  EventLogView view() const { return {device_, heads_, warps_, capacity_}; }

  // Empties the log (host memory, and the device counters with a
  // synchronous cudaMemset): call it before a launch, not while one runs.
  void reset() {
    std::memset(host_, 0, bytes_);
    LogHeader h{};
    h.magic = kLogMagic;
    h.version = kEventLogVersion;
    h.warps = warps_;
    h.capacity = capacity_;
    std::memcpy(host_, &h, sizeof h);
    check(cudaMemset(heads_, 0, std::size_t{warps_} * sizeof(std::uint32_t)), "cudaMemset (event log heads)");
  }

  // What the device wrote, as the file's contents. No CUDA call: valid
  // after a trap, once the launch has ended (synchronised, with an error or
  // not).
  EventLogFile read(const EventLogLaunch& launch) const {
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
    std::memcpy(&h, host_, sizeof h);
    if (h.trap != 0) {
      f.trap = Trap{trap_reason(h.trap), h.trap_warp, h.trap_bar, h.trap_parity, h.trap_line, h.trap_file, 0, 0};
    }
    for (std::uint32_t w = 0; w < warps_; ++w) {
      const unsigned char* part = host_ + sizeof(LogHeader) + w * event_log_warp_bytes(capacity_);
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

  // read(launch) written to `path` (event_log_file.hpp's format). Throws
  // std::runtime_error if the file cannot be written.
  void save(const std::string& path, const EventLogLaunch& launch) const {
    std::ofstream out(path);
    if (!out) throw std::runtime_error("EventLog::save: cannot open " + path);
    write_event_log(out, read(launch));
    if (!out.flush()) throw std::runtime_error("EventLog::save: cannot write " + path);
  }

 private:
  static void check(cudaError_t e, const char* call) {
    if (e != cudaSuccess) throw std::runtime_error(std::string("EventLog: ") + call + ": " + cudaGetErrorString(e));
  }
  static TrapReason trap_reason(std::uint32_t v) {
    return v == static_cast<std::uint32_t>(TrapReason::watchdog) ? TrapReason::watchdog : TrapReason::check;
  }
  void release() noexcept {
    if (heads_ != nullptr) (void)cudaFree(heads_);
    if (host_ != nullptr) (void)cudaFreeHost(host_);
    heads_ = nullptr;
    host_ = nullptr;
    device_ = nullptr;
  }

  std::uint32_t warps_, capacity_;
  std::size_t bytes_ = 0;
  unsigned char* host_ = nullptr;
  unsigned char* device_ = nullptr;
  std::uint32_t* heads_ = nullptr;
};

}  // namespace wspipe::cuda
