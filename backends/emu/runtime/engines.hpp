// The asynchronous engines' room (internal; engines.cpp): each CTA's TMA
// engine and tensor core, the operations issued to them (by the tensor
// core, TMA load and TMA store rooms) waiting in their queues, the issue
// stamps, and the rule that no operation reaches a CTA after its exit
// (async.*). Also the request a CLC unit holds (clc.cpp), stamped the same way.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "backends/emu/runtime/clock.hpp"
#include "backends/emu/runtime/models.hpp"
#include "backends/emu/runtime/room.hpp"
#include "core/barrier.hpp"
#include "core/config.hpp"
#include "core/tma.hpp"

namespace wspipe::emu::detail {



// An operation issued to an asynchronous engine, completed when the
// scheduler picks the engine.
// Who issued an asynchronous operation, when and where, and the issuer's
// clock at issue (EngineRoom::stamp_issue): the operation happens after what the
// warp did so far, and not before what it does next.
struct Issued {
  std::uint32_t issuer = 0;  // warp id
  std::uint64_t step = 0;    // issue step
  SourceLoc loc{};
  Clock clock;               // the issuer's clock at issue
};

struct AsyncOp : Issued {
  enum class Kind : std::uint8_t { tma, mma, commit, tma_store };
  Kind kind = Kind::tma;
  std::uint64_t seq = 0;     // its engine's issue number (footprints: World::Res::async_op)
  int cta_group = 1;
  std::uint16_t mask = 0;    // destination CTA ranks (TMA, commit); bit of the own rank when not multicast
  std::uint32_t bar_offset = 0;  // the mbarrier's offset in shared memory
  // tma
  TensorMap map{};
  TmaCoords coords{};
  std::uint32_t dst_offset = 0;
  // tma, delivered in pieces (RunOptions::async_reorder): the bytes of the
  // box already delivered and counted, a prefix; the box itself, read from
  // global memory with the first piece, waits in `staged`.
  std::uint32_t delivered = 0;
  // tma_store (map, coords; dst_offset is the source in shared memory): it
  // completes in two engine steps, PTX "cp.async.bulk.wait_group" telling
  // the reads of the source (.read) from the writes to global memory. The
  // first reads the box into `staged`; the second writes it.
  std::uint32_t group = 0;  // the issuer's bulk group (an index into TmaStoreRoom's groups of the issuer)
  bool read_done = false;
  std::vector<std::byte> staged;
  // mma
  model::MmaJob job{};
  std::shared_ptr<const model::MmaFootprint> footprint;  // model::shared_mma_footprint
};

// A CTA's TMA engine or tensor core: by default it completes its
// operations in issue order. The tensor core keeps that order (PTX
// "tcgen05 memory consistency": the MMAs of a thread are pipelined in issue
// order, and tcgen05.commit tracks all of them). A TMA engine's loads may
// also complete out of issue order and in pieces, as PTX allows, through the
// engine's alternative actors (EngineRoom, RunOptions::async_reorder).
struct Engine {
  std::uint32_t cta = 0;
  bool tensor = false;
  std::string name;
  std::deque<AsyncOp> queue;
  std::uint64_t issued = 0;  // operations issued so far
};


// Cluster launch control (clc.cpp): a clusterlaunchcontrol.try_cancel
// waiting in its cluster's CLC unit until the scheduler completes it.
struct ClcRequest : Issued {
  std::uint32_t cta = 0;     // the issuing CTA
  std::uint32_t resp_offset = 0, bar_offset = 0;  // in shared memory
  bool multicast = false;    // .multicast::cluster::all: every CTA of the cluster
  std::uint64_t seq = 0;     // its cluster's issue number (footprints)
};

// The engines: actors first_actor() + e, e = 2 * cta + (tensor core ? 1 : 0).
// With RunOptions::async_reorder, each CTA's TMA engine also has
// per_cta() = RunOptions::reorder_window + 1 alternative actors, from
// first_alternative() on, numbered per_cta() * cta + j: j < per_cta() - 1
// completes the load at queue position j + 1 ahead of the older operations
// (out of issue order); the last delivers and counts a piece of the oldest
// load (in pieces). The strategies pick them as any actor; the default
// policy never does.
class EngineRoom : Room {
 public:
  // A load is cut into pieces of whole 128-byte lines (a swizzle keeps each
  // 16-byte chunk in its line): one of at least two lines can be split.
  // Where its barrier's tx-count reaches zero, the cut is at a 16-byte
  // chunk, the grain at which silicon counts a copy's bytes.
  static constexpr std::uint32_t kPieceGrain = 128;
  static constexpr std::uint32_t kChunk = 16;

  EngineRoom(World& world, std::uint32_t first_actor);

  std::uint32_t first_actor() const { return base_; }
  std::uint32_t count() const { return static_cast<std::uint32_t>(engines_.size()); }
  const Engine& engine(std::uint32_t e) const { return engines_[e]; }
  const std::vector<Engine>& all() const { return engines_; }
  Move move(std::uint32_t e) const { return engines_[e].queue.empty() ? Move::no : Move::progress; }

  // Issue: stamps `op` with its issuer, step, place and the issuer's clock
  // (the operation happens after what the warp did so far, and not before
  // what it does next); an operation that signals `bar` (in the issuing
  // CTA's shared memory; the same offset in each CTA of `mask`, or in the
  // issuing CTA when 0); into the queue of CTA `cta`'s TMA engine or tensor core.
  void stamp_issue(Warp& w, Issued& op, const SourceLoc& loc);
  AsyncOp issue_op(Warp& w, AsyncOp::Kind kind, int cta_group, SharedMemBarrier& bar, std::uint16_t mask,
                   const SourceLoc& loc);
  void enqueue(std::uint32_t cta, bool tensor, AsyncOp op);
  // Engine `e` completes its oldest operation (the scheduler picked it);
  // false when the run ended.
  bool step(std::uint32_t e) { return complete(e, 0); }

  // The alternative actors (none without RunOptions::async_reorder): placed
  // by the World after every other actor, so that the others keep their ids.
  void place_alternatives(std::uint32_t first);
  std::uint32_t first_alternative() const { return alt_base_; }
  std::uint32_t alternatives() const { return alt_count_; }
  // A CTA's alternatives: the reorder window's, then the piece's.
  std::uint32_t per_cta() const { return per_cta_; }
  Move alternative_move(std::uint32_t actor) const;
  std::string alternative_name(std::uint32_t actor) const;
  // The scheduler picked alternative `actor`; false when the run ended.
  bool alternative_step(std::uint32_t actor);

  // The tx-count of a barrier of CTA `cta` changed: whether a piece of a
  // load into it can bring it to zero (alternative_move) may have too.
  void tx_changed(std::uint32_t cta);

  // async.*: an operation `op` reaches CTA `cta` after its exit; a CTA
  // exits with operations still in flight into it (false: reported).
  void report_target_exited(std::uint32_t cta, const Issued& op, std::string message);
  bool check_exit(Warp& w);

 private:
  bool in_flight_for(std::uint32_t cta, std::string* what) const;
  // Engine `e` completes the operation at queue position `k`.
  bool complete(std::uint32_t e, std::size_t k);
  // Engine `e`'s queue changed: it and its alternatives may move otherwise.
  void changed(std::uint32_t e);
  // The size of the next piece of the oldest load of engine `e` (0: none
  // can land now), reading its barriers' tx-counts as a footprint when
  // `touch` (the step that lands it).
  std::uint32_t next_piece(std::uint32_t e, bool touch) const;

  std::uint32_t base_ = 0;
  std::vector<Engine> engines_;  // 2 per CTA: TMA engine, tensor core
  std::uint32_t alt_base_ = ~0u, alt_count_ = 0, per_cta_ = 0;
};

}  // namespace wspipe::emu::detail
