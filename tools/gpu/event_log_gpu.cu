// wspipe_event_log_gpu: the CUDA backend's event log (docs/event-log.md) on
// a Hopper (sm_90a) or later GPU, through HopperBackend:
//  1. ring: a correct producer/consumer ring (ProducerConsumerPipeline, 4
//     stages) logged: every warp's events counted, each wait on the barrier
//     and parity its item implies and answered "passed", the source lines
//     and file those of this file's calls; once with every event kept, once
//     with the ring wrapped (the last `capacity` kept, in order). Each
//     launch's log is saved, read back with the parser and compared.
//  2. hang: a consumer waits on a barrier nobody arrives on; the watchdog
//     traps; the log, read from the host-mapped mirror that the trapping
//     warp filled before the trap, names the hung wait (warp, barrier,
//     parity, line) and is saved as a file.
// The hang runs last: a trapped kernel leaves the context unusable.
//
//   wspipe_event_log_gpu [OUTDIR]    (default: the working directory)
//
// Exit: 0 as expected; 1 a check failed; 77 no sm_90+ GPU (CTest skips).
#ifndef WSPIPE_CUDA_EVENT_LOG
#define WSPIPE_CUDA_EVENT_LOG 256
#endif
// A wait that fails this many try_waits traps: far beyond any wait of the
// correct ring, a fraction of a second for the planted hang.
#ifndef WSPIPE_CUDA_WATCHDOG_SPINS
#define WSPIPE_CUDA_WATCHDOG_SPINS 100000
#endif

#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <exception>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "backends/cuda/cuda_backend.hpp"
#include "backends/cuda/event_log.hpp"
#include "backends/cuda/event_log_device.hpp"
#include "backends/cuda/event_log_file.hpp"
#include "core/pipeline.hpp"
#include "tools/gpu/device_buffer.hpp"

static_assert(WSPIPE_CUDA_EVENT_LOG > 0, "wspipe_event_log_gpu tests the event log: build it with the log on");

namespace {

using B = wspipe::cuda::HopperBackend;
using wspipe::SharedMemBarrier;
using namespace wspipe::cuda;

constexpr int kStages = 4;
constexpr std::uint32_t kWords = 4;
using Pipe = wspipe::ProducerConsumerPipeline<B, kStages>;

struct RingStorage {
  SharedMemBarrier barriers[2 * kStages];  // full[kStages] then empty[kStages]
  std::uint32_t slot[kStages][kWords];
};

__device__ __forceinline__ std::uint32_t word(std::uint32_t item, std::uint32_t k) { return item * 2654435761u + k; }

// The lines of the calls the log must name.
constexpr std::uint32_t kProduceLine = __LINE__ + 1;
__device__ __forceinline__ auto produce(Pipe& pipe) { return pipe.produce(); }
constexpr std::uint32_t kConsumeLine = __LINE__ + 1;
__device__ __forceinline__ auto consume(Pipe& pipe) { return pipe.consume(); }
constexpr std::uint32_t kArriveLine = __LINE__ + 1;
__device__ __forceinline__ void publish(const auto& slot) { slot.arrive_elected(); }

}  // namespace

// Warp 0 produces `items` items, warp 1 consumes and checks them; `out[0]`:
// the shared-memory address of the first barrier, `out[1]`: items consumed.
extern "C" __global__ void __launch_bounds__(64) wspipe_event_log_ring(std::uint32_t items, std::uint32_t* out) {
  auto& s = B::shared_storage<RingStorage>();
  const std::uint32_t warp = B::warp_idx();
  if (warp == 0) {
    Pipe(s.barriers).init_mbars(1, 32);
    B::fence_init();
  }
  B::cluster_sync();
  if (warp == 0) {
    Pipe pipe(s.barriers);
    for (std::uint32_t i = 0; i < items; ++i) {
      auto slot = produce(pipe);
#pragma unroll
      for (std::uint32_t k = 0; k < kWords; ++k) s.slot[slot.index()][k] = word(i, k);
      publish(slot);
    }
  } else if (warp == 1) {
    Pipe pipe(s.barriers);
    std::uint32_t good = 0;
    for (std::uint32_t i = 0; i < items; ++i) {
      auto slot = consume(pipe);
      bool intact = true;
#pragma unroll
      for (std::uint32_t k = 0; k < kWords; ++k) intact &= s.slot[slot.index()][k] == word(i, k);
      good += intact ? 1 : 0;
    }
    if (B::lane_idx() == 0) {
      out[0] = B::smem_addr(&s.barriers[0]);
      out[1] = good;
    }
  }
}

namespace {
struct HangStorage {
  SharedMemBarrier bar[2];  // [0]: the producer arrives once; [1]: nobody arrives
};
constexpr std::uint32_t kHangLine = __LINE__ + 1;
__device__ __forceinline__ void hung_wait(SharedMemBarrier& bar) { B::wait(bar, 0); }
}  // namespace

// The planted hang: warp 0 arrives on bar[0] and leaves; warp 1 waits on
// bar[0] (passes), then on bar[1], which nobody arrives on.
extern "C" __global__ void __launch_bounds__(64) wspipe_event_log_hang() {
  auto& s = B::shared_storage<HangStorage>();
  const std::uint32_t warp = B::warp_idx();
  if (warp == 0) {
    B::elect_one([&] {
      B::init(s.bar[0], 1);
      B::init(s.bar[1], 1);
    });
    B::fence_init();
  }
  B::cluster_sync();
  if (warp == 0) {
    B::elect_one([&] { B::arrive(s.bar[0]); });
  } else if (warp == 1) {
    B::wait(s.bar[0], 0);
    hung_wait(s.bar[1]);
  }
}

namespace {

int failures = 0;
void expect(bool ok, const std::string& what) {
  if (!ok) {
    ++failures;
    std::printf("FAIL: %s\n", what.c_str());
  }
}

const std::uint32_t kThisFile = event_log_file_id(__FILE__);

void launch(void (*kernel)(), std::size_t smem) {
  WSPIPE_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
  kernel<<<1, 64, smem>>>();
}

EventLogLaunch launch_info(const char* kernel, std::uint32_t n, std::size_t smem, const std::string& config) {
  EventLogLaunch l;
  l.kernel = kernel;
  l.launch = n;
  l.grid = {1, 1, 1};
  l.block = {64, 1, 1};
  l.smem_bytes = smem;
  l.config = config;
  l.sources = {__FILE__, "pipeline.hpp"};
  return l;
}

// Saves the log, reads the file back and compares it with the memory's.
EventLogFile save_and_reread(const EventLog& log, const EventLogLaunch& info, const std::string& path) {
  log.save(path, info);
  std::ifstream in(path);
  EventLogFile back;
  try {
    back = parse_event_log(in);
  } catch (const EventLogParseError& e) {
    expect(false, path + ": " + e.what());
    return log.read(info);
  }
  expect(back == log.read(info), path + ": the file read back differs from the log in memory");
  std::printf("saved %s\n", path.c_str());
  return back;
}

// The ring's log: each warp's events as the protocol implies.
void check_ring(const EventLogFile& f, std::uint32_t items, std::uint32_t bar0) {
  const std::string tag = "ring, " + std::to_string(items) + " items: ";
  expect(f.warps.size() == 2, tag + "2 warps logged, found " + std::to_string(f.warps.size()));
  expect(!f.trap, tag + "no trap");
  if (f.warps.size() != 2) return;
  const std::uint32_t full0 = bar0, empty0 = bar0 + 8 * kStages;
  for (int w = 0; w < 2; ++w) {
    const EventLogWarp& lw = f.warps[static_cast<std::size_t>(w)];
    const std::string wt = tag + "warp " + std::to_string(w) + ": ";
    // Producer: 2 inits per stage, the cluster barrier, then per item a
    // wait on empty and an elected arrive on full. Consumer: the cluster
    // barrier, then per item a wait on full and 32 arrivals on empty.
    const std::uint32_t head = w == 0 ? 2 * kStages + 2 : 2;
    const std::uint32_t total = head + 2 * items;
    expect(lw.total == total, wt + "expected " + std::to_string(total) + " events, found " + std::to_string(lw.total));
    const std::uint32_t kept = total < f.capacity ? total : f.capacity;
    expect(lw.events.size() == kept,
           wt + "expected " + std::to_string(kept) + " kept, found " + std::to_string(lw.events.size()));
    expect(lw.warp_in_cta == static_cast<std::uint32_t>(w) && lw.block == Dim3{0, 0, 0}, wt + "its place");
    for (std::size_t k = 0; k < lw.events.size(); ++k) {
      const LoggedEvent& e = lw.events[k];
      expect(e.seq == total - kept + 1 + k, wt + "events in order, none missing");
      if (k > 0) expect(e.time >= lw.events[k - 1].time, wt + "the clock does not go back");
      const std::uint32_t n = e.seq - 1;  // the event's number
      if (n < head) {
        const EventOp want = n < 2 * kStages && w == 0 ? EventOp::init
                             : n == head - 2         ? EventOp::cluster_arrive
                                                     : EventOp::cluster_wait;
        expect(e.op == want, wt + "event " + std::to_string(e.seq) + " is " + event_op_name(e.op) + ", expected " +
                                 event_op_name(want));
        continue;
      }
      const std::uint32_t item = (n - head) / 2, stage = item % kStages;
      const std::uint32_t phase = (item / kStages) & 1u;
      const bool is_wait = (n - head) % 2 == 0;
      const std::string et = wt + "item " + std::to_string(item) + " " + (is_wait ? "wait" : "arrive") + ": ";
      if (is_wait) {
        const std::uint32_t bar = w == 0 ? empty0 + 8 * stage : full0 + 8 * stage;
        const std::uint32_t parity = w == 0 ? phase ^ 1u : phase;
        expect(e.op == EventOp::wait, et + "op " + event_op_name(e.op));
        expect(e.bar == bar, et + "barrier");
        expect(e.parity == parity, et + "parity");
        expect(e.answer == true, et + "answer: passed");
        expect(e.lanes == 0xffffffffu, et + "all 32 lanes");
        expect(e.file == kThisFile && e.line == (w == 0 ? kProduceLine : kConsumeLine),
               et + "at " + f.source_name(e.file) + ":" + std::to_string(e.line));
      } else {
        expect(e.op == EventOp::arrive, et + "op " + event_op_name(e.op));
        expect(e.bar == (w == 0 ? full0 : empty0) + 8 * stage, et + "barrier");
        expect(!e.parity && !e.cta, et + "no parity, local");
        // The producer's arrive is elected (one lane), the consumer's is every lane's.
        expect(w == 0 ? __builtin_popcount(e.lanes) == 1 : e.lanes == 0xffffffffu,
               et + "lanes " + std::to_string(e.lanes));
        expect(e.file == kThisFile && e.line == (w == 0 ? kArriveLine : kConsumeLine),
               et + "at " + f.source_name(e.file) + ":" + std::to_string(e.line));
      }
    }
  }
}

int run(const std::string& outdir) {
  const auto device = wspipe::gpu::sm90_device_or_skip("the event log");
  if (!device) return 77;
  std::printf("wspipe_event_log_gpu on %s (sm_%d%d): WSPIPE_CUDA_EVENT_LOG=%d, WSPIPE_CUDA_WATCHDOG_SPINS=%d\n",
              device->name, device->major, device->minor, WSPIPE_CUDA_EVENT_LOG, WSPIPE_CUDA_WATCHDOG_SPINS);
  EventLog log(2, WSPIPE_CUDA_EVENT_LOG);
  attach_event_log(log);

  // 1. The correct ring: everything kept, then wrapped.
  wspipe::gpu::DeviceBuffer<std::uint32_t> out(2);
  std::uint32_t n = 0;
  for (const std::uint32_t items : {100u, 1000u}) {
    log.reset();
    out.fill_bytes(0);
    const std::size_t smem = sizeof(RingStorage);
    WSPIPE_CUDA_CHECK(cudaFuncSetAttribute(wspipe_event_log_ring, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           static_cast<int>(smem)));
    wspipe_event_log_ring<<<1, 64, smem>>>(items, out.get());
    WSPIPE_CUDA_CHECK(cudaGetLastError());
    WSPIPE_CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<std::uint32_t> host(2);
    out.download(host);
    expect(host[1] == items, "ring: " + std::to_string(host[1]) + " of " + std::to_string(items) + " items intact");
    const auto info = launch_info("wspipe_event_log_ring", n, smem,
                                  "stages=" + std::to_string(kStages) + " items=" + std::to_string(items));
    const EventLogFile f = save_and_reread(log, info, outdir + "/wspipe_event_log_ring." + std::to_string(n) + ".log");
    check_ring(f, items, host[0]);
    std::printf("ring, %u items: warp 0 %u events (%zu kept), warp 1 %u events (%zu kept)\n", items,
                f.warps.empty() ? 0 : f.warps[0].total, f.warps.empty() ? 0 : f.warps[0].events.size(),
                f.warps.size() < 2 ? 0 : f.warps[1].total, f.warps.size() < 2 ? 0 : f.warps[1].events.size());
    ++n;
  }

  // 2. The planted hang, last.
  log.reset();
  launch(wspipe_event_log_hang, sizeof(HangStorage));
  const cudaError_t launched = cudaGetLastError();
  const cudaError_t e = launched != cudaSuccess ? launched : cudaDeviceSynchronize();
  std::printf("hang: the launch ended with %s\n", cudaGetErrorName(e));
  expect(e != cudaSuccess, "hang: the launch trapped");
  const auto info = launch_info("wspipe_event_log_hang", n, sizeof(HangStorage),
                                "planted=consumer waits on a barrier nobody arrives on");
  const std::string path = outdir + "/wspipe_event_log_hang." + std::to_string(n) + ".log";
  const EventLogFile f = save_and_reread(log, info, path);
  expect(f.trap.has_value(), "hang: the log's header names a trap");
  if (f.trap) {
    const Trap& t = *f.trap;
    std::printf("hang: trap %s warp %u barrier 0x%x parity %u at %s:%u\n",
                t.reason == TrapReason::watchdog ? "watchdog" : "check", t.warp, t.bar, t.parity,
                f.source_name(t.file).c_str(), t.line);
    expect(t.reason == TrapReason::watchdog, "hang: the watchdog trapped");
    expect(t.warp == 1, "hang: warp 1 trapped");
    expect(t.parity == 0, "hang: parity 0");
    expect(t.file == kThisFile && t.line == kHangLine, "hang: at the hung wait's line");
  }
  // The barrier the trap names is the second one initialised.
  if (f.warps.size() == 2 && f.warps[0].events.size() >= 2 && f.trap) {
    expect(f.warps[0].events[1].op == EventOp::init && f.warps[0].events[1].bar == f.trap->bar,
           "hang: the trap names bar[1]");
    const EventLogWarp& c = f.warps[1];
    expect(c.trap.has_value() && c.trap->tries == WSPIPE_CUDA_WATCHDOG_SPINS, "hang: warp 1's own trap, tries");
    expect(!c.events.empty() && c.events.back().op == EventOp::wait && c.events.back().answer == false &&
               c.events.back().bar == f.trap->bar,
           "hang: warp 1's last event is the wait that failed");
    expect(c.events.size() >= 2 && c.events[c.events.size() - 2].op == EventOp::wait &&
               c.events[c.events.size() - 2].answer == true,
           "hang: the wait before it passed");
  } else {
    expect(false, "hang: both warps logged");
  }
  std::ifstream in(path);
  std::printf("---- %s\n%s----\n", path.c_str(), std::string(std::istreambuf_iterator<char>(in), {}).c_str());
  std::printf("%s\n", failures == 0 ? "event log: all checks passed" : "event log: FAILED");
  return failures == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc > 1 ? argv[1] : ".");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
