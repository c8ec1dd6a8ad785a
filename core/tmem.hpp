// Tensor Memory lifecycle and stages, after Modular MAX's structured sm100
// kernels (sm100_structured/structured_kernels/tmem.mojo; docs/pipeline-api.md):
//
//   TmemAddress         a TMEM address (lane << 16 | column) with arithmetic
//   TmemAllocation      tcgen05.alloc by the MMA warp, read back by the
//                       epilogue, relinquish, dealloc
//   TmemStage           one accumulator stage: base + index * stride
//   TmemDeallocBarrier  the one-shot barrier on which every epilogue thread
//                       (of both CTAs for cta_group 2) signals it is done
//                       with TMEM before the MMA warp deallocates
#pragma once

#include <cstdint>

#include "backend.hpp"
#include "smem.hpp"
#include "tcgen05.hpp"

namespace wspipe {

class TmemAddress {
 public:
  constexpr TmemAddress() = default;
  WSPIPE_HD constexpr explicit TmemAddress(std::uint32_t raw) : raw_(raw) {}
  WSPIPE_HD constexpr std::uint32_t raw() const { return raw_; }
  WSPIPE_HD constexpr std::uint32_t lane() const { return tmem_lane(raw_); }
  WSPIPE_HD constexpr std::uint32_t col() const { return tmem_col(raw_); }
  // `cols` columns to the right; `lanes` lanes down.
  WSPIPE_HD constexpr TmemAddress offset(std::uint32_t lanes, std::uint32_t cols) const {
    return TmemAddress(raw_ + (lanes << 16) + cols);
  }
  friend constexpr bool operator==(TmemAddress, TmemAddress) = default;

 private:
  std::uint32_t raw_ = 0;
};

// Rows 16-31 of a 32-lane fragment are 16 lanes below rows 0-15: a count of
// lanes, for TmemAddress::offset (MAX's TMEM_LOWER_ROW_OFFSET is the same
// step as a raw address delta, 16 << 16).
inline constexpr std::uint32_t kTmemLowerRowLanes = 16;

// TensorMemoryBackend: on a backend without Tensor Memory (HopperBackend,
// sm_90a) naming this type is a constraint error, before any operation.
template <TensorMemoryBackend B, int CtaGroup, std::uint32_t MaxCols = kTmemColumns>
class TmemAllocation {
  static_assert(CtaGroup == 1 || CtaGroup == 2, "TmemAllocation<B, CtaGroup, MaxCols>: CtaGroup must be 1 or 2");
  static_assert(tmem_alloc_size_valid(MaxCols),
                "TmemAllocation<B, CtaGroup, MaxCols>: MaxCols must be a power of 2 in [32, 512]");

 public:
  static constexpr int kCtaGroup = CtaGroup;
  static constexpr std::uint32_t kCols = MaxCols;

  constexpr TmemAllocation() = default;
  WSPIPE_HD constexpr explicit TmemAllocation(std::uint32_t addr) : addr_(addr) {}

  // The MMA warp (all 32 lanes; for cta_group 2 one warp of each CTA of the
  // pair, after a cluster barrier): allocate, then read the address back
  // (the warp's own store, ordered by syncwarp).
  WSPIPE_HD static TmemAllocation allocate(std::uint32_t* smem_addr, SourceLoc loc = SourceLoc::current()) {
    B::template tmem_alloc<CtaGroup>(smem_addr, MaxCols, loc);
    B::syncwarp(loc);
    return from_shared(smem_addr, loc);
  }
  // Another warp, after the barrier that published the address (the
  // alloc's store is weak: reading it earlier is a race, docs/hardware.md bug 8).
  WSPIPE_HD static TmemAllocation from_shared(const std::uint32_t* smem_addr, SourceLoc loc = SourceLoc::current()) {
    return TmemAllocation(SmemView<B, const std::uint32_t>(smem_addr, 1).load(0, loc));
  }

  WSPIPE_HD constexpr std::uint32_t addr() const { return addr_; }
  WSPIPE_HD constexpr TmemAddress address() const { return TmemAddress(addr_); }

  // tcgen05.relinquish_alloc_permit: no further alloc in this CTA.
  WSPIPE_HD void release_lock(SourceLoc loc = SourceLoc::current()) const {
    B::template tmem_relinquish<CtaGroup>(loc);
  }
  WSPIPE_HD void deallocate(SourceLoc loc = SourceLoc::current()) const {
    B::template tmem_dealloc<CtaGroup>(addr_, MaxCols, loc);
  }

 private:
  std::uint32_t addr_ = 0;
};

// A typed view of TMEM: a Rows x Cols matrix of 32-bit elements T (f32 or
// s32 accumulators: TMEM cells are 32 bits; a narrower D element still takes
// a whole cell, PTX "tcgen05.mma"), element (row, col) at lane row, column
// col of the base (the MMA's data-path layout D for M = 128).
template <class T, std::uint32_t Rows, std::uint32_t Cols>
class TmemTensor {
  static_assert(sizeof(T) == 4, "TmemTensor<T, Rows, Cols>: T must be a 32-bit type (one TMEM cell)");
  static_assert(Rows >= 1 && Rows <= kTmemLanes, "TmemTensor<T, Rows, Cols>: Rows must be in [1, 128]");
  static_assert(Cols >= 1 && Cols <= kTmemColumns, "TmemTensor<T, Rows, Cols>: Cols must be in [1, 512]");

 public:
  using Element = T;
  static constexpr std::uint32_t kRows = Rows;
  static constexpr std::uint32_t kCols = Cols;

  WSPIPE_HD constexpr explicit TmemTensor(TmemAddress base) : base_(base) {}
  WSPIPE_HD constexpr TmemAddress base() const { return base_; }
  WSPIPE_HD constexpr TmemAddress at(std::uint32_t row, std::uint32_t col) const { return base_.offset(row, col); }
  // The rows a warp may load: its lane quarter (PTX tcgen05 access restrictions).
  WSPIPE_HD constexpr TmemAddress quarter(std::uint32_t warp_idx) const {
    return at(tmem_quarter_first_lane(warp_idx), 0);
  }

 private:
  TmemAddress base_;
};

// One accumulator stage of `NumStages` in a TMEM allocation, `StageStride`
// columns apart (usually 512 / NumStages).
template <int NumStages, std::uint32_t StageStride, int CtaGroup>
class TmemStage {
  static_assert(NumStages >= 1, "TmemStage<NumStages, StageStride, CtaGroup>: NumStages must be at least 1");
  static_assert(StageStride >= 1 && NumStages * StageStride <= kTmemColumns,
                "TmemStage<NumStages, StageStride, CtaGroup>: NumStages * StageStride must fit in 512 columns");
  static_assert(CtaGroup == 1 || CtaGroup == 2, "TmemStage<NumStages, StageStride, CtaGroup>: CtaGroup must be 1 or 2");

 public:
  static constexpr int kNumStages = NumStages;
  static constexpr std::uint32_t kStride = StageStride;

  WSPIPE_HD constexpr TmemStage(std::uint32_t base_addr, std::uint32_t index) : base_(base_addr), index_(index) {}
  WSPIPE_HD constexpr TmemStage(TmemAddress base, std::uint32_t index) : base_(base.raw()), index_(index) {}
  template <Backend B, std::uint32_t MaxCols>
  WSPIPE_HD constexpr TmemStage(const TmemAllocation<B, CtaGroup, MaxCols>& alloc, std::uint32_t index)
      : base_(alloc.addr()), index_(index) {}

  // A stage from an offset already computed as base + index * stride
  // (legacy pipelines): the base is computed back from it.
  WSPIPE_HD static constexpr TmemStage from_offset(std::uint32_t offset, std::uint32_t index) {
    return TmemStage(offset - index * StageStride, index);
  }

  WSPIPE_HD constexpr std::uint32_t index() const { return index_; }
  WSPIPE_HD constexpr std::uint32_t base() const { return base_; }
  WSPIPE_HD constexpr std::uint32_t offset() const { return base_ + index_ * StageStride; }
  WSPIPE_HD constexpr TmemAddress address() const { return TmemAddress(offset()); }

  // The cell at `lane`, `col` of the stage.
  WSPIPE_HD constexpr TmemAddress cell(std::uint32_t lane, std::uint32_t col) const {
    return address().offset(lane, col);
  }

  // The stage as a Rows x Cols accumulator of T (MAX's TmemStage.tensor).
  template <class T, std::uint32_t Rows, std::uint32_t Cols>
  WSPIPE_HD constexpr TmemTensor<T, Rows, Cols> tensor() const {
    static_assert(Cols <= StageStride, "TmemStage::tensor<T, Rows, Cols>: Cols must fit in the stage's columns");
    return TmemTensor<T, Rows, Cols>(address());
  }

  // The calling warp's fragment rows 0-15 / 16-31 of its lane quarter, as
  // tcgen05.ld.16x256b.x<Repeat> at column `col` of the stage: 4 * Repeat
  // registers per thread (MAX's load_upper / load_lower). Asynchronous:
  // wait_load() before reading the registers.
  template <Backend B, std::uint32_t Repeat = 4>
  WSPIPE_HD auto load_upper(std::uint32_t col = 0, SourceLoc loc = SourceLoc::current()) const {
    return B::template tmem_load<TmemShape::s16x256b, Repeat>(
        cell(tmem_quarter_first_lane(B::warp_idx()), col).raw(), loc);
  }
  template <Backend B, std::uint32_t Repeat = 4>
  WSPIPE_HD auto load_lower(std::uint32_t col = 0, SourceLoc loc = SourceLoc::current()) const {
    return B::template tmem_load<TmemShape::s16x256b, Repeat>(
        cell(tmem_quarter_first_lane(B::warp_idx()) + kTmemLowerRowLanes, col).raw(), loc);
  }
  template <Backend B>
  WSPIPE_HD static void wait_load(SourceLoc loc = SourceLoc::current()) {
    B::tmem_wait_load(loc);
  }

 private:
  std::uint32_t base_;
  std::uint32_t index_;
};

// The one-shot barrier between the epilogue and the MMA warp's dealloc:
// count 128 * CtaGroup. Every epilogue thread signals it (for cta_group 2
// also on the peer CTA's, so that each CTA's dealloc waits for both CTAs'
// epilogues, docs/hardware.md bug 9); the MMA warp relinquishes, waits, deallocates.
template <TensorMemoryBackend B, int CtaGroup>
class TmemDeallocBarrier {
  static_assert(CtaGroup == 1 || CtaGroup == 2, "TmemDeallocBarrier<B, CtaGroup>: CtaGroup must be 1 or 2");

 public:
  static constexpr std::uint32_t kEpilogueThreads = 128;
  static constexpr std::uint32_t kCount = kEpilogueThreads * CtaGroup;

  WSPIPE_HD explicit TmemDeallocBarrier(SharedMemBarrier* bar) : bar_(bar) {}

  // By one warp (it elects a lane), before the fence_init + cluster barrier.
  WSPIPE_HD void init(SourceLoc loc = SourceLoc::current()) const {
    B::elect_one([&] { B::init(*bar_, kCount, BarrierName{"tmem_dealloc"}, loc); });
  }

  // Epilogue warps, at warp level (32 arrivals per warp).
  WSPIPE_HD void signal_complete(SourceLoc loc = SourceLoc::current()) const {
    if constexpr (CtaGroup == 2) B::arrive_remote(*bar_, B::cta_rank() ^ 1u, loc);
    B::arrive(*bar_, loc);
  }

  // The MMA warp: relinquish the allocation permit, wait for every epilogue
  // thread, deallocate.
  template <std::uint32_t MaxCols>
  WSPIPE_HD void complete_dealloc(const TmemAllocation<B, CtaGroup, MaxCols>& tmem,
                                  SourceLoc loc = SourceLoc::current()) const {
    tmem.release_lock(loc);
    B::wait(*bar_, 0, loc);
    tmem.deallocate(loc);
  }

  WSPIPE_HD SharedMemBarrier& barrier() const { return *bar_; }

 private:
  SharedMemBarrier* bar_;
};

}  // namespace wspipe
