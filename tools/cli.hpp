// The wspipe command-line program, as a function so that tests can call it.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

namespace wspipe::cli {

// Exit codes: 0 nothing found; 1 a violation, deadlock or livelock found;
// 2 bad usage or input.
int main(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace wspipe::cli
