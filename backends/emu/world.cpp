#include "world.hpp"

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>

// Fiber switches announced to AddressSanitizer (g++ defines
// __SANITIZE_ADDRESS__, clang has __has_feature). ThreadSanitizer is not
// told: its fiber API needs the switch made right after the announcement,
// but a fiber that ends returns through Boost's instrumented header code
// before Boost switches, which corrupts TSan's shadow stack (it crashed).
// Unannotated, TSan sees each exploration thread as one thread, which is
// what the tsan preset checks: the threads of parallel exploration.
#if defined(__SANITIZE_ADDRESS__)
#define WSPIPE_ASAN 1
#endif
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define WSPIPE_ASAN 1
#endif
#endif
#ifdef WSPIPE_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

namespace wspipe::emu {

const char* to_string(Status s) {
  switch (s) {
    case Status::ok: return "ok";
    case Status::violation: return "violation";
    case Status::deadlock: return "deadlock";
    case Status::livelock: return "livelock";
  }
  return "?";
}

namespace detail {
namespace {

// set_sched_check: -1 until set (then the build's and environment's default).
std::atomic<int> g_sched_check{-1};
std::atomic<std::uint64_t> g_sched_checks{0};
thread_local std::uint64_t tl_sched_evaluations = 0;

bool sched_check_default() {
#ifndef NDEBUG
  return true;
#else
  static const bool env = [] {
    const char* v = std::getenv("WSPIPE_SCHED_CHECK");
    return v != nullptr && std::strcmp(v, "1") == 0;
  }();
  return env;
#endif
}

// The handle an initialised barrier keeps in its 8 bytes: a tag in the high
// word and the index of its model state plus one in the low word. A zeroed
// or overwritten barrier does not decode to a live entry.
constexpr std::uint64_t kTag = 0x57535042ull << 32;  // "WSPB"
constexpr std::uint32_t kMaxCount = (1u << 20) - 1;  // PTX "Mbarrier counts", .layout::v0
constexpr std::int64_t kMaxTx = (1 << 20) - 1;
constexpr std::int64_t kNotSeen = -2;
constexpr std::uint64_t kKillOpLimit = 50'000'000;
constexpr std::uint32_t kSmemWord = 4;  // bytes per shared-memory shadow

std::uint32_t lanes(std::uint32_t mask) { return static_cast<std::uint32_t>(std::popcount(mask)); }

std::string cta_label(std::uint32_t cta) { return "cta" + std::to_string(cta); }

std::string hex8(std::uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%08x", v);
  return buf;
}

}  // namespace

// A Boost.Fiber scheduling algorithm that runs exactly the fiber the World
// picked. Fibers never block in Boost's sense: a warp that waits for a
// barrier stays "ready" to Boost and is simply not picked.
class DirectedAlgorithm final : public boost::fibers::algo::algorithm {
 public:
  DirectedAlgorithm() { instance = this; }
  ~DirectedAlgorithm() override {
    if (instance == this) instance = nullptr;
  }
  void awakened(boost::fibers::context* ctx) noexcept override {
    ctx->ready_link(ready_);
    last_awakened = ctx;
  }
  boost::fibers::context* pick_next() noexcept override {
    boost::fibers::context* ctx = next;
    next = nullptr;
    if (ctx != nullptr && ctx->ready_is_linked()) {
      ctx->ready_unlink();
      return ctx;
    }
    // Only Boost's own bookkeeping (fiber teardown at thread exit) gets
    // here; hand out fibers in arrival order as round_robin would.
    if (ready_.empty()) return nullptr;
    ctx = &ready_.front();
    ready_.pop_front();
    return ctx;
  }
  bool has_ready_fibers() const noexcept override { return !ready_.empty(); }

  // Boost frees the contexts (and stacks) of ended fibers only in its
  // dispatcher fiber, which a directed schedule never picks. Run it once:
  // it releases them and hands control back to the caller, the only other
  // ready fiber.
  void collect_terminated() {
    for (auto& ctx : ready_) {
      if (ctx.is_context(boost::fibers::type::dispatcher_context)) {
        next = &ctx;
        boost::this_fiber::yield();
        return;
      }
    }
  }
  void suspend_until(std::chrono::steady_clock::time_point const&) noexcept override {}
  void notify() noexcept override {}

  boost::fibers::context* next = nullptr;
  boost::fibers::context* last_awakened = nullptr;
  static thread_local DirectedAlgorithm* instance;

 private:
  boost::fibers::scheduler::ready_queue_type ready_;
};
thread_local DirectedAlgorithm* DirectedAlgorithm::instance = nullptr;

namespace {
DirectedAlgorithm& algorithm() {
  if (DirectedAlgorithm::instance == nullptr) boost::fibers::use_scheduling_algorithm<DirectedAlgorithm>();
  return *DirectedAlgorithm::instance;
}

// Warp stacks: 256 KiB with a guard page, so that a kernel overflowing its
// warp's stack faults instead of corrupting a neighbour's. Mapping and
// protecting a stack costs more than a whole `ring` run, and the kernel's
// mmap lock serialises threads (2 jobs ran ring 1.17x faster than 1): each
// thread keeps its freed stacks for its next runs.
class CachedStack {
 public:
  boost::context::stack_context allocate() {
    Cache& c = cache();
    if (c.stacks.empty()) {
      c.last = boost::context::protected_fixedsize_stack(kBytes).allocate();
    } else {
      c.last = c.stacks.back();
      c.stacks.pop_back();
    }
#ifdef WSPIPE_ASAN
    // AddressSanitizer's shadow outlives a stack: Boost.Context's entry
    // frames never return (they switch away), so the redzones poisoned for
    // them stay marked after the fiber ends, and a stack reused, or mapped
    // again at the same address, inherited them. Those were the
    // stack-buffer-underflow reports of the ASan build (in Boost's
    // create_fiber and World::access_info): not defects, stale shadow.
    const FiberStack s = last();
    ASAN_UNPOISON_MEMORY_REGION(s.bottom, s.size);
#endif
    return c.last;
  }
  // The stack handed out last on this thread, for the sanitizers.
  static FiberStack last() {
    const boost::context::stack_context& s = cache().last;
    return {.bottom = static_cast<const char*>(s.sp) - s.size, .size = s.size};
  }
  void deallocate(boost::context::stack_context& s) noexcept {
    Cache& c = cache();
    if (c.stacks.size() < kKept) {
      c.stacks.push_back(s);
    } else {
      boost::context::protected_fixedsize_stack(kBytes).deallocate(s);
    }
  }

 private:
  static constexpr std::size_t kBytes = 256 * 1024;
  static constexpr std::size_t kKept = 256;  // the warps of a large grid; 64 MiB of address space
  struct Cache {
    std::vector<boost::context::stack_context> stacks;
    boost::context::stack_context last{};
    ~Cache() {
      for (auto& s : stacks) boost::context::protected_fixedsize_stack(kBytes).deallocate(s);
    }
  };
  static Cache& cache() {
    thread_local Cache c;
    return c;
  }
};

// The calling thread's own stack (where run() is called). Looked up once per
// thread: for the main thread pthread_getattr_np parses /proc/self/maps,
// which cost a quarter of a short run's time under ASan (the model fuzzers).
FiberStack this_stack() {
  FiberStack s;
#ifdef WSPIPE_ASAN
  thread_local const FiberStack cached = [] {
    FiberStack t;
    pthread_attr_t attr;
    void* addr = nullptr;
    if (pthread_getattr_np(pthread_self(), &attr) == 0) {
      pthread_attr_getstack(&attr, &addr, &t.size);
      pthread_attr_destroy(&attr);
    }
    t.bottom = addr;
    return t;
  }();
  s = cached;
#endif
  return s;
}
}  // namespace

void set_sched_check(bool on) { g_sched_check = on ? 1 : 0; }
std::uint64_t sched_checks() { return g_sched_checks.load(); }
std::uint64_t sched_evaluations() { return tl_sched_evaluations; }

void World::outside_a_warp() {
  std::fputs("wspipe: an EmuBackend operation was called outside a warp of emu::run()\n", stderr);
  std::abort();
}

// The launch's cluster shape, checked as cudaLaunchKernelEx checks it: every
// dimension at least 1, at most 8 CTAs (the portable maximum), or 16 with
// cudaFuncAttributeNonPortableClusterSizeAllowed (CUDA Programming Guide,
// "Thread Block Clusters"; sm_100 supports 16).
namespace {
ClusterShape checked_cluster_shape(const LaunchConfig& launch) {
  const ClusterShape shape = launch.cluster_shape.value_or(ClusterShape{launch.cluster_size, 1, 1});
  std::string m;
  auto dims = [&] {
    m.append(std::to_string(shape.x)).append("x").append(std::to_string(shape.y)).append("x")
        .append(std::to_string(shape.z));
  };
  if (launch.cluster_shape && launch.cluster_size != 1 && launch.cluster_size != shape.size()) {
    m = "cluster_size ";
    m.append(std::to_string(launch.cluster_size)).append(" disagrees with cluster_shape ");
    dims();
    m.append(" (").append(std::to_string(shape.size())).append(" CTAs): set one of them");
    throw BadLaunch(m);
  }
  const std::uint64_t size = std::uint64_t{shape.x} * shape.y * shape.z;
  if (shape.x == 0 || shape.y == 0 || shape.z == 0 || size > ClusterShape::kMax) {
    m = launch.cluster_shape ? "cluster_shape " : "cluster_size ";
    if (launch.cluster_shape) {
      dims();
    } else {
      m.append(std::to_string(launch.cluster_size));
    }
    m.append(": a cluster has every dimension at least 1 and at most 16 CTAs in all");
    throw BadLaunch(m);
  }
  if (size > ClusterShape::kMaxPortable && !launch.non_portable_cluster_size) {
    m = "a cluster of ";
    m.append(std::to_string(size))
        .append(" CTAs is beyond the portable 8: set LaunchConfig::non_portable_cluster_size (CUDA: "
                "cudaFuncAttributeNonPortableClusterSizeAllowed) to launch up to 16");
    throw BadLaunch(m);
  }
  return shape;
}
}  // namespace

}  // namespace detail

LaunchConfig checked_launch(const LaunchConfig& in) {
  LaunchConfig launch = in;
  launch.cluster_shape = detail::checked_cluster_shape(in);
  launch.cluster_size = launch.cluster_shape->size();
  if (launch.num_clusters < 1 || launch.num_clusters > 1024)
    throw BadLaunch("num_clusters must be in [1, 1024], got " + std::to_string(launch.num_clusters));
  if (launch.warps_per_cta < 1 || launch.warps_per_cta > 32)
    throw BadLaunch("warps_per_cta must be in [1, 32], got " + std::to_string(launch.warps_per_cta));
  if (launch.smem_bytes > 228 * 1024)
    throw BadLaunch("smem_bytes " + std::to_string(launch.smem_bytes) + " exceeds 228 KiB per CTA");
  if (launch.max_active_clusters > launch.num_clusters) {
    std::string m = "max_active_clusters must be 0 (all) or in [1, num_clusters = ";
    m.append(std::to_string(launch.num_clusters)).append("], got ").append(std::to_string(launch.max_active_clusters));
    throw BadLaunch(m);
  }
  detail::World::check_coresidency(launch);
  return launch;
}

namespace detail {

namespace {

// The buffers keep_cta_buffers kept on this thread: at most kKeptCtas CTAs'
// worth of each kind (a larger grid's extra buffers are freed), and no
// shadow table whose storage grew past kKeptTableBytes (split blocks): at
// most about 20 MiB per thread, typically 0.7 MiB per CTA.
constexpr std::size_t kKeptCtas = 8;
constexpr std::size_t kKeptTableBytes = std::size_t{1} << 20;
thread_local bool spare_buffers_alive = false;  // from the spares' construction to their destruction
struct SpareBuffers {
  std::vector<std::pair<std::size_t, std::byte*>> smem;  // (size, aligned_alloc'd buffer)
  std::vector<std::unique_ptr<std::uint32_t[]>> tmem;
  std::vector<ShadowTable<kTmemShadowBlock>> tmem_shadows;
  std::vector<ShadowTable<kSmemShadowBlock>> smem_shadows;
  SpareBuffers() { spare_buffers_alive = true; }
  ~SpareBuffers() {
    spare_buffers_alive = false;
    for (const auto& kept : smem) std::free(kept.second);
  }
  SpareBuffers(const SpareBuffers&) = delete;
  SpareBuffers& operator=(const SpareBuffers&) = delete;
};
SpareBuffers& spare_buffers() {
  thread_local SpareBuffers s;
  return s;
}

template <class T>
T take_last(std::vector<T>& kept) {
  if (kept.empty()) return T{};
  T t = std::move(kept.back());
  kept.pop_back();
  return t;
}

template <class T>
void keep(std::vector<T>& kept, T&& t) {
  if (kept.size() < kKeptCtas) kept.push_back(std::move(t));
}

template <std::uint32_t K>
void keep_table(std::vector<ShadowTable<K>>& kept, ShadowTable<K>& t) {
  if (t.storage_bytes() > kKeptTableBytes) return;  // freed with its CTA
  t.clear();
  keep(kept, std::move(t));
}

// Shared memory as allocated: whole KiB, 1024-byte aligned (swizzled tiles
// repeat every 1024 bytes and are placed at offsets aligned to it, as on
// hardware).
std::size_t smem_alloc_bytes(std::size_t smem_bytes) {
  return (std::max<std::size_t>(smem_bytes, 16) + 1023) / 1024 * 1024;
}

}  // namespace

std::byte* take_smem(std::size_t bytes) {
  std::byte* p = nullptr;
  auto& kept = spare_buffers().smem;
  const auto it = std::find_if(kept.begin(), kept.end(), [&](const auto& k) { return k.first == bytes; });
  if (it != kept.end()) {
    p = it->second;
    kept.erase(it);
  } else {
    p = static_cast<std::byte*>(std::aligned_alloc(1024, bytes));
  }
  std::memset(p, 0, bytes);
  return p;
}

std::unique_ptr<std::uint32_t[]> take_tmem_cells() {
  constexpr std::size_t kCells = std::size_t{kTmemLanes} * kTmemColumns;
  std::unique_ptr<std::uint32_t[]> cells = take_last(spare_buffers().tmem);
  if (cells == nullptr) return std::make_unique<std::uint32_t[]>(kCells);  // value-initialised
  std::memset(cells.get(), 0, kCells * sizeof(std::uint32_t));
  return cells;
}

ShadowTable<kTmemShadowBlock> take_tmem_shadow() {
  return take_last(spare_buffers().tmem_shadows);
}

ShadowTable<kSmemShadowBlock> take_smem_shadow() {
  return take_last(spare_buffers().smem_shadows);
}

void keep_cta_buffers(Cta& c) {
  // (After the thread's spares are destroyed, at its exit, all is freed.)
  SpareBuffers* s = spare_buffers_alive ? &spare_buffers() : nullptr;
  if (c.smem != nullptr) {
    if (s == nullptr) {
      std::free(c.smem);
    } else {
      if (s->smem.size() == kKeptCtas) {  // the oldest goes: its size may be an earlier launch's
        std::free(s->smem.front().second);
        s->smem.erase(s->smem.begin());
      }
      s->smem.emplace_back(smem_alloc_bytes(c.smem_bytes), c.smem);
    }
    c.smem = nullptr;
  }
  if (s == nullptr) return;
  if (c.tmem != nullptr) keep(s->tmem, std::move(c.tmem));
  keep_table(s->tmem_shadows, c.tmem_shadow);
  keep_table(s->smem_shadows, c.smem_shadow);
}

World::World(const LaunchConfig& launch_in, const std::function<void()>& body, const RunOptions& options)
    : launch_(checked_launch(launch_in)), body_(body), options_(options) {
  const LaunchConfig& launch = launch_;  // checked: cluster_shape set, cluster_size its size

  const std::uint32_t num_ctas = launch.num_clusters * launch.cluster_size;
  ctas_.resize(num_ctas);
  clusters_.resize(launch.num_clusters);
  for (std::uint32_t c = 0; c < num_ctas; ++c) {
    Cta& cta = ctas_[c];
    cta.cluster = c / launch.cluster_size;
    cta.rank = c % launch.cluster_size;
    cta.smem = take_smem(smem_alloc_bytes(launch.smem_bytes));
    cta.smem_shadow = take_smem_shadow();
    cta.tmem_shadow = take_tmem_shadow();
    cta.smem_bytes = launch.smem_bytes;
    cta.live_warps = launch.warps_per_cta;
  }
  for (std::uint32_t k = 0; k < launch.num_clusters; ++k) {
    clusters_[k].first_cta = k * launch.cluster_size;
    clusters_[k].live_threads = launch.cluster_size * launch.warps_per_cta * 32;
  }
  warps_.resize(num_ctas * launch.warps_per_cta);
  for (std::uint32_t i = 0; i < warps_.size(); ++i) {
    Warp& w = warps_[i];
    w.id = i;
    w.cta = i / launch.warps_per_cta;
    w.widx = i % launch.warps_per_cta;
    w.name = cta_label(w.cta) + "/w" + std::to_string(w.widx);
    if (w.widx < launch.warp_roles.size() && !launch.warp_roles[w.widx].empty())
      w.name += " " + launch.warp_roles[w.widx];
  }
  // Two engines per CTA, actors after the warps: its TMA engine and its
  // tensor core.
  engines_.resize(2 * num_ctas);
  for (std::uint32_t e = 0; e < engines_.size(); ++e) {
    engines_[e].cta = e / 2;
    engines_[e].tensor = (e % 2) != 0;
    engines_[e].name = cta_label(e / 2) + (engines_[e].tensor ? "/tensor-core" : "/tma");
  }
  clc_modeled_ = launch.max_active_clusters != 0;
  const std::uint32_t actors = static_cast<std::uint32_t>(warps_.size() + engines_.size()) + clc_actors();
  if (options_.race_check) {
    // Components: warps, their ld agents, their st agents, engines, the
    // clusters' CLC units; each numbered within its cluster, in that order.
    const std::size_t comps = 3 * warps_.size() + engines_.size() + clusters_.size();
    std::vector<std::uint32_t> cluster_of(comps);
    slot_.assign(comps, 0);
    cluster_comps_.assign(clusters_.size(), 0);
    for (std::size_t k = 0; k < comps; ++k) {
      const std::size_t w = k % warps_.size();
      const std::size_t clc = 3 * warps_.size() + engines_.size();
      const std::uint32_t cta = k < 3 * warps_.size() ? warps_[w].cta
                                : k < clc            ? engines_[k - 3 * warps_.size()].cta
                                                     : clusters_[k - clc].first_cta;
      cluster_of[k] = ctas_[cta].cluster;
      slot_[k] = cluster_comps_[cluster_of[k]]++;
    }
    clocks_.resize(comps);
    for (std::size_t k = 0; k < comps; ++k) {
      clocks_[k].assign(cluster_comps_[cluster_of[k]], 0);
      clocks_[k][slot_[k]] = 1;
    }
  }
  // Every warp can start: all enabled, no engine yet. Waiter lists for the
  // barriers that exist from the start; an mbarrier's list comes with its init.
  enabled_.reserve(actors);
  spin_.reserve(actors);
  for (std::uint32_t i = 0; i < warps_.size(); ++i) enabled_.push_back(i);
  spin_.assign(warps_.size(), 0);
  moves_.assign(actors, static_cast<std::uint8_t>(Move::no));
  std::fill_n(moves_.begin(), warps_.size(), static_cast<std::uint8_t>(Move::progress));
  unfinished_ = num_warps();
  marked_.assign(actors, 0);
  clc_setup();  // the clusters that do not start: their warps leave the enabled set
  lists_.resize(mbar_list(0));
  const int check = g_sched_check.load();
  sched_check_ = check < 0 ? sched_check_default() : check != 0;
  strategy_ = make_strategy(options.strategy, actors);
  if (strategy_ == nullptr) throw std::invalid_argument("RunOptions: a custom strategy needs StrategyParams::make");
  track_fp_ = strategy_->wants_footprints();

  source_root_ = options.source_root;
#ifdef WSPIPE_SOURCE_DIR
  if (source_root_.empty()) source_root_ = WSPIPE_SOURCE_DIR;
#endif
  if (!source_root_.empty() && source_root_.back() != '/') source_root_ += '/';
  if (options_.trace) {
    result_.trace.num_ctas = num_ctas;
    for (const Warp& w : warps_) result_.trace.warps.push_back({w.name, w.cta});
    for (const Engine& e : engines_) result_.trace.warps.push_back({e.name, e.cta});
    // The CLC units shown with their cluster's first CTA, the launcher with CTA 0.
    for (std::uint32_t a = 0; a < clc_actors(); ++a) {
      const std::uint32_t cta = a / 2 < clusters_.size() ? clusters_[a / 2].first_cta : 0;
      result_.trace.warps.push_back({clc_actor_name(clc_base() + a), cta});
    }
    result_.trace.strip_prefix = source_root_;
    result_.trace.events = take_event_storage();
  }
}

World::~World() {
  for (Cta& c : ctas_) keep_cta_buffers(c);
}

// ---------------------------------------------------------------- scheduling

World::Move World::movable(const Warp& w) const {
  switch (w.block) {
    case Block::none: return Move::progress;
    case Block::not_started: return cluster_launched(ctas_[w.cta].cluster) ? Move::progress : Move::no;
    case Block::finished: return Move::no;
    case Block::mbar: return phase_done(mbars_[w.obj], w.parity) ? Move::progress : Move::no;
    case Block::mbar_try:
      if (phase_done(mbars_[w.obj], w.parity)) return Move::progress;
      return options_.spurious_try_wait ? Move::spin : Move::no;
    case Block::named: return ctas_[w.cta].named[w.obj].gen > w.target ? Move::progress : Move::no;
    case Block::cluster: return clusters_[ctas_[w.cta].cluster].gen > w.target ? Move::progress : Move::no;
    case Block::tmem_alloc:
      return tmem_first_fit(w.cta, static_cast<std::uint32_t>(w.target), static_cast<int>(w.parity)) >= 0
                 ? Move::progress
                 : Move::no;
    case Block::tmem_pair: return ctas_[pair_cta(w.cta, 0)].pair.gen > w.target ? Move::progress : Move::no;
    // The waiter is the stores' issuer: the engine marks it at each step.
    case Block::bulk_wait: return bulk_done(w, w.target, w.parity != 0) ? Move::progress : Move::no;
  }
  return Move::no;
}

std::string World::rel(const char* file) const {
  std::string f = file != nullptr ? file : "";
  if (!source_root_.empty() && f.rfind(source_root_, 0) == 0) f.erase(0, source_root_.size());
  return f;
}

std::string World::actor_name(std::int32_t actor) const {
  if (actor < 0) return "";
  const auto a = static_cast<std::uint32_t>(actor);
  if (a >= clc_base()) return clc_actor_name(a);
  return a < warps_.size() ? warps_[a].name : engines_[a - warps_.size()].name;
}

void World::close_step() {
  if (!fp_open_) return;
  fp_open_ = false;
  std::sort(fp_.begin(), fp_.end());
  fp_.erase(std::unique(fp_.begin(), fp_.end()), fp_.end());
  strategy_->stepped(last_actor_, fp_);
  fp_.clear();
}

void World::blocked(Warp& w) {
  mark(w.id);
  std::uint32_t list = 0;
  switch (w.block) {
    case Block::mbar:
    case Block::mbar_try: list = mbar_list(static_cast<std::uint32_t>(w.obj)); break;
    case Block::named: list = named_list(w.cta, static_cast<std::uint32_t>(w.obj)); break;
    case Block::cluster: list = cluster_list(ctas_[w.cta].cluster); break;
    case Block::tmem_alloc:
    case Block::tmem_pair: list = tmem_list(w.cta); break;
    case Block::bulk_wait:  // no list: the TMA engine marks the issuer (world_store.cpp)
    case Block::none:
    case Block::not_started:
    case Block::finished: return;
  }
  w.wait_list = static_cast<std::int32_t>(list);
  w.wait_pos = static_cast<std::uint32_t>(lists_[list].size());
  lists_[list].push_back(w.id);
  if (w.block == Block::mbar_try) {
    w.try_pos = static_cast<std::int32_t>(try_waiters_.size());
    try_waiters_.push_back(w.id);
  }
}

void World::unblocked(Warp& w) {
  mark(w.id);
  if (w.wait_list >= 0) {
    std::vector<std::uint32_t>& l = lists_[static_cast<std::size_t>(w.wait_list)];
    const std::uint32_t last = l.back();
    l[w.wait_pos] = last;
    warps_[last].wait_pos = w.wait_pos;
    l.pop_back();
    w.wait_list = -1;
  }
  if (w.try_pos >= 0) {
    const std::uint32_t last = try_waiters_.back();
    try_waiters_[static_cast<std::size_t>(w.try_pos)] = last;
    warps_[last].try_pos = w.try_pos;
    try_waiters_.pop_back();
    w.try_pos = -1;
  }
}

// Re-evaluates the marked actors and moves each whose Move changed into,
// out of or within the sorted enabled set: work in proportion to what
// changed (and, for an insertion, to the enabled set), none for the others.
void World::refresh() {
  tl_sched_evaluations += dirty_.size();
  for (const std::uint32_t a : dirty_) {
    marked_[a] = 0;
    const Move now = move_of(a);
    const auto was = static_cast<Move>(moves_[a]);
    if (now == was) continue;
    moves_[a] = static_cast<std::uint8_t>(now);
    const auto at = std::lower_bound(enabled_.begin(), enabled_.end(), a) - enabled_.begin();
    if (was == Move::no) {
      enabled_.insert(enabled_.begin() + at, a);
      spin_.insert(spin_.begin() + at, now == Move::spin);
    } else if (now == Move::no) {
      enabled_.erase(enabled_.begin() + at);
      spin_.erase(spin_.begin() + at);
    } else {
      spin_[static_cast<std::size_t>(at)] = now == Move::spin;
    }
    if (was == Move::spin) --spinning_;
    if (now == Move::spin) ++spinning_;
  }
  dirty_.clear();
}

// The full recomputation the incremental set must equal (set_sched_check),
// compared entry by entry as it is made (no allocation per step).
void World::check_enabled() const {
  std::size_t k = 0;
  bool same = true;
  auto visit = [&](std::uint32_t actor, Move m) {
    if (m == Move::no) return;
    same = same && k < enabled_.size() && enabled_[k] == actor && spin_[k] == (m == Move::spin ? 1 : 0);
    ++k;
  };
  std::uint32_t unfinished = 0;
  std::size_t tries = 0;
  for (const Warp& w : warps_) {
    unfinished += w.block != Block::finished ? 1 : 0;
    tries += w.block == Block::mbar_try ? 1 : 0;
    visit(w.id, movable(w));
  }
  for (std::uint32_t e = 0; e < engines_.size(); ++e) visit(num_warps() + e, move_of(num_warps() + e));
  for (std::uint32_t a = clc_base(); a < clc_base() + clc_actors(); ++a) visit(a, clc_move(a));
  const auto spinning = static_cast<std::size_t>(std::count(spin_.begin(), spin_.end(), std::uint8_t{1}));
  g_sched_checks.fetch_add(1, std::memory_order_relaxed);
  if (same && k == enabled_.size() && spinning == spinning_ && unfinished == unfinished_ &&
      tries == try_waiters_.size())
    return;
  // Appended piece by piece: g++ 12 at -O3 warns (-Wrestrict, falsely) on
  // `" " + std::string` chains.
  std::string kept, full;
  auto add = [](std::string& to, const std::string& name, bool spin) {
    to.append(" ").append(name);
    if (spin) to.append(" (spin)");
  };
  for (std::size_t i = 0; i < enabled_.size(); ++i)
    add(kept, actor_name(static_cast<std::int32_t>(enabled_[i])), spin_[i] != 0);
  for (const Warp& w : warps_) {
    const Move m = movable(w);
    if (m != Move::no) add(full, w.name, m == Move::spin);
  }
  for (std::uint32_t e = 0; e < engines_.size(); ++e)
    if (!engines_[e].queue.empty()) add(full, engines_[e].name, false);
  for (std::uint32_t a = clc_base(); a < clc_base() + clc_actors(); ++a)
    if (clc_move(a) != Move::no) add(full, clc_actor_name(a), false);
  std::fprintf(stderr,
               "wspipe: scheduler check failed at step %llu: the enabled set kept at events differs from movable()\n"
               "  kept:      %s (%zu spinning, %u unfinished, %zu in try_wait)\n"
               "  recomputed:%s (%u unfinished, %zu in try_wait)\n",
               static_cast<unsigned long long>(step_), kept.c_str(), spinning_, unfinished_, try_waiters_.size(),
               full.c_str(), unfinished, tries);
  std::abort();
}

bool World::dispatch(Warp* self) {
  for (;;) {
    if (track_fp_) close_step();
    if (step_ >= options_.max_steps) {
      end(Status::livelock, self);
      return false;
    }
    refresh();
    if (sched_check_) check_enabled();
    // An actor that can only time out (spurious try_wait) does not count as
    // progress: if nothing else can move, the kernel is deadlocked. An
    // engine with operations queued can always move.
    const bool progress = enabled_.size() > spinning_;
    const bool unfinished = unfinished_ > 0;
    const std::uint32_t* enabled = enabled_.data();
    const std::uint8_t* spin = spin_.data();
    std::size_t n = enabled_.size();
    if (!progress) {
      // Nothing can change any state, except a try_wait whose time limit
      // runs out: it returns false, and its warp may then complete the phase
      // itself (PTX: try_wait is a potentially blocking test, not a wait).
      // Only a warp that polls forever is deadlocked.
      if (unfinished && n == 0 && idle_timeouts_ < kMaxIdleTimeouts) {
        idle_enabled_.assign(try_waiters_.begin(), try_waiters_.end());
        std::sort(idle_enabled_.begin(), idle_enabled_.end());
        idle_spin_.assign(idle_enabled_.size(), 1);
        enabled = idle_enabled_.data();
        spin = idle_spin_.data();
        n = idle_enabled_.size();
      }
      if (n == 0 || idle_timeouts_ >= kMaxIdleTimeouts) {
        end(unfinished ? Status::deadlock : Status::ok, self);
        return false;
      }
    }
    // The default policy (schedule.hpp): the last actor goes on while it
    // can make progress, else the next one in cyclic order that can.
    std::size_t at = std::lower_bound(enabled, enabled + n, last_actor_) - enabled;
    const bool can_continue = at < n && enabled[at] == last_actor_ && spin[at] == 0;
    if (!can_continue) {
      // The next actor in cyclic order that can make progress; when every
      // one can only time out, the next one (a time-out is then the move).
      const std::size_t first = ((at < n && enabled[at] == last_actor_) ? at + 1 : at) % n;
      at = first;
      for (std::size_t tries = 0, k = first; tries < n; ++tries, k = (k + 1) % n) {
        if (spin[k] == 0) {
          at = k;
          break;
        }
      }
    }
    std::uint32_t pick = enabled[at];
    if (n > 1 || track_fp_) {
      const Choice c{.enabled = enabled, .spin = spin, .n = n, .step = step_ + 1,
                     .index = choices_, .preferred = pick, .can_continue = can_continue};
      const auto p = strategy_->pick(c);
      if (!p) {
        if (strategy_->pruned()) {
          result_.pruned = true;
        } else {
          mismatch_ = strategy_->mismatch();
        }
        end(Status::ok, self);
        return false;
      }
      if (n > 1) {
        if (*p != pick) result_.schedule.push({choices_, *p});
        if (is_preemption(c, *p)) result_.preemption_at.push_back(choices_);
        for (std::size_t i = 0; i < n; ++i) fingerprint_ = (fingerprint_ ^ (enabled[i] * 2 + spin[i])) * 16777619u;
        fingerprint_ = (fingerprint_ ^ 0xffu) * 16777619u;  // end of this choice point
        ++choices_;
      }
      pick = *p;
    }
    // Letting a try_wait time out while nothing else could move changes no
    // state; anything else does.
    idle_timeouts_ = progress ? 0 : idle_timeouts_ + 1;
    last_actor_ = pick;
    fp_open_ = track_fp_;
    ++step_;
    if (pick >= clc_base()) {
      // A CLC unit completes a try_cancel, or the launcher launches a
      // cluster (world_clc.cpp); the scheduler picks again.
      clc_step(pick);
      if (stopping_ || killing_) return false;
      continue;
    }
    if (pick >= num_warps()) {
      // An engine completes its oldest operation on the running fiber, and
      // the scheduler picks again.
      mark(pick);  // its queue may have drained
      if (!engine_step(pick - num_warps()) || stopping_ || killing_) return false;
      continue;
    }
    if (self != nullptr && pick == self->id) return true;
    transfer(warps_[pick], self);
    return self != nullptr && self->block != Block::finished && !killing_;
  }
}

// Hands control to `to`. A live `from` sleeps until someone picks it again;
// a finished one returns and lets its fiber end.
void World::transfer(Warp& to, Warp* from) {
  DirectedAlgorithm& algo = *algo_;
  current_ = &to;
  if (to.ctx == nullptr) {
    Warp* target = &to;
    to.fiber = boost::fibers::fiber(std::allocator_arg, CachedStack(), [this, target] {
      arrived(nullptr);
      warp_main(*target);
    });
    to.ctx = algo.last_awakened;
    to.stack = CachedStack::last();
  }
  algo.next = to.ctx;
  if (from == nullptr || from->block != Block::finished) {
    switch_to(to.stack);
    current_ = from;
  }
}

void World::switch_to([[maybe_unused]] const FiberStack& to) {
#ifdef WSPIPE_ASAN
  void* fake_stack = nullptr;
  __sanitizer_start_switch_fiber(&fake_stack, to.bottom, to.size);
#endif
  boost::this_fiber::yield();
#ifdef WSPIPE_ASAN
  arrived(fake_stack);
#endif
}

void World::switch_to(boost::fibers::context* ctx, const FiberStack& stack) {
  algo_->next = ctx;
  switch_to(stack);
}

void World::arrived([[maybe_unused]] void* fake_stack) {
#ifdef WSPIPE_ASAN
  __sanitizer_finish_switch_fiber(fake_stack, nullptr, nullptr);
#endif
}

void World::leaving([[maybe_unused]] const boost::fibers::context* self) {
#ifdef WSPIPE_ASAN
  const FiberStack* to = algo_->next == main_ctx_ ? &main_stack_ : nullptr;
  for (const Warp& x : warps_) {
    if (to == nullptr && x.ctx == algo_->next && x.ctx != self) to = &x.stack;
    if (to == nullptr && x.lane.ctx == algo_->next && x.lane.ctx != self) to = &x.lane.stack;
  }
  if (to == nullptr) return;
  __sanitizer_start_switch_fiber(nullptr, to->bottom, to->size);  // this stack is done with
#endif
}

void World::end(Status s, Warp* from) {
  if (!stopping_) {
    stopping_ = true;
    if (result_.status == Status::ok) result_.status = s;
  }
  algo_->next = main_ctx_;
  current_ = nullptr;
  if (from != nullptr && from->block != Block::finished) {
    switch_to(main_stack_);  // back to run(); resumed only for teardown
    current_ = from;
  }
}

bool World::point(Warp& w, Block b, std::int32_t obj, std::uint32_t parity, std::uint64_t target,
                  const SourceLoc& loc) {
  if (killing_) {
    if (++w.kill_ops > kKillOpLimit) {
      std::fprintf(stderr, "wspipe: warp %s did not finish while the run was torn down\n", w.name.c_str());
      std::abort();
    }
    return false;
  }
  w.block = b;
  w.obj = obj;
  w.parity = parity;
  w.target = target;
  w.loc = loc;
  w.since = step_;
  // A non-blocking point leaves the warp as movable as it was running.
  const bool waits = b != Block::none;
  if (waits) blocked(w);
  const bool go = dispatch(&w);
  w.block = Block::none;
  if (waits) unblocked(w);
  return go && !killing_;
}

void World::warp_main(Warp& w) {
  current_ = &w;
  w.block = Block::none;
  if (!killing_ && options_.trace)
    record({.step = step_, .warp = static_cast<std::int32_t>(w.id), .kind = EventKind::start});
  body_();
  // The second lane must end too, with no operation lane 0 did not make.
  if (options_.lane_divergence) lanes_meet(w, LaneOp{.kind = LaneOp::Kind::exit, .lanes = 32});
  finish(w);
  leaving(w.ctx);
}

void World::start_second_lane(Warp& w) {
  Warp* target = &w;
  w.lane.fiber = boost::fibers::fiber(std::allocator_arg, CachedStack(), [this, target] {
    arrived(nullptr);
    lane_main(*target);
  });
  w.lane.ctx = algo_->last_awakened;
  w.lane.stack = CachedStack::last();
}

void World::lane_main(Warp& w) {
  body_();
  w.lane.finished = true;
  w.lane.at = LaneOp{.kind = LaneOp::Kind::exit, .lanes = 32};
  // Back to the warp's fiber, which waits for this lane's next operation
  // (or to the teardown in run(), which resumed it).
  in_lane_ = false;
  algo_->next = killing_ ? main_ctx_ : w.ctx;
  leaving(w.lane.ctx);
}

void World::finish(Warp& w) {
  w.block = Block::finished;
  mark(w.id);
  --unfinished_;
  touch_global();  // an exit changes the cluster barrier's count and may end the CTA
  Cta& cta = ctas_[w.cta];
  Cluster& cl = clusters_[cta.cluster];
  --cta.live_warps;
  cl.live_threads -= 32;
  if (cl.live_threads == 0) clc_cluster_exited(cta.cluster);
  if (killing_) {
    algo_->next = main_ctx_;
    return;
  }
  if (options_.trace)
    record({.step = step_, .warp = static_cast<std::int32_t>(w.id), .kind = EventKind::exit});
  if (cta.exited()) cta_exited(w);
  // barrier.cluster waits for the threads that have not exited.
  release_cluster_if_complete(cl);
  if (!stopping_) dispatch(&w);
  if (stopping_) algo_->next = main_ctx_;
}

RunResult World::run() {
  algo_ = &algorithm();
  World* const outer = tl_world_;
  tl_world_ = this;
  main_ctx_ = boost::fibers::context::active();
  main_stack_ = this_stack();
  dispatch(nullptr);  // returns when the run has ended
  if (track_fp_) close_step();
  if (mismatch_.empty() && !result_.pruned) mismatch_ = strategy_->mismatch();
  const std::uint32_t check = options_.strategy.kind == StrategyKind::replay && options_.strategy.strict
                                  ? options_.strategy.replay.check()
                                  : 0;
  if (check != 0 && check != fingerprint()) {
    mismatch_ = (mismatch_.empty() ? std::string() : mismatch_ + "; ") +
                "it was recorded from a run with other choice points (check " + hex8(check) + ", this run " +
                hex8(fingerprint()) + "): another kernel, configuration or wspipe version";
  }
  result_.steps = step_;
  result_.choices = choices_;
  result_.schedule.set_check(fingerprint());
  if (result_.status == Status::deadlock || result_.status == Status::livelock) {
    for (const Warp& w : warps_)
      if (w.block != Block::finished) result_.blocked.push_back(describe_blocked(w));
  }

  // Teardown: every fiber that started must run to its end before it can be
  // joined; unfinished ones continue with every operation a no-op. (Their
  // stacks may hold scoped contexts whose destructors call operations, so
  // unwinding them with an exception is not an option.)
  killing_ = true;
  for (Warp& w : warps_) {
    if (w.ctx != nullptr && w.block != Block::finished) {
      current_ = &w;
      algo_->next = w.ctx;
      switch_to(w.stack);
    }
    if (w.fiber.joinable()) w.fiber.join();
    if (w.lane.ctx != nullptr && !w.lane.finished) {
      current_ = &w;
      in_lane_ = true;
      switch_to(w.lane.ctx, w.lane.stack);
      in_lane_ = false;
    }
    if (w.lane.fiber.joinable()) w.lane.fiber.join();
  }
  current_ = nullptr;
  algo_->collect_terminated();
  tl_world_ = outer;

  if (!mismatch_.empty()) throw ScheduleMismatch("schedule does not fit this run: " + mismatch_);
  return std::move(result_);
}

// ------------------------------------------------------------ identity

std::uint32_t World::lane_idx(const SourceLoc& loc) {
  if (in_lane_) return kSecondLane;
  Warp& w = warp();
  if (lanes(w.active) != 1) {
    fail(w, "warp.lane-idx-divergent", "",
         "lane_idx() called with " + std::to_string(lanes(w.active)) +
             " lanes active: in warp-level code it has no single value; use for_each_lane or elect_one",
         loc);
    return 0;
  }
  return static_cast<std::uint32_t>(std::countr_zero(w.active));
}

void* World::shared_storage(std::size_t size, std::size_t align) {
  Warp& w = warp();
  const Cta& c = ctas_[w.cta];
  if (size > c.smem_bytes || align > 1024) {
    std::fprintf(stderr,
                 "wspipe: shared_storage of %zu bytes (alignment %zu) does not fit the launch's smem_bytes %zu\n",
                 size, align, c.smem_bytes);
    std::abort();
  }
  return c.smem;
}

void World::syncwarp(const SourceLoc& loc) {
  Warp& w = warp();
  if (!lanes_agree(w, {.kind = LaneOp::Kind::syncwarp, .loc = loc}) || !point(w, loc)) return;
  if (options_.trace)
    record({.step = step_, .warp = static_cast<std::int32_t>(w.id), .kind = EventKind::syncwarp,
            .file = loc.file_name(), .line = loc.line()});
}

// Every lane keeps its own copy of a pipeline cursor (DESIGN.md: each warp,
// and on the GPU each thread, holds its own state; only the barriers are
// shared). The emulator's one copy stands for 32 equal ones only while the
// whole warp steps it: stepped by fewer lanes, the others keep the old stage
// and phase, and their next wait passes on a stale phase or reads a stale
// slot on hardware, while this fiber's copy looks right.
void World::warp_state_step(const char* what, const SourceLoc& loc) {
  Warp& w = warp();
  if (lanes(w.active) == 32 || killing_ || stopping_ || in_lane_) return;
  fail(w, "warp.divergent-state", what,
       std::string(what) + " stepped with " + std::to_string(lanes(w.active)) +
           " of 32 lanes active (inside elect_one or for_each_lane): each lane keeps its own copy, so the other " +
           std::to_string(32 - lanes(w.active)) +
           " keep the old stage and phase and later wait on a stale one; step it at warp level (an elected "
           "release that steps for the whole warp: release_elected())",
       loc);
}

void World::check(bool cond, const char* what, const SourceLoc& loc) {
  if (cond || killing_ || stopping_ || in_lane_) return;
  fail(warp(), "kernel.check", "", std::string("kernel check failed: ") + what, loc);
}

// ------------------------------------------------------------ mbarrier

bool World::in_smem(const void* p, const Cta& c) const {
  const auto* b = static_cast<const std::byte*>(p);
  return b >= c.smem && b + sizeof(SharedMemBarrier) <= c.smem + c.smem_bytes;
}

std::string World::anon_name(const void* p, const Cta& c) const {
  char buf[64];
  std::snprintf(buf, sizeof buf, "mbarrier at smem+0x%zx",
                static_cast<std::size_t>(static_cast<const std::byte*>(p) - c.smem));
  return buf;
}

std::string World::object_label(std::uint32_t id) const {
  const Mbar& m = mbars_[id];
  return m.name + " (" + cta_label(m.cta) + ")";
}

Mbar* World::resolve(SharedMemBarrier& bar, Warp& w, const SourceLoc& loc) {
  const Cta& c = ctas_[w.cta];
  if (!in_smem(&bar, c)) {
    fail(w, "mbarrier.not-shared", "mbarrier outside shared memory",
         "mbarrier operand is not in this CTA's shared memory (PTX: undefined behaviour)", loc);
    return nullptr;
  }
  const std::uint64_t raw = bar.raw;
  const std::uint64_t idx = (raw & 0xffffffffull) - 1;
  if ((raw & ~0xffffffffull) == kTag && idx < mbars_.size() && mbars_[idx].addr == &bar && mbars_[idx].live) {
    touch_mbar(mbars_[idx]);
    return &mbars_[idx];
  }
  fail(w, "mbarrier.uninitialized", anon_name(&bar, c) + " (" + cta_label(w.cta) + ")",
       "operation on an mbarrier that is not initialised (never init-ed, inval-ed, or its bytes overwritten)", loc);
  return nullptr;
}

Mbar* World::resolve_remote(SharedMemBarrier& bar, std::uint32_t rank, Warp& w, const SourceLoc& loc) {
  const Cta& own = ctas_[w.cta];
  if (rank >= launch_.cluster_size) {
    fail(w, "cluster.bad-rank", "",
         "remote arrive to CTA rank " + std::to_string(rank) + " in a cluster of " +
             std::to_string(launch_.cluster_size),
         loc);
    return nullptr;
  }
  if (!in_smem(&bar, own)) {
    fail(w, "mbarrier.not-shared", "mbarrier outside shared memory",
         "remote arrive names an address outside this CTA's shared memory", loc);
    return nullptr;
  }
  const std::uint32_t peer = clusters_[own.cluster].first_cta + rank;
  if (peer == w.cta) return resolve(bar, w, loc);
  Cta& pc = ctas_[peer];
  auto* peer_bar =
      reinterpret_cast<SharedMemBarrier*>(pc.smem + (reinterpret_cast<std::byte*>(&bar) - own.smem));
  if (pc.exited()) {
    fail(w, "mbarrier.remote-exited-cta", anon_name(peer_bar, pc) + " (" + cta_label(peer) + ")",
         "remote arrive into " + cta_label(peer) +
             ", which has exited (illegal shared::cluster access: launch failure on hardware)",
         loc);
    return nullptr;
  }
  const std::uint64_t raw = peer_bar->raw;
  const std::uint64_t idx = (raw & 0xffffffffull) - 1;
  if ((raw & ~0xffffffffull) != kTag || idx >= mbars_.size() || mbars_[idx].addr != peer_bar ||
      !mbars_[idx].live) {
    fail(w, "mbarrier.uninitialized", anon_name(peer_bar, pc) + " (" + cta_label(peer) + ")",
         "remote arrive on an mbarrier of " + cta_label(peer) + " that is not initialised", loc);
    return nullptr;
  }
  Mbar& m = mbars_[idx];
  touch_mbar(m);
  const Cluster& cl = clusters_[own.cluster];
  if (!m.fenced || cl.gen <= m.fenced_gen) {
    fail(w, "mbarrier.remote-init-not-visible", object_label(static_cast<std::uint32_t>(idx)),
         std::string("remote arrive before the barrier's init was made visible to the cluster: ") +
             (m.fenced ? "no cluster barrier completed after the initialising warp's fence_init"
                       : "the initialising warp has not executed fence_init (fence.mbarrier_init.release.cluster)"),
         loc);
    return nullptr;
  }
  return &m;
}

void World::mbar_init(SharedMemBarrier& bar, std::uint32_t count, const char* base, int index,
                      const SourceLoc& loc) {
  if (in_lane_) return;
  Warp& w = warp();
  if (!point(w, loc)) return;
  const Cta& c = ctas_[w.cta];
  if (!in_smem(&bar, c)) {
    fail(w, "mbarrier.not-shared", "mbarrier outside shared memory",
         "mbarrier.init on an address outside this CTA's shared memory", loc);
    return;
  }
  std::string name;
  if (base != nullptr) {
    name = base;
    if (index >= 0) name += "[" + std::to_string(index) + "]";
  } else {
    name = anon_name(&bar, c);
  }
  touch(Res::mbar, (std::uint64_t{w.cta} << 32) |
                       static_cast<std::uint64_t>(reinterpret_cast<const std::byte*>(&bar) - c.smem));
  const std::uint64_t raw = bar.raw;
  const std::uint64_t old = (raw & 0xffffffffull) - 1;
  if ((raw & ~0xffffffffull) == kTag && old < mbars_.size() && mbars_[old].addr == &bar && mbars_[old].live) {
    fail(w, "mbarrier.init-live", object_label(static_cast<std::uint32_t>(old)),
         "mbarrier.init on a live barrier (needs mbarrier.inval first; hardware silently resets it)", loc);
    return;
  }
  if (count < 1 || count > kMaxCount) {
    fail(w, "mbarrier.count-range", name + " (" + cta_label(w.cta) + ")",
         "mbarrier.init count " + std::to_string(count) + " outside [1, 2^20-1]", loc);
    return;
  }
  const auto id = static_cast<std::uint32_t>(mbars_.size());
  Mbar& m = mbars_.emplace_back();
  lists_.emplace_back();  // its waiters: mbar_list(id)
  m.addr = &bar;
  m.cta = w.cta;
  m.name = std::move(name);
  m.live = true;
  m.expected = m.pending = count;
  m.init_warp = static_cast<std::int32_t>(w.id);
  bar.raw = kTag | (id + 1);
  if (options_.trace) result_.trace.objects.push_back({m.name, m.cta});
  if (options_.trace)
    record({.step = step_, .warp = static_cast<std::int32_t>(w.id), .object = static_cast<std::int32_t>(id),
            .kind = EventKind::init, .a = count, .file = loc.file_name(), .line = loc.line()});
  if (lanes(w.active) > 1)
    fail(w, "mbarrier.init-live", object_label(id),
         "mbarrier.init executed by " + std::to_string(lanes(w.active)) +
             " lanes: every lane after the first re-initialises a live barrier (init belongs in elect_one)",
         loc);
}

void World::mbar_inval(SharedMemBarrier& bar, const SourceLoc& loc) {
  if (in_lane_) return;
  Warp& w = warp();
  if (!point(w, loc)) return;
  Mbar* m = resolve(bar, w, loc);
  if (m == nullptr) return;
  m->live = false;
  mark_list(mbar_list(static_cast<std::uint32_t>(m - mbars_.data())));  // its waiters cannot pass now
  bar.raw = 0;
  if (options_.trace)
    record({.step = step_, .warp = static_cast<std::int32_t>(w.id),
            .object = static_cast<std::int32_t>(m - mbars_.data()), .kind = EventKind::inval, .file = loc.file_name(),
            .line = loc.line()});
}

void World::fence_init(const SourceLoc& loc) {
  if (in_lane_) return;
  Warp& w = warp();
  if (!point(w, loc)) return;
  // fence.mbarrier_init.release.cluster orders the executing thread's prior
  // mbarrier.init operations for the cluster (PTX "membar/fence").
  std::int64_t n = 0;
  const std::uint64_t gen = clusters_[ctas_[w.cta].cluster].gen;
  touch(Res::cluster, ctas_[w.cta].cluster);
  for (Mbar& m : mbars_) {
    if (m.live && !m.fenced && m.init_warp == static_cast<std::int32_t>(w.id)) {
      touch_mbar(m);
      m.fenced = true;
      m.fenced_gen = gen;
      ++n;
    }
  }
  if (options_.trace)
    record({.step = step_, .warp = static_cast<std::int32_t>(w.id), .kind = EventKind::fence_init, .a = n,
            .file = loc.file_name(), .line = loc.line()});
}

bool World::check_tx_range(std::uint32_t id, Warp& w, const SourceLoc& loc) {
  const Mbar& m = mbars_[id];
  if (m.tx > kMaxTx || m.tx < -kMaxTx) {
    fail(w, "mbarrier.tx-range", object_label(id),
         "tx-count " + std::to_string(m.tx) + " outside [-(2^20-1), 2^20-1]", loc);
    return false;
  }
  return true;
}

void World::maybe_complete(std::uint32_t id, std::int32_t actor, const SourceLoc& loc) {
  Mbar& m = mbars_[id];
  touch_mbar(m);
  if (m.pending != 0 || m.tx != 0) return;
  // PTX "Phase Completion": pending arrivals and tx-count both reached 0.
  ++m.phase;
  m.pending = m.expected;
  m.observed = false;
  if (options_.race_check) {
    m.done.swap(m.acc);
    m.acc.assign(clock_size(m.cta), 0);
  }
  if (options_.trace)
    record({.step = step_, .warp = actor, .object = static_cast<std::int32_t>(id), .kind = EventKind::phase,
            .a = static_cast<std::int64_t>(m.phase), .file = loc.file_name(), .line = loc.line()});
  mark_list(mbar_list(id));
  // A waiter still blocked on a phase two behind can no longer see it: its
  // parity now names the current, incomplete phase (aliasing). The waiters
  // are the barrier's list; the lowest warp id is reported.
  const Warp* alias = nullptr;
  for (const std::uint32_t a : lists_[mbar_list(id)]) {
    const Warp& x = warps_[a];
    if (x.intended + 1 < static_cast<std::int64_t>(m.phase) && (alias == nullptr || x.id < alias->id)) alias = &x;
  }
  if (alias != nullptr) {
    const Warp& x = *alias;
    fail(*current_, "mbarrier.parity-alias", object_label(id),
         "phase " + std::to_string(x.intended) + ", which " + x.name + " waits for (parity " +
             std::to_string(x.parity) + "), completed and the barrier moved on to phase " +
             std::to_string(m.phase) + " before the waiter ran: its parity now names the current phase",
         x.loc, &x);
  }
}

bool World::arrive_on(std::uint32_t id, std::uint32_t count, std::uint32_t tx_bytes, bool remote, std::uint32_t comp,
                      std::int32_t actor, const SourceLoc& loc, const Warp* culprit) {
  Mbar* m = &mbars_[id];
  touch_mbar(*m);
  Warp& running = *current_;
  // arrive.expect_tx is expect-tx(n) then arrive-on(1), per lane.
  m->tx += static_cast<std::int64_t>(tx_bytes) * count;
  if (tx_bytes != 0 && !check_tx_range(id, running, loc)) return false;
  if (count > m->pending) {
    fail(running, "mbarrier.over-arrival", object_label(id),
         "arrive of " + std::to_string(count) + (count > 1 ? " (one per active lane)" : "") + " with only " +
             std::to_string(m->pending) + " of " + std::to_string(m->expected) +
             " arrivals pending in phase " + std::to_string(m->phase) +
             ": traps on hardware; a warp-level arrive counts every active lane (use elect_one)",
         loc, culprit);
    return false;
  }
  if (!m->observed) {
    fail(running, "mbarrier.arrive-before-wait", object_label(id),
         "arrive in phase " + std::to_string(m->phase) + " before any wait observed the completion of phase " +
             std::to_string(m->phase - 1) + " (PTX usage rule): the phase can be skipped unseen",
         loc, culprit);
    return false;
  }
  m->pending -= count;
  if (options_.race_check) {
    if (m->acc.empty()) m->acc.assign(clock_size(m->cta), 0);
    release(comp, m->acc);
  }
  if (options_.trace)
    record({.step = step_, .warp = actor, .object = static_cast<std::int32_t>(id), .kind = EventKind::arrive,
            .remote = remote, .a = count, .b = m->pending, .c = m->tx, .file = loc.file_name(), .line = loc.line()});
  maybe_complete(id, actor, loc);
  return !stopping_;
}

void World::mbar_arrive(SharedMemBarrier& bar, std::int64_t cta_rank, std::uint32_t tx_bytes, const SourceLoc& loc) {
  if (in_lane_) return;
  Warp& w = warp();
  if (!point(w, loc)) return;
  const bool remote = cta_rank >= 0;
  Mbar* m = remote ? resolve_remote(bar, static_cast<std::uint32_t>(cta_rank), w, loc) : resolve(bar, w, loc);
  if (m == nullptr) return;
  const auto id = static_cast<std::uint32_t>(m - mbars_.data());
  // PTX "tcgen05 memory consistency": a warp hands TMEM back (this arrive
  // releases the accumulator stage) only after tcgen05.wait::ld, or the MMA
  // that reuses the stage may overwrite cells the load still reads.
  if (w.ld_waited < w.ld_issued) {
    fail(w, "tmem.release-before-wait-ld", object_label(id),
         "arrive while " + std::to_string(w.ld_issued - w.ld_waited) +
             " tcgen05.ld of this warp are still in flight (the latest at " + where(w.ld_loc) + "): tcgen05.wait::ld must come first",
         loc);
    return;
  }
  arrive_on(id, lanes(w.active), tx_bytes, remote && m->cta != w.cta, w.id, static_cast<std::int32_t>(w.id), loc,
            nullptr);
}

void World::mbar_tx(SharedMemBarrier& bar, std::int64_t delta_per_lane, const SourceLoc& loc) {
  if (in_lane_) return;
  Warp& w = warp();
  if (!point(w, loc)) return;
  Mbar* m = resolve(bar, w, loc);
  if (m == nullptr) return;
  const auto id = static_cast<std::uint32_t>(m - mbars_.data());
  const std::int64_t delta = delta_per_lane * lanes(w.active);
  m->tx += delta;
  if (!check_tx_range(id, w, loc)) return;
  if (options_.trace)
    record({.step = step_, .warp = static_cast<std::int32_t>(w.id), .object = static_cast<std::int32_t>(id),
            .kind = delta >= 0 ? EventKind::expect_tx : EventKind::complete_tx, .a = delta >= 0 ? delta : -delta,
            .b = m->pending, .c = m->tx, .file = loc.file_name(), .line = loc.line()});
  // tx may return to 0 with no arrivals pending: that completes the phase
  // (observed on sm_90a, HARDWARE.md §1).
  maybe_complete(id, static_cast<std::int32_t>(w.id), loc);
}

bool World::mbar_wait(SharedMemBarrier& bar, std::uint32_t parity, bool is_try, const SourceLoc& loc) {
  return mbar_wait_kind(bar, parity, is_try ? WaitKind::try_wait : WaitKind::wait, loc);
}

bool World::mbar_test(SharedMemBarrier& bar, std::uint32_t parity, const SourceLoc& loc) {
  return mbar_wait_kind(bar, parity, WaitKind::test_wait, loc);
}

bool World::mbar_wait_kind(SharedMemBarrier& bar, std::uint32_t parity, WaitKind kind, const SourceLoc& loc) {
  Warp& w = warp();
  const LaneOp::Kind lane_kind = kind == WaitKind::wait       ? LaneOp::Kind::wait
                                 : kind == WaitKind::try_wait ? LaneOp::Kind::try_wait
                                                              : LaneOp::Kind::test_wait;
  if (!lanes_agree(w, {.kind = lane_kind, .object = &bar, .a = parity & 1u, .loc = loc}))
    return w.lane.ok;  // lane 31 takes the answer the warp's fiber got
  if (killing_) return point(w, loc), true;
  Mbar* m = resolve(bar, w, loc);
  if (m == nullptr) return true;
  const auto id = static_cast<std::uint32_t>(m - mbars_.data());
  parity &= 1u;
  // The phase this wait means: the next one with this parity after the
  // last phase this warp observed on the barrier. Waits are valid only for
  // the current phase and the one before (PTX mbarrier.test_wait).
  if (w.seen.size() <= id) w.seen.resize(id + 1, kNotSeen);
  const std::int64_t last = w.seen[id];
  const auto cur = static_cast<std::int64_t>(m->phase);
  std::int64_t intended;
  if (last == kNotSeen) {
    intended = ((cur & 1) == parity) ? cur : cur - 1;
  } else {
    intended = ((last & 1) == static_cast<std::int64_t>(parity)) ? last : last + 1;
  }
  if (intended < cur - 1) {
    fail(w, "mbarrier.parity-alias", object_label(id),
         "wait for parity " + std::to_string(parity) + ": this warp last observed phase " + std::to_string(last) +
             ", so it waits for phase " + std::to_string(intended) + ", but the barrier is at phase " +
             std::to_string(cur) + "; the parity names phase " + std::to_string(((cur & 1) == parity) ? cur : cur - 1) +
             " instead",
         loc);
    return true;
  }
  w.intended = intended;
  // test_wait never blocks: a plain scheduling point.
  const bool go = kind == WaitKind::test_wait
                      ? point(w, loc)
                      : point(w, kind == WaitKind::try_wait ? Block::mbar_try : Block::mbar,
                              static_cast<std::int32_t>(id), parity, 0, loc);
  if (!go) return true;
  // Other warps ran meanwhile and may have grown the barrier table: look the
  // barrier up again by id rather than through the pointer.
  Mbar& after = mbars_[id];
  touch_mbar(after);
  const bool ok = phase_done(after, parity);
  if (ok) {
    after.observed = true;
    w.seen[id] = static_cast<std::int64_t>(after.phase) - 1;
    if (options_.race_check) acquire(w.id, after.done);
  }
  if (options_.trace)
    record({.step = step_, .begin = w.since + 1, .warp = static_cast<std::int32_t>(w.id),
            .object = static_cast<std::int32_t>(id), .kind = kind == WaitKind::wait       ? EventKind::wait
                                              : kind == WaitKind::try_wait ? EventKind::try_wait
                                                                           : EventKind::test_wait,
            .a = parity, .b = ok ? static_cast<std::int64_t>(after.phase) - 1 : -1, .c = ok, .file = loc.file_name(),
            .line = loc.line()});
  if (w.lane.publish) w.lane.ok = ok;
  return ok;
}

// ------------------------------------------------------ named and cluster

void World::named_barrier(std::uint32_t id, std::uint32_t threads, bool sync, const SourceLoc& loc) {
  Warp& w = warp();
  const LaneOp op{.kind = sync ? LaneOp::Kind::named_sync : LaneOp::Kind::named_arrive, .a = id, .b = threads, .loc = loc};
  if (!lanes_agree(w, op) || !point(w, loc)) return;
  const std::string obj = "named barrier " + std::to_string(id) + " (" + cta_label(w.cta) + ")";
  if (id >= 16) {
    fail(w, "named-barrier.bad-id", obj, "named barrier id " + std::to_string(id) + " outside [0, 15]", loc);
    return;
  }
  const std::uint32_t cta_threads = launch_.warps_per_cta * 32;
  if (threads == 0 || threads % 32 != 0 || threads > cta_threads) {
    fail(w, "named-barrier.thread-count", obj,
         "thread count " + std::to_string(threads) + " is not a positive multiple of 32 up to the CTA's " +
             std::to_string(cta_threads),
         loc);
    return;
  }
  // Warp-collective in the programming model (DESIGN.md): the whole warp
  // arrives, so a barrier's thread count is always reached exactly.
  if (lanes(w.active) != 32) {
    fail(w, "named-barrier.partial-warp", obj,
         std::string(sync ? "bar.sync" : "bar.arrive") + " issued with " + std::to_string(lanes(w.active)) +
             " of 32 lanes active (inside elect_one or for_each_lane): named barriers are warp-collective here",
         loc);
    return;
  }
  touch(Res::named, (std::uint64_t{w.cta} << 8) | id);
  NamedBarrier& nb = ctas_[w.cta].named[id];
  if (nb.arrived == 0) {
    nb.expected = threads;
  } else if (nb.expected != threads) {
    fail(w, "named-barrier.count-mismatch", obj,
         std::string(sync ? "bar.sync" : "bar.arrive") + " with " + std::to_string(threads) +
             " threads while the barrier in progress was started with " + std::to_string(nb.expected),
         loc);
    return;
  }
  nb.arrived += 32;
  if (options_.race_check) {
    if (nb.acc.empty()) nb.acc.assign(clock_size(w.cta), 0);
    release(w.id, nb.acc);
  }
  if (options_.trace)
    record({.step = step_, .warp = static_cast<std::int32_t>(w.id), .kind = EventKind::named_arrive,
            .a = id, .b = threads, .c = nb.arrived, .file = loc.file_name(), .line = loc.line()});
  const std::uint64_t gen = nb.gen;
  if (nb.arrived == nb.expected) {
    nb.arrived = 0;
    ++nb.gen;
    mark_list(named_list(w.cta, id));
    if (options_.race_check) {
      nb.done.swap(nb.acc);
      nb.acc.assign(clock_size(w.cta), 0);
    }
  }
  if (!sync) return;
  if (!point(w, Block::named, static_cast<std::int32_t>(id), 0, gen, loc)) return;
  touch(Res::named, (std::uint64_t{w.cta} << 8) | id);
  // bar.sync has acquire semantics over the barrier's participants. (If the
  // barrier has completed again meanwhile, this acquires the later instance:
  // more than it should, which can only hide a race.)
  if (options_.race_check) acquire(w.id, ctas_[w.cta].named[id].done);
  if (options_.trace)
    record({.step = step_, .begin = w.since + 1, .warp = static_cast<std::int32_t>(w.id),
            .kind = EventKind::named_pass, .a = id, .file = loc.file_name(), .line = loc.line()});
}

void World::release_cluster_if_complete(Cluster& c) {
  if (c.arrived > 0 && c.arrived >= c.live_threads) {
    c.arrived = 0;
    ++c.gen;
    mark_list(cluster_list(static_cast<std::uint32_t>(&c - clusters_.data())));
    if (options_.race_check) {
      c.done.swap(c.acc);
      c.acc.assign(cluster_comps_[static_cast<std::size_t>(&c - clusters_.data())], 0);
    }
  }
}

void World::cluster_sync(const SourceLoc& loc) {
  Warp& w = warp();
  if (!lanes_agree(w, {.kind = LaneOp::Kind::cluster_sync, .loc = loc}) || !point(w, loc)) return;
  Cluster& c = clusters_[ctas_[w.cta].cluster];
  touch(Res::cluster, ctas_[w.cta].cluster);
  // barrier.cluster.arrive + wait: every non-exited thread of the cluster.
  c.arrived += lanes(w.active);
  if (options_.race_check) {
    if (c.acc.empty()) c.acc.assign(clock_size(w.cta), 0);
    release(w.id, c.acc);
  }
  const std::uint64_t gen = c.gen;
  if (options_.trace)
    record({.step = step_, .warp = static_cast<std::int32_t>(w.id), .kind = EventKind::cluster_arrive,
            .a = c.arrived, .b = c.live_threads, .file = loc.file_name(), .line = loc.line()});
  release_cluster_if_complete(c);
  if (!point(w, Block::cluster, -1, 0, gen, loc)) return;
  touch(Res::cluster, ctas_[w.cta].cluster);
  ++w.cluster_syncs;
  if (options_.race_check) acquire(w.id, clusters_[ctas_[w.cta].cluster].done);
  if (options_.trace)
    record({.step = step_, .begin = w.since + 1, .warp = static_cast<std::int32_t>(w.id),
            .kind = EventKind::cluster_pass, .file = loc.file_name(), .line = loc.line()});
}

void World::cta_exited(Warp& w) {
  const Cta& cta = ctas_[w.cta];
  // An async operation that still writes into this CTA's shared memory or
  // TMEM, or arrives on its barriers, would do so after it is gone (on
  // hardware: a launch failure, HARDWARE.md §6 bug 15). The same rule as an
  // operation reaching the CTA after its exit (world_async.cpp).
  if (store_reading_at_exit(w)) return;
  std::string what;
  if (cta_has_async_in_flight(w.cta, &what) || clc_pending_for(w.cta, &what)) {
    fail(w, "async.target-exited", cta_label(w.cta),
         "the CTA exited while " + what + " was still in flight into it (drain the pipeline before exiting)", w.loc);
    return;
  }
  // Bytes still expected or delivered unmatched on a barrier when its CTA
  // exits: expect_tx and the bytes that arrived disagree (HARDWARE.md §4).
  for (std::uint32_t id = 0; id < mbars_.size(); ++id) {
    const Mbar& m = mbars_[id];
    if (m.live && m.cta == w.cta && m.tx != 0) {
      fail(w, "mbarrier.tx-pending-at-exit", object_label(id),
           "the CTA exited with tx-count " + std::to_string(m.tx) + " in phase " + std::to_string(m.phase) +
               ": bytes expected and bytes delivered disagree",
           w.loc);
      return;
    }
  }
  // PTX "tcgen05.alloc": all Tensor Memory allocated must be deallocated
  // before the kernel exits; a leaked block stays taken for the next CTA on
  // the SM, whose tcgen05.alloc then blocks.
  if (!cta.tmem_live.empty()) {
    const TmemBlock& b = cta.tmem_live.front();
    fail(w, "tmem.leak", "TMEM columns [" + std::to_string(b.col) + ", " + std::to_string(b.col + b.cols) + ") (" +
                             cta_label(w.cta) + ")",
         "the CTA exited with " + std::to_string(cta.tmem_live.size()) + " Tensor Memory allocation(s) live; " +
             std::to_string(b.cols) + " columns allocated by " + warps_[b.warp].name + " at " + where(b.loc) + " (step " + std::to_string(b.step) + ") were never deallocated",
         b.loc, &warps_[b.warp]);
  }
}

// ------------------------------------------------------------ reporting

void World::fail(Warp& w, std::string rule, std::string object, std::string message, const SourceLoc& loc,
                 const Warp* culprit, std::string other) {
  if (stopping_ || killing_) return;
  const Warp& who = culprit != nullptr ? *culprit : w;
  Violation v;
  v.rule = std::move(rule);
  v.message = std::move(message);
  v.warp = who.name;
  v.object = std::move(object);
  v.step = step_;
  v.file = rel(loc.file_name());
  v.line = loc.line();
  v.other = std::move(other);
  if (options_.trace)
    record({.step = step_, .warp = static_cast<std::int32_t>(who.id), .kind = EventKind::violation,
            .file = loc.file_name(), .line = loc.line()});
  result_.violations.push_back(std::move(v));
  result_.status = Status::violation;
  end(Status::violation, &w);
}

BlockedWarp World::describe_blocked(const Warp& w) const {
  BlockedWarp b;
  b.warp = w.name;
  b.since = w.since;
  b.file = rel(w.loc.file_name());
  b.line = w.loc.line();
  std::int32_t object = -1;
  switch (w.block) {
    case Block::not_started:
      b.op = cluster_launched(ctas_[w.cta].cluster) ? "not started" : "not launched (its cluster waits for a launch slot)";
      break;
    case Block::none: b.op = "running"; break;
    case Block::finished: b.op = "finished"; break;
    case Block::mbar:
    case Block::mbar_try: {
      const Mbar& m = mbars_[w.obj];
      object = w.obj;
      b.op = w.block == Block::mbar ? "wait" : "try_wait";
      b.object = object_label(static_cast<std::uint32_t>(w.obj));
      b.state = "waits for parity " + std::to_string(w.parity) + " (phase " + std::to_string(w.intended) +
                "); the barrier is in phase " + std::to_string(m.phase) + " (parity " +
                std::to_string(m.phase & 1) + ") with " + std::to_string(m.pending) + " of " +
                std::to_string(m.expected) + " arrivals pending, tx-count " + std::to_string(m.tx);
      break;
    }
    case Block::named: {
      const NamedBarrier& nb = ctas_[w.cta].named[w.obj];
      b.op = "bar.sync";
      b.object = "named barrier " + std::to_string(w.obj) + " (" + cta_label(w.cta) + ")";
      b.state = std::to_string(nb.arrived) + " of " + std::to_string(nb.expected) + " threads arrived";
      break;
    }
    case Block::cluster: {
      const Cluster& c = clusters_[ctas_[w.cta].cluster];
      b.op = "cluster_sync";
      b.object = "cluster barrier (cluster " + std::to_string(ctas_[w.cta].cluster) + ")";
      b.state = std::to_string(c.arrived) + " of " + std::to_string(c.live_threads) + " live threads arrived";
      break;
    }
    case Block::tmem_alloc:
    case Block::tmem_pair:
      b.op = w.block == Block::tmem_alloc ? "tcgen05.alloc" : "tcgen05 cta_group::2 collective";
      b.object = "Tensor Memory (" + cta_label(w.cta) + ")";
      b.state = tmem_describe_blocked(w);
      break;
    case Block::bulk_wait:
      b.op = w.parity != 0 ? "cp.async.bulk.wait_group.read" : "cp.async.bulk.wait_group";
      b.object = "bulk async-groups of " + w.name;
      b.state = bulk_describe_blocked(w);
      break;
  }
  if (object >= 0 && options_.trace) {
    for (const Event* e : result_.trace.last_on(object, 6)) {
      b.last_events.push_back("step " + std::to_string(e->step) + "  " + result_.trace.warps[e->warp].name + "  " +
                              result_.trace.describe(*e) + "  " + result_.trace.location(*e));
    }
  }
  return b;
}

// ------------------------------------------------------ happens-before

void World::release(std::uint32_t comp, Clock& into) {
  join(into, clocks_[comp]);
  tick(comp);
}

void World::acquire(std::uint32_t comp, const Clock& from) { join(clocks_[comp], from); }

std::uint32_t World::access_info(std::int32_t actor, std::int32_t issuer, const char* what, const SourceLoc& loc) {
  access_infos_.push_back({.actor = actor, .issuer = issuer, .what = what, .step = step_, .loc = loc});
  return static_cast<std::uint32_t>(access_infos_.size() - 1);
}

std::string World::describe_access(const Access& a) const {
  const AccessInfo& i = access_infos_[a.info];
  const std::string file = rel(i.loc.file_name());
  std::string who = actor_name(i.actor);
  if (i.issuer >= 0 && i.issuer != i.actor) who += " (issued by " + actor_name(i.issuer) + ")";
  return who + ": " + i.what + " at step " + std::to_string(i.step) + ", " + file + ":" + std::to_string(i.loc.line());
}

void World::report_race(const Shadow& s, const Access* other, bool write, std::uint32_t info, const std::string& object,
                        const SourceLoc& loc, const Warp* culprit) {
  const AccessInfo& mine = access_infos_[info];
  const AccessInfo& theirs = access_infos_[other->info];
  const bool other_wrote = other == &s.write;
  fail(*current_, object.rfind("TMEM", 0) == 0 ? "race.tmem" : "race.smem", object,
       std::string(mine.what) + (write ? " (write)" : " (read)") + " by " + actor_name(mine.actor) +
           " is not ordered with an earlier " + theirs.what + (other_wrote ? " (write)" : " (read)") +
           " of the same location by " + actor_name(theirs.actor) +
           ": no barrier, commit or wait orders the two, whatever values this schedule produced",
       loc, culprit, describe_access(*other));
}

bool World::smem_range_access(std::uint32_t cta, std::uint32_t offset, std::uint32_t bytes, bool write, bool generic,
                              std::uint32_t comp, std::uint32_t info, const SourceLoc& loc, const Warp* culprit) {
  const model::MmaFootprint::Range range{.cta = 0, .offset = offset, .bytes = bytes};
  return smem_ranges_access(&cta, {&range, 1}, write, generic, comp, info, loc, culprit);
}

bool World::smem_ranges_access(const std::uint32_t* ctas, std::span<const model::MmaFootprint::Range> ranges,
                               bool write, bool generic, std::uint32_t comp, std::uint32_t info, const SourceLoc& loc,
                               const Warp* culprit) {
  const Access a = access_now(comp, info);
  const Clock& clock = clocks_[comp];
  std::uint32_t cta = 0;
  // A visit each for writes and reads, small enough to be inlined into the
  // table's loop.
  auto visit_write = [&](Shadow& s, std::uint32_t k) {
    if (const Access* other = shadow_write(s, clock, a))
      return smem_word_rare(s, other, k, cta, true, comp, info, loc, culprit);
    s.write_generic = generic;
    return true;
  };
  auto visit_read = [&](Shadow& s, std::uint32_t k) {
    const Access* other = shadow_read(s, clock, a);
    // (A read leaves the shadow's write as it was.)
    if (other == nullptr && (generic || !s.write_generic || s.write.time == 0)) return true;
    return smem_word_rare(s, other, k, cta, false, comp, info, loc, culprit);
  };
  for (const model::MmaFootprint::Range& r : ranges) {
    if (r.bytes == 0) continue;
    cta = ctas[r.cta];
    Cta& c = ctas_[cta];
    // Shadow granularity: 4-byte words, the smallest unit kernels here hand
    // between warps (a TMEM address, an f32); sub-word accesses by different
    // warps to one word would be reported as conflicting.
    const auto words = static_cast<std::uint32_t>((c.smem_bytes + kSmemWord - 1) / kSmemWord);
    if (c.smem_shadow.empty()) c.smem_shadow.reset(words);
    const std::uint32_t first = r.offset / kSmemWord, last = std::min((r.offset + r.bytes - 1) / kSmemWord + 1, words);
    if (!(write ? c.smem_shadow.access_range(first, last, visit_write)
                : c.smem_shadow.access_range(first, last, visit_read)))
      return false;
  }
  return true;
}

bool World::smem_word_rare(const Shadow& s, const Access* other, std::uint32_t word, std::uint32_t cta, bool write,
                           std::uint32_t comp, std::uint32_t info, const SourceLoc& loc, const Warp* culprit) {
  auto object = [&] {
    char buf[96];
    std::snprintf(buf, sizeof buf, "shared memory [0x%x, 0x%x) (%s)", word * kSmemWord, (word + 1) * kSmemWord,
                  cta_label(cta).c_str());
    return std::string(buf);
  };
  if (other != nullptr) {
    report_race(s, other, write, info, object(), loc, culprit);
    return false;
  }
  // PTX "Proxies": the async proxy (tensor core, TMA) sees a warp's
  // ordinary stores only after that warp's fence.proxy.async, and the
  // reader must be ordered after the fence (HARDWARE.md §3).
  const Access& prior = s.write;
  const Warp& writer = warps_[prior.comp];
  const auto& f = writer.proxy_fences;
  const auto it = std::lower_bound(f.begin(), f.end(), prior.time);
  if (it != f.end() && clocks_[comp][prior.slot] >= *it) return true;
  fail(*current_, "smem.missing-proxy-fence", object(),
       std::string(access_infos_[info].what) + " by " + actor_name(access_infos_[info].actor) +
           " (async proxy) reads shared memory written by an ordinary store of " + writer.name +
           (it == f.end() ? " that no fence.proxy.async followed"
                          : " whose fence.proxy.async is not ordered before the read") +
           ": the tensor core or TMA may read stale data",
       loc, culprit, describe_access(prior));
  return false;
}

}  // namespace detail

RunResult run(const LaunchConfig& launch, const std::function<void()>& body, const RunOptions& options) {
  detail::World world(launch, body, options);
  return world.run();
}

}  // namespace wspipe::emu
