// This project's own wspipe program: the same commands as wspipe's (list,
// run, explore, replay), over a catalogue holding pipeline3.
//
//   pipeline3 explore pipeline3 --stages 1 --items 8 --seconds 30
//   pipeline3 explore pipeline3/early-release --runs 1000
#include <stdexcept>
#include <string>

#include "pipeline3_emu.hpp"
#include "tools/cli.hpp"

namespace {

wspipe::cli::Catalogue catalogue() {
  wspipe::cli::Scenario s;
  s.name = "pipeline3";
  s.help = "loader warp -> ring -> transformer warp -> ring -> writer warp, key published by a named barrier";
  s.options = {
      {"stages", 2, 1, pipeline3::kMaxStages, "slots in each ring"},
      {"items", 16, 0, 100'000, "items carried from the loader to the writer"},
  };
  s.variants = {
      {"", "ok", "correct pipeline"},
      {"early-release", "race.smem", "the transformer frees its input slot before reading it"},
      {"unelected-arrive", "mbarrier.over-arrival", "the transformer signals its output slot with all 32 lanes"},
  };
  s.prepare = [](const std::string& variant, const wspipe::cli::OptionValues& v) {
    pipeline3::Config c;
    c.stages = static_cast<int>(v.at("stages"));
    c.items = static_cast<std::uint32_t>(v.at("items"));
    if (variant == "early-release") c.bug = pipeline3::Bug::early_release;
    if (variant == "unelected-arrive") c.bug = pipeline3::Bug::unelected_arrive;
    // Called once per run: the input is rebuilt each time, which for a
    // kernel this small costs nothing next to the run.
    return pipeline3::make_kernel(c, pipeline3::make_input(c.items));
  };
  return {s};
}

}  // namespace

int main(int argc, char** argv) { return wspipe::cli::main(argc, argv, catalogue()); }
