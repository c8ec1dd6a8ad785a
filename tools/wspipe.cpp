#include <iostream>

#include "cli.hpp"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv, argv + argc);
  return wspipe::cli::main(args, std::cout, std::cerr);
}
