#include "schedule.hpp"

#include <charconv>
#include <cstdio>

namespace wspipe::emu {
namespace {

constexpr std::string_view kLetters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";

void put_actor(std::string& out, std::uint32_t a) {
  if (a < kLetters.size()) {
    out += kLetters[a];
  } else {
    out += '{';
    out += std::to_string(a);
    out += '}';
  }
}

int letter_value(char ch) {
  if (ch >= 'a' && ch <= 'z') return ch - 'a';
  if (ch >= 'A' && ch <= 'Z') return 26 + (ch - 'A');
  return -1;
}

bool is_hex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); }

}  // namespace

std::string Schedule::encode() const {
  std::string out = std::to_string(version_) + ":";
  if (check_ != 0) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "%08x:", check_);
    out += buf;
  }
  std::uint64_t next = 0;  // the first choice index not yet covered
  for (const Deviation& d : deviations_) {
    if (d.at > next) out += std::to_string(d.at - next);
    put_actor(out, d.actor);
    next = d.at + 1;
  }
  return out;
}

std::optional<Schedule> Schedule::decode(std::string_view text, std::string* error) {
  auto fail = [&](std::size_t pos, const std::string& why) -> std::optional<Schedule> {
    if (error) *error = "schedule '" + std::string(text.substr(0, 80)) + "': " + why + " at character " + std::to_string(pos);
    return std::nullopt;
  };
  const auto version_end = text.find(':');
  if (version_end == std::string_view::npos)
    return fail(0, "missing version prefix \"" + std::to_string(kVersion) + ":\"");
  const std::string_view version = text.substr(0, version_end);
  if (version == "1")
    return fail(0, "version 1 schedules (every choice listed) are no longer read; re-run the exploration that "
                   "printed it to get a version " + std::to_string(kVersion) + " schedule");
  Schedule s;
  if (version.size() == 1 && version[0] - '0' >= kOldestVersion && version[0] - '0' <= kVersion) {
    s.version_ = version[0] - '0';
  } else {
    return fail(0, "unsupported version \"" + std::string(version) + "\" (this build reads versions " +
                       std::to_string(kOldestVersion) + " to " + std::to_string(kVersion) + ")");
  }
  std::size_t pos = version_end + 1;
  if (const auto colon = text.find(':', pos); colon != std::string_view::npos) {
    if (colon - pos != 8) return fail(pos, "the check must be 8 hex digits");
    for (std::size_t i = pos; i < colon; ++i)
      if (!is_hex(text[i])) return fail(i, "the check must be 8 hex digits");
    std::from_chars(text.data() + pos, text.data() + colon, s.check_, 16);
    if (s.check_ == 0) return fail(pos, "a check of 0 is never written");
    pos = colon + 1;
  }
  // A choice index beyond any run's reach is an error, not a huge vector.
  constexpr std::uint64_t kMaxIndex = std::uint64_t{1} << 40;
  std::uint64_t next = 0;
  while (pos < text.size()) {
    std::uint64_t gap = 0;
    if (text[pos] >= '0' && text[pos] <= '9') {
      const char* begin = text.data() + pos;
      auto [p, ec] = std::from_chars(begin, text.data() + text.size(), gap);
      if (ec != std::errc() || gap == 0 || *begin == '0') return fail(pos, "bad gap (a positive number, no leading 0)");
      pos += static_cast<std::size_t>(p - begin);
      if (pos == text.size()) return fail(pos, "a gap must be followed by an actor");
    }
    // next passes kMaxIndex only after a deviation at kMaxIndex itself; the
    // difference must not be taken then (it would wrap around).
    if (next > kMaxIndex || gap > kMaxIndex - next) return fail(pos, "choice index too large");
    std::uint32_t actor = 0;
    const char ch = text[pos];
    if (int v = letter_value(ch); v >= 0) {
      actor = static_cast<std::uint32_t>(v);
      ++pos;
    } else if (ch == '{') {
      const auto close = text.find('}', pos);
      if (close == std::string_view::npos) return fail(pos, "unclosed '{'");
      auto [p, ec] = std::from_chars(text.data() + pos + 1, text.data() + close, actor);
      if (ec != std::errc() || p != text.data() + close || close == pos + 1) return fail(pos + 1, "bad number in braces");
      if (actor < kLetters.size()) return fail(pos + 1, "an actor below 52 is written as a letter");
      pos = close + 1;
    } else {
      return fail(pos, std::string("unexpected character '") + ch + "'");
    }
    s.deviations_.push_back({next + gap, actor});
    next += gap + 1;
  }
  return s;
}

}  // namespace wspipe::emu
