// Kept buffers: a CTA's large buffers (shared memory, TMEM cells, shadow
// tables) outlive its run and serve the next run on the same thread.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>

#include "backends/emu/runtime/tmem.hpp"
#include "backends/emu/runtime/world.hpp"

namespace wspipe::emu::detail {

namespace {

// The buffers keep_cta_buffers kept on this thread: at most kKeptCtas CTAs'
// worth of each kind (a larger grid's extra buffers are freed), and shadow
// tables of both kinds up to kKeptTableBytes of storage together (a table
// that would pass it is freed): at most about 20 MiB per thread, typically
// 0.7 MiB per CTA. One budget for the tables, not a limit per table: a
// single CTA whose accesses split most of its table's blocks (persistent-
// gemm's grows past 2 MiB) keeps it, where a limit of 1 MiB per table
// freed it after every run and the next run paid its page faults again
// (docs/performance.md, "Kept shadow tables").
constexpr std::size_t kKeptCtas = 8;
constexpr std::size_t kKeptTableBytes = std::size_t{16} << 20;
thread_local bool spare_buffers_alive = false;  // from the spares' construction to their destruction
struct SpareBuffers {
  std::vector<std::pair<std::size_t, std::byte*>> smem;  // (size, aligned_alloc'd buffer)
  std::vector<std::unique_ptr<std::uint32_t[]>> tmem;
  std::vector<ShadowTable<kTmemShadowBlock>> tmem_shadows;
  std::vector<ShadowTable<kSmemShadowBlock>> smem_shadows;
  std::size_t table_bytes = 0;  // the storage of the tables kept, both kinds
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
  SpareBuffers& s = spare_buffers();
  t.clear();  // (keeps the storage)
  const std::size_t bytes = t.storage_bytes();
  // Else it is freed with its CTA.
  if (kept.size() == kKeptCtas || s.table_bytes + bytes > kKeptTableBytes) return;
  kept.push_back(std::move(t));
  s.table_bytes += bytes;
}

template <std::uint32_t K>
ShadowTable<K> take_table(std::vector<ShadowTable<K>>& kept) {
  if (kept.empty()) return {};
  ShadowTable<K> t = take_last(kept);
  spare_buffers().table_bytes -= t.storage_bytes();
  return t;
}

}  // namespace

std::size_t smem_alloc_bytes(std::size_t smem_bytes) {
  return (std::max<std::size_t>(smem_bytes, 16) + 1023) / 1024 * 1024;
}

std::byte* take_smem(std::size_t bytes) {
  std::byte* p = nullptr;
  auto& kept = spare_buffers().smem;
  const auto it = std::find_if(kept.begin(), kept.end(), [&](const auto& k) { return k.first == bytes; });
  if (it != kept.end()) {
    p = it->second;
    kept.erase(it);
  } else {
    p = static_cast<std::byte*>(std::aligned_alloc(1024, bytes));
    if (p == nullptr) throw std::bad_alloc();  // explore and the CLI say what would help
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

ShadowTable<kTmemShadowBlock> take_tmem_shadow() { return take_table(spare_buffers().tmem_shadows); }

ShadowTable<kSmemShadowBlock> take_smem_shadow() { return take_table(spare_buffers().smem_shadows); }

std::size_t kept_table_bytes() { return spare_buffers_alive ? spare_buffers().table_bytes : 0; }

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
  keep_table(s->smem_shadows, c.smem_shadow);
}

void keep_tmem_buffers(std::unique_ptr<std::uint32_t[]>& cells, ShadowTable<kTmemShadowBlock>& shadow) {
  if (!spare_buffers_alive) return;
  SpareBuffers& s = spare_buffers();
  if (cells != nullptr) keep(s.tmem, std::move(cells));
  keep_table(s.tmem_shadows, shadow);
}

}  // namespace wspipe::emu::detail
