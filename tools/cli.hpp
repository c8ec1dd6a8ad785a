// The wspipe command-line program as a library: list, run, explore and
// replay over a catalogue of scenarios. The built-in `wspipe` program is
// this over examples' catalogue; a user builds a program of their own over
// theirs:
//
//   int main(int argc, char** argv) { return wspipe::cli::main(argc, argv, my_catalogue()); }
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include "backends/emu/scenario.hpp"

namespace wspipe::cli {

// The catalogue's types live in the library (backends/emu/scenario.hpp);
// here under the names the CLI has always given them.
using emu::Catalogue;
using emu::OptionSpec;
using emu::OptionValues;
using emu::Scenario;
using emu::VariantSpec;

// Exit codes: 0 nothing found; 1 a violation, deadlock or livelock found;
// 2 bad usage or input.
int main(const std::vector<std::string>& args, const Catalogue& catalogue, std::ostream& out, std::ostream& err);
// The same on the process's arguments and standard streams.
int main(int argc, char** argv, const Catalogue& catalogue);

}  // namespace wspipe::cli
