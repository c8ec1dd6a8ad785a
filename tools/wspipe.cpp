// The built-in `wspipe` program: the CLI over examples' catalogue.
#include "examples/scenarios.hpp"
#include "tools/cli.hpp"

int main(int argc, char** argv) { return wspipe::cli::main(argc, argv, wspipe::examples::catalogue()); }
