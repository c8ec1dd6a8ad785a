// wspipe_silicon: the arch-neutral half of wspipe on a real GPU (Hopper,
// sm_90a, or later), through HopperBackend. docs/silicon.md records what it
// showed on which device.
//
//   wspipe_silicon ring          the ring example, the emulator's source, with its payload check:
//                                stages 1..8, items up to 100,000, one CTA and a full grid of rings
//   wspipe_silicon tile-reduce   the tile-reduce example (TMA, multicast in clusters of 2), every
//                                stage count and cluster shape, against the host reference
//   wspipe_silicon variants      each broken ring and tile-reduce variant in a process of its own, under a watchdog
//                                (bounded waits that trap) and a host timeout: hang, trap, wrong
//                                result or silently correct
//   wspipe_silicon conformance [--seed S] [--count N]
//                                N mbarrier programs (mbar_program.hpp), every wait's result; programs
//                                that trap are isolated in processes of their own
//   wspipe_silicon all           all four
//
// Results go to stdout and, as files, to $WSPIPE_SILICON_OUT (default: the
// working directory): ring.txt, tile_reduce.txt, variants.txt,
// mbarrier_conformance.txt. The
// conformance file is what tests/silicon_conformance_test.cpp compares the
// emulator with (tests/data/).
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
#define WSPIPE_CUDA_WATCHDOG_SPINS 1000000

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "backends/cuda/cuda_backend.hpp"
#include "backends/cuda/launch.hpp"
#include "backends/cuda/mbar_program.hpp"
#include "backends/cuda/tensor_map.hpp"
#include "examples/ring.hpp"
#include "examples/tile_reduce.hpp"

namespace {

using B = wspipe::cuda::HopperBackend;
using wspipe::SharedMemBarrier;
using wspipe::examples::RingBug;
using wspipe::examples::TileReduceBug;
using wspipe::silicon::MbarOp;
using wspipe::silicon::MbarOpKind;

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

// -------------------------------------------------------------- processes

struct ChildResult {
  enum Kind { exited, signalled, timed_out } kind;
  int code;            // exit status or signal
  std::string output;  // its stdout and stderr
  double seconds;
};

// Runs `fn` in a forked child, its stdout and stderr captured; kills it
// after `timeout_s`. The child's return value is its exit status.
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
    const int rc = fn();
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

#define CUDA_OK(expr)                                                                             \
  do {                                                                                            \
    if (cudaError_t e_ = (expr); e_ != cudaSuccess) {                                             \
      std::printf("CUDA error: %s: %s (%s:%d)\n", #expr, cudaGetErrorString(e_), __FILE__, __LINE__); \
      return 3;                                                                                   \
    }                                                                                             \
  } while (0)

// The device, probed in a child: "<name> (sm_XY), driver N" and exit 0, or
// the reason there is none and exit 77.
int probe_device() {
  int n = 0;
  if (cudaError_t e = cudaGetDeviceCount(&n); e != cudaSuccess || n == 0) {
    std::printf("no CUDA device here (%s)", e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
    return 77;
  }
  cudaDeviceProp prop{};
  CUDA_OK(cudaGetDeviceProperties(&prop, 0));
  int driver = 0;
  CUDA_OK(cudaDriverGetVersion(&driver));
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

cudaError_t launch_ring(int stages, std::uint32_t ctas, std::uint32_t items, RingBug bug, std::uint32_t* done) {
  switch (stages) {
    case 1: return launch_ring<1>(ctas, items, bug, done);
    case 2: return launch_ring<2>(ctas, items, bug, done);
    case 3: return launch_ring<3>(ctas, items, bug, done);
    case 4: return launch_ring<4>(ctas, items, bug, done);
    case 5: return launch_ring<5>(ctas, items, bug, done);
    case 6: return launch_ring<6>(ctas, items, bug, done);
    case 7: return launch_ring<7>(ctas, items, bug, done);
    case 8: return launch_ring<8>(ctas, items, bug, done);
    default: return cudaErrorInvalidValue;
  }
}

// Every stage count with a few item counts, each as one CTA and as a grid
// of 4 rings per SM running side by side; every CTA must report all items.
int ring_child() {
  int sms = 0;
  CUDA_OK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const std::uint32_t grid = 4u * static_cast<std::uint32_t>(sms);
  std::uint32_t* done = nullptr;
  CUDA_OK(cudaMalloc(&done, grid * sizeof(std::uint32_t)));
  std::vector<std::uint32_t> host(grid);
  int failures = 0;
  for (int stages = 1; stages <= 8; ++stages) {
    for (std::uint32_t items : {1u, 2u, 9u, 1000u, 100000u}) {
      for (std::uint32_t ctas : {1u, grid}) {
        CUDA_OK(cudaMemset(done, 0, grid * sizeof(std::uint32_t)));
        cudaEvent_t t0, t1;
        CUDA_OK(cudaEventCreate(&t0));
        CUDA_OK(cudaEventCreate(&t1));
        CUDA_OK(cudaEventRecord(t0));
        CUDA_OK(launch_ring(stages, ctas, items, RingBug::none, done));
        CUDA_OK(cudaEventRecord(t1));
        CUDA_OK(cudaDeviceSynchronize());
        float ms = 0;
        CUDA_OK(cudaEventElapsedTime(&ms, t0, t1));
        CUDA_OK(cudaMemcpy(host.data(), done, ctas * sizeof(std::uint32_t), cudaMemcpyDeviceToHost));
        std::uint32_t ok = 0;
        for (std::uint32_t c = 0; c < ctas; ++c) ok += host[c] == items;
        const bool pass = ok == ctas;
        failures += !pass;
        std::printf("ring stages=%d items=%u ctas=%u: %s (%u/%u CTAs complete, %.3f ms, %.1f ns/item)\n", stages,
                    items, ctas, pass ? "ok" : "FAIL", ok, ctas, ms, 1e6 * ms / items);
      }
    }
  }
  CUDA_OK(cudaFree(done));
  return failures == 0 ? 0 : 1;
}

// -------------------------------------------------------------- tile-reduce

// One launch of tile-reduce: `clusters` clusters of `cluster` CTAs over
// `rows` rows; "" when every sum equals the host reference, else what differs.
template <int Stages>
std::string tile_reduce_once(std::uint32_t rows, std::uint32_t cluster, std::uint32_t clusters, TileReduceBug bug,
                             cudaError_t* err, float* ms = nullptr) {
  wspipe::examples::TileReduceProblem p(rows, cluster);
  std::uint32_t* d_x = nullptr;
  std::uint32_t* d_out = nullptr;
  auto fail = [&](cudaError_t e) {
    *err = e;
    return std::string(cudaGetErrorString(e));
  };
  if (cudaError_t e = cudaMalloc(&d_x, p.x.size() * 4); e != cudaSuccess) return fail(e);
  if (cudaError_t e = cudaMalloc(&d_out, p.out.size() * 4); e != cudaSuccess) return fail(e);
  if (cudaError_t e = cudaMemcpy(d_x, p.x.data(), p.x.size() * 4, cudaMemcpyHostToDevice); e != cudaSuccess) return fail(e);
  if (cudaError_t e = cudaMemset(d_out, 0, p.out.size() * 4); e != cudaSuccess) return fail(e);
  wspipe::examples::TileReduceArgs<B> args;
  args.x_map = wspipe::cuda::make_tma_map(p.x_map(d_x));
  args.out = d_out;
  args.rows = rows;
  args.bug = bug;
  const wspipe::cuda::ClusterLaunch cfg{dim3(clusters * cluster), dim3(32 * wspipe::examples::kTileReduceWarps),
                                        dim3(cluster), nullptr};
  cudaEvent_t t0, t1;
  cudaEventCreate(&t0);
  cudaEventCreate(&t1);
  cudaEventRecord(t0);
  cudaError_t e = wspipe::cuda::launch_cluster<wspipe::examples::TileReduceStorage<Stages>>(tile_reduce_kernel<Stages>,
                                                                                             cfg, args);
  cudaEventRecord(t1);
  if (e == cudaSuccess) e = cudaDeviceSynchronize();
  if (e == cudaSuccess && ms != nullptr) cudaEventElapsedTime(ms, t0, t1);
  if (e == cudaSuccess) e = cudaMemcpy(p.out.data(), d_out, p.out.size() * 4, cudaMemcpyDeviceToHost);
  if (e != cudaSuccess) return fail(e);
  cudaFree(d_x);
  cudaFree(d_out);
  *err = cudaSuccess;
  return p.check();
}

std::string tile_reduce_once(int stages, std::uint32_t rows, std::uint32_t cluster, std::uint32_t clusters,
                             TileReduceBug bug, cudaError_t* err, float* ms = nullptr) {
  switch (stages) {
    case 1: return tile_reduce_once<1>(rows, cluster, clusters, bug, err, ms);
    case 2: return tile_reduce_once<2>(rows, cluster, clusters, bug, err, ms);
    case 3: return tile_reduce_once<3>(rows, cluster, clusters, bug, err, ms);
    default: return tile_reduce_once<4>(rows, cluster, clusters, bug, err, ms);
  }
}

// Every stage count, clusters of 1 and 2, one cluster and a full grid.
int tile_reduce_child() {
  int sms = 0;
  CUDA_OK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  int failures = 0;
  for (int stages = 1; stages <= 4; ++stages) {
    for (std::uint32_t cluster : {1u, 2u}) {
      const std::uint32_t full = static_cast<std::uint32_t>(sms) / cluster;
      for (std::uint32_t clusters : {1u, full}) {
        for (std::uint32_t tiles : {1u, 7u, 4096u}) {
          cudaError_t e = cudaSuccess;
          float ms = 0;
          const std::string diff = tile_reduce_once(stages, tiles * wspipe::examples::kTileRows, cluster, clusters,
                                                    TileReduceBug::none, &e, &ms);
          if (e != cudaSuccess) {
            std::printf("tile-reduce stages=%d cluster=%u clusters=%u tiles=%u: CUDA error %s\n", stages, cluster,
                        clusters, tiles, cudaGetErrorString(e));
            return 3;
          }
          failures += !diff.empty();
          std::printf("tile-reduce stages=%d cluster=%u clusters=%u tiles=%u: %s (%.3f ms)\n", stages, cluster,
                      clusters, tiles, diff.empty() ? "ok, bit for bit" : ("FAIL: " + diff).c_str(), ms);
        }
      }
    }
  }
  return failures == 0 ? 0 : 1;
}

// ----------------------------------------------------------------- variants

struct Variant {
  const char* name;
  const char* emulator;  // the emulator's verdict: tools/wspipe.sh explore <name>
  std::function<int()> run;  // in the child: exit 0 correct, 4 launch failed, 5 wrong result
};

int ring_variant_child(RingBug bug) {
  std::uint32_t* done = nullptr;
  CUDA_OK(cudaMalloc(&done, sizeof(std::uint32_t)));
  CUDA_OK(cudaMemset(done, 0, sizeof(std::uint32_t)));
  CUDA_OK(launch_ring(4, 1, 1000, bug, done));
  const cudaError_t e = cudaDeviceSynchronize();
  if (e != cudaSuccess) {
    std::printf("launch failed: %s\n", cudaGetErrorString(e));
    return 4;
  }
  std::uint32_t host = 0;
  CUDA_OK(cudaMemcpy(&host, done, sizeof host, cudaMemcpyDeviceToHost));
  std::printf("completed: %u of 1000 items\n", host);
  return host == 1000 ? 0 : 5;
}

// kTileReduceTries launches over a full grid of clusters of 2, 2 stages:
// how many gave a wrong sum. A launch that fails ends the child.
constexpr int kTileReduceTries = 20;
int tile_reduce_variant_child(TileReduceBug bug) {
  int sms = 0;
  CUDA_OK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  int wrong = 0;
  std::string first;
  for (int i = 0; i < kTileReduceTries; ++i) {
    cudaError_t e = cudaSuccess;
    const std::string diff = tile_reduce_once(2, 4096 * wspipe::examples::kTileRows, 2,
                                              static_cast<std::uint32_t>(sms) / 2, bug, &e);
    if (e != cudaSuccess) {
      std::printf("launch failed: %s (launch %d of %d; %d wrong before)\n", cudaGetErrorString(e), i + 1,
                  kTileReduceTries, wrong);
      return 4;
    }
    if (!diff.empty() && wrong++ == 0) first = diff;
  }
  std::printf("wrong result in %d of %d launches%s%s\n", wrong, kTileReduceTries, wrong ? "; first: " : "",
              first.c_str());
  return wrong == 0 ? 0 : 5;
}

const std::vector<Variant>& variants() {
  static const std::vector<Variant> all = {
      {"ring/no-release", "deadlock (the producer waits on empty forever)",
       [] { return ring_variant_child(RingBug::no_release); }},
      {"ring/over-arrive", "mbarrier.over-arrival", [] { return ring_variant_child(RingBug::over_arrive); }},
      {"ring/producer-phase-0", "deadlock (the producer's first wait never passes)",
       [] { return ring_variant_child(RingBug::producer_phase_0); }},
      {"tile-reduce/local-release", "race.smem",
       [] { return tile_reduce_variant_child(TileReduceBug::local_release); }},
      {"tile-reduce/expect-own-half", "race.smem",
       [] { return tile_reduce_variant_child(TileReduceBug::expect_own_half); }},
      {"tile-reduce/no-drain", "mbarrier.remote-exited-cta",
       [] { return tile_reduce_variant_child(TileReduceBug::no_drain); }},
      {"tile-reduce/release-before-read", "race.smem",
       [] { return tile_reduce_variant_child(TileReduceBug::release_before_read); }},
  };
  return all;
}

std::string last_line(std::string out) {
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  const auto at = out.rfind('\n');
  return at == std::string::npos ? out : out.substr(at + 1);
}

// What happened to a variant's child, in the table's words.
std::string variant_outcome(const ChildResult& r) {
  if (r.kind == ChildResult::timed_out) return "hang (host timeout; the watchdog did not fire)";
  if (r.kind == ChildResult::signalled) return "process killed by signal " + std::to_string(r.code);
  if (r.code == 0) return "silently correct (" + last_line(r.output) + ")";
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

int run_variants(const std::string& device) {
  std::string table = "# wspipe_silicon variants on " + device + "\n# variant | emulator | silicon | seconds\n";
  for (const Variant& v : variants()) {
    const ChildResult r = in_child(v.run, 120);
    const std::string outcome = variant_outcome(r);
    std::printf("%s: emulator: %s; silicon: %s (%.1f s)\n", v.name, v.emulator, outcome.c_str(), r.seconds);
    table += std::string(v.name) + " | " + v.emulator + " | " + outcome + " | " + std::to_string(r.seconds) + "\n";
  }
  write_file("variants.txt", table);
  return 0;
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
  MbarOp* d_ops = nullptr;
  std::uint32_t* d_begin = nullptr;
  std::uint32_t* d_which = nullptr;
  std::uint8_t* d_src = nullptr;
  char* d_obs = nullptr;
  CUDA_OK(cudaMalloc(&d_ops, progs.ops.size() * sizeof(MbarOp)));
  CUDA_OK(cudaMalloc(&d_begin, progs.begin.size() * sizeof(std::uint32_t)));
  CUDA_OK(cudaMalloc(&d_which, which.size() * sizeof(std::uint32_t)));
  CUDA_OK(cudaMalloc(&d_src, 4096));
  CUDA_OK(cudaMalloc(&d_obs, static_cast<std::size_t>(kChunk) * wspipe::silicon::kMaxOps));
  CUDA_OK(cudaMemcpy(d_ops, progs.ops.data(), progs.ops.size() * sizeof(MbarOp), cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(d_begin, progs.begin.data(), progs.begin.size() * sizeof(std::uint32_t),
                     cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(d_which, which.data(), which.size() * sizeof(std::uint32_t), cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemset(d_src, 0x5a, 4096));
  // The tma_copy map: 1024 f32, one box of 16 (64 bytes) at 0.
  wspipe::TensorMap m;
  m.global = d_src;
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
    cudaError_t e = wspipe::cuda::launch_cluster<ProgramStorage>(mbar_program_kernel, cfg, d_ops, d_begin,
                                                                 d_which + a, map, d_src, d_obs);
    if (e == cudaSuccess) e = cudaDeviceSynchronize();
    if (e == cudaSuccess) e = cudaMemcpy(obs.data(), d_obs, obs.size(), cudaMemcpyDeviceToHost);
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
  // The programs HARDWARE.md says will trap (an over-arrival) run one to a
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

int usage() {
  std::fprintf(stderr,
               "usage: wspipe_silicon ring | tile-reduce | variants | conformance [--seed S] [--count N] | all\n"
               "  Runs wspipe's arch-neutral half on the GPU (sm_90 or later); files go to $WSPIPE_SILICON_OUT.\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return usage();
  const std::string what = argv[1];
  std::uint64_t seed = 1;
  std::uint32_t count = 10000;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    if ((a == "--seed" || a == "--count") && i + 1 < argc) {
      char* end = nullptr;
      const unsigned long long v = std::strtoull(argv[++i], &end, 10);
      if (end == argv[i] || *end != '\0' || (a == "--count" && (v == 0 || v > 1000000))) {
        std::fprintf(stderr, "wspipe_silicon: bad value for %s: %s\n", a.c_str(), argv[i]);
        return 2;
      }
      if (a == "--seed") {
        seed = v;
      } else {
        count = static_cast<std::uint32_t>(v);
      }
    } else {
      std::fprintf(stderr, "wspipe_silicon: unknown argument: %s\n", a.c_str());
      return usage();
    }
  }
  if (what != "ring" && what != "tile-reduce" && what != "variants" && what != "conformance" && what != "all") {
    return usage();
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
  if (what == "ring" || what == "all") {
    const ChildResult r = in_child(ring_child, 500);
    std::fputs(r.output.c_str(), stdout);
    write_file("ring.txt", "# wspipe_silicon ring on " + device + "\n" + r.output);
    if (r.kind != ChildResult::exited || r.code != 0) {
      std::printf("ring: FAILED (%s)\n", r.kind == ChildResult::timed_out ? "timed out" : "see above");
      rc = 1;
    }
  }
  if (what == "tile-reduce" || what == "all") {
    const ChildResult r = in_child(tile_reduce_child, 500);
    std::fputs(r.output.c_str(), stdout);
    write_file("tile_reduce.txt", "# wspipe_silicon tile-reduce on " + device + "\n" + r.output);
    if (r.kind != ChildResult::exited || r.code != 0) {
      std::printf("tile-reduce: FAILED (%s)\n", r.kind == ChildResult::timed_out ? "timed out" : "see above");
      rc = 1;
    }
  }
  if (what == "variants" || what == "all") rc |= run_variants(device);
  if (what == "conformance" || what == "all") rc |= run_conformance(device, seed, count);
  return rc;
}
