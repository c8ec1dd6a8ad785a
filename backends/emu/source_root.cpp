// The default of RunOptions::source_root: WSPIPE_SOURCE_ROOT, else the root
// the program's project noted (emulator.hpp, WSPIPE_PROJECT_SOURCE_DIR).
#include <cstdlib>
#include <mutex>
#include <string>

#include "emulator.hpp"

namespace wspipe::emu {
namespace {

struct ProjectRoot {
  std::mutex mu;
  std::string root;  // the first one noted
};
ProjectRoot& project_root() {
  static ProjectRoot r;
  return r;
}

}  // namespace

bool detail::note_project_source_root(const char* root) {
  ProjectRoot& p = project_root();
  const std::lock_guard<std::mutex> lock(p.mu);
  if (p.root.empty() && root != nullptr) p.root = root;
  return true;
}

std::string default_source_root() {
  if (const char* env = std::getenv("WSPIPE_SOURCE_ROOT")) return env;
  ProjectRoot& p = project_root();
  const std::lock_guard<std::mutex> lock(p.mu);
  return p.root;
}

}  // namespace wspipe::emu
