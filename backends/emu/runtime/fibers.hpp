// Fibers (internal): the directed Boost.Fiber scheduling algorithm that runs
// exactly the fiber the World picked, the calling thread's stack, and the
// AddressSanitizer switch annotations (fibers.cpp).
#pragma once

#include <boost/fiber/all.hpp>
#include <chrono>

#include "backends/emu/runtime/world.hpp"

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

namespace wspipe::emu::detail {

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

// This thread's DirectedAlgorithm, installed on first use.
DirectedAlgorithm& algorithm();

// The calling thread's own stack (where run() is called), for the
// AddressSanitizer annotations; empty in builds without ASan.
FiberStack this_stack();

}  // namespace wspipe::emu::detail
