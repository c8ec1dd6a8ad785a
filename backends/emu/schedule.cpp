#include "schedule.hpp"

#include <charconv>

namespace wspipe::emu {
namespace {

constexpr std::string_view kLetters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";

void put_choice(std::string& out, std::uint32_t c) {
  if (c < kLetters.size()) {
    out += kLetters[c];
  } else {
    out += '{';
    out += std::to_string(c);
    out += '}';
  }
}

int letter_value(char ch) {
  if (ch >= 'a' && ch <= 'z') return ch - 'a';
  if (ch >= 'A' && ch <= 'Z') return 26 + (ch - 'A');
  return -1;
}

}  // namespace

std::string Schedule::encode() const {
  std::string out = std::to_string(kVersion) + ":";
  for (std::size_t i = 0; i < choices_.size();) {
    std::size_t j = i + 1;
    while (j < choices_.size() && choices_[j] == choices_[i]) ++j;
    put_choice(out, choices_[i]);
    if (j - i > 1) out += std::to_string(j - i);
    i = j;
  }
  return out;
}

std::optional<Schedule> Schedule::decode(std::string_view text, std::string* error) {
  auto fail = [&](std::size_t pos, const std::string& why) -> std::optional<Schedule> {
    if (error) *error = "schedule: " + why + " at character " + std::to_string(pos);
    return std::nullopt;
  };
  const std::string prefix = std::to_string(kVersion) + ":";
  if (text.substr(0, prefix.size()) != prefix) {
    auto colon = text.find(':');
    if (colon == std::string_view::npos) return fail(0, "missing version prefix \"" + prefix + "\"");
    return fail(0, "unsupported version \"" + std::string(text.substr(0, colon)) + "\" (this build reads version " +
                       std::to_string(kVersion) + ")");
  }
  Schedule s;
  // The encoding is compact, but a count can ask for any number of choices;
  // refuse more than any run could use (16 Mi, above the CLI's default step
  // budget of 5 M steps) instead of exhausting memory.
  constexpr std::uint64_t kMaxChoices = std::uint64_t{1} << 24;
  std::size_t pos = prefix.size();
  while (pos < text.size()) {
    std::uint32_t choice = 0;
    const char ch = text[pos];
    if (int v = letter_value(ch); v >= 0) {
      choice = static_cast<std::uint32_t>(v);
      ++pos;
    } else if (ch == '{') {
      auto close = text.find('}', pos);
      if (close == std::string_view::npos) return fail(pos, "unclosed '{'");
      auto [p, ec] = std::from_chars(text.data() + pos + 1, text.data() + close, choice);
      if (ec != std::errc() || p != text.data() + close || close == pos + 1)
        return fail(pos + 1, "bad number in braces");
      pos = close + 1;
    } else {
      return fail(pos, std::string("unexpected character '") + ch + "'");
    }
    std::uint64_t count = 1;
    if (pos < text.size() && text[pos] >= '0' && text[pos] <= '9') {
      const char* begin = text.data() + pos;
      auto [p, ec] = std::from_chars(begin, text.data() + text.size(), count);
      if (ec != std::errc() || count < 2 || *begin == '0') return fail(pos, "bad repeat count");
      pos += static_cast<std::size_t>(p - begin);
    }
    if (count > kMaxChoices - s.choices_.size()) return fail(pos, "too many choices");
    s.choices_.insert(s.choices_.end(), count, choice);
  }
  return s;
}

}  // namespace wspipe::emu
