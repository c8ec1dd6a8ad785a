// The CUDA backend's seeded delays (docs/delays.md): what a delay
// configuration is, which site an operation is, and how long the n-th
// occurrence at a site in a warp sleeps. Plain C++20 that also compiles as
// device code: the kernel side (delays_device.hpp), the host object that
// owns the device memory (delays.hpp), the silicon harness and the CPU
// tests share these definitions, and the last need no CUDA.
//
// A site is an operation kind (EventOp, the event log's names) at a source
// line of a file: `wait@ring.hpp:73`. The file is its name after the last
// '/' (event_log_file_id), so that a site's text names it in any build and
// on any machine; two operations of one kind on one line are one site.
//
// A configuration: a seed, the distribution (density: the share of
// occurrences that sleep, in 256ths; max_ns: the longest sleep), and the
// sites that may sleep (all, or a list). The sleep before the n-th
// occurrence (from 0) at site s in warp w (the grid's warp number, as the
// event log's) is delay_ns(config, site_key(s), w, n): a pure function, so
// that a seed and a site list reproduce every sleep, and a site keeps its
// sleeps when others leave the list (what ddmin needs).
#pragma once

#include <cstddef>
#include <cstdint>

#include "backends/cuda/event_log_format.hpp"

#include <algorithm>
#include <charconv>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace wspipe::cuda {

// The operations that may sleep first: waits (wait, try_wait, test_wait,
// named_sync, cluster_wait), arrivals (arrive, arrive_expect_tx,
// complete_tx, named_arrive, cluster_arrive) and the issue of asynchronous
// work (tma_load, tma_store, mma, mma_commit, clc_try_cancel). The rest
// (init, inval, expect_tx, bulk groups, Tensor Memory allocation) never do.
WSPIPE_EVENT_LOG_HD constexpr bool delay_op(EventOp op) {
  switch (op) {
    case EventOp::wait:
    case EventOp::try_wait:
    case EventOp::test_wait:
    case EventOp::named_sync:
    case EventOp::cluster_wait:
    case EventOp::arrive:
    case EventOp::arrive_expect_tx:
    case EventOp::complete_tx:
    case EventOp::named_arrive:
    case EventOp::cluster_arrive:
    case EventOp::tma_load:
    case EventOp::tma_store:
    case EventOp::mma:
    case EventOp::mma_commit:
    case EventOp::clc_try_cancel: return true;
    default: return false;
  }
}

// SplitMix64's finaliser: every output bit depends on every input bit.
WSPIPE_EVENT_LOG_HD constexpr std::uint64_t delay_mix(std::uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// A site's key: a hash of its kind, file id and line; never 0 (0 marks a
// free slot in the device's table of sites).
WSPIPE_EVENT_LOG_HD constexpr std::uint32_t delay_site_key(EventOp op, std::uint32_t file, std::uint32_t line) {
  const std::uint64_t z = delay_mix((std::uint64_t{file} << 32) | (std::uint64_t{line} << 8) | static_cast<std::uint8_t>(op));
  const auto k = static_cast<std::uint32_t>(z ^ (z >> 32));
  return k != 0 ? k : 1u;
}

// The most sites a list holds, and the slots of the device's table of the
// sites met in a launch (each warp counts its occurrences per slot).
inline constexpr std::uint32_t kDelayMaxSites = 64;
inline constexpr std::uint32_t kDelaySlots = 128;

// The distribution's bounds: __nanosleep sleeps at most about a millisecond.
inline constexpr std::uint32_t kDelayMaxNs = 1'000'000;
inline constexpr std::uint32_t kDelayDefaultDensity = 64;  // a quarter of the occurrences
inline constexpr std::uint32_t kDelayDefaultMaxNs = 65'536;

// What the device reads (a __constant__ copy, delays_device.hpp) besides
// its memory: an aggregate, so that a __constant__ variable may hold it.
struct DelayParams {
  std::uint64_t seed;
  std::uint32_t density;  // in 256ths: occurrences that sleep (0: none; 256: every one)
  std::uint32_t max_ns;   // the longest sleep, 1 to kDelayMaxNs
  std::uint32_t all;      // 1: every site may sleep; 0: only those of `keys`
  std::uint32_t count;    // the listed sites
  std::uint32_t keys[kDelayMaxSites];
};

// The sleep, in nanoseconds, before occurrence `n` (from 0) at the site of
// key `site` in warp `warp`: 0 for about (256 - density) / 256 of the
// occurrences; else 2^k plus a fraction of it, k uniform in [0, log2
// max_ns], capped at max_ns. Depends on nothing else.
WSPIPE_EVENT_LOG_HD constexpr std::uint32_t delay_ns(std::uint64_t seed, std::uint32_t density, std::uint32_t max_ns,
                                                     std::uint32_t site, std::uint32_t warp, std::uint32_t n) {
  const std::uint64_t h = delay_mix(delay_mix(delay_mix(seed) ^ site) ^ ((std::uint64_t{warp} << 32) | n));
  if ((h & 0xffu) >= density) return 0;
  std::uint32_t bits = 0;  // floor(log2 max_ns)
  while (bits < 31 && (max_ns >> (bits + 1)) != 0) ++bits;
  const auto k = static_cast<std::uint32_t>(h >> 8) % (bits + 1);  // 32-bit: no 64-bit division helper
  const std::uint32_t base = 1u << k;
  const std::uint32_t ns = base + static_cast<std::uint32_t>((h >> 16) & (base - 1));
  return ns < max_ns ? ns : max_ns;
}
WSPIPE_EVENT_LOG_HD constexpr std::uint32_t delay_ns(const DelayParams& p, std::uint32_t site, std::uint32_t warp,
                                                     std::uint32_t n) {
  return delay_ns(p.seed, p.density, p.max_ns, site, warp, n);
}

// The device's memory (DelayState, delays.hpp), 16-byte words: first the
// table of sites met (kDelaySlots entries), then per warp its cache of the
// last file name's id and its occurrence counts per slot.
struct alignas(16) DelaySiteSlot {
  std::uint32_t key;   // delay_site_key; 0: free
  std::uint32_t what;  // the op (bits 0-7) and the line (bits 8-31)
  std::uint32_t file;  // event_log_file_id
  std::uint32_t hits;  // occurrences in the launch, every warp's
};
static_assert(sizeof(DelaySiteSlot) == 16);
struct alignas(16) DelayWarp {
  std::uint32_t name_key;  // the low 32 bits of the address of the warp's last file name (0: none yet)
  std::uint32_t name_id;   // and its event_log_file_id
  std::uint32_t reserved[2];
  std::uint32_t count[kDelaySlots];  // occurrences so far, per slot of the table
};
static_assert(sizeof(DelayWarp) == 16 + 4 * kDelaySlots);
WSPIPE_EVENT_LOG_HD constexpr std::size_t delay_state_bytes(std::uint32_t warps) {
  return kDelaySlots * sizeof(DelaySiteSlot) + std::size_t{warps} * sizeof(DelayWarp);
}

// The host's side: sites and configurations as text (host code only, also
// where nvcc compiles the file).

// A site as its text says it: `<op>@<file>:<line>`.
struct DelaySite {
  EventOp op = EventOp::wait;
  std::string file;  // the name after the last '/'
  std::uint32_t line = 0;

  std::uint32_t key() const { return delay_site_key(op, event_log_file_id(file.c_str()), line); }
  std::string text() const { return std::string(event_op_name(op)) + "@" + file + ":" + std::to_string(line); }
  friend bool operator==(const DelaySite&, const DelaySite&) = default;
};

namespace delay_detail {
inline std::optional<std::uint64_t> parse_u64(std::string_view s) {
  std::uint64_t v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc{} || end != s.data() + s.size() || s.empty()) return std::nullopt;
  return v;
}
}  // namespace delay_detail

// `wait@ring.hpp:73`; a path before the name is dropped. nullopt where the
// text is not a site: an unknown or never-delayed op, no file, no line.
inline std::optional<DelaySite> parse_delay_site(std::string_view text) {
  const auto at = text.find('@');
  const auto colon = text.rfind(':');
  if (at == std::string_view::npos || colon == std::string_view::npos || colon < at) return std::nullopt;
  DelaySite s;
  bool known = false;
  for (std::uint8_t v = 1; v <= kEventOpLast; ++v) {
    const auto op = static_cast<EventOp>(v);
    if (text.substr(0, at) == event_op_name(op)) {
      s.op = op;
      known = delay_op(op);
    }
  }
  if (!known) return std::nullopt;
  std::string_view file = text.substr(at + 1, colon - at - 1);
  if (const auto slash = file.rfind('/'); slash != std::string_view::npos) file = file.substr(slash + 1);
  const auto line = delay_detail::parse_u64(text.substr(colon + 1));
  if (file.empty() || !line || *line == 0 || *line > 0xffffffu) return std::nullopt;
  s.file = std::string(file);
  s.line = static_cast<std::uint32_t>(*line);
  return s;
}

// A configuration as the host holds it. Its text, one token with no
// spaces: `seed:7,density:64,max_ns:65536,sites:all` or
// `...,sites:wait@ring.hpp:73+arrive@ring.hpp:85` (sites: `none` for an
// empty list, which sleeps nowhere).
struct DelayConfig {
  std::uint64_t seed = 0;
  std::uint32_t density = kDelayDefaultDensity;
  std::uint32_t max_ns = kDelayDefaultMaxNs;
  bool all = true;
  std::vector<DelaySite> sites;  // when !all

  std::string text() const {
    std::string t = "seed:" + std::to_string(seed) + ",density:" + std::to_string(density) +
                    ",max_ns:" + std::to_string(max_ns) + ",sites:";
    if (all) return t + "all";
    if (sites.empty()) return t + "none";
    for (std::size_t i = 0; i < sites.size(); ++i) t += (i ? "+" : "") + sites[i].text();
    return t;
  }

  // What the device reads. The caller has validated the configuration
  // (parse_delay_config, or at most kDelayMaxSites sites).
  DelayParams params() const {
    DelayParams p{};
    p.seed = seed;
    p.density = density;
    p.max_ns = max_ns;
    p.all = all ? 1u : 0u;
    for (const DelaySite& s : sites) {
      if (p.count < kDelayMaxSites) p.keys[p.count++] = s.key();
    }
    return p;
  }
};

// The configuration of `text` (DelayConfig::text's form; keys in any order,
// each at most once, those left out at their defaults), or nullopt with
// `error` saying what is wrong.
inline std::optional<DelayConfig> parse_delay_config(std::string_view text, std::string& error) {
  DelayConfig c;
  bool seen[4] = {};
  static constexpr std::string_view kKeys[4] = {"seed", "density", "max_ns", "sites"};
  while (!text.empty()) {
    // Items end at ','; a site's text holds ':' and '@' but no ','.
    const std::size_t end = std::min(text.find(','), text.size());
    const std::string_view item = text.substr(0, end);
    text = end < text.size() ? text.substr(end + 1) : std::string_view{};
    const auto colon = item.find(':');
    if (colon == std::string_view::npos) {
      error = "expected key:value, found '" + std::string(item) + "'";
      return std::nullopt;
    }
    const std::string_view key = item.substr(0, colon);
    std::string_view value = item.substr(colon + 1);
    std::size_t k = 0;
    while (k < 4 && kKeys[k] != key) ++k;
    if (k == 4) {
      error = "unknown key '" + std::string(key) + "' (seed, density, max_ns, sites)";
      return std::nullopt;
    }
    if (seen[k]) {
      error = "'" + std::string(key) + "' given twice";
      return std::nullopt;
    }
    seen[k] = true;
    if (k < 3) {
      const auto v = delay_detail::parse_u64(value);
      const bool ok = v && (k == 0 || (k == 1 && *v <= 256) || (k == 2 && *v >= 1 && *v <= kDelayMaxNs));
      if (!ok) {
        error = "bad " + std::string(key) + " '" + std::string(value) + "'" +
                (k == 1 ? " (0 to 256)" : k == 2 ? " (1 to " + std::to_string(kDelayMaxNs) + ")" : "");
        return std::nullopt;
      }
      if (k == 0) c.seed = *v;
      if (k == 1) c.density = static_cast<std::uint32_t>(*v);
      if (k == 2) c.max_ns = static_cast<std::uint32_t>(*v);
      continue;
    }
    c.all = value == "all";
    c.sites.clear();
    if (c.all || value == "none") continue;
    while (!value.empty()) {
      const auto plus = value.find('+');
      const std::string_view one = value.substr(0, plus);
      const auto site = parse_delay_site(one);
      if (!site) {
        error = "bad site '" + std::string(one) + "' (<op>@<file>:<line>, an op that may sleep)";
        return std::nullopt;
      }
      for (const DelaySite& s : c.sites) {
        if (s.key() == site->key()) {
          error = "site '" + site->text() + "' given twice";
          return std::nullopt;
        }
      }
      c.sites.push_back(*site);
      value = plus == std::string_view::npos ? std::string_view{} : value.substr(plus + 1);
    }
    if (c.sites.size() > kDelayMaxSites) {
      error = std::to_string(c.sites.size()) + " sites, more than " + std::to_string(kDelayMaxSites);
      return std::nullopt;
    }
  }
  return c;
}

}  // namespace wspipe::cuda
