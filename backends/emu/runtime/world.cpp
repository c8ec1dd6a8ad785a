// The World: one execution of a kernel (construction, the run, the end,
// exits and teardown). Its rooms are the other files of this folder
// (docs/architecture.md).
#include "backends/emu/runtime/world.hpp"
#include "backends/emu/runtime/engines.hpp"
#include "backends/emu/runtime/tensor_core.hpp"
#include "backends/emu/runtime/tma_load.hpp"
#include "backends/emu/runtime/tma_store.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "backends/emu/runtime/barriers.hpp"
#include "backends/emu/runtime/clc.hpp"
#include "backends/emu/runtime/fibers.hpp"
#include "backends/emu/runtime/mbarrier.hpp"
#include "backends/emu/runtime/tmem.hpp"
#include "backends/emu/runtime/util.hpp"

namespace wspipe::emu::detail {

namespace {
// The epoch tables and the access records of this thread's last World,
// for the next one: records of a long run reach megabytes, which glibc
// hands back to the system when they are freed (it unmaps them, or trims
// its heap), and the next run faulted their pages in again. Records past
// kKeptAccessInfoBytes are not kept.
thread_local std::vector<EpochEnds> t_epoch_ends;
thread_local std::vector<AccessInfo> t_access_infos;
constexpr std::size_t kKeptAccessInfoBytes = std::size_t{64} << 20;
}  // namespace

World::World(const LaunchConfig& launch_in, const std::function<void()>& body, const RunOptions& options)
    : launch_(checked_launch(launch_in)), body_(body), options_(options) {
  const LaunchConfig& launch = launch_;  // checked: cluster_shape set, cluster_size its size

  const std::uint32_t num_ctas = launch.num_clusters * launch.cluster_size;
  ctas_.resize(num_ctas);
  // A run under the rules of an older schedule version (replay() of one)
  // records its schedule in that version, which replays under the same
  // rules. (Loads in issue order say so in the replay line instead.)
  if (options_.legacy_pieces && options_.async_reorder)
    result_.schedule = Schedule({}, 0, options_.spin_out_limit == 0 ? 4 : 5);
  // A constructor that throws (a bad strategy below) runs no destructor:
  // the CTAs' buffers go back to this thread's spares on the way out, as
  // ~World gives them back.
  struct KeepOnThrow {
    std::vector<Cta>& ctas;
    bool armed = true;
    ~KeepOnThrow() {
      if (armed)
        for (Cta& c : ctas) keep_cta_buffers(c);
    }
  } keep_on_throw{ctas_};
  // Each CTA's shared memory and, with the race checker, its shadow's
  // table of blocks (split blocks grow it as the run goes; not charged).
  const std::size_t smem_shadow_bytes =
      options.race_check ? launch.smem_bytes / kSmemWord / kSmemShadowBlock * sizeof(Shadow) : 0;
  memory_.add(num_ctas * (smem_alloc_bytes(launch.smem_bytes) + smem_shadow_bytes), options.max_memory_bytes,
              "the shared memory of the launch's " + std::to_string(num_ctas) + " CTAs");
  clusters_.resize(launch.num_clusters);
  for (std::uint32_t c = 0; c < num_ctas; ++c) {
    Cta& cta = ctas_[c];
    cta.cluster = c / launch.cluster_size;
    cta.rank = c % launch.cluster_size;
    cta.smem = take_smem(smem_alloc_bytes(launch.smem_bytes));
    cta.smem_shadow = take_smem_shadow();
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
  // The rooms. The engines (two per CTA: its TMA engine and its tensor
  // core) are actors after the warps, the CLC units after the engines.
  engines_ = std::make_unique<EngineRoom>(*this, num_warps());
  tensor_core_ = std::make_unique<TensorCoreRoom>(*this);
  tma_load_ = std::make_unique<TmaLoadRoom>(*this);
  tma_store_ = std::make_unique<TmaStoreRoom>(*this);
  mbar_ = std::make_unique<MbarrierRoom>(*this);
  tmem_ = std::make_unique<TmemRoom>(*this);
  barriers_ = std::make_unique<BarrierRoom>(*this);
  clc_ = std::make_unique<ClcRoom>(*this, num_warps() + num_engines());
  // The TMA engines' alternative actors (RunOptions::async_reorder) last.
  engines_->place_alternatives(num_warps() + num_engines() + clc_->actors());
  const std::uint32_t actors = num_warps() + num_engines() + clc_->actors() + engines_->alternatives();
  if (options_.race_check) {
    // Components: warps, then each of their agents (comp_ld ... comp_clc)
    // and their lanes' components (comp_lanes), numbered within their
    // cluster in that order.
    const std::size_t comps = 7 * warps_.size();
    std::vector<std::uint32_t> cluster_of(comps);
    slot_.assign(comps, 0);
    cluster_comps_.assign(clusters_.size(), 0);
    for (std::size_t k = 0; k < comps; ++k) {
      cluster_of[k] = ctas_[warps_[k % warps_.size()].cta].cluster;
      slot_[k] = cluster_comps_[cluster_of[k]]++;
    }
    epoch_ends_.swap(t_epoch_ends);
    for (EpochEnds& e : epoch_ends_) e.clear();
    access_infos_.swap(t_access_infos);
    access_infos_.clear();
    epoch_ends_.resize(warps_.size());
    clocks_.resize(comps);
    for (std::size_t k = 0; k < comps; ++k) {
      clocks_[k].assign(cluster_comps_[cluster_of[k]], 0);
      clocks_[k][slot_[k]] = 1;
    }
    // A warp's lanes start in epoch 1 (0 is "none"), which no release covers yet.
    for (const Warp& w : warps_) clocks_[w.id][slot_[comp_lanes(w.id)]] = 1;
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
  // The warps of clusters that do not start (CLC) leave the enabled set.
  std::erase_if(enabled_, [&](std::uint32_t id) {
    if (clc_->launched(ctas_[warps_[id].cta].cluster)) return false;
    moves_[id] = static_cast<std::uint8_t>(Move::no);
    return true;
  });
  spin_.assign(enabled_.size(), 0);
  lists_.resize(mbar_list(0));
  sched_check_ = sched_check_on();
  if (options.strategy.shared != nullptr) {
    if (options.strategy.kind != StrategyKind::custom && options.strategy.kind != StrategyKind::exhaustive)
      throw std::invalid_argument("RunOptions: StrategyParams::shared is for the custom and exhaustive kinds, not " +
                                  std::string(to_string(options.strategy.kind)));
    strategy_ = options.strategy.shared;
    strategy_->new_execution(actors);
  } else {
    owned_strategy_ = make_strategy(options.strategy, actors);
    strategy_ = owned_strategy_.get();
  }
  if (strategy_ == nullptr)
    throw std::invalid_argument("RunOptions: a custom strategy needs StrategyParams::make or StrategyParams::shared");
  track_fp_ = strategy_->wants_footprints();

  // Empty: absolute paths (emu::run of an emu::Kernel fills in the
  // project's root: RunOptions::source_root).
  source_root_ = options.source_root;
  if (!source_root_.empty() && source_root_.back() != '/') source_root_ += '/';
  if (options_.trace) {
    result_.trace.num_ctas = num_ctas;
    for (const Warp& w : warps_) result_.trace.warps.push_back({w.name, w.cta});
    for (const Engine& e : engines_->all()) result_.trace.warps.push_back({e.name, e.cta});
    // The CLC units shown with their cluster's first CTA, the launcher with CTA 0.
    for (std::uint32_t a = 0; a < clc_->actors(); ++a) {
      const std::uint32_t cta = a / 2 < clusters_.size() ? clusters_[a / 2].first_cta : 0;
      result_.trace.warps.push_back({clc_->actor_name(clc_->first_actor() + a), cta});
    }
    for (std::uint32_t a = 0; a < engines_->alternatives(); ++a)
      result_.trace.warps.push_back(
          {engines_->alternative_name(engines_->first_alternative() + a), a / engines_->per_cta()});
    result_.trace.strip_prefix = source_root_;
    result_.trace.events = take_event_storage();
  }
  keep_on_throw.armed = false;
}

// The trace's vector is about to double: charge the new half.
void World::charge_trace_growth() {
  const std::size_t events = std::max<std::size_t>(result_.trace.events.capacity(), 1024);
  memory_.add(events * sizeof(Event), options_.max_memory_bytes,
              "the trace of this run (" + std::to_string(result_.trace.events.size()) +
                  " events so far; `wspipe run --trace FILE` streams it to the file)");
}

// Hands the sink the events it has not had and keeps the last kKeepEvents
// (the report's "last events on" a barrier come from them).
void World::stream_trace() {
  Trace& t = result_.trace;
  options_.trace_sink->take(t, std::span<const Event>(t.events).subspan(t.streamed));
  const std::size_t drop = t.events.size() - kKeepEvents;
  t.events.erase(t.events.begin(), t.events.begin() + static_cast<std::ptrdiff_t>(drop));
  t.dropped += drop;
  t.streamed = t.events.size();
}

World::~World() {
  for (Cta& c : ctas_) keep_cta_buffers(c);
  if (epoch_ends_.size() >= t_epoch_ends.size()) t_epoch_ends.swap(epoch_ends_);
  if (access_infos_.capacity() >= t_access_infos.capacity() &&
      access_infos_.capacity() * sizeof(AccessInfo) <= kKeptAccessInfoBytes)
    t_access_infos.swap(access_infos_);
}

void World::never_run(std::uint32_t cluster) {
  Cluster& cl = clusters_[cluster];
  for (std::uint32_t r = 0; r < launch_.cluster_size; ++r) {
    Cta& cta = ctas_[cl.first_cta + r];
    for (std::uint32_t i = 0; i < launch_.warps_per_cta; ++i) {
      Warp& w = warps_[(cl.first_cta + r) * launch_.warps_per_cta + i];
      w.block = Block::finished;
      mark(w.id);
      --unfinished_;
    }
    cta.live_warps = 0;
  }
  cl.live_threads = 0;
}

void World::end(Status s, Warp* from) {
  if (!stopping_) {
    stopping_ = true;
    if (result_.status == Status::ok) result_.status = s;
  }
  algo_->next = main_ctx_;
  set_current(nullptr);
  if (from != nullptr && from->block != Block::finished) {
    switch_to(main_stack_);  // back to run(); resumed only for teardown
    set_current(from);
  }
}

void World::finish(Warp& w) {
  w.block = Block::finished;
  mark(w.id);
  --unfinished_;
  Cta& cta = ctas_[w.cta];
  Cluster& cl = clusters_[cta.cluster];
  --cta.live_warps;
  // An exit lowers the count of threads a cluster barrier waits for
  // (commutative with other exits and arrivals, BarrierRoom::threads_exited);
  // the CTA's last exit ends the CTA (what reaches it afterwards reads
  // that). Exits are counted updates: whichever comes last ends the CTA,
  // and the last one was not enabled by the others (a step that ends with
  // the last exit, a try_wait's time-out before it say, could have run
  // before another warp's exit, which is then the last).
  touch(Res::cta_warps, w.cta, Touch::count);
  if (cta.exited()) touch(Res::cta_exit, w.cta);  // the exit checks (cta_exited) add what they read
  cl.live_threads -= 32;
  if (cl.live_threads == 0) clc_->cluster_exited(cta.cluster);
  if (killing_) {
    algo_->next = main_ctx_;
    return;
  }
  if (options_.trace)
    record({.step = step_, .warp = static_cast<std::int32_t>(w.id), .kind = EventKind::exit});
  if (cta.exited()) cta_exited(w);
  // barrier.cluster waits for the threads that have not exited.
  barriers_->threads_exited(cta.cluster);
  if (!stopping_) dispatch(&w);
  if (stopping_) algo_->next = main_ctx_;
}

RunResult World::run() {
  algo_ = &algorithm();
  // This run is the thread's until it returns or throws (a fiber stack or a
  // buffer that cannot be allocated): the access hooks (plain_access.cpp)
  // must never find a World that is gone.
  struct Restore {
    RunningWarp* outer;
    ~Restore() { tl_running_ = outer; }
  } const restore{tl_running_};
  tl_running_ = this;
  main_ctx_ = boost::fibers::context::active();
  main_stack_ = this_stack();
  dispatch(nullptr);  // returns when the run has ended
  if (track_fp_) {
    close_step();
    strategy_->ended(result_.status != Status::ok);
  }
  if (mismatch_.empty() && !result_.pruned) mismatch_ = strategy_->mismatch();
  const Schedule& replayed = options_.strategy.replay;
  const std::uint32_t check =
      options_.strategy.kind == StrategyKind::replay && options_.strategy.strict ? replayed.check() : 0;
  if (check != 0 && check != fingerprint(replayed.version())) {
    mismatch_ = (mismatch_.empty() ? std::string() : mismatch_ + "; ") + "the " +
                (replayed.version() == 2 ? "choice points" : "steps") +
                " of this run differ from those of the run it was recorded from (check " + hex8(check) + " there, " +
                hex8(fingerprint(replayed.version())) +
                " here): it was recorded on another kernel, configuration or wspipe version. Replay it with the "
                "kernel and options it was recorded with (the replay line printed with it has them all), or explore "
                "this one for a schedule of its own";
  }
  result_.steps = step_;
  result_.spurious_try_wait = options_.spurious_try_wait;
  result_.spin_out_limit = options_.spin_out_limit;
  result_.async_reorder = options_.async_reorder;
  result_.reorder_window = options_.reorder_window;
  result_.legacy_pieces = options_.legacy_pieces;
  result_.choices = choices_;
  result_.schedule.set_check(fingerprint(result_.schedule.version()));
  if (result_.status == Status::deadlock || result_.status == Status::livelock) {
    for (const Warp& w : warps_)
      if (w.block != Block::finished) result_.blocked.push_back(describe_blocked(w));
  }

  // Teardown: every fiber that started must run to its end before it can be
  // joined. An unfinished one resumes where it waits, and its next
  // operation throws TeardownUnwind (World::teardown_op), which unwinds its
  // frames to run_body: a loop whose exit depends on what a wait publishes
  // ends too. Operations in the destructors that the unwinding runs are
  // no-ops. A fiber that keeps catching the unwinding is abandoned instead
  // (abandon_running: it comes back here without ending) and released, and
  // the run ends with swallowed_, below. Nothing of it is recorded: the
  // run's result is complete here.
  killing_ = true;
  for (Warp& w : warps_) {
    if (w.ctx != nullptr && w.block != Block::finished) {
      set_current(&w);
      algo_->next = w.ctx;
      switch_to(w.stack);
    }
    if (w.abandoned) {
      release_abandoned(w.fiber, w.ctx, w.stack);
    } else if (w.fiber.joinable()) {
      w.fiber.join();
    }
    if (w.lane.ctx != nullptr && !w.lane.finished) {
      set_current(&w);
      in_lane_ = true;
      switch_to(w.lane.ctx, w.lane.stack);
      in_lane_ = false;
    }
    if (w.lane.abandoned) {
      undo_lane_stores(w);  // what lane_main does for a lane that ends
      release_abandoned(w.lane.fiber, w.lane.ctx, w.lane.stack);
    } else if (w.lane.fiber.joinable()) {
      w.lane.fiber.join();
    }
  }
  set_current(nullptr);
  algo_->collect_terminated();

  if (escaped_) std::rethrow_exception(escaped_);
  if (swallowed_) std::rethrow_exception(swallowed_);
  if (!mismatch_.empty()) throw ScheduleMismatch("schedule does not fit this run: " + mismatch_);
  return std::move(result_);
}

// What a CTA's exit leaves behind, each room checking its own: a TMA store
// still reading its shared memory, an async operation in flight into it,
// bytes pending on its barriers, Tensor Memory still allocated.
void World::cta_exited(Warp& w) {
  if (tma_store_->reading_at_exit(w) || !engines_->check_exit(w) || !mbar_->check_exit(w)) return;
  tmem_->check_exit(w);
}

}  // namespace wspipe::emu::detail

namespace wspipe::emu {

RunResult run(const LaunchConfig& launch, const std::function<void()>& body, const RunOptions& options) {
  detail::World world(launch, body, options);
  return world.run();
}

}  // namespace wspipe::emu
