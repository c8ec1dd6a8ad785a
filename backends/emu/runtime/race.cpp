// The happens-before race checker: releases and acquires of vector
// clocks, access descriptions, and the shadow visits of shared memory
// (TMEM's are in tmem.cpp); the rules named race.*.
#include "backends/emu/runtime/world.hpp"
#include "backends/emu/runtime/util.hpp"
#include "backends/emu/runtime/tmem.hpp"

namespace wspipe::emu::detail {

// ------------------------------------------------------ happens-before

void World::release(std::uint32_t comp, Clock& into) {
  join(into, clocks_[comp]);
  tick(comp);
}

void World::acquire(std::uint32_t comp, const Clock& from) { join(clocks_[comp], from); }

// PTX's memory consistency model orders a release's prior accesses of the
// thread that performs it; a warp's fiber is 32 threads. Its warp-level
// accesses are every lane's (the elected lane's among them), so any lane's
// release covers them; a per-lane access is its lane's, and another lane's
// release covers it only once a syncwarp ordered it into that lane
// (docs/emulator-models.md, "Per-lane release").
void World::warp_release(Warp& w, Clock& into) {
  const std::uint32_t lanes = slot_[comp_lanes(w.id)];
  const std::uint32_t handed = lanes_handed_on(w), before = into[lanes];
  release(w.id, into);
  into[lanes] = std::max(before, handed);
}

void World::warp_issue(Warp& w, Clock& out) {
  const std::uint32_t handed = lanes_handed_on(w);
  out = clocks_[w.id];
  out[slot_[comp_lanes(w.id)]] = handed;
  tick(w.id);
}

void World::async_start(std::uint32_t comp, const Clock& issued) {
  Clock& c = clocks_[comp];
  const std::uint32_t own = std::max(c[slot_[comp]], issued[slot_[comp]]);
  c = issued;  // the same size: no allocation
  c[slot_[comp]] = own;
}

std::uint32_t World::access_info(std::int32_t actor, std::int32_t issuer, const char* what, const SourceLoc& loc) {
  access_infos_.push_back({.actor = actor, .issuer = issuer, .what = what, .step = step_, .loc = loc});
  return static_cast<std::uint32_t>(access_infos_.size() - 1);
}

// Only shadows (and their read sets) keep an access record's number past
// the operation that made it: every room uses a record at once, in the
// step that made it, and no operation is in progress when a warp's next one
// starts. So the records no shadow names are dropped, and the others
// renumbered in order, in every shadow alike (equal shadows stay equal).
// The plain accesses' memos name records too; none is pending here, and
// the memos are forgotten.
void World::collect_access_infos() {
  constexpr std::uint32_t kDropped = ~0u;
  std::vector<std::uint32_t> number(access_infos_.size(), kDropped);
  auto mark = [&](Access& a) { number[a.info] = 0; };
  for (Cta& c : ctas_) c.smem_shadow.for_each_access(mark);
  tmem_->for_each_access(mark);
  std::uint32_t kept = 0;
  for (std::size_t i = 0; i < access_infos_.size(); ++i) {
    if (number[i] == kDropped) continue;
    access_infos_[kept] = access_infos_[i];
    number[i] = kept++;
  }
  access_infos_.resize(kept);
  auto renumber = [&](Access& a) { a.info = number[a.info]; };
  for (Cta& c : ctas_) c.smem_shadow.for_each_access(renumber);
  tmem_->for_each_access(renumber);
  plain_memo_ = {};
  step_lines_step_ = ~std::uint64_t{0};
  ++plain_epoch_;
  collect_infos_at_ = std::max<std::size_t>(kCollectInfosAt, 2 * std::size_t{kept});
}

std::string World::describe_access(const Access& a) const {
  const AccessInfo& i = access_infos_[a.info];
  const CodeLine at = line_of(i);
  std::string who = actor_name(i.actor);
  if (i.issuer >= 0 && i.issuer != i.actor) who += " (issued by " + actor_name(i.issuer) + ")";
  return who + ": " + i.what + " at step " + std::to_string(i.step) + ", " + rel(at.file) + ":" + std::to_string(at.line);
}

void World::report_race(const Shadow& s, const Access* other, bool write, std::uint32_t info, std::uint32_t comp,
                        const std::string& object, const SourceLoc& loc, const Warp* culprit) {
  const AccessInfo& mine = access_infos_[info];
  const AccessInfo& theirs = access_infos_[other->info];
  const bool other_wrote = other == &s.write;
  // The cause: what of the earlier access's warp this access is ordered
  // after. Its clock holds the last epoch of that warp it acquired (through
  // any chain of releases and waits); where that epoch ended is the
  // release that let this access go ahead.
  std::string cause;
  if (is_lanes_comp(other->comp)) {
    cause = "; the " + std::string(theirs.what) +
            " was one lane's (per-lane code: for_each_lane, elect_one), and an arrive, fence or issue by another "
            "lane orders only that lane's own accesses: a B::syncwarp() (__syncwarp) before it orders every lane's";
  }
  if (theirs.issuer >= 0) {
    const Warp& by = warps_[static_cast<std::uint32_t>(theirs.issuer)];
    const std::uint32_t t = clocks_[comp][slot_[by.id]];
    const EpochEnds& ends = epoch_ends_[by.id];
    if (t == 0 || t > ends.count()) {
      cause += "; nothing orders any operation of " + by.name + " before the " + mine.what;
    } else if (const EpochEnd* e = ends.find(t)) {
      cause += "; the " + std::string(mine.what) + " is ordered after " + by.name + "'s operations up to step " +
               std::to_string(e->step) + " (" + where(e->loc) + "), and the " + theirs.what + " is not among them";
    } else {
      cause += "; the " + std::string(mine.what) + " is ordered after " + by.name + "'s operations up to its epoch " +
               std::to_string(t) + " of " + std::to_string(ends.count()) +
               " (where that epoch ended is no longer kept: the last " + std::to_string(EpochEnds::kKept) +
               " are), and the " + theirs.what + " is not among them";
    }
  }
  fail(*current_, object.rfind("TMEM", 0) == 0 ? "race.tmem" : "race.smem", object,
       std::string(mine.what) + (write ? " (write)" : " (read)") + " by " + actor_name(mine.actor) +
           " is not ordered with an earlier " + theirs.what + (other_wrote ? " (write)" : " (read)") +
           " of the same location by " + actor_name(theirs.actor) +
           ": no barrier, commit or wait orders the two, whatever values this schedule produced" + cause,
       mine.pc != 0 ? line_of(mine) : CodeLine{loc.file_name(), loc.line()}, culprit, describe_access(*other));
}

bool World::smem_range_access(std::uint32_t cta, std::uint32_t offset, std::uint32_t bytes, bool write, bool generic,
                              std::uint32_t comp, std::uint32_t info, const SourceLoc& loc, const Warp* culprit) {
  const model::MmaFootprint::Range range{.cta = 0, .offset = offset, .bytes = bytes};
  return smem_ranges_access(&cta, {&range, 1}, write, generic, comp, info, loc, culprit);
}

bool World::smem_ranges_access(const std::uint32_t* ctas, std::span<const model::MmaFootprint::Range> ranges,
                               bool write, bool generic, std::uint32_t comp, std::uint32_t info, const SourceLoc& loc,
                               const Warp* culprit) {
  // With the checker off, the access is only a resource of the step (its
  // 16-byte chunks: touch_smem), so that the reduction keeps both orders of
  // it and a conflicting one.
  if (!options_.race_check) {
    for (const model::MmaFootprint::Range& r : ranges) touch_smem(ctas[r.cta], r.offset, r.bytes, write);
    return true;
  }
  // (A generic access is warp `comp`'s own, per-lane while only some of
  // its lanes are active. Not always the running warp's: a cta_group::2
  // tcgen05.alloc stores its address in the step of the pair's last warp.)
  const Access a =
      generic && warps_[comp].active != ~0u ? lane_access(warps_[comp], info) : access_now(comp, info);
  const Clock& clock = clocks_[comp];
  std::uint32_t cta = 0, last = 0;
  ReadSets* sets = nullptr;  // the CTA's table's
  // A visit each for writes and reads, small enough to be inlined into the
  // table's loop.
  auto visit_write = [&](Shadow& s, std::uint32_t k) {
    if (const Access* other = shadow_write(s, *sets, clock, a))
      return smem_word_rare(s, other, k, last, cta, true, comp, info, loc, culprit);
    s.write_generic = generic;
    return true;
  };
  // An async-proxy read of bytes an ordinary store wrote passes the proxy
  // fence check for every byte of that store's component and time once it
  // passed for one (the check reads nothing else that this access changes):
  // a tile the TMA stores is checked once per store, not once per byte.
  Access fenced{.comp = ~0u, .slot = 0, .time = 0, .info = 0};
  auto visit_read = [&](Shadow& s, std::uint32_t k) {
    const Access* other = shadow_read(s, *sets, clock, a);
    // (A read leaves the shadow's write as it was.)
    if (other == nullptr && (generic || !s.write_generic || s.write.time == 0)) return true;
    if (other == nullptr && s.write.comp == fenced.comp && s.write.time == fenced.time) return true;
    if (!smem_word_rare(s, other, k, last, cta, false, comp, info, loc, culprit)) return false;
    if (other == nullptr) fenced = s.write;
    return true;
  };
  for (const model::MmaFootprint::Range& r : ranges) {
    if (r.bytes == 0) continue;
    cta = ctas[r.cta];
    Cta& c = ctas_[cta];
    // Shadow granularity: bytes, so that sub-word data of different warps in
    // one word never conflict (it costs no more than 4-byte words did:
    // docs/performance.md).
    const auto words = static_cast<std::uint32_t>((c.smem_bytes + kSmemWord - 1) / kSmemWord);
    if (c.smem_shadow.empty()) c.smem_shadow.reset(words);
    sets = &c.smem_shadow.read_sets();
    const std::uint32_t first = r.offset / kSmemWord;
    last = std::min((r.offset + r.bytes - 1) / kSmemWord + 1, words);
    if (!(write ? c.smem_shadow.access_range(first, last, visit_write)
                : c.smem_shadow.access_range(first, last, visit_read)))
      return false;
  }
  return true;
}

bool World::smem_word_rare(const Shadow& s, const Access* other, std::uint32_t word, std::uint32_t last,
                           std::uint32_t cta, bool write, std::uint32_t comp, std::uint32_t info, const SourceLoc& loc,
                           const Warp* culprit) {
  // The object: `word` and the locations after it, up to `last`, that the
  // same earlier access makes this one fail on (not yet visited, so in
  // their state before it).
  auto object = [&] {
    const ShadowTable<kSmemShadowBlock>& table = ctas_[cta].smem_shadow;
    const Clock& clock = clocks_[comp];
    const std::uint32_t same = other != nullptr ? other->info : s.write.info;
    auto failing = [&](const Shadow& t) -> const Access* {
      if (other == nullptr) return &t.write;  // the ordinary store the async proxy reads
      if (!write) return happens_before(t.write, clock) ? nullptr : &t.write;  // a read fails on the write only
      return first_unordered(t, table.read_sets(), clock);
    };
    const std::uint32_t end = table.find_first(word + 1, last, [&](const Shadow& t) {
      const Access* o = failing(t);
      return o == nullptr || o->info != same;
    });
    char buf[96];
    std::snprintf(buf, sizeof buf, "shared memory [0x%x, 0x%x) (%s)", word * kSmemWord, end * kSmemWord,
                  cta_label(cta).c_str());
    return std::string(buf);
  };
  if (other != nullptr) {
    report_race(s, other, write, info, comp, object(), loc, culprit);
    return false;
  }
  // PTX "Proxies": the async proxy (tensor core, TMA) sees a warp's
  // ordinary stores only after that warp's fence.proxy.async, and the
  // reader must be ordered after the fence (docs/hardware.md "The async proxy").
  // (A per-lane store's fence is the first whose lane epoch covers it.)
  const Access& prior = s.write;
  const Warp& writer = warps_[prior.comp % num_warps()];
  const auto& f = writer.proxy_fences;
  const auto& by = is_lanes_comp(prior.comp) ? writer.proxy_fence_lanes : f;
  const auto it = f.begin() + (std::lower_bound(by.begin(), by.end(), prior.time) - by.begin());
  if (it != f.end() && clocks_[comp][slot_[writer.id]] >= *it) return true;
  fail(*current_, "smem.missing-proxy-fence", object(),
       std::string(access_infos_[info].what) + " by " + actor_name(access_infos_[info].actor) +
           " (async proxy) reads shared memory written by an ordinary store of " + writer.name +
           (it == f.end() ? " that no fence.proxy.async followed"
                          : " whose fence.proxy.async is not ordered before the read") +
           ": the tensor core or TMA may read stale data",
       loc, culprit, describe_access(prior));
  return false;
}

std::uint32_t World::smem_offset(const void* p) {
  const Cta& c = ctas_[warp().cta];
  const auto* b = static_cast<const std::byte*>(p);
  if (b < c.smem || b > c.smem + c.smem_bytes) return 0xffffffffu;  // decodes to no valid operand
  return static_cast<std::uint32_t>(b - c.smem);
}

void World::smem_access(const void* p, std::uint32_t bytes, bool write, const SourceLoc& loc) {
  if (in_lane_) return;
  if ((!options_.race_check && !tracks_footprints()) || killing_ || stopping_) return;
  Warp& w = warp();
  const Cta& c = ctas_[w.cta];
  const auto* b = static_cast<const std::byte*>(p);
  if (b < c.smem || b + bytes > c.smem + c.smem_bytes) {
    if (options_.race_check)
      fail(w, "smem.not-shared", "", "a shared-memory view accesses bytes outside this CTA's shared memory", loc);
    return;
  }
  if (!options_.race_check) {
    touch_smem(w.cta, static_cast<std::uint32_t>(b - c.smem), bytes, write);
    return;
  }
  const std::uint32_t info = access_info(static_cast<std::int32_t>(w.id), static_cast<std::int32_t>(w.id),
                                         write ? "ordinary store" : "ordinary load", loc);
  if (options_.trace) trace_smem(w, static_cast<std::uint32_t>(b - c.smem), bytes, write, {loc.file_name(), loc.line()});
  smem_range_access(w.cta, static_cast<std::uint32_t>(b - c.smem), bytes, write, true, w.id, info, loc, nullptr);
}

void World::fence_proxy_async(const SourceLoc& loc) {
  if (in_lane_) return;
  Warp& w = warp();
  if (killing_ || stopping_) return;
  if (options_.race_check) {
    w.proxy_fences.push_back(now(w.id));
    // The lanes' accesses it covers: all of them where every lane with
    // unsynchronised per-lane stores fences (their epoch then ends, so
    // that later ones are not covered), else those a syncwarp ordered.
    std::uint32_t& epoch = clocks_[w.id][slot_[comp_lanes(w.id)]];
    std::uint32_t lanes = w.lanes_ordered;
    if (w.lanes_dirty != 0 && (w.lanes_dirty & ~w.active) == 0) lanes = epoch++;
    w.proxy_fence_lanes.push_back(std::max(lanes, w.proxy_fence_lanes.empty() ? 0u : w.proxy_fence_lanes.back()));
    w.loc = loc;  // where its epoch ends
    tick(w.id);   // later stores are not covered by this fence
  }
  if (options_.trace)
    record({.step = step_, .warp = static_cast<std::int32_t>(w.id), .kind = EventKind::proxy_fence,
            .file = loc.file_name(), .line = loc.line()});
}

}  // namespace wspipe::emu::detail
