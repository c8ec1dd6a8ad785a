// wspipe_silicon: the arch-neutral half of wspipe on a real GPU (Hopper,
// sm_90a, or later), through HopperBackend. docs/silicon.md records what it
// showed on which device.
//
//   wspipe_silicon ring          the ring example, the emulator's source, with its payload check:
//                                stages 1..8, items up to 100,000, one CTA and a full grid of rings
//   wspipe_silicon tile-reduce   the tile-reduce example (TMA, multicast in clusters of 2), every
//                                stage count and cluster shape, against the host reference
//   wspipe_silicon tma-store     TMA stores and bulk async-groups: load, rewrite with ordinary stores,
//                                store; swizzled and unswizzled maps, boxes past the tensor's edges,
//                                up to 3 groups in flight; every word of the output and its guards;
//                                then which box origins the TMA accepts (probes, each in a process)
//   wspipe_silicon clusters      clusters of 2x1 to 16x1: multicast along x, along y and to a subset,
//                                remote arrivals; what landed in every CTA, and its rank and position
//   wspipe_silicon variants [--event-logs DIR]
//                                each broken ring and tile-reduce variant (and the correct ring) in a
//                                process of its own, under a watchdog (bounded waits that trap) and a
//                                host timeout: hang, trap, wrong result or silently correct; built
//                                with WSPIPE_CUDA_EVENT_LOG=N, each variant's event log (the launch
//                                that failed, or the first) goes to DIR (default:
//                                $WSPIPE_SILICON_EVENT_LOGS, else event_logs/ in the results directory)
//   wspipe_silicon conformance [--seed S] [--count N]
//                                N mbarrier programs (mbar_program.hpp), every wait's result; programs
//                                that trap are isolated in processes of their own
//   wspipe_silicon conformance-mw [--seed S] [--count N] [--reps R] [--generator G]
//                                N multi-warp mbarrier programs (mw_program.hpp, generator G: 1
//                                or 2, default 1), each run R times with varied delays: the set of
//                                outcomes seen, with counts
//   wspipe_silicon explore TARGET [--seeds N] [--first-seed S] [--launches L] [--density D]
//                  [--max-ns M] [--no-shrink] | [--delays SPEC]
//                                a catalogue kernel (ring, tile-reduce or one of their variants) under
//                                seeded delays, built with WSPIPE_CUDA_DELAYS=1 (docs/delays.md): a
//                                baseline that lists the sites, N seeds of L launches, then ddmin over
//                                the first failing seed's sites, the minimal configuration confirmed,
//                                its logged run's event log saved for `wspipe explain`; --delays runs
//                                one configuration (the reproduction of a found one)
//   wspipe_silicon all           all six (not conformance-mw, not explore)
//
// Results go to stdout and, as files, to $WSPIPE_SILICON_OUT (default: the
// working directory): ring.txt, tile_reduce.txt, tma_store.txt,
// clusters.txt, variants.txt, mbarrier_conformance.txt,
// mbarrier_mw_conformance.txt. The conformance files are what
// tests/silicon_conformance_test.cpp and silicon_mw_conformance_test.cpp
// compare the emulator with (tests/data/).
//
// Exit: 0 all as expected; 1 a failure; 2 bad usage; 77 no sm_90+ GPU here
// (the message names what was found), so that CTest skips.
//
// All GPU work happens in child processes (fork before any CUDA call): a
// trapped kernel leaves its CUDA context unusable, and a hung one can only
// be killed, so each child is one unit that may be lost.

// The watchdog: a wait that fails this many try_waits traps (printing the
// barrier). Each try_wait suspends for a system-dependent time first, so
// this is seconds, far beyond any wait of a correct ring.
// `explore` is built with fewer (tools/silicon.sh explore: 200,000), so that
// each hang under many seeds costs about a second.
#ifndef WSPIPE_CUDA_WATCHDOG_SPINS
#define WSPIPE_CUDA_WATCHDOG_SPINS 1000000
#endif
// The variants' event log (docs/event-log.md): built with
// WSPIPE_CUDA_EVENT_LOG=N (N events per warp; `tools/silicon.sh variants`
// builds with it), each variant's child logs its launches and saves the log
// of the launch that failed, or of the first when none did. 0: no log.
#ifndef WSPIPE_CUDA_EVENT_LOG
#define WSPIPE_CUDA_EVENT_LOG 0
#endif
// `explore` needs the seeded delays (WSPIPE_CUDA_DELAYS=1, docs/delays.md);
// tools/silicon.sh explore builds with them and the log.
#ifndef WSPIPE_CUDA_DELAYS
#define WSPIPE_CUDA_DELAYS 0
#endif

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "backends/cuda/cuda_backend.hpp"
#include "backends/cuda/delays.hpp"
#include "backends/cuda/delays_device.hpp"
#include "backends/cuda/event_log.hpp"
#include "backends/cuda/event_log_device.hpp"
#include "backends/cuda/launch.hpp"
#include "backends/cuda/tensor_map.hpp"
#include "core/cluster.hpp"
#include "core/pipeline_state.hpp"
#include "core/smem.hpp"
#include "core/tcgen05.hpp"
#include "examples/ring.hpp"
#include "examples/stage_dispatch.hpp"
#include "examples/tile_reduce.hpp"
#include "tools/gpu/ddmin.hpp"
#include "tools/gpu/device_buffer.hpp"
#include "tools/gpu/mbar_program.hpp"
#include "tools/gpu/mw_program.hpp"

namespace {

using B = wspipe::cuda::HopperBackend;
using wspipe::SharedMemBarrier;
using wspipe::examples::RingBug;
using wspipe::examples::TileReduceBug;
using wspipe::gpu::CudaError;
using wspipe::gpu::DeviceBuffer;
using wspipe::gpu::DeviceEvent;
using wspipe::silicon::MbarOp;
using wspipe::silicon::MbarOpKind;
using wspipe::silicon::MwOp;
using wspipe::silicon::MwOpKind;

// ------------------------------------------------------------------ kernels

// The ring example exactly as the emulator runs it; then every thread of the
// CTA has returned, and thread 0 records how many items went through.
template <int Stages>
__global__ void __launch_bounds__(32 * wspipe::examples::kRingWarps)
    ring_kernel(std::uint32_t items, RingBug bug, std::uint32_t* done) {
  wspipe::examples::ring_kernel<B, Stages>(items, bug);
  __syncthreads();
  if (threadIdx.x == 0) done[blockIdx.x] = items;
}

// tile-reduce exactly as the emulator runs it.
template <int Stages>
__global__ void __launch_bounds__(32 * wspipe::examples::kTileReduceWarps)
    tile_reduce_kernel(const __grid_constant__ wspipe::examples::TileReduceArgs<B> args) {
  wspipe::examples::tile_reduce_kernel<B, Stages>(args);
}

struct ProgramStorage {
  SharedMemBarrier bar;
  alignas(128) std::uint8_t dst[wspipe::silicon::kMaxCopyBytes];
};

// Wait about `ns` nanoseconds: after a copy is issued, long enough for it to
// deliver its bytes (a few hundred bytes take about a microsecond), so that
// the next operation sees the barrier after the delivery, as the program's
// one-thread order says.
__device__ void settle(std::uint64_t ns) {
  std::uint64_t start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    __nanosleep(1000);
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (now - start < ns);
}

// One program per CTA, issued by thread 0 alone. `obs` gets one character
// per wait ('1' passed, '0' not), NUL-terminated, kMaxOps per program.
__global__ void mbar_program_kernel(const MbarOp* ops, const std::uint32_t* begin, const std::uint32_t* which,
                                    const __grid_constant__ CUtensorMap map, const std::uint8_t* src, char* obs) {
  if (threadIdx.x != 0) return;
  auto& s = B::shared_storage<ProgramStorage>();
  const std::uint32_t p = which[blockIdx.x];
  char* out = obs + static_cast<std::size_t>(blockIdx.x) * wspipe::silicon::kMaxOps;
  std::uint32_t n = 0;
  for (std::uint32_t i = begin[p]; i < begin[p + 1]; ++i) {
    const MbarOp op = ops[i];
    switch (op.kind) {
      case MbarOpKind::init: B::init(s.bar, op.arg); break;
      case MbarOpKind::inval: B::inval(s.bar); break;
      case MbarOpKind::arrive:
        (void)::cuda::ptx::mbarrier_arrive(::cuda::ptx::sem_release, ::cuda::ptx::scope_cta,
                                           ::cuda::ptx::space_shared, &s.bar.raw, op.arg);
        break;
      case MbarOpKind::arrive_expect_tx: B::arrive_expect_tx(s.bar, op.arg); break;
      case MbarOpKind::expect_tx: B::expect_tx(s.bar, op.arg); break;
      case MbarOpKind::complete_tx: B::complete_tx(s.bar, op.arg); break;
      case MbarOpKind::bulk_copy:
        ::cuda::ptx::cp_async_bulk(::cuda::ptx::space_cluster, ::cuda::ptx::space_global, s.dst, src, op.arg,
                                   &s.bar.raw);
        settle(20000);
        break;
      case MbarOpKind::tma_copy:
        B::tma_load<1, 1>(map, s.dst, s.bar, wspipe::TmaCoords{});
        settle(20000);
        break;
      case MbarOpKind::try_wait: out[n++] = B::try_wait(s.bar, op.arg) ? '1' : '0'; break;
      case MbarOpKind::test_wait:
        out[n++] = B::test_wait(s.bar, op.arg) ? '1' : '0';
        break;
    }
  }
  out[n] = '\0';
}

namespace mw = wspipe::silicon;

struct MwStorage {
  SharedMemBarrier bar[mw::kMwMaxBars];
  std::uint32_t slot[mw::kMwSlots];
  alignas(128) std::uint8_t dst[mw::kMwMaxBars][mw::kMwCopyBytes];
};

// One multi-warp program: its warps' operations are ops[begin[w], begin[w + 1]).
struct MwBounds {
  std::uint32_t begin[mw::kMwMaxWarps + 1];
  std::uint32_t count[mw::kMwMaxBars];
  std::uint32_t bars;
  std::uint32_t warps;
  std::uint32_t generator;  // mw_program's: from 2 on, some repetitions hold one warp back (mw_hold)
};

__device__ std::uint64_t mw_now() {
  std::uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__device__ std::uint64_t mw_mix(std::uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Generator 2 on: in every sixteenth repetition (from the third) one warp
// starts 100 us late, and in every sixteenth (from the eleventh) one warp
// stalls 100 us before one of its first eight operations, so that the
// others run a long stretch, their whole program where they do not wait for
// it, meanwhile. The warp and the operation come from the repetition.
// Returns how long to hold before operation `op` of `warp`, in ns.
__device__ std::uint32_t mw_hold(std::uint32_t rep, std::uint32_t warp, std::uint32_t op, std::uint32_t warps) {
  const std::uint64_t z = mw_mix(rep * 0x100000001b3ull + 77);
  if (warp != z % warps) return 0;
  if (rep % 16 == 3 && op == 0) return 100'000;
  if (rep % 16 == 11 && op == (z >> 8) % 8) return 100'000;
  return 0;
}

// The delay before operation `op` of warp `warp` in repetition `rep`: none
// in every eighth repetition (the tightest races) and in 40% of the others'
// operations, else 2^0..2^11 ns, now and then 10 us; the same (rep, warp,
// op) always gets the same.
__device__ std::uint32_t mw_delay(std::uint32_t rep, std::uint32_t warp, std::uint32_t op) {
  if (rep % 8 == 0) return 0;
  const std::uint64_t z = mw_mix(static_cast<std::uint64_t>(rep) << 32 | warp << 8 | op);
  const std::uint32_t r = static_cast<std::uint32_t>(z % 100);
  if (r < 40) return 0;
  if (r < 45) return 10000;
  return 1u << ((z >> 8) % 12);
}

// One repetition per CTA (blockIdx.x is its number): thread 0 initialises
// the barriers, lane 0 of each warp then issues that warp's operations with
// a delay before each. obs gets kMwMaxOps words per warp, in program order:
// each observing operation's value and each blocking wait's (1 passed,
// kMwNoPass gave up after `wait_ns`, which ends the warp); a spin_or_load
// whose tries all failed, its fallback's value after the 0.
__global__ void mw_program_kernel(const MwOp* ops, const __grid_constant__ MwBounds bounds,
                                  const __grid_constant__ CUtensorMap map, const std::uint8_t* src,
                                  std::uint32_t* obs, std::uint64_t wait_ns) {
  auto& s = B::shared_storage<MwStorage>();
  const std::uint32_t warp = threadIdx.x / 32;
  if (threadIdx.x == 0) {
    for (std::uint32_t b = 0; b < bounds.bars; ++b) B::init(s.bar[b], bounds.count[b]);
    for (std::uint32_t& v : s.slot) v = 0;
    for (auto& d : s.dst) {
      for (std::uint8_t& v : d) v = 0;
    }
    B::fence_proxy_async();  // the zeroes before the copies' bytes
  }
  __syncthreads();
  if (threadIdx.x % 32 != 0) return;
  std::uint32_t* out = obs + (static_cast<std::size_t>(blockIdx.x) * mw::kMwMaxWarps + warp) * mw::kMwMaxObs;
  std::uint32_t n = 0;
  volatile std::uint32_t* slot = s.slot;
  for (std::uint32_t i = bounds.begin[warp]; i < bounds.begin[warp + 1]; ++i) {
    const MwOp op = ops[i];
    const std::uint32_t at = i - bounds.begin[warp];
    if (bounds.generator >= 2) {
      if (const std::uint32_t hold = mw_hold(blockIdx.x, warp, at, bounds.warps)) {
        const std::uint64_t start = mw_now();
        while (mw_now() - start < hold) __nanosleep(10'000);
      }
    }
    if (const std::uint32_t ns = mw_delay(blockIdx.x, warp, at)) __nanosleep(ns);
    SharedMemBarrier& bar = s.bar[op.bar];
    switch (op.kind) {
      case MwOpKind::arrive:
        (void)::cuda::ptx::mbarrier_arrive(::cuda::ptx::sem_release, ::cuda::ptx::scope_cta,
                                           ::cuda::ptx::space_shared, &bar.raw, 1u);
        break;
      case MwOpKind::arrive_expect_tx: B::arrive_expect_tx(bar, op.arg); break;
      case MwOpKind::expect_tx: B::expect_tx(bar, op.arg); break;
      case MwOpKind::complete_tx: B::complete_tx(bar, op.arg); break;
      case MwOpKind::bulk_copy:
        ::cuda::ptx::cp_async_bulk(::cuda::ptx::space_cluster, ::cuda::ptx::space_global, s.dst[op.bar] + 16 * op.dst,
                                   src + op.value, op.arg, &bar.raw);
        break;
      case MwOpKind::tma_copy: {
        wspipe::TmaCoords at;
        at.c[0] = static_cast<std::int32_t>(op.value / 4);
        B::tma_load<1, 1>(map, s.dst[op.bar], bar, at);
        break;
      }
      case MwOpKind::try_wait: out[n++] = B::try_wait(bar, op.arg) ? 1 : 0; break;
      case MwOpKind::test_wait: out[n++] = B::test_wait(bar, op.arg) ? 1 : 0; break;
      case MwOpKind::spin: {
        std::uint32_t passed = 0;
        for (std::uint32_t t = 1; t <= op.tries && passed == 0; ++t) passed = B::try_wait(bar, op.arg) ? t : 0;
        out[n++] = passed;
        break;
      }
      case MwOpKind::spin_or_load: {
        std::uint32_t passed = 0;
        for (std::uint32_t t = 1; t <= op.tries && passed == 0; ++t) passed = B::try_wait(bar, op.arg) ? t : 0;
        out[n++] = passed;
        if (passed == 0) out[n++] = reinterpret_cast<volatile const std::uint32_t*>(s.dst[op.bar])[op.value];
        break;
      }
      case MwOpKind::wait: {
        const std::uint64_t start = mw_now();
        while (!B::try_wait(bar, op.arg)) {
          if (mw_now() - start > wait_ns) {
            out[n] = mw::kMwNoPass;
            return;
          }
        }
        out[n++] = 1;
        break;
      }
      case MwOpKind::store: slot[op.arg] = op.value; break;
      case MwOpKind::load: out[n++] = slot[op.arg]; break;
      case MwOpKind::load_copy:
        out[n++] = reinterpret_cast<volatile const std::uint32_t*>(s.dst[op.bar])[op.arg];
        break;
    }
  }
}

// -------------------------------------------------------------- processes

struct ChildResult {
  enum Kind { exited, signalled, timed_out } kind;
  int code;            // exit status or signal
  std::string output;  // its stdout and stderr
  double seconds;
};

// Runs `fn` in a forked child, its stdout and stderr captured; kills it
// after `timeout_s`. The child's return value is its exit status; an
// exception out of it (a failed CUDA call, WSPIPE_CUDA_CHECK) is printed
// and exits 3.
ChildResult in_child(const std::function<int()>& fn, double timeout_s) {
  int fds[2];
  if (pipe(fds) != 0) {
    std::perror("pipe");
    std::exit(1);
  }
  std::fflush(stdout);
  std::fflush(stderr);
  const auto start = std::chrono::steady_clock::now();
  const pid_t pid = fork();
  if (pid < 0) {
    std::perror("fork");
    std::exit(1);
  }
  if (pid == 0) {
    close(fds[0]);
    dup2(fds[1], 1);
    dup2(fds[1], 2);
    close(fds[1]);
    int rc = 3;
    try {
      rc = fn();
    } catch (const std::exception& e) {
      std::printf("%s\n", e.what());
    }
    std::fflush(stdout);
    std::fflush(stderr);
    _exit(rc);
  }
  close(fds[1]);
  ChildResult r{ChildResult::exited, 0, {}, 0};
  char buf[4096];
  bool killed = false;
  for (;;) {
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (!killed && elapsed > timeout_s) {
      kill(pid, SIGKILL);
      killed = true;
    }
    pollfd pfd{fds[0], POLLIN, 0};
    if (poll(&pfd, 1, 100) > 0) {
      const ssize_t got = read(fds[0], buf, sizeof buf);
      if (got <= 0) break;
      r.output.append(buf, static_cast<std::size_t>(got));
    }
  }
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (killed) {
    r.kind = ChildResult::timed_out;
  } else if (WIFSIGNALED(status)) {
    r.kind = ChildResult::signalled;
    r.code = WTERMSIG(status);
  } else {
    r.code = WEXITSTATUS(status);
  }
  return r;
}

// The device, probed in a child: "<name> (sm_XY), driver N" and exit 0, or
// the reason there is none and exit 77.
int probe_device() {
  int n = 0;
  if (cudaError_t e = cudaGetDeviceCount(&n); e != cudaSuccess || n == 0) {
    std::printf("no CUDA device here (%s)", e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
    return 77;
  }
  cudaDeviceProp prop{};
  WSPIPE_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  int driver = 0;
  WSPIPE_CUDA_CHECK(cudaDriverGetVersion(&driver));
  std::printf("%s (sm_%d%d, %d SMs), driver API %d", prop.name, prop.major, prop.minor, prop.multiProcessorCount,
              driver);
  return prop.major >= 9 ? 0 : 77;
}

std::string out_dir() {
  const char* d = std::getenv("WSPIPE_SILICON_OUT");
  return d != nullptr && *d != '\0' ? d : ".";
}

void write_file(const std::string& name, const std::string& text) {
  const std::string path = out_dir() + "/" + name;
  std::ofstream f(path);
  f << text;
  if (!f) {
    std::fprintf(stderr, "wspipe_silicon: cannot write %s\n", path.c_str());
    std::exit(1);
  }
  std::printf("wrote %s\n", path.c_str());
}

// ------------------------------------------------------------------- ring

template <int Stages>
cudaError_t launch_ring(std::uint32_t ctas, std::uint32_t items, RingBug bug, std::uint32_t* done) {
  const wspipe::cuda::ClusterLaunch cfg{dim3(ctas), dim3(32 * wspipe::examples::kRingWarps), dim3(1), nullptr};
  return wspipe::cuda::launch_cluster<wspipe::examples::RingStorage<Stages>>(ring_kernel<Stages>, cfg, items, bug,
                                                                             done);
}

// stages in [1, 8].
cudaError_t launch_ring(std::uint32_t stages, std::uint32_t ctas, std::uint32_t items, RingBug bug,
                        std::uint32_t* done) {
  return wspipe::examples::dispatch_stage_count<8>(
      stages, [&]<int Stages>() { return launch_ring<Stages>(ctas, items, bug, done); });
}

// Every stage count with a few item counts, each as one CTA and as a grid
// of 4 rings per SM running side by side; every CTA must report all items.
int ring_child() {
  int sms = 0;
  WSPIPE_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const std::uint32_t grid = 4u * static_cast<std::uint32_t>(sms);
  DeviceBuffer<std::uint32_t> done(grid);
  DeviceEvent t0, t1;
  int failures = 0;
  for (std::uint32_t stages = 1; stages <= 8; ++stages) {
    for (std::uint32_t items : {1u, 2u, 9u, 1000u, 100000u}) {
      for (std::uint32_t ctas : {1u, grid}) {
        done.fill_bytes(0);
        t0.record();
        WSPIPE_CUDA_CHECK(launch_ring(stages, ctas, items, RingBug::none, done.get()));
        t1.record();
        WSPIPE_CUDA_CHECK(cudaDeviceSynchronize());
        const float ms = t1.ms_since(t0);
        std::vector<std::uint32_t> host(ctas);
        done.download(host);
        std::uint32_t ok = 0;
        for (std::uint32_t c = 0; c < ctas; ++c) ok += host[c] == items;
        const bool pass = ok == ctas;
        failures += !pass;
        std::printf("ring stages=%u items=%u ctas=%u: %s (%u/%u CTAs complete, %.3f ms, %.1f ns/item)\n", stages,
                    items, ctas, pass ? "ok" : "FAIL", ok, ctas, ms, 1e6 * ms / items);
      }
    }
  }
  return failures == 0 ? 0 : 1;
}

// -------------------------------------------------------------- tile-reduce

// One launch of tile-reduce: `clusters` clusters of `cluster` CTAs over
// `rows` rows; "" when every sum equals the host reference, else what
// differs. A CUDA call that fails throws CudaError.
template <int Stages>
std::string tile_reduce_once(std::uint32_t rows, std::uint32_t cluster, std::uint32_t clusters, TileReduceBug bug,
                             float* ms = nullptr) {
  wspipe::examples::TileReduceProblem p(rows, cluster);
  const auto d_x = DeviceBuffer<std::uint32_t>::copy_of(p.x);
  DeviceBuffer<std::uint32_t> d_out(p.out.size());
  d_out.fill_bytes(0);
  wspipe::examples::TileReduceArgs<B> args;
  args.x_map = wspipe::cuda::make_tma_map(p.x_map(d_x.get()));
  args.out = d_out.get();
  args.rows = rows;
  args.bug = bug;
  const wspipe::cuda::ClusterLaunch cfg{dim3(clusters * cluster), dim3(32 * wspipe::examples::kTileReduceWarps),
                                        dim3(cluster), nullptr};
  DeviceEvent t0, t1;
  t0.record();
  WSPIPE_CUDA_CHECK(wspipe::cuda::launch_cluster<wspipe::examples::TileReduceStorage<Stages>>(
      tile_reduce_kernel<Stages>, cfg, args));
  t1.record();
  WSPIPE_CUDA_CHECK(cudaDeviceSynchronize());
  if (ms != nullptr) *ms = t1.ms_since(t0);
  d_out.download(p.out);
  return p.check();
}

// stages in [1, 4].
std::string tile_reduce_once(std::uint32_t stages, std::uint32_t rows, std::uint32_t cluster, std::uint32_t clusters,
                             TileReduceBug bug, float* ms = nullptr) {
  return wspipe::examples::dispatch_stage_count<4>(
      stages, [&]<int Stages>() { return tile_reduce_once<Stages>(rows, cluster, clusters, bug, ms); });
}

// Every stage count, clusters of 1 and 2, one cluster and a full grid.
int tile_reduce_child() {
  int sms = 0;
  WSPIPE_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  int failures = 0;
  for (std::uint32_t stages = 1; stages <= 4; ++stages) {
    for (std::uint32_t cluster : {1u, 2u}) {
      const std::uint32_t full = static_cast<std::uint32_t>(sms) / cluster;
      for (std::uint32_t clusters : {1u, full}) {
        for (std::uint32_t tiles : {1u, 7u, 4096u}) {
          float ms = 0;
          std::string diff;
          try {
            diff = tile_reduce_once(stages, tiles * wspipe::examples::kTileRows, cluster, clusters,
                                    TileReduceBug::none, &ms);
          } catch (const CudaError& e) {
            std::printf("tile-reduce stages=%u cluster=%u clusters=%u tiles=%u: %s\n", stages, cluster, clusters,
                        tiles, e.what());
            return 3;
          }
          failures += !diff.empty();
          std::printf("tile-reduce stages=%u cluster=%u clusters=%u tiles=%u: %s (%.3f ms)\n", stages, cluster,
                      clusters, tiles, diff.empty() ? "ok, bit for bit" : ("FAIL: " + diff).c_str(), ms);
        }
      }
    }
  }
  return failures == 0 ? 0 : 1;
}

// ---------------------------------------------------------------- tma-store

// TMA stores and bulk async-groups. Each CTA walks boxes of a u32 tensor X:
// one thread TMA-loads a box into shared memory; every thread rewrites its
// share of the box into a staging buffer with ordinary stores; one thread
// TMA-stores the staging buffer into Y as two half-boxes, one bulk
// async-group per box, and moves on while the group is still in flight.
// Each element of Y is store_value(X element, its row, its column), and a
// thread finds an element's shared-memory address through
// wspipe::swizzle_address, the formula the emulator's TMA uses: so a
// formula that disagreed with the hardware on a swizzled map puts a value
// computed for one position at another, which the host sees. The boxes
// overhang the tensor's right and bottom edges (some half-boxes lie wholly
// outside): the loads fill the overhang with zeros, the stores must not
// write it, and Y lies inside a larger buffer of guard words that the host
// checks too; only the words past a row's end that share its last 16 bytes
// are tallied rather than checked (the H100 writes them, tma_store_once).
// Box origins stay non-negative: a store at a negative coordinate traps on
// the H100 (the probes in run_tma_store).
constexpr std::uint32_t kStoreWarps = 4;
constexpr std::uint32_t kStoreThreads = 32 * kStoreWarps;
constexpr std::uint32_t kStoreMaxBoxElems = 32 * 32;

template <int Stages>
struct StoreStorage {
  alignas(1024) std::uint32_t in[kStoreMaxBoxElems];
  alignas(1024) std::uint32_t staging[Stages][kStoreMaxBoxElems];
  SharedMemBarrier full;
};

struct StoreArgs {
  CUtensorMap x_map;  // X, box box_cols x box_rows, swizzle in_swizzle
  CUtensorMap y_map;  // Y, box box_cols x box_rows / 2, swizzle out_swizzle
  wspipe::SmemSwizzle in_swizzle = wspipe::SmemSwizzle::none;
  wspipe::SmemSwizzle out_swizzle = wspipe::SmemSwizzle::none;
  std::uint32_t box_cols = 0, box_rows = 0;
  std::uint32_t boxes_x = 0, boxes_y = 0;  // the grid of boxes that covers the tensor from (0, 0)
};

// X, the words in X's row padding (past the tensor, never loaded), and what
// the CTA makes of an element: different for every element and position,
// so that a value stored at the wrong place cannot pass.
__host__ __device__ constexpr std::uint32_t store_input(std::uint32_t row, std::uint32_t col) {
  return (row * 40503u + col) * 2654435761u + 7u;
}
__host__ __device__ constexpr std::uint32_t store_x_padding(std::uint32_t row, std::uint32_t col) {
  return ~store_input(row, col);
}
__host__ __device__ constexpr std::uint32_t store_value(std::uint32_t x, std::uint32_t row, std::uint32_t col) {
  return (x * 0x9e3779b1u) ^ ((row << 16) + col);
}

template <int Stages>
__global__ void __launch_bounds__(kStoreThreads) tma_store_kernel(const __grid_constant__ StoreArgs args) {
  using wspipe::PipelineState;
  using wspipe::swizzle_address;
  auto& s = B::shared_storage<StoreStorage<Stages>>();
  const std::uint32_t warp = B::warp_idx();
  const std::uint32_t box = args.box_cols * args.box_rows;
  const std::uint32_t half = box / 2;
  if (warp == 0) {
    B::elect_one([&] { B::init(s.full, 1); });
    B::fence_init();
  }
  B::cluster_sync();

  // The bulk async-groups belong to the thread that commits them, so one
  // thread must issue, commit and wait: elect.sync elects the same lane for
  // the same member mask every time (PTX "elect.sync"), and warp 0 is
  // whole at each elect_one below.
  PipelineState<1> full = PipelineState<1>::consumer_start();
  PipelineState<Stages> staging;
  for (std::uint32_t b = blockIdx.x; b < args.boxes_x * args.boxes_y; b += gridDim.x, ++full, ++staging) {
    const std::uint32_t col0 = b % args.boxes_x * args.box_cols;
    const std::uint32_t row0 = b / args.boxes_x * args.box_rows;
    const auto at = [](std::uint32_t col, std::uint32_t row) {
      return wspipe::TmaCoords{{static_cast<std::int32_t>(col), static_cast<std::int32_t>(row)}};
    };
    if (warp == 0) {
      B::elect_one([&] {
        // This box's staging buffer was last read by the group committed
        // Stages boxes ago: once at most Stages - 1 groups still read, it
        // is free. The other threads write it only after their wait on
        // `full`, whose phase this thread's arrive (a release) completes.
        B::bulk_wait_group_read<Stages - 1>();
        B::arrive_expect_tx(s.full, box * 4);
        B::tma_load<1, 2>(args.x_map, s.in, s.full, at(col0, row0));
      });
    }
    B::wait(s.full, full.phase());

    const wspipe::SmemView<B, std::uint32_t> in(s.in, box);
    const wspipe::SmemView<B, std::uint32_t> out(s.staging[staging.index()], box);
    B::for_each_lane([&](std::uint32_t lane) {
      for (std::uint32_t e = warp * 32 + lane; e < box; e += kStoreThreads) {
        const std::uint32_t x = in.load(swizzle_address(args.in_swizzle, e * 4) / 4);
        out.store(swizzle_address(args.out_swizzle, e * 4) / 4,
                  store_value(x, row0 + e / args.box_cols, col0 + e % args.box_cols));
      }
    });
    // The stores read the staging buffer through the async proxy.
    B::fence_proxy_async();
    // Every thread has written its share and read its last of `in`, which
    // the next load overwrites.
    B::named_sync(1, kStoreThreads);
    if (warp == 0) {
      B::elect_one([&] {
        // Two stores, one group: a half-box starts a whole number of swizzle
        // periods into the buffer, so it has the buffer's swizzle pattern.
        B::tma_store<2>(args.y_map, out.data(), at(col0, row0));
        B::tma_store<2>(args.y_map, out.data() + half, at(col0, row0 + args.box_rows / 2));
        B::bulk_commit_group();
      });
    }
  }
  // The CTA's shared memory must outlive the stores' reads of it; waiting
  // for the writes as well makes the kernel's end the point where Y is done.
  if (warp == 0) B::elect_one([] { B::bulk_wait_group<0>(); });
}

struct StoreCase {
  const char* name;
  wspipe::SmemSwizzle in_swizzle, out_swizzle;
  std::uint32_t box_cols, box_rows;
  std::uint32_t cols, rows;
  std::uint32_t ctas;  // 0: one per SM
};

// Y's buffer: kStoreGuardRows rows of guard words, the tensor's rows (each
// padded with guard words to the pitch), kStoreGuardRows more.
constexpr std::uint32_t kStoreGuardRows = 8;
__host__ __device__ constexpr std::uint32_t store_guard(std::size_t i) {
  return static_cast<std::uint32_t>(i * 0x85ebca6bu) ^ 0xdeadbeefu;
}

// One launch of a case: "" when every word of Y's buffer is what it must
// be, else how many differ and the first. `tail` gets what happened to the
// words past a row's end that share its last 16 bytes (only where the row's
// bytes are not a multiple of 16): on the H100 a store writes them.
template <int Stages>
std::string tma_store_once(const StoreCase& c, int sms, std::string* tail) {
  const std::uint32_t x_pitch = (c.cols + 3) / 4 * 4;  // row strides are multiples of 16 bytes
  const std::uint32_t y_pitch = x_pitch + 8;
  const std::size_t x_words = std::size_t{c.rows} * x_pitch;
  const std::size_t y_words = std::size_t{c.rows + 2 * kStoreGuardRows} * y_pitch;
  std::vector<std::uint32_t> x(x_words), y(y_words);
  for (std::uint32_t r = 0; r < c.rows; ++r)
    for (std::uint32_t col = 0; col < x_pitch; ++col)
      x[std::size_t{r} * x_pitch + col] = col < c.cols ? store_input(r, col) : store_x_padding(r, col);
  for (std::size_t i = 0; i < y_words; ++i) y[i] = store_guard(i);

  const auto d_x = DeviceBuffer<std::uint32_t>::copy_of(x);
  auto d_y = DeviceBuffer<std::uint32_t>::copy_of(y);

  auto map = [&](const void* global, std::uint32_t pitch, std::uint32_t box_rows, wspipe::SmemSwizzle sw) {
    wspipe::TensorMap m;
    m.global = global;
    m.dtype = wspipe::ElemType::u32;
    m.rank = 2;
    m.dims[0] = c.cols;
    m.dims[1] = c.rows;
    m.strides[1] = std::uint64_t{pitch} * 4;
    m.box[0] = c.box_cols;
    m.box[1] = box_rows;
    m.swizzle = sw;
    return wspipe::cuda::make_tma_map(m);
  };
  StoreArgs args;
  args.x_map = map(d_x.get(), x_pitch, c.box_rows, c.in_swizzle);
  args.y_map = map(d_y.get() + std::size_t{kStoreGuardRows} * y_pitch, y_pitch, c.box_rows / 2, c.out_swizzle);
  args.in_swizzle = c.in_swizzle;
  args.out_swizzle = c.out_swizzle;
  args.box_cols = c.box_cols;
  args.box_rows = c.box_rows;
  args.boxes_x = (c.cols + c.box_cols - 1) / c.box_cols;
  args.boxes_y = (c.rows + c.box_rows - 1) / c.box_rows;
  const std::uint32_t ctas = c.ctas != 0 ? c.ctas : static_cast<std::uint32_t>(sms);
  const wspipe::cuda::ClusterLaunch cfg{dim3(ctas), dim3(kStoreThreads), dim3(1), nullptr};
  WSPIPE_CUDA_CHECK(wspipe::cuda::launch_cluster<StoreStorage<Stages>>(tma_store_kernel<Stages>, cfg, args));
  WSPIPE_CUDA_CHECK(cudaDeviceSynchronize());
  d_y.download(y);

  // Words past a row's end in its last 16 bytes ("tail") are tallied: left
  // alone, or written with the value the CTA staged there, computed from a
  // zero-filled load (the TMA's out-of-bounds fill) or from X's padding.
  std::size_t wrong = 0, tail_words = 0, tail_zero = 0, tail_padding = 0, tail_untouched = 0;
  std::string first;
  for (std::size_t i = 0; i < y_words; ++i) {
    const std::int64_t r = static_cast<std::int64_t>(i / y_pitch) - kStoreGuardRows;
    const auto col = static_cast<std::uint32_t>(i % y_pitch);
    const bool in_rows = r >= 0 && r < c.rows;
    const auto row = static_cast<std::uint32_t>(r);
    if (in_rows && col >= c.cols && col < x_pitch) {
      ++tail_words;
      const std::uint32_t padding = x[std::size_t{row} * x_pitch + col];
      if (y[i] == store_guard(i)) {
        ++tail_untouched;
      } else if (y[i] == store_value(0, row, col)) {
        ++tail_zero;
      } else if (y[i] == store_value(padding, row, col)) {
        ++tail_padding;
      } else if (wrong++ == 0) {
        first = "row " + std::to_string(r) + " column " + std::to_string(col) + " (past the row's end): " +
                std::to_string(y[i]);
      }
      continue;
    }
    const bool inside = in_rows && col < c.cols;
    const std::uint32_t want =
        inside ? store_value(x[std::size_t{row} * x_pitch + col], row, col) : store_guard(i);
    if (y[i] != want && wrong++ == 0) {
      first = "row " + std::to_string(r) + " column " + std::to_string(col) + (inside ? "" : " (a guard word)") +
              ": " + std::to_string(y[i]) + " instead of " + std::to_string(want);
    }
  }
  if (tail_words != 0) {
    *tail = std::to_string(tail_words) + " words past the rows' ends in their last 16 bytes: " +
            std::to_string(tail_zero) + " written with the staged value of a zero-filled load, " +
            std::to_string(tail_padding) + " with that of X's padding, " + std::to_string(tail_untouched) +
            " left alone";
  }
  if (wrong == 0) return "";
  return std::to_string(wrong) + " of " + std::to_string(y_words) + " words wrong, the first at " + first;
}

// stages in [1, 3].
std::string tma_store_once(std::uint32_t stages, const StoreCase& c, int sms, std::string* tail) {
  return wspipe::examples::dispatch_stage_count<3>(
      stages, [&]<int Stages>() { return tma_store_once<Stages>(c, sms, tail); });
}

// One case with 1, 2 and 3 staging buffers (so up to 3 groups in flight).
int tma_store_child(const StoreCase& c) {
  int sms = 0;
  WSPIPE_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  int failures = 0;
  for (std::uint32_t stages = 1; stages <= 3; ++stages) {
    std::string diff, tail;
    try {
      diff = tma_store_once(stages, c, sms, &tail);
    } catch (const std::exception& ex) {  // a CudaError, or make_tma_map's refusal
      std::printf("tma-store %s, staging buffers %u: %s\n", c.name, stages, ex.what());
      return 3;
    }
    failures += !diff.empty();
    std::printf("tma-store %s, tensor %ux%u, staging buffers %u: %s%s%s\n", c.name, c.cols, c.rows, stages,
                diff.empty() ? "ok, Y and its guards bit for bit" : ("FAIL: " + diff).c_str(),
                tail.empty() ? "" : "; ", tail.c_str());
  }
  return failures == 0 ? 0 : 1;
}

// What the TMA accepts: one copy of a 32x32 u32 box by one thread.
struct TmaProbeStorage {
  alignas(1024) std::uint32_t box[32 * 32];
  SharedMemBarrier bar;
};

__global__ void __launch_bounds__(32)
    tma_probe_kernel(const __grid_constant__ CUtensorMap map, bool store, wspipe::TmaCoords at) {
  auto& s = B::shared_storage<TmaProbeStorage>();
  B::elect_one([&] { B::init(s.bar, 1); });
  B::fence_init();
  B::cluster_sync();
  if (store) {
    const wspipe::SmemView<B, std::uint32_t> box(s.box, 32 * 32);
    B::for_each_lane([&](std::uint32_t lane) {
      for (std::uint32_t i = lane; i < box.size(); i += 32) box.store(i, i);
    });
    B::fence_proxy_async();
    B::syncwarp();
    B::elect_one([&] {
      B::tma_store<2>(map, s.box, at);
      B::bulk_commit_group();
      B::bulk_wait_group<0>();
    });
  } else {
    B::elect_one([&] {
      B::arrive_expect_tx(s.bar, sizeof s.box);
      B::tma_load<1, 2>(map, s.box, s.bar, at);
    });
    B::wait(s.bar, 0);
  }
}

struct TmaProbe {
  const char* name;
  bool store;
  std::int32_t col, row;  // the box's origin in a 200 x 100 u32 tensor
  const char* h100;       // what the H100 did (docs/silicon.md): "ok" or the CUDA error
};

// In the child: "ok" or the CUDA error, printed; exit 0 either way.
int tma_probe_child(const TmaProbe& p) {
  const DeviceBuffer<std::uint32_t> d(100 * 208);
  wspipe::TensorMap m;
  m.global = d.get();
  m.dtype = wspipe::ElemType::u32;
  m.rank = 2;
  m.dims[0] = 200;
  m.dims[1] = 100;
  m.strides[1] = 208 * 4;
  m.box[0] = 32;
  m.box[1] = 32;
  const CUtensorMap map = wspipe::cuda::make_tma_map(m);
  const wspipe::cuda::ClusterLaunch cfg{dim3(1), dim3(32), dim3(1), nullptr};
  cudaError_t e = wspipe::cuda::launch_cluster<TmaProbeStorage>(tma_probe_kernel, cfg, map, p.store,
                                                                wspipe::TmaCoords{{p.col, p.row}});
  if (e == cudaSuccess) e = cudaDeviceSynchronize();
  std::printf("%s", e == cudaSuccess ? "ok" : cudaGetErrorString(e));
  return 0;
}

// Every case, each in a process of its own (a TMA fault poisons the CUDA
// context, and the other cases still say what works), then the probes.
int run_tma_store(const std::string& device) {
  using wspipe::SmemSwizzle;
  // Boxes of 32 rows; a swizzled box's rows are as wide as the swizzle.
  // Few CTAs for the small tensors, so that each walks several boxes.
  static const StoreCase cases[] = {
      {"none -> none, box 24x32", SmemSwizzle::none, SmemSwizzle::none, 24, 32, 200, 100, 4},
      {"128B -> 128B, box 32x32", SmemSwizzle::b128, SmemSwizzle::b128, 32, 32, 200, 100, 4},
      {"none -> 128B, box 32x32", SmemSwizzle::none, SmemSwizzle::b128, 32, 32, 200, 100, 4},
      {"128B -> none, box 32x32", SmemSwizzle::b128, SmemSwizzle::none, 32, 32, 200, 100, 4},
      {"64B -> 64B, box 16x32", SmemSwizzle::b64, SmemSwizzle::b64, 16, 32, 200, 100, 4},
      {"32B -> 32B, box 8x32", SmemSwizzle::b32, SmemSwizzle::b32, 8, 32, 200, 61, 4},
      {"32B -> 32B, box 8x32, rows of 788 bytes", SmemSwizzle::b32, SmemSwizzle::b32, 8, 32, 197, 61, 4},
      {"none -> none, box 24x32, rows of 792 bytes", SmemSwizzle::none, SmemSwizzle::none, 24, 32, 198, 100, 4},
      {"128B -> 128B, box 32x32, one CTA per SM", SmemSwizzle::b128, SmemSwizzle::b128, 32, 32, 1000, 1000, 0},
  };
  // Box origins at the tensor's edges. The inner coordinate's bytes must be
  // a multiple of 16 for both; a load may start at a negative coordinate
  // (that part reads as zeros), a store may not.
  static const TmaProbe probes[] = {
      {"load at (-8,0)", false, -8, 0, "ok"},
      {"load at (0,-16)", false, 0, -16, "ok"},
      {"load at (1,0), inner coordinate 4 bytes", false, 1, 0, "an illegal instruction was encountered"},
      {"store at (192,80), past the right and bottom edges", true, 192, 80, "ok"},
      {"store at (200,100), wholly past them", true, 200, 100, "ok"},
      {"store at (-8,0)", true, -8, 0, "an illegal instruction was encountered"},
      {"store at (0,-16)", true, 0, -16, "an illegal instruction was encountered"},
      {"store at (0,-32), wholly outside", true, 0, -32, "an illegal instruction was encountered"},
      {"store at (1,0), inner coordinate 4 bytes", true, 1, 0, "an illegal instruction was encountered"},
  };
  std::string text = "# wspipe_silicon tma-store on " + device + "\n";
  int rc = 0;
  for (const StoreCase& c : cases) {
    const ChildResult r = in_child([&] { return tma_store_child(c); }, 120);
    std::string out = r.output;
    if (r.kind == ChildResult::timed_out) out += "tma-store " + std::string(c.name) + ": timed out\n";
    if (r.kind == ChildResult::signalled) {
      out += "tma-store " + std::string(c.name) + ": killed by signal " + std::to_string(r.code) + "\n";
    }
    std::fputs(out.c_str(), stdout);
    text += out;
    if (r.kind != ChildResult::exited || r.code != 0) rc = 1;
  }
  for (const TmaProbe& p : probes) {
    const ChildResult r = in_child([&] { return tma_probe_child(p); }, 60);
    const std::string got = r.kind == ChildResult::exited && r.code == 0 ? r.output : "error: " + r.output;
    const bool as_recorded = got == p.h100;
    rc |= as_recorded ? 0 : 1;
    const std::string line = std::string("tma probe ") + p.name + ": " + got +
                             (as_recorded ? " (as recorded)" : std::string(" (FAIL: recorded: ") + p.h100 + ")") + "\n";
    std::fputs(line.c_str(), stdout);
    text += line;
  }
  write_file("tma_store.txt", text);
  if (rc != 0) std::printf("tma-store: FAILED (see above)\n");
  return rc;
}

// ----------------------------------------------------------------- clusters

// Clusters up to 16 CTAs, 2-D multicast. Each CTA of a cluster multicasts
// three tiles: one to its row (ClusterShape::mask_along_x), one to its
// column (mask_along_y) and one to a scattered subset of the cluster
// (cluster_subset_mask). A tile lands in each receiver in the slot of its
// phase and sender, every receiver's barrier of that phase expecting the
// bytes of all the tiles its position implies. Each receiver writes back
// all its slots, those that nothing should have reached (still holding a
// sentinel) included, then arrives remotely on each sender's `released`
// barrier; a sender exits only when every receiver of its tiles has. The
// CTA also writes back its %cluster_ctarank and %cluster_ctaid, and the
// host checks rank = x + dim.x * y, the order core/cluster.hpp states.
constexpr std::uint32_t kMcBoxCols = 16;  // a tile: 16 x 4 u32, 256 bytes
constexpr std::uint32_t kMcBoxRows = 4;
constexpr std::uint32_t kMcTileElems = kMcBoxCols * kMcBoxRows;
constexpr std::uint32_t kMcTileBytes = kMcTileElems * 4;
constexpr std::uint32_t kMcPhases = 3;  // along x, along y, over a subset
constexpr std::uint32_t kMcMaxCtas = wspipe::ClusterShape::kMax;
constexpr std::uint32_t kMcSlotWords = kMcPhases * kMcMaxCtas * kMcTileElems;
constexpr std::uint32_t kMcSentinel = 0x5e5e5e5eu;

struct McStorage {
  alignas(128) std::uint32_t slot[kMcPhases][kMcMaxCtas][kMcTileElems];  // [phase][sender's rank]
  SharedMemBarrier full[kMcPhases];
  SharedMemBarrier released;
};

// What the CTA read from its special registers.
struct McIdent {
  std::uint32_t ctarank, nctarank;
  std::uint32_t ctaid[3], nctaid[3];
  std::uint32_t clusterid[2];
};

struct McArgs {
  CUtensorMap map;  // the tiles: 16 x (clusters * kMcPhases * kMcMaxCtas * 4) u32, box 16 x 4
  wspipe::ClusterShape shape;
  std::uint32_t* slots_out = nullptr;  // kMcSlotWords per CTA, CTA blockIdx.x + gridDim.x * blockIdx.y
  McIdent* ident_out = nullptr;        // one per CTA, likewise
};

// The subset that CTA `rank` multicasts to in the third phase: ranks
// rank + 1, + 3 and + 4 (mod the cluster size). From 5 CTAs on that is
// three others, the sender left out; with 4 CTAs three of the four, which
// is neither a row nor a column of 4x1 or 2x2; with 2 the whole cluster.
__host__ __device__ constexpr std::uint16_t cluster_subset_mask(wspipe::ClusterShape shape, std::uint32_t rank) {
  const std::uint32_t n = shape.size();
  return static_cast<std::uint16_t>((1u << (rank + 1) % n) | (1u << (rank + 3) % n) | (1u << (rank + 4) % n));
}
// Whether `sender`'s tile of `phase` lands in `receiver`.
__host__ __device__ constexpr bool cluster_delivers(wspipe::ClusterShape shape, std::uint32_t phase,
                                                    std::uint32_t sender, std::uint32_t receiver) {
  const std::uint16_t mask = phase == 0   ? shape.mask_along_x(sender)
                             : phase == 1 ? shape.mask_along_y(sender)
                                          : cluster_subset_mask(shape, sender);
  return (mask >> receiver & 1u) != 0;
}
// The tile `sender` of cluster `cluster` multicasts in `phase`: its row in the map.
__host__ __device__ constexpr std::uint32_t cluster_tile_row(std::uint32_t cluster, std::uint32_t phase,
                                                             std::uint32_t sender) {
  return ((cluster * kMcPhases + phase) * kMcMaxCtas + sender) * kMcBoxRows;
}
__host__ __device__ constexpr std::uint32_t cluster_tile_word(std::uint32_t row, std::uint32_t col) {
  return (row * 31u + col) * 0x9e3779b1u + 1u;
}

__global__ void __launch_bounds__(32) cluster_multicast_kernel(const __grid_constant__ McArgs args) {
  auto& s = B::shared_storage<McStorage>();
  const wspipe::ClusterShape shape = args.shape;
  const std::uint32_t rank = B::cta_rank();
  const std::uint32_t n = shape.size();
  B::check(B::cluster_size() == n, "the launch's cluster shape is the kernel argument's");

  const std::uint16_t masks[kMcPhases] = {shape.mask_along_x(rank), shape.mask_along_y(rank),
                                          cluster_subset_mask(shape, rank)};
  std::uint32_t incoming[kMcPhases] = {};  // tiles that land here, per phase
  std::uint32_t receivers = 0;             // arrivals this CTA's `released` expects
  for (std::uint32_t p = 0; p < kMcPhases; ++p) {
    receivers += static_cast<std::uint32_t>(__popc(masks[p]));
    for (std::uint32_t from = 0; from < n; ++from) incoming[p] += cluster_delivers(shape, p, from, rank);
  }

  // Every slot holds the sentinel until a tile lands in it. The tiles come
  // through the async proxy, after these ordinary stores.
  const wspipe::SmemView<B, std::uint32_t> slots(&s.slot[0][0][0], kMcSlotWords);
  B::for_each_lane([&](std::uint32_t lane) {
    // A local copy: store() takes a reference, which cannot bind to a
    // namespace-scope (host) constant in device code.
    const std::uint32_t sentinel = kMcSentinel;
    for (std::uint32_t i = lane; i < kMcSlotWords; i += 32) slots.store(i, sentinel);
  });
  B::fence_proxy_async();
  B::elect_one([&] {
    for (SharedMemBarrier& full : s.full) B::init(full, 1);
    B::init(s.released, receivers);
  });
  B::fence_init();
  // Every CTA's barriers and sentinels are in place before any tile flies.
  B::cluster_sync();

  B::elect_one([&] {
    for (std::uint32_t p = 0; p < kMcPhases; ++p) {
      // A peer's tile may land before this arms the barrier: the tx-count
      // goes negative and the phase waits for this arrival all the same.
      B::arrive_expect_tx(s.full[p], incoming[p] * kMcTileBytes);
      const wspipe::TmaCoords at{{0, static_cast<std::int32_t>(cluster_tile_row(B::cluster_idx(), p, rank))}};
      B::tma_load_multicast<1, 2>(args.map, s.slot[p][rank], s.full[p], at, masks[p]);
    }
  });
  for (SharedMemBarrier& full : s.full) B::wait(full, 0);

  const std::size_t cta = blockIdx.x + std::size_t{gridDim.x} * blockIdx.y;
  B::for_each_lane([&](std::uint32_t lane) {
    for (std::uint32_t i = lane; i < kMcSlotWords; i += 32) args.slots_out[cta * kMcSlotWords + i] = slots.load(i);
  });
  B::elect_one([&] {
    McIdent id;
    id.ctarank = ::cuda::ptx::get_sreg_cluster_ctarank();
    id.nctarank = ::cuda::ptx::get_sreg_cluster_nctarank();
    id.ctaid[0] = ::cuda::ptx::get_sreg_cluster_ctaid_x();
    id.ctaid[1] = ::cuda::ptx::get_sreg_cluster_ctaid_y();
    id.ctaid[2] = ::cuda::ptx::get_sreg_cluster_ctaid_z();
    id.nctaid[0] = ::cuda::ptx::get_sreg_cluster_nctaid_x();
    id.nctaid[1] = ::cuda::ptx::get_sreg_cluster_nctaid_y();
    id.nctaid[2] = ::cuda::ptx::get_sreg_cluster_nctaid_z();
    id.clusterid[0] = ::cuda::ptx::get_sreg_clusterid_x();
    id.clusterid[1] = ::cuda::ptx::get_sreg_clusterid_y();
    args.ident_out[cta] = id;
  });
  // Done with every tile that landed here (the reads above are ordered
  // before the arrive by syncwarp): tell each sender.
  B::syncwarp();
  B::elect_one([&] {
    for (std::uint32_t p = 0; p < kMcPhases; ++p) {
      for (std::uint32_t from = 0; from < n; ++from) {
        if (cluster_delivers(shape, p, from, rank)) B::arrive_remote(s.released, from);
      }
    }
  });
  // No receiver arrives on this CTA once it has exited.
  B::wait(s.released, 0);
}

// Launches `clusters` clusters of `shape` (a grid of shape.x * clusters by
// shape.y CTAs) and checks every CTA's slots and registers: "" when all are
// as the shape implies. A CUDA call that fails throws CudaError.
std::string clusters_once(const wspipe::ClusterShape shape, std::uint32_t clusters) {
  const std::uint32_t ctas = shape.size() * clusters;
  const std::uint32_t tile_rows = clusters * kMcPhases * kMcMaxCtas * kMcBoxRows;
  std::vector<std::uint32_t> tiles(std::size_t{tile_rows} * kMcBoxCols);
  for (std::uint32_t r = 0; r < tile_rows; ++r)
    for (std::uint32_t c = 0; c < kMcBoxCols; ++c) tiles[std::size_t{r} * kMcBoxCols + c] = cluster_tile_word(r, c);
  std::vector<std::uint32_t> slots(std::size_t{ctas} * kMcSlotWords);
  std::vector<McIdent> ident(ctas);

  const auto d_tiles = DeviceBuffer<std::uint32_t>::copy_of(tiles);
  DeviceBuffer<std::uint32_t> d_slots(slots.size());
  d_slots.fill_bytes(0);
  DeviceBuffer<McIdent> d_ident(ident.size());
  d_ident.fill_bytes(0xff);

  wspipe::TensorMap m;
  m.global = d_tiles.get();
  m.dtype = wspipe::ElemType::u32;
  m.rank = 2;
  m.dims[0] = kMcBoxCols;
  m.dims[1] = tile_rows;
  m.strides[1] = kMcBoxCols * 4;
  m.box[0] = kMcBoxCols;
  m.box[1] = kMcBoxRows;
  McArgs args;
  args.map = wspipe::cuda::make_tma_map(m);
  args.shape = shape;
  args.slots_out = d_slots.get();
  args.ident_out = d_ident.get();
  const wspipe::cuda::ClusterLaunch cfg{dim3(shape.x * clusters, shape.y), dim3(32), dim3(shape.x, shape.y, 1),
                                        nullptr};
  WSPIPE_CUDA_CHECK(wspipe::cuda::launch_cluster<McStorage>(cluster_multicast_kernel, cfg, args));
  WSPIPE_CUDA_CHECK(cudaDeviceSynchronize());
  d_slots.download(slots);
  d_ident.download(ident);

  // CTA (bx, by) of the grid sits at (bx % dim.x, by % dim.y) of cluster
  // bx / dim.x, and its rank is ClusterShape::rank of that position.
  std::string first;
  std::size_t wrong_ident = 0, wrong_words = 0;
  for (std::uint32_t by = 0; by < shape.y; ++by) {
    for (std::uint32_t bx = 0; bx < shape.x * clusters; ++bx) {
      const std::size_t cta = bx + std::size_t{shape.x} * clusters * by;
      const std::uint32_t x = bx % shape.x, y = by % shape.y, cluster = bx / shape.x;
      const std::uint32_t rank = shape.rank(x, y);
      const McIdent& id = ident[cta];
      const bool ident_ok = id.ctarank == rank && id.nctarank == shape.size() && id.ctaid[0] == x &&
                            id.ctaid[1] == y && id.ctaid[2] == 0 && id.nctaid[0] == shape.x &&
                            id.nctaid[1] == shape.y && id.nctaid[2] == 1 && id.clusterid[0] == cluster &&
                            id.clusterid[1] == 0;
      if (!ident_ok && wrong_ident++ == 0 && first.empty()) {
        first = "CTA (" + std::to_string(bx) + "," + std::to_string(by) + ") read %cluster_ctarank " +
                std::to_string(id.ctarank) + ", %cluster_ctaid (" + std::to_string(id.ctaid[0]) + "," +
                std::to_string(id.ctaid[1]) + "," + std::to_string(id.ctaid[2]) + "), %clusterid.x " +
                std::to_string(id.clusterid[0]) + "; expected rank " + std::to_string(rank) + " at (" +
                std::to_string(x) + "," + std::to_string(y) + ",0) of cluster " + std::to_string(cluster);
      }
      for (std::uint32_t p = 0; p < kMcPhases; ++p) {
        for (std::uint32_t from = 0; from < kMcMaxCtas; ++from) {
          const bool lands = from < shape.size() && cluster_delivers(shape, p, from, rank);
          for (std::uint32_t i = 0; i < kMcTileElems; ++i) {
            const std::uint32_t want =
                lands ? cluster_tile_word(cluster_tile_row(cluster, p, from) + i / kMcBoxCols, i % kMcBoxCols)
                      : kMcSentinel;
            const std::uint32_t got = slots[cta * kMcSlotWords + (p * kMcMaxCtas + from) * kMcTileElems + i];
            if (got != want && wrong_words++ == 0 && first.empty()) {
              static const char* const phase_names[] = {"along x", "along y", "to the subset"};
              first = "CTA rank " + std::to_string(rank) + " of cluster " + std::to_string(cluster) + ", tile " +
                      phase_names[p] + " from rank " + std::to_string(from) + ", word " + std::to_string(i) + ": " +
                      std::to_string(got) + " instead of " + (lands ? "the tile's" : "the sentinel (nothing lands there)");
            }
          }
        }
      }
    }
  }
  if (wrong_ident == 0 && wrong_words == 0) return "";
  return std::to_string(wrong_ident) + " CTAs with unexpected registers, " + std::to_string(wrong_words) +
         " words wrong; first: " + first;
}

// How many clusters of `shape` the device can hold at once
// (cudaOccupancyMaxActiveClusters, after the opt-in that shapes of more
// than 8 CTAs need), or the error that says it cannot tell.
cudaError_t max_active_clusters(const wspipe::ClusterShape shape, int* count) {
  if (!shape.portable()) {
    if (cudaError_t e = cudaFuncSetAttribute(cluster_multicast_kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
        e != cudaSuccess) {
      return e;
    }
  }
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = shape.x;
  attr[0].val.clusterDim.y = shape.y;
  attr[0].val.clusterDim.z = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(shape.x, shape.y);
  config.blockDim = dim3(32);
  config.dynamicSmemBytes = sizeof(McStorage);
  config.attrs = attr;
  config.numAttrs = 1;
  return cudaOccupancyMaxActiveClusters(count, cluster_multicast_kernel, &config);
}

// Every shape: the portable ones (up to 8 CTAs) and, where the device can
// hold them, the non-portable 4x4 and 16x1. Each as one cluster and as
// twice as many clusters as fit at once.
int clusters_child() {
  using wspipe::ClusterShape;
  const ClusterShape shapes[] = {{2, 1, 1}, {4, 1, 1}, {2, 2, 1}, {4, 2, 1}, {8, 1, 1}, {4, 4, 1}, {16, 1, 1}};
  int failures = 0;
  for (const ClusterShape& shape : shapes) {
    const std::string name = std::to_string(shape.x) + "x" + std::to_string(shape.y);
    std::string masks;
    for (std::uint32_t r = 0; r < shape.size(); ++r) {
      char m[8];
      std::snprintf(m, sizeof m, "%s%04x", r == 0 ? "" : " ", cluster_subset_mask(shape, r));
      masks += m;
    }
    int fit = 0;
    if (const cudaError_t e = max_active_clusters(shape, &fit); e != cudaSuccess || fit == 0) {
      std::printf("clusters %s (%s): skipped, the device cannot run it (cudaOccupancyMaxActiveClusters: %s)\n",
                  name.c_str(), shape.portable() ? "portable" : "non-portable",
                  e != cudaSuccess ? cudaGetErrorString(e) : "0 clusters");
      cudaGetLastError();
      if (shape.portable()) ++failures;  // every sm_90 device runs portable shapes
      continue;
    }
    std::printf("clusters %s (%s): %d clusters fit at once; subset masks by rank: %s\n", name.c_str(),
                shape.portable() ? "portable" : "non-portable", fit, masks.c_str());
    for (const std::uint32_t clusters : {1u, 2u * static_cast<std::uint32_t>(fit)}) {
      std::string diff;
      try {
        diff = clusters_once(shape, clusters);
      } catch (const std::exception& ex) {  // a CudaError, or make_tma_map's refusal
        std::printf("clusters %s, %u clusters: %s\n", name.c_str(), clusters, ex.what());
        return 3;
      }
      failures += !diff.empty();
      std::printf("clusters %s, %u clusters: %s\n", name.c_str(), clusters,
                  diff.empty() ? "ok: every CTA got exactly the tiles of its masks, rank = x + dim.x * y"
                               : ("FAIL: " + diff).c_str());
    }
  }
  return failures == 0 ? 0 : 1;
}

// ----------------------------------------------------------------- variants

struct Variant {
  const char* name;
  const char* emulator;  // the emulator's verdict: tools/wspipe.sh explore <name>
  // In the child, given the name: exit 0 correct, 4 launch failed, 5 wrong result.
  std::function<int(const std::string&)> run;
};

// The sources whose names the catalogue kernels' events and sites carry.
std::vector<std::string> catalogue_sources() {
  return {"examples/ring.hpp",       "examples/tile_reduce.hpp", "core/pipeline.hpp",
          "core/input_pipeline.hpp", "core/tma.hpp",             "core/cluster.hpp",
          "core/pipeline_state.hpp", "core/warp_context.hpp",    "tools/gpu/silicon.cu"};
}

// Where the variants' event logs go: `--event-logs DIR`, else
// $WSPIPE_SILICON_EVENT_LOGS, else event_logs/ in the results directory.
std::string g_event_log_dir;

// A variant child's event log, when the build has one: sized for the
// launch's warps, attached to this file's kernels, emptied before each
// launch; after each, `launched` saves the file of the first launch that
// failed, or of launch 0 while none has (one file per variant:
// <variant, '/' as '.'>.<launch>.log). The file's `config` names the
// catalogue scenario and its options (`scenario=ring/no-release stages=4
// ...`), so that the emulator can build the same kernel. Without the log:
// nothing.
class VariantLog {
 public:
  VariantLog(const std::string& variant, wspipe::cuda::EventLogLaunch info) : info_(std::move(info)) {
    if constexpr (WSPIPE_CUDA_EVENT_LOG > 0) {
      const std::uint32_t warps = info_.grid.x * info_.grid.y * info_.grid.z * (info_.block.x / 32);
      log_.emplace(warps, WSPIPE_CUDA_EVENT_LOG);
      wspipe::cuda::attach_event_log(*log_);
      std::string stem = variant;
      for (char& c : stem) c = c == '/' ? '.' : c;
      stem_ = g_event_log_dir + "/" + stem;
      info_.config = "scenario=" + variant + " " + info_.config;
      info_.sources = catalogue_sources();
    }
  }

  void before_launch() {
    if (log_) log_->reset();
  }

  // After launch `n` (synchronised, trapped or not); `failed`: it hung,
  // trapped or gave a wrong result.
  void launched(std::uint32_t n, bool failed) {
    if (!log_ || saved_failed_ || (n != 0 && !failed)) return;
    info_.launch = n;
    const std::string path = stem_ + "." + std::to_string(n) + ".log";
    try {
      log_->save(path, info_);
      const wspipe::cuda::EventLogFile f = log_->read(info_);
      std::string trap = "no trap";
      if (f.trap) {
        const wspipe::cuda::Trap& t = *f.trap;
        char buf[160];
        std::snprintf(buf, sizeof buf, "trap %s: warp %u, barrier 0x%x, parity %u, at %s:%u",
                      t.reason == wspipe::cuda::TrapReason::watchdog ? "watchdog" : "check", t.warp, t.bar,
                      t.parity, f.source_name(t.file).c_str(), t.line);
        trap = buf;
      }
      std::printf("event log: %s (launch %u, %s)\n", path.c_str(), n, trap.c_str());
    } catch (const std::exception& e) {
      std::printf("event log: launch %u not saved: %s\n", n, e.what());
      saved_failed_ = failed;
      return;
    }
    if (!saved_.empty() && saved_ != path) std::filesystem::remove(saved_);
    saved_ = path;
    saved_failed_ = failed;
  }

 private:
  wspipe::cuda::EventLogLaunch info_;
  std::optional<wspipe::cuda::EventLog> log_;
  std::string stem_;
  std::string saved_;  // the file saved so far
  bool saved_failed_ = false;
};

constexpr std::uint32_t kVariantRingStages = 4;
constexpr std::uint32_t kVariantRingItems = 1000;

// One launch of a 4-stage ring of 1,000 items (one CTA).
// What an event log says of that launch.
wspipe::cuda::EventLogLaunch ring_variant_info() {
  wspipe::cuda::EventLogLaunch info;
  info.kernel = "ring_kernel<" + std::to_string(kVariantRingStages) + ">";
  info.grid = {1, 1, 1};
  info.block = {32 * wspipe::examples::kRingWarps, 1, 1};
  info.smem_bytes = sizeof(wspipe::examples::RingStorage<kVariantRingStages>);
  info.config = "stages=" + std::to_string(kVariantRingStages) + " items=" + std::to_string(kVariantRingItems) +
                " release=lanes";
  return info;
}
int ring_variant_child(const std::string& name, RingBug bug) {
  VariantLog log(name, ring_variant_info());
  DeviceBuffer<std::uint32_t> done(1);
  done.fill_bytes(0);
  log.before_launch();
  WSPIPE_CUDA_CHECK(launch_ring(kVariantRingStages, 1, kVariantRingItems, bug, done.get()));
  const cudaError_t e = cudaDeviceSynchronize();
  if (e != cudaSuccess) {
    log.launched(0, true);
    std::printf("launch failed: %s\n", cudaGetErrorString(e));
    return 4;
  }
  std::vector<std::uint32_t> host(1);
  done.download(host);
  log.launched(0, host[0] != kVariantRingItems);
  std::printf("completed: %u of %u items\n", host[0], kVariantRingItems);
  return host[0] == kVariantRingItems ? 0 : 5;
}

// kTileReduceTries launches over a full grid of clusters of 2, 2 stages,
// 4,096 tiles: how many gave a wrong sum. A launch that fails ends the
// child.
constexpr int kTileReduceTries = 20;
constexpr std::uint32_t kVariantTrStages = 2, kVariantTrCluster = 2, kVariantTrRows = 4096 * wspipe::examples::kTileRows;
// The full grid's clusters, and what an event log says of that launch.
std::uint32_t tile_reduce_variant_clusters() {
  int sms = 0;
  WSPIPE_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  return static_cast<std::uint32_t>(sms) / kVariantTrCluster;
}
wspipe::cuda::EventLogLaunch tile_reduce_variant_info(std::uint32_t clusters) {
  wspipe::cuda::EventLogLaunch info;
  info.kernel = "tile_reduce_kernel<" + std::to_string(kVariantTrStages) + ">";
  info.grid = {clusters * kVariantTrCluster, 1, 1};
  info.block = {32 * wspipe::examples::kTileReduceWarps, 1, 1};
  info.cluster = {kVariantTrCluster, 1, 1};
  info.smem_bytes = sizeof(wspipe::examples::TileReduceStorage<kVariantTrStages>);
  info.config = "rows=" + std::to_string(kVariantTrRows) + " stages=" + std::to_string(kVariantTrStages) +
                " cluster=" + std::to_string(kVariantTrCluster) + " clusters=" + std::to_string(clusters) +
                " weights=computed";
  return info;
}
int tile_reduce_variant_child(const std::string& name, TileReduceBug bug) {
  const std::uint32_t clusters = tile_reduce_variant_clusters();
  VariantLog log(name, tile_reduce_variant_info(clusters));
  int wrong = 0;
  std::string first;
  for (int i = 0; i < kTileReduceTries; ++i) {
    std::string diff;
    log.before_launch();
    try {
      diff = tile_reduce_once(kVariantTrStages, kVariantTrRows, kVariantTrCluster, clusters, bug);
    } catch (const CudaError& e) {
      log.launched(static_cast<std::uint32_t>(i), true);
      std::printf("launch failed: %s (launch %d of %d; %d wrong before)\n", cudaGetErrorString(e.code()), i + 1,
                  kTileReduceTries, wrong);
      return 4;
    }
    log.launched(static_cast<std::uint32_t>(i), !diff.empty());
    if (!diff.empty() && wrong++ == 0) first = diff;
  }
  std::printf("wrong result in %d of %d launches%s%s\n", wrong, kTileReduceTries, wrong ? "; first: " : "",
              first.c_str());
  return wrong == 0 ? 0 : 5;
}

const std::vector<Variant>& variants() {
  // The correct ring first: its log is the contrast to the broken ones'.
  static const std::vector<Variant> all = {
      {"ring", "ok", [](const std::string& n) { return ring_variant_child(n, RingBug::none); }},
      {"ring/no-release", "deadlock (the producer waits on empty forever)",
       [](const std::string& n) { return ring_variant_child(n, RingBug::no_release); }},
      {"ring/over-arrive", "mbarrier.over-arrival",
       [](const std::string& n) { return ring_variant_child(n, RingBug::over_arrive); }},
      {"ring/producer-phase-0", "deadlock (the producer's first wait never passes)",
       [](const std::string& n) { return ring_variant_child(n, RingBug::producer_phase_0); }},
      {"tile-reduce/local-release", "race.smem",
       [](const std::string& n) { return tile_reduce_variant_child(n, TileReduceBug::local_release); }},
      {"tile-reduce/expect-own-half", "race.smem",
       [](const std::string& n) { return tile_reduce_variant_child(n, TileReduceBug::expect_own_half); }},
      {"tile-reduce/no-drain", "mbarrier.remote-exited-cta",
       [](const std::string& n) { return tile_reduce_variant_child(n, TileReduceBug::no_drain); }},
      {"tile-reduce/release-before-read", "race.smem",
       [](const std::string& n) { return tile_reduce_variant_child(n, TileReduceBug::release_before_read); }},
  };
  return all;
}

std::string last_line(std::string out) {
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  const auto at = out.rfind('\n');
  return at == std::string::npos ? out : out.substr(at + 1);
}

// What happened to a variant's child, in the table's words.
std::string variant_outcome(const Variant& v, const ChildResult& r) {
  if (r.kind == ChildResult::timed_out) return "hang (host timeout; the watchdog did not fire)";
  if (r.kind == ChildResult::signalled) return "process killed by signal " + std::to_string(r.code);
  if (r.code == 0) return (std::string(v.emulator) == "ok" ? "correct (" : "silently correct (") + last_line(r.output) + ")";
  if (r.output.find("wspipe watchdog") != std::string::npos) return "hang (watchdog trap: a wait never passed)";
  if (r.output.find("wspipe check failed") != std::string::npos) return "wrong result (the payload check trapped)";
  if (r.code == 4) {
    const auto at = r.output.find("launch failed: ");
    std::string why = at == std::string::npos ? "?" : r.output.substr(at + 15);
    while (!why.empty() && (why.back() == '\n' || why.back() == '\r')) why.pop_back();
    return "trap (" + why + ", no watchdog or check message)";
  }
  if (r.code == 5) return "wrong result (" + last_line(r.output) + ")";
  return "error (exit " + std::to_string(r.code) + ")";
}

// Each variant's line, then, in a build with the event log, where its log
// went and the trap it names (as a comment line of the table).
int run_variants(const std::string& device) {
  std::string table = "# wspipe_silicon variants on " + device + "\n# variant | emulator | silicon | seconds\n";
  if (WSPIPE_CUDA_EVENT_LOG > 0) {
    std::error_code ec;
    std::filesystem::create_directories(g_event_log_dir, ec);
    table += "# event logs (WSPIPE_CUDA_EVENT_LOG=" + std::to_string(WSPIPE_CUDA_EVENT_LOG) + " events per warp) in " +
             g_event_log_dir + "\n";
  }
  for (const Variant& v : variants()) {
    const ChildResult r = in_child([&] { return v.run(v.name); }, 120);
    const std::string outcome = variant_outcome(v, r);
    std::printf("%s: emulator: %s; silicon: %s (%.1f s)\n", v.name, v.emulator, outcome.c_str(), r.seconds);
    table += std::string(v.name) + " | " + v.emulator + " | " + outcome + " | " + std::to_string(r.seconds) + "\n";
    std::istringstream lines(r.output);
    for (std::string line; std::getline(lines, line);) {
      if (line.rfind("event log: ", 0) != 0) continue;
      std::printf("  %s\n", line.c_str());
      table += "#   " + line + "\n";
    }
  }
  write_file("variants.txt", table);
  return 0;
}

// ------------------------------------------------------------------ explore

// `explore TARGET`: a catalogue kernel (the variants' launches: the ring of
// 4 stages and 1,000 items in one CTA; tile-reduce over the full grid of
// clusters of 2) under seeded delays (docs/delays.md). First a baseline
// (every site counted, none sleeps), which lists the sites the kernel met;
// then each seed (every site may sleep) for --launches launches; then, for
// the first seed that failed, ddmin over the sites with the seed kept, the
// minimal configuration run again, and once more with the event log until
// a launch fails, whose log is saved for `wspipe explain`.
struct ExploreTarget {
  const char* name;
  bool ring;
  RingBug ring_bug;
  TileReduceBug tile_reduce_bug;
};

const std::vector<ExploreTarget>& explore_targets() {
  static const std::vector<ExploreTarget> all = {
      {"ring", true, RingBug::none, TileReduceBug::none},
      {"ring/no-release", true, RingBug::no_release, TileReduceBug::none},
      {"ring/over-arrive", true, RingBug::over_arrive, TileReduceBug::none},
      {"ring/producer-phase-0", true, RingBug::producer_phase_0, TileReduceBug::none},
      {"tile-reduce", false, RingBug::none, TileReduceBug::none},
      {"tile-reduce/local-release", false, RingBug::none, TileReduceBug::local_release},
      {"tile-reduce/expect-own-half", false, RingBug::none, TileReduceBug::expect_own_half},
      {"tile-reduce/no-drain", false, RingBug::none, TileReduceBug::no_drain},
      {"tile-reduce/release-before-read", false, RingBug::none, TileReduceBug::release_before_read},
  };
  return all;
}

// One launch: "" when its result is right, else what is wrong. A launch
// that fails throws CudaError.
std::string explore_launch(const ExploreTarget& t, std::uint32_t clusters) {
  if (!t.ring) {
    return tile_reduce_once(kVariantTrStages, kVariantTrRows, kVariantTrCluster, clusters, t.tile_reduce_bug);
  }
  DeviceBuffer<std::uint32_t> done(1);
  done.fill_bytes(0);
  WSPIPE_CUDA_CHECK(launch_ring(kVariantRingStages, 1, kVariantRingItems, t.ring_bug, done.get()));
  WSPIPE_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<std::uint32_t> host(1);
  done.download(host);
  return host[0] == kVariantRingItems ? ""
                                      : "completed " + std::to_string(host[0]) + " of " +
                                            std::to_string(kVariantRingItems) + " items";
}

// A run of configurations, `launches` launches each, from (config, launch)
// `from`. nullopt among the configurations: no delays attached.
struct ExploreJob {
  const ExploreTarget* target = nullptr;
  std::vector<std::optional<wspipe::cuda::DelayConfig>> configs;
  std::uint32_t launches = 1;
  std::size_t from_config = 0;
  std::uint32_t from_launch = 0;
  bool stop_at_failure = false;  // the first failed launch ends the run
  std::string log_path;          // with the log: the first failed launch's log goes there
  bool report_sites = false;     // after the first launch, if it passed: the sites it met
};

std::string explore_log_config(const ExploreTarget& t, const std::optional<wspipe::cuda::DelayConfig>& c) {
  return std::string("scenario=") + t.name + " " +
         (t.ring ? ring_variant_info() : tile_reduce_variant_info(tile_reduce_variant_clusters())).config +
         " delays=" + (c ? c->text() : std::string("off"));
}

// In the child: prints "R <config> <launch> ok | wrong <what> | failed
// <error>" per launch, "S <hits> <site>" per site met, "L <path>" for a
// saved log; returns 4 after a failed launch (its context is lost).
int explore_child(const ExploreJob& job) {
  const ExploreTarget& t = *job.target;
  const std::uint32_t clusters = t.ring ? 1 : tile_reduce_variant_clusters();
  wspipe::cuda::EventLogLaunch info = t.ring ? ring_variant_info() : tile_reduce_variant_info(clusters);
  const std::uint32_t warps = info.grid.x * info.grid.y * info.grid.z * (info.block.x / 32);
  wspipe::cuda::DelayState delays(warps);
  std::optional<wspipe::cuda::EventLog> log;
  if (!job.log_path.empty()) {
    log.emplace(warps, WSPIPE_CUDA_EVENT_LOG > 0 ? WSPIPE_CUDA_EVENT_LOG : 1);
    wspipe::cuda::attach_event_log(*log);
    info.sources = catalogue_sources();
  }
  for (std::size_t c = job.from_config; c < job.configs.size(); ++c) {
    const auto& config = job.configs[c];
    if (config) {
      wspipe::cuda::attach_delays(delays, *config);
    } else {
      wspipe::cuda::detach_delays();
    }
    info.config = explore_log_config(t, config);
    for (std::uint32_t l = c == job.from_config ? job.from_launch : 0; l < job.launches; ++l) {
      delays.reset();
      if (log) log->reset();
      std::string wrong;
      const auto save = [&](std::uint32_t launch) {
        if (!log) return;
        info.launch = launch;
        try {
          log->save(job.log_path, info);
          std::printf("L %s\n", job.log_path.c_str());
        } catch (const std::exception& e) {
          std::printf("N %s\n", e.what());
        }
      };
      try {
        wrong = explore_launch(t, clusters);
      } catch (const CudaError& e) {
        std::fflush(stdout);
        save(l);
        std::printf("R %zu %u failed %s\n", c, l, cudaGetErrorString(e.code()));
        return 4;
      }
      if (!wrong.empty()) {
        save(l);
        std::printf("R %zu %u wrong %s\n", c, l, wrong.c_str());
        if (job.stop_at_failure) return 5;
      } else {
        std::printf("R %zu %u ok\n", c, l);
      }
      if (job.report_sites && c == 0 && l == 0 && wrong.empty()) {
        for (const auto& hit : delays.sites(catalogue_sources())) {
          std::printf("S %u %s\n", hit.hits, hit.site.text().c_str());
        }
      }
      std::fflush(stdout);
    }
  }
  return 0;
}

// What a launch did: ok, wrong, hang (the watchdog trapped), check (the
// kernel's check trapped), trap (another launch failure), timeout (the
// host killed the process), died.
struct ExploreLaunch {
  std::size_t config = 0;
  std::uint32_t launch = 0;
  std::string kind, detail;
};
struct ExploreResult {
  std::vector<ExploreLaunch> launches;
  std::vector<wspipe::cuda::DelaySiteHit> sites;
  std::string log_path;  // saved
  bool failed() const {
    return std::any_of(launches.begin(), launches.end(), [](const ExploreLaunch& l) { return l.kind != "ok"; });
  }
};

// Runs `job` in as many child processes as its failed launches need: each
// failed launch ends a child, and the next starts after it (or, with
// stop_at_failure, none does).
ExploreResult explore_run(ExploreJob job) {
  ExploreResult res;
  const std::size_t total = job.configs.size() * job.launches;
  for (;;) {
    const std::size_t left = total - (job.from_config * job.launches + job.from_launch);
    if (left == 0) break;
    // The watchdog traps a hung wait within about a second (200,000 tries);
    // delays add milliseconds per launch. 5 s a launch is far beyond both.
    const ChildResult r = in_child([&] { return explore_child(job); }, 30.0 + 5.0 * static_cast<double>(left));
    std::size_t next_c = job.from_config;
    std::uint32_t next_l = job.from_launch;
    std::string since;  // output since the last R line: the device's messages
    bool ended_by_failure = false;
    std::istringstream lines(r.output);
    for (std::string line; std::getline(lines, line);) {
      std::size_t c = 0;
      unsigned l = 0;
      int used = 0;
      if (line.rfind("R ", 0) == 0 && std::sscanf(line.c_str(), "R %zu %u %n", &c, &l, &used) == 2) {
        ExploreLaunch x{c, l, line.substr(static_cast<std::size_t>(used)), ""};
        const auto sp = x.kind.find(' ');
        if (sp != std::string::npos) {
          x.detail = x.kind.substr(sp + 1);
          x.kind = x.kind.substr(0, sp);
        }
        if (x.kind == "failed") {
          x.kind = since.find("wspipe watchdog") != std::string::npos       ? "hang"
                   : since.find("wspipe check failed") != std::string::npos ? "check"
                                                                             : "trap";
          ended_by_failure = true;
        }
        if (x.kind == "wrong" && job.stop_at_failure) ended_by_failure = true;
        res.launches.push_back(x);
        since.clear();
        next_c = c + (l + 1 == job.launches ? 1 : 0);
        next_l = l + 1 == job.launches ? 0 : l + 1;
      } else if (line.rfind("S ", 0) == 0) {
        unsigned hits = 0;
        char text[256] = {};
        if (std::sscanf(line.c_str(), "S %u %255s", &hits, text) == 2) {
          if (const auto site = wspipe::cuda::parse_delay_site(text)) res.sites.push_back({*site, hits});
        }
      } else if (line.rfind("L ", 0) == 0) {
        res.log_path = line.substr(2);
      } else {
        since += line + "\n";
      }
    }
    if (!ended_by_failure && r.kind == ChildResult::exited && r.code == 0) break;
    if (!ended_by_failure) {  // killed, died or an error outside a launch: the launch it was in
      ExploreLaunch x{next_c, next_l, r.kind == ChildResult::timed_out ? "timeout" : "died", last_line(r.output)};
      if (r.kind == ChildResult::exited && r.code == 3) x.kind = "error";
      res.launches.push_back(x);
      if (x.kind == "error") break;  // a CUDA call outside a launch failed: no point going on
      next_c = next_c + (next_l + 1 == job.launches ? 1 : 0);
      next_l = next_l + 1 == job.launches ? 0 : next_l + 1;
    }
    if (job.stop_at_failure) break;
    job.from_config = next_c;
    job.from_launch = next_l;
  }
  return res;
}

// "3 of 10 (hang 2, wrong 1)" for the launches of config `c` (all: npos).
std::string explore_tally(const ExploreResult& r, std::size_t c = std::string::npos) {
  std::map<std::string, int> kinds;
  int n = 0, failed = 0;
  for (const ExploreLaunch& l : r.launches) {
    if (c != std::string::npos && l.config != c) continue;
    ++n;
    if (l.kind != "ok") {
      ++failed;
      ++kinds[l.kind];
    }
  }
  std::string s = std::to_string(failed) + " of " + std::to_string(n) + " launches failed";
  if (!kinds.empty()) {
    s += " (";
    bool first = true;
    for (const auto& [k, v] : kinds) {
      s += (first ? "" : ", ") + k + " " + std::to_string(v);
      first = false;
    }
    s += ")";
  }
  return s;
}

std::string explore_first_detail(const ExploreResult& r) {
  for (const ExploreLaunch& l : r.launches) {
    if (l.kind != "ok") return l.kind + (l.detail.empty() ? "" : ": " + l.detail);
  }
  return "";
}

struct ExploreOptions {
  std::string target;
  std::uint64_t first_seed = 1;
  std::uint32_t seeds = 20;
  std::uint32_t launches = 0;  // 0: 1 for the ring, 5 for tile-reduce
  std::uint32_t density = wspipe::cuda::kDelayDefaultDensity;
  std::uint32_t max_ns = wspipe::cuda::kDelayDefaultMaxNs;
  bool shrink = true;
  std::optional<wspipe::cuda::DelayConfig> only;  // --delays: this configuration alone
};

int run_explore(const std::string& device, const ExploreOptions& o) {
  if (!wspipe::cuda::kDelaysOn) {
    std::printf("explore: this build has no delays; build it with -DWSPIPE_CUDA_DELAYS=1 (tools/silicon.sh explore)\n");
    return 2;
  }
  const auto it = std::find_if(explore_targets().begin(), explore_targets().end(),
                               [&](const ExploreTarget& t) { return o.target == t.name; });
  if (it == explore_targets().end()) {
    std::printf("explore: unknown target '%s'; one of:", o.target.c_str());
    for (const ExploreTarget& t : explore_targets()) std::printf(" %s", t.name);
    std::printf("\n");
    return 2;
  }
  const ExploreTarget& t = *it;
  const std::uint32_t launches = o.launches != 0 ? o.launches : t.ring ? 1 : 5;
  std::string stem = t.name;
  for (char& ch : stem) ch = ch == '/' ? '.' : ch;
  std::string text = "# wspipe_silicon explore " + std::string(t.name) + " on " + device + "\n";
  const auto say = [&](const std::string& line) {
    std::printf("%s\n", line.c_str());
    std::fflush(stdout);
    text += line + "\n";
  };
  say("# watchdog: " + std::to_string(WSPIPE_CUDA_WATCHDOG_SPINS) + " failed try_waits; event log: " +
      std::to_string(WSPIPE_CUDA_EVENT_LOG) + " events per warp (logged runs only); " + std::to_string(launches) +
      " launches per configuration");
  std::error_code ec;
  std::filesystem::create_directories(g_event_log_dir, ec);
  const auto job = [&](std::vector<std::optional<wspipe::cuda::DelayConfig>> configs) {
    ExploreJob j;
    j.target = &t;
    j.configs = std::move(configs);
    j.launches = launches;
    return j;
  };
  // The logged run of `config`: until a launch fails, at most 2 * launches.
  const auto logged = [&](const std::optional<wspipe::cuda::DelayConfig>& config, const std::string& name) {
    ExploreJob j = job({config});
    j.launches = 2 * launches;
    j.stop_at_failure = true;
    j.log_path = g_event_log_dir + "/" + stem + "." + name + ".log";
    const ExploreResult r = explore_run(j);
    if (!r.failed()) {
      say("logged run: " + explore_tally(r) + "; no log saved (the log changes the timing)");
    } else if (r.log_path.empty()) {
      say("logged run: " + explore_first_detail(r) + "; its log could not be read (a trap the log did not take)");
    } else {
      say("logged run: " + explore_first_detail(r) + " at launch " + std::to_string(r.launches.back().launch));
      say("event log: " + r.log_path);
      say("explain it: wspipe explain " + r.log_path);
    }
  };

  if (o.only) {
    const ExploreResult r = explore_run(job({o.only}));
    say("delays " + o.only->text() + ": " + explore_tally(r) +
        (r.failed() ? "; first: " + explore_first_detail(r) : ""));
    if (r.failed()) logged(o.only, "delays");
    write_file("explore_" + stem + ".txt", text);
    return 0;
  }

  // The baseline: every site counted, none sleeps; its first launch lists the sites.
  wspipe::cuda::DelayConfig counted;
  counted.density = 0;
  ExploreJob base = job({counted});
  base.report_sites = true;
  const ExploreResult baseline = explore_run(base);
  say("baseline (" + counted.text() + "): " + explore_tally(baseline) +
      (baseline.failed() ? "; first: " + explore_first_detail(baseline) : ""));
  std::vector<wspipe::cuda::DelaySite> sites;
  std::string site_list;
  for (const auto& hit : baseline.sites) {
    sites.push_back(hit.site);
    site_list += " " + hit.site.text() + " (" + std::to_string(hit.hits) + ")";
  }
  say("sites met (occurrences in one launch): " + (sites.empty() ? std::string(" none read") : site_list));

  // The seeds.
  std::vector<std::optional<wspipe::cuda::DelayConfig>> configs;
  for (std::uint32_t i = 0; i < o.seeds; ++i) {
    wspipe::cuda::DelayConfig c;
    c.seed = o.first_seed + i;
    c.density = o.density;
    c.max_ns = o.max_ns;
    configs.push_back(c);
  }
  const auto start = std::chrono::steady_clock::now();
  const ExploreResult seeds = explore_run(job(configs));
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::optional<std::uint64_t> first_failing;
  std::uint32_t failing_seeds = 0;
  for (std::size_t c = 0; c < configs.size(); ++c) {
    const std::string tally = explore_tally(seeds, c);
    const bool failed = tally.rfind("0 of", 0) != 0;
    failing_seeds += failed ? 1 : 0;
    if (failed && !first_failing) first_failing = configs[c]->seed;
    if (failed || o.seeds <= 20) say("seed " + std::to_string(configs[c]->seed) + ": " + tally);
  }
  char timing[64];
  std::snprintf(timing, sizeof timing, "%.1f", secs);
  say("seeds " + std::to_string(o.first_seed) + "-" + std::to_string(o.first_seed + o.seeds - 1) + " (density " +
      std::to_string(o.density) + "/256, max_ns " + std::to_string(o.max_ns) + "): " + explore_tally(seeds) +
      ", in " + std::to_string(failing_seeds) + " of " + std::to_string(o.seeds) + " seeds (" + timing + " s)");
  // A correct kernel that fails under delays (or in the baseline) fails the
  // command: CTest's explore tests run the correct ring and tile-reduce.
  const bool correct = t.ring ? t.ring_bug == RingBug::none : t.tile_reduce_bug == TileReduceBug::none;
  const int rc = correct && (baseline.failed() || first_failing) ? 1 : 0;
  if (!first_failing || !o.shrink) {
    write_file("explore_" + stem + ".txt", text);
    return rc;
  }

  // Shrink the first failing seed's sites.
  wspipe::cuda::DelayConfig failing = *configs[static_cast<std::size_t>(*first_failing - o.first_seed)];
  wspipe::cuda::DelayConfig minimal = failing;
  if (baseline.failed()) {
    minimal.all = false;
    minimal.sites.clear();
    say("shrink: the baseline fails with no sleep: the minimal configuration is " + minimal.text());
  } else if (sites.empty() || sites.size() > wspipe::cuda::kDelayMaxSites) {
    say("shrink: " + std::to_string(sites.size()) + " sites read: cannot list them; the configuration stays " +
        failing.text());
  } else {
    std::size_t tests = 0;
    const auto fails = [&](const std::vector<wspipe::cuda::DelaySite>& subset) {
      wspipe::cuda::DelayConfig c = failing;
      c.all = false;
      c.sites = subset;
      ExploreJob j = job({c});
      j.stop_at_failure = true;
      const ExploreResult r = explore_run(j);
      ++tests;
      say("  test " + c.text() + ": " + (r.failed() ? explore_first_detail(r) : "passed"));
      return r.failed();
    };
    if (!fails(sites)) {
      say("shrink: seed " + std::to_string(failing.seed) + " with the listed sites did not fail again; the "
          "configuration stays " + failing.text());
    } else {
      std::size_t ddmin_tests = 0;
      minimal.all = false;
      minimal.sites = wspipe::gpu::ddmin(sites, fails, &ddmin_tests);
      say("shrink: " + std::to_string(sites.size()) + " sites to " + std::to_string(minimal.sites.size()) + " in " +
          std::to_string(tests) + " runs: " + minimal.text());
    }
  }
  const ExploreResult again = explore_run(job({minimal}));
  say("confirm " + minimal.text() + ": " + explore_tally(again));
  say("reproduce: tools/silicon.sh explore " + std::string(t.name) + " --delays '" + minimal.text() +
      "' --launches " + std::to_string(launches));
  logged(minimal, "seed" + std::to_string(minimal.seed));
  write_file("explore_" + stem + ".txt", text);
  return rc;
}

// -------------------------------------------------------------- conformance

struct Programs {
  std::vector<MbarOp> ops;
  std::vector<std::uint32_t> begin;  // program i is ops[begin[i], begin[i + 1])
};

// Runs the programs `which` in launches of up to kChunk, one CTA each,
// printing "R <index> <observations>" for each; at the first launch that
// fails, prints "F <position in which> <end position>" and stops.
constexpr std::uint32_t kChunk = 1024;
int conformance_child(const Programs& progs, const std::vector<std::uint32_t>& which) {
  const auto d_ops = DeviceBuffer<MbarOp>::copy_of(progs.ops);
  const auto d_begin = DeviceBuffer<std::uint32_t>::copy_of(progs.begin);
  const auto d_which = DeviceBuffer<std::uint32_t>::copy_of(which);
  DeviceBuffer<std::uint8_t> d_src(4096);
  d_src.fill_bytes(0x5a);
  const DeviceBuffer<char> d_obs(static_cast<std::size_t>(kChunk) * wspipe::silicon::kMaxOps);
  // The tma_copy map: 1024 f32, one box of 16 (64 bytes) at 0.
  wspipe::TensorMap m;
  m.global = d_src.get();
  m.dtype = wspipe::ElemType::f32;
  m.rank = 1;
  m.dims[0] = 1024;
  m.box[0] = wspipe::silicon::kTmaCopyBytes / 4;
  const CUtensorMap map = wspipe::cuda::make_tma_map(m);
  std::vector<char> obs(static_cast<std::size_t>(kChunk) * wspipe::silicon::kMaxOps);
  const auto n = static_cast<std::uint32_t>(which.size());
  for (std::uint32_t a = 0; a < n; a += kChunk) {
    const std::uint32_t b = std::min(n, a + kChunk);
    const wspipe::cuda::ClusterLaunch cfg{dim3(b - a), dim3(32), dim3(1), nullptr};
    cudaError_t e = wspipe::cuda::launch_cluster<ProgramStorage>(mbar_program_kernel, cfg, d_ops.get(), d_begin.get(),
                                                                 d_which.get() + a, map, d_src.get(), d_obs.get());
    if (e == cudaSuccess) e = cudaDeviceSynchronize();
    if (e == cudaSuccess) e = cudaMemcpy(obs.data(), d_obs.get(), obs.size(), cudaMemcpyDeviceToHost);
    if (e != cudaSuccess) {
      std::printf("F %u %u %s\n", a, b, cudaGetErrorString(e));
      return 0;
    }
    for (std::uint32_t i = a; i < b; ++i) {
      std::printf("R %u %s\n", which[i], &obs[static_cast<std::size_t>(i - a) * wspipe::silicon::kMaxOps]);
    }
  }
  return 0;
}

// Fills results[i] for each program i of `which`: its observations, or "T"
// when its launch failed with the program alone in it (a trap). A launch of
// several that fails is split in halves, each run in a fresh process.
void run_programs(const Programs& progs, const std::vector<std::uint32_t>& which, std::vector<std::string>& results,
                  int& children) {
  std::size_t from = 0;
  while (from < which.size()) {
    const std::vector<std::uint32_t> rest(which.begin() + static_cast<std::ptrdiff_t>(from), which.end());
    ++children;
    const ChildResult r = in_child([&] { return conformance_child(progs, rest); }, 300);
    std::size_t next = which.size();
    std::size_t pos = 0;
    while (pos < r.output.size()) {
      std::size_t end = r.output.find('\n', pos);
      if (end == std::string::npos) end = r.output.size();
      const std::string line = r.output.substr(pos, end - pos);
      pos = end + 1;
      unsigned a = 0, b = 0;
      char text[wspipe::silicon::kMaxOps + 1] = {};
      if (line.rfind("R ", 0) == 0 && std::sscanf(line.c_str(), "R %u %48s", &a, text) >= 1) {
        results[a] = text;
      } else if (line.rfind("F ", 0) == 0 && std::sscanf(line.c_str(), "F %u %u", &a, &b) == 2) {
        if (b - a == 1) {
          results[rest[a]] = "T";
        } else {
          const auto mid = rest.begin() + (a + b) / 2;
          run_programs(progs, {rest.begin() + a, mid}, results, children);
          run_programs(progs, {mid, rest.begin() + b}, results, children);
        }
        next = from + b;
      }
    }
    if (r.kind != ChildResult::exited || r.code != 0) {
      std::printf("conformance child for %zu programs failed (%s, exit %d):\n%s\n", rest.size(),
                  r.kind == ChildResult::timed_out ? "timed out" : "died", r.code, r.output.c_str());
      std::exit(1);
    }
    from = next;
  }
}

int run_conformance(const std::string& device, std::uint64_t seed, std::uint32_t count) {
  Programs progs;
  progs.begin.push_back(0);
  for (std::uint32_t i = 0; i < count; ++i) {
    for (const MbarOp& op : wspipe::silicon::program(seed, i)) progs.ops.push_back(op);
    progs.begin.push_back(static_cast<std::uint32_t>(progs.ops.size()));
  }
  // The programs docs/hardware.md says will trap (an over-arrival) run one to a
  // process; the others in launches of kChunk, split only if one fails.
  std::vector<std::uint32_t> together, apart;
  for (std::uint32_t i = 0; i < count; ++i) {
    (wspipe::silicon::reference(wspipe::silicon::program(seed, i)).trap_at >= 0 ? apart : together).push_back(i);
  }
  std::vector<std::string> results(count);
  int children = 0;
  const auto start = std::chrono::steady_clock::now();
  run_programs(progs, together, results, children);
  std::printf("conformance: %zu programs together in %.1f s\n", together.size(),
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  for (std::uint32_t i : apart) run_programs(progs, {i}, results, children);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::uint32_t traps = 0;
  std::string text = "# wspipe mbarrier conformance: observations on silicon, one line per program\n# device: " +
                     device + "\n# seed: " + std::to_string(seed) + "\n# count: " + std::to_string(count) +
                     "\n# format: <index> <one character per wait, 1 passed / 0 not; '-' none; T: the program "
                     "trapped>\n";
  for (std::uint32_t i = 0; i < count; ++i) {
    traps += results[i] == "T";
    text += std::to_string(i) + " " + (results[i].empty() ? "-" : results[i]) + "\n";
  }
  std::printf("conformance: %u programs (seed %llu) in %.1f s, %d processes, %u trapped\n", count,
              static_cast<unsigned long long>(seed), secs, children, traps);
  for (std::uint32_t i = 0; i < wspipe::silicon::kNamedPrograms && i < count; ++i) {
    std::printf("  named %u: %s -> %s\n", i, wspipe::silicon::to_string(wspipe::silicon::program(seed, i)).c_str(),
                results[i].c_str());
  }
  write_file("mbarrier_conformance.txt", text);
  return 0;
}

// ----------------------------------------------------- multi-warp conformance

// A blocking wait of a multi-warp program gives up after this long: far
// beyond any wait that can pass (the programs' waits all can, docs/silicon.md).
constexpr std::uint64_t kMwWaitNs = 20'000'000;
// Programs per child process: each child has the host timeout of 300 s.
constexpr std::uint32_t kMwProgramsPerChild = 100;

// Runs programs [from, to) of `seed`, `reps` repetitions each (one CTA
// each, one launch per program), printing for program i "S i" as it
// starts, "O <runs> <outcome>" per distinct outcome, then "E i". A launch
// that fails prints "F i <error>" and ends the child (its context is lost).
int conformance_mw_child(std::uint64_t seed, std::uint32_t generator, std::uint32_t from, std::uint32_t to,
                         std::uint32_t reps) {
  std::vector<std::uint32_t> words(mw::kMwSourceBytes / 4);
  for (std::uint32_t i = 0; i < words.size(); ++i) words[i] = mw::kMwSourceBase + i;
  const auto d_src = DeviceBuffer<std::uint32_t>::copy_of(words);
  const auto* src = reinterpret_cast<const std::uint8_t*>(d_src.get());
  // The tma_copy map: the source as f32, one box of 16 (64 bytes).
  wspipe::TensorMap m;
  m.global = d_src.get();
  m.dtype = wspipe::ElemType::f32;
  m.rank = 1;
  m.dims[0] = mw::kMwSourceBytes / 4;
  m.box[0] = mw::kMwTmaBytes / 4;
  const CUtensorMap map = wspipe::cuda::make_tma_map(m);
  const std::size_t per_rep = static_cast<std::size_t>(mw::kMwMaxWarps) * mw::kMwMaxObs;
  const std::uint32_t max_ops = generator >= 2 ? mw::kMwMaxOps2 : mw::kMwMaxOps;
  DeviceBuffer<std::uint32_t> d_obs(per_rep * reps);
  std::vector<std::uint32_t> obs(per_rep * reps);
  for (std::uint32_t i = from; i < to; ++i) {
    std::printf("S %u\n", i);
    std::fflush(stdout);
    const mw::MwProgram p = mw::mw_program(seed, i, generator);
    std::vector<MwOp> flat;
    MwBounds bounds{};
    for (std::uint32_t w = 0; w < mw::kMwMaxWarps; ++w) {
      bounds.begin[w] = static_cast<std::uint32_t>(flat.size());
      if (w >= p.warps) continue;
      if (p.ops[w].size() > max_ops || mw::observation_count(p, w) > mw::kMwMaxObs) {  // the generator keeps within
        std::printf("program %u: warp %u has %zu operations, more than %u\n", i, w, p.ops[w].size(), max_ops);
        return 3;
      }
      flat.insert(flat.end(), p.ops[w].begin(), p.ops[w].end());
    }
    bounds.begin[mw::kMwMaxWarps] = static_cast<std::uint32_t>(flat.size());
    for (std::uint32_t b = 0; b < mw::kMwMaxBars; ++b) bounds.count[b] = p.count[b];
    bounds.bars = p.bars;
    bounds.warps = p.warps;
    bounds.generator = generator;
    if (flat.empty()) flat.push_back({MwOpKind::load});  // never read: a buffer of one
    const auto d_ops = DeviceBuffer<MwOp>::copy_of(flat);
    d_obs.fill_bytes(0);
    const wspipe::cuda::ClusterLaunch cfg{dim3(reps), dim3(32 * p.warps), dim3(1), nullptr};
    cudaError_t e = wspipe::cuda::launch_cluster<MwStorage>(mw_program_kernel, cfg, d_ops.get(), bounds, map, src,
                                                            d_obs.get(), kMwWaitNs);
    if (e == cudaSuccess) e = cudaDeviceSynchronize();
    if (e == cudaSuccess) e = cudaMemcpy(obs.data(), d_obs.get(), obs.size() * 4, cudaMemcpyDeviceToHost);
    if (e != cudaSuccess) {
      std::printf("F %u %s\n", i, cudaGetErrorString(e));
      return 0;
    }
    std::map<std::string, std::uint32_t> seen;
    for (std::uint32_t r = 0; r < reps; ++r) {
      std::array<std::vector<std::uint32_t>, mw::kMwMaxWarps> per_warp;
      for (std::uint32_t w = 0; w < p.warps; ++w) {
        const std::uint32_t* at = &obs[(static_cast<std::size_t>(r) * mw::kMwMaxWarps + w) * mw::kMwMaxObs];
        per_warp[w].assign(at, at + mw::observation_count(p, w));
      }
      ++seen[mw::outcome_text(p, per_warp)];
    }
    for (const auto& [outcome, runs] : seen) std::printf("O %u %s\n", runs, outcome.c_str());
    std::printf("E %u\n", i);
    std::fflush(stdout);
  }
  return 0;
}

int run_conformance_mw(const std::string& device, std::uint64_t seed, std::uint32_t generator, std::uint32_t count,
                       std::uint32_t reps) {
  std::string body;  // the file's per-program part
  std::uint32_t failed = 0, children = 0;
  std::size_t outcomes = 0;
  const auto start = std::chrono::steady_clock::now();
  for (std::uint32_t from = 0; from < count;) {
    ++children;
    const std::uint32_t to = std::min(count, from + kMwProgramsPerChild);
    const ChildResult r = in_child([&] { return conformance_mw_child(seed, generator, from, to, reps); }, 300);
    // Programs the child finished go to the file; the one it was running
    // when it failed, died or was killed is recorded as such, and the next
    // child starts after it.
    std::uint32_t next = to;
    std::uint32_t done = from;  // programs before it are in `body`
    std::string block;
    std::size_t block_outcomes = 0;
    std::istringstream lines(r.output);
    std::string line;
    bool open = false;
    std::uint32_t current = 0;
    while (std::getline(lines, line)) {
      unsigned i = 0;
      if (line.rfind("S ", 0) == 0 && std::sscanf(line.c_str(), "S %u", &i) == 1) {
        open = true;
        current = i;
        block.clear();
        block_outcomes = 0;
      } else if (line.rfind("O ", 0) == 0 && open) {
        block += line + "\n";
        ++block_outcomes;
      } else if (line.rfind("E ", 0) == 0 && open) {
        body += "P " + std::to_string(current) + "\n" + block;
        outcomes += block_outcomes;
        open = false;
        done = current + 1;
      } else if (line.rfind("F ", 0) == 0 && open) {
        body += "P " + std::to_string(current) + " failed: " + line.substr(line.find(' ', 2) + 1) + "\n";
        ++failed;
        open = false;
        next = done = current + 1;
      }
    }
    if (open) {  // died or killed inside a program
      body += "P " + std::to_string(current) + " failed: " +
              (r.kind == ChildResult::timed_out ? std::string("hung (host timeout)") : "the process died") + "\n";
      ++failed;
      next = current + 1;
    } else if (r.kind != ChildResult::exited || r.code != 0) {
      // Between programs: go on after the last one done, unless none was.
      if (done == from) {
        std::printf("conformance-mw child from program %u failed (%s, exit %d):\n%s\n", from,
                    r.kind == ChildResult::timed_out ? "timed out" : "died", r.code, r.output.c_str());
        return 1;
      }
      next = done;
    }
    std::printf("conformance-mw: programs %u-%u done (%.1f s)\n", from, next - 1,
                std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    std::fflush(stdout);
    from = next;
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("conformance-mw: %u programs (seed %llu, generator %u) x %u repetitions in %.1f s, %u processes: "
              "%zu outcomes, %u programs failed\n",
              count, static_cast<unsigned long long>(seed), generator, reps, secs, children, outcomes, failed);
  write_file("mbarrier_mw_conformance.txt",
             "# wspipe multi-warp mbarrier conformance: the outcomes silicon showed, per program\n# device: " +
                 device + "\n# seed: " + std::to_string(seed) + "\n# generator: " + std::to_string(generator) +
                 "\n# count: " + std::to_string(count) + "\n# reps: " + std::to_string(reps) +
                 "\n# format: 'P <index>' then one 'O <runs> <outcome>' per distinct outcome (mw_program.hpp, "
                 "outcome_text); 'P <index> failed: <why>' when its launch failed\n" +
                 body);
  return failed == 0 ? 0 : 1;
}

// Runs a part that is one child process, echoes its output and records it
// in `file`; 0 when the child passed.
int run_part(const char* part, const char* file, int (*child)(), double timeout_s, const std::string& device) {
  const ChildResult r = in_child(child, timeout_s);
  std::fputs(r.output.c_str(), stdout);
  write_file(file, "# wspipe_silicon " + std::string(part) + " on " + device + "\n" + r.output);
  if (r.kind == ChildResult::exited && r.code == 0) return 0;
  std::printf("%s: FAILED (%s)\n", part, r.kind == ChildResult::timed_out ? "timed out" : "see above");
  return 1;
}

int usage() {
  std::fprintf(stderr,
               "usage: wspipe_silicon ring | tile-reduce | tma-store | clusters | variants [--event-logs DIR] | "
               "conformance [--seed S] [--count N] | conformance-mw [--seed S] [--count N] [--reps R] "
               "[--generator 1|2] | explore TARGET [--seeds N] [--first-seed S] [--launches L] [--density D] "
               "[--max-ns M] [--no-shrink] [--delays SPEC] | all\n"
               "  Runs wspipe's arch-neutral half on the GPU (sm_90 or later); files go to $WSPIPE_SILICON_OUT.\n"
               "  A build with WSPIPE_CUDA_EVENT_LOG=N saves each variant's event log in DIR (default:\n"
               "  $WSPIPE_SILICON_EVENT_LOGS, else event_logs/ in $WSPIPE_SILICON_OUT).\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return usage();
  const std::string what = argv[1];
  ExploreOptions explore;
  int first_option = 2;
  if (what == "explore") {
    if (argc < 3) return usage();
    explore.target = argv[2];
    first_option = 3;
  }
  std::uint64_t seed = 1;
  std::optional<std::uint32_t> count;
  std::uint32_t reps = 10000;
  std::uint32_t generator = 1;
  for (int i = first_option; i < argc; ++i) {
    const std::string a = argv[i];
    const bool explore_number =
        a == "--seeds" || a == "--first-seed" || a == "--launches" || a == "--density" || a == "--max-ns";
    if (what == "explore" && explore_number && i + 1 < argc) {
      char* end = nullptr;
      const unsigned long long v = std::strtoull(argv[++i], &end, 10);
      const unsigned long long most = a == "--density" ? 256 : a == "--max-ns" ? wspipe::cuda::kDelayMaxNs : 1000000;
      if (end == argv[i] || *end != '\0' || v > most || (v == 0 && a != "--first-seed" && a != "--density")) {
        std::fprintf(stderr, "wspipe_silicon: bad value for %s: %s\n", a.c_str(), argv[i]);
        return 2;
      }
      const auto u = static_cast<std::uint32_t>(v);
      if (a == "--seeds") explore.seeds = u;
      if (a == "--first-seed") explore.first_seed = v;
      if (a == "--launches") explore.launches = u;
      if (a == "--density") explore.density = u;
      if (a == "--max-ns") explore.max_ns = u;
    } else if (what == "explore" && a == "--no-shrink") {
      explore.shrink = false;
    } else if (what == "explore" && a == "--delays" && i + 1 < argc) {
      std::string error;
      explore.only = wspipe::cuda::parse_delay_config(argv[++i], error);
      if (!explore.only) {
        std::fprintf(stderr, "wspipe_silicon: bad --delays: %s\n", error.c_str());
        return 2;
      }
    } else if ((a == "--seed" || a == "--count" || a == "--reps" || a == "--generator") && i + 1 < argc) {
      char* end = nullptr;
      const unsigned long long v = std::strtoull(argv[++i], &end, 10);
      if (end == argv[i] || *end != '\0' || (a != "--seed" && (v == 0 || v > 1000000)) ||
          (a == "--generator" && v > mw::kMwGenerators)) {
        std::fprintf(stderr, "wspipe_silicon: bad value for %s: %s\n", a.c_str(), argv[i]);
        return 2;
      }
      if (a == "--seed") {
        seed = v;
      } else if (a == "--count") {
        count = static_cast<std::uint32_t>(v);
      } else if (a == "--generator") {
        generator = static_cast<std::uint32_t>(v);
      } else {
        reps = static_cast<std::uint32_t>(v);
      }
    } else if (a == "--event-logs" && i + 1 < argc) {
      g_event_log_dir = argv[++i];
    } else {
      std::fprintf(stderr, "wspipe_silicon: unknown argument: %s\n", a.c_str());
      return usage();
    }
  }
  if (what != "ring" && what != "tile-reduce" && what != "tma-store" && what != "clusters" && what != "variants" &&
      what != "conformance" && what != "conformance-mw" && what != "explore" && what != "all") {
    return usage();
  }

  if (g_event_log_dir.empty()) {
    const char* d = std::getenv("WSPIPE_SILICON_EVENT_LOGS");
    g_event_log_dir = d != nullptr && *d != '\0' ? d : out_dir() + "/event_logs";
  }

  const ChildResult probe = in_child(probe_device, 60);
  if (probe.kind != ChildResult::exited || (probe.code != 0 && probe.code != 77)) {
    std::printf("wspipe_silicon: probing the device failed: %s\n", probe.output.c_str());
    return 1;
  }
  if (probe.code == 77) {
    std::printf("SKIP: %s; wspipe_silicon needs an sm_90 or later GPU\n", probe.output.c_str());
    return 77;
  }
  const std::string device = probe.output;
  std::printf("device: %s\n", device.c_str());

  int rc = 0;
  if (what == "ring" || what == "all") rc |= run_part("ring", "ring.txt", ring_child, 500, device);
  if (what == "tile-reduce" || what == "all") {
    rc |= run_part("tile-reduce", "tile_reduce.txt", tile_reduce_child, 500, device);
  }
  if (what == "tma-store" || what == "all") rc |= run_tma_store(device);
  if (what == "clusters" || what == "all") rc |= run_part("clusters", "clusters.txt", clusters_child, 300, device);
  if (what == "variants" || what == "all") rc |= run_variants(device);
  if (what == "conformance" || what == "all") rc |= run_conformance(device, seed, count.value_or(10000));
  if (what == "explore") rc |= run_explore(device, explore);
  if (what == "conformance-mw") rc |= run_conformance_mw(device, seed, generator, count.value_or(500), reps);
  return rc;
}
