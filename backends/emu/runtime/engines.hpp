// The asynchronous engines' state (internal): operations issued to a CTA's
// TMA engine or tensor core (engines.cpp, tma_store.cpp), bulk async-groups,
// and cluster launch control requests (clc.cpp).
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "backends/emu/runtime/clock.hpp"
#include "backends/emu/runtime/models.hpp"
#include "core/config.hpp"
#include "core/tma.hpp"

namespace wspipe::emu::detail {

// A bulk async-group (PTX "cp.async.bulk.commit_group"): the TMA stores
// committed together, counted until their shared-memory reads and their
// global writes are done, and the releases of those completions, which
// cp.async.bulk.wait_group[.read] acquires.
struct BulkGroup {
  std::uint32_t reading = 0;  // stores that have not read their shared-memory source yet
  std::uint32_t writing = 0;  // stores whose global writes are not done yet
  Clock read_done, write_done;
};


// An operation issued to an asynchronous engine, completed when the
// scheduler picks the engine.
// Who issued an asynchronous operation, when and where, and the issuer's
// clock at issue (World::stamp_issue): the operation happens after what the
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
  int cta_group = 1;
  std::uint16_t mask = 0;    // destination CTA ranks (TMA, commit); bit of the own rank when not multicast
  std::uint32_t bar_offset = 0;  // the mbarrier's offset in shared memory
  // tma
  TensorMap map{};
  TmaCoords coords{};
  std::uint32_t dst_offset = 0;
  // tma_store (map, coords; dst_offset is the source in shared memory): it
  // completes in two engine steps, PTX "cp.async.bulk.wait_group" telling
  // the reads of the source (.read) from the writes to global memory. The
  // first reads the box into `staged`; the second writes it.
  std::uint32_t group = 0;  // the issuer's bulk group (index into Warp::bulk_groups)
  bool read_done = false;
  std::vector<std::byte> staged;
  // mma
  model::MmaJob job{};
  std::shared_ptr<const model::MmaFootprint> footprint;  // model::shared_mma_footprint
};

// A CTA's TMA engine or tensor core: it completes its operations in issue
// order (the tensor core pipelines MMAs in order, PTX "tcgen05 memory
// consistency"; TMA completion order is a simplification: copies may
// complete out of order on hardware).
struct Engine {
  std::uint32_t cta = 0;
  bool tensor = false;
  std::string name;
  std::deque<AsyncOp> queue;
};


// Cluster launch control (clc.cpp): a clusterlaunchcontrol.try_cancel
// waiting in its cluster's CLC unit until the scheduler completes it.
struct ClcRequest : Issued {
  std::uint32_t cta = 0;     // the issuing CTA
  std::uint32_t resp_offset = 0, bar_offset = 0;  // in shared memory
  bool multicast = false;    // .multicast::cluster::all: every CTA of the cluster
};

}  // namespace wspipe::emu::detail
