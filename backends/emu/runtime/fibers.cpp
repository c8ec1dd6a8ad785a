// Fibers: one per warp (and per second lane), on cached guarded stacks,
// switched by the World's directed scheduling algorithm; each switch is
// announced to AddressSanitizer (fibers.hpp).
#include "backends/emu/runtime/world.hpp"
#include "backends/emu/runtime/fibers.hpp"

#include <pthread.h>

#include <cstdio>
#include <cstdlib>

namespace wspipe::emu::detail {

thread_local DirectedAlgorithm* DirectedAlgorithm::instance = nullptr;

DirectedAlgorithm& algorithm() {
  if (DirectedAlgorithm::instance == nullptr) boost::fibers::use_scheduling_algorithm<DirectedAlgorithm>();
  return *DirectedAlgorithm::instance;
}

namespace {

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
  // The stack of a fiber that will never run again (World::release_abandoned),
  // kept or freed as an ended fiber's is. Boost.Context would do it when
  // the fiber ends, which an abandoned one never does. AddressSanitizer's
  // marks on its frames go first (allocate() clears them for a stack the
  // cache hands out again; an unmapped one may be mapped again by others).
  void reclaim(const FiberStack& s) noexcept {
#ifdef WSPIPE_ASAN
    ASAN_UNPOISON_MEMORY_REGION(s.bottom, s.size);
#endif
    boost::context::stack_context sc{};
    sc.size = s.size;
    sc.sp = static_cast<char*>(const_cast<void*>(s.bottom)) + s.size;
    deallocate(sc);
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

}  // namespace

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

// Hands control to `to`. A live `from` sleeps until someone picks it again;
// a finished one returns and lets its fiber end.
void World::transfer(Warp& to, Warp* from) {
  DirectedAlgorithm& algo = *algo_;
  set_current(&to);
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
    set_current(from);
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

// The fiber running keeps catching the teardown's unwinding
// (teardown_op): the teardown gives up on it. It hands control back to
// run() for the last time; its frames are never unwound, and what they own
// (the kernel's locals on it) is never freed. Nothing resumes it:
// release_abandoned takes it out of Boost's scheduler. Were it resumed all
// the same, it would return and throw the unwinding again.
void World::abandon_running(Warp& w) {
  (in_lane_ ? w.lane.abandoned : w.abandoned) = true;
  algo_->next = main_ctx_;
  leaving(in_lane_ ? w.lane.ctx : w.ctx);  // AddressSanitizer: this stack is done with
  boost::this_fiber::yield();
}

// An abandoned fiber (abandon_running), once the caller's thread runs
// again. Boost.Fiber cannot end a fiber from outside (an unfinished one's
// context, released, would be resumed to end it; Boost.Context's forced
// unwinding throws through the kernel's frames, whose catch (...) caught the
// unwinding already), so the fiber is taken out of its scheduler instead:
// off the ready queue (its last switch, a yield, put it there) and out of
// the scheduler's workers, so that the thread's scheduler, when the thread
// exits, neither resumes it nor waits for it to end. The handle is detached
// (a joinable fiber's destructor calls std::terminate); the context keeps
// the reference Boost releases when a fiber ends, so nothing releases it.
// Its stack, where the context lies, goes back as an ended fiber's does:
// nothing refers to it any more.
void World::release_abandoned(boost::fibers::fiber& fiber, boost::fibers::context* ctx, const FiberStack& stack) {
  if (ctx->ready_is_linked()) ctx->ready_unlink();
  ctx->detach();
  fiber.detach();
  CachedStack().reclaim(stack);
}

void World::warp_main(Warp& w) {
  set_current(&w);
  w.block = Block::none;
  if (!killing_ && options_.trace)
    record({.step = step_, .warp = static_cast<std::int32_t>(w.id), .kind = EventKind::start});
  run_body(w);
  // The second lane must end too, with no operation lane 0 did not make.
  if (options_.lane_divergence) lanes_meet(w, LaneOp{.kind = LaneOp::Kind::exit, .lanes = 32});
  finish(w);
  leaving(w.ctx);
}

// The kernel's body on the fiber running. An exception out of it (a
// model's buffer that could not be allocated, or the kernel's own host
// code throwing) cannot leave the fiber: Boost.Fiber would terminate the
// program. It ends the run instead, and run() throws it on the caller's
// thread once every fiber has been torn down. TeardownUnwind is the
// teardown's own (World::teardown_op): the fiber has unwound, nothing more.
void World::run_body(Warp& w) {
  try {
    body_();
    check_plain();  // its plain accesses since its last operation (which may need memory)
  } catch (const TeardownUnwind&) {
  } catch (...) {
    if (!escaped_) escaped_ = std::current_exception();
    if (!stopping_ && !killing_) end(Status::ok, &w);
  }
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
  run_body(w);
  undo_lane_stores(w);
  w.lane.finished = true;
  w.lane.at = LaneOp{.kind = LaneOp::Kind::exit, .lanes = 32};
  // Back to the warp's fiber, which waits for this lane's next operation
  // (or to the teardown in run(), which resumed it).
  in_lane_ = false;
  algo_->next = killing_ ? main_ctx_ : w.ctx;
  leaving(w.lane.ctx);
}

}  // namespace wspipe::emu::detail
