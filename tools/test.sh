#!/usr/bin/env bash
# The whole test suite: installs what is missing, builds, runs every test.
#  - the default preset: emulator, unit and property tests, the CLI end to
#    end, fuzz corpora replayed, and a short benchmark run;
#  - the CMake package: installed to a temporary prefix, and the standalone
#    project examples/consumer built and tested against it;
#  - the sanitize preset (UBSan) over the same tests, then the asan preset
#    (AddressSanitizer alone: the fibers' stack switches are annotated);
#  - the tsan preset (ThreadSanitizer) over the tests of parallel
#    exploration, where runs go on several threads, and the teardown's
#    (fibers unwound or abandoned at a run's end);
#  - the fuzz preset (clang 14, ASan+UBSan): every libFuzzer target for a
#    bounded time from its corpus (docs/fuzzing.md);
#  - the cuda preset when nvcc is present: the sm_100a and sm_90a builds
#    of the CUDA backend and the examples, their SASS checks, the compile-
#    time refusal of Tensor Memory on sm_90a, and the ring's SASS cost
#    (core/ against hand-written); the GPU tests skip without a GPU.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
jobs=$(nproc 2>/dev/null || echo 2)

run_preset() {
  "$root/tools/bootstrap.sh" "$1"
  echo "[test] ctest --preset $1" >&2
  ctest --preset "$1" -j "$jobs"
}

run_preset default

# The package as a user consumes it: install the default build to a
# temporary prefix, then build and run examples/consumer (a project of its
# own: find_package(wspipe CONFIG REQUIRED) and nothing else) against it,
# with the consumer's own strict flags.
prefix=$(mktemp -d /tmp/wspipe-prefix.XXXXXX)
trap 'rm -rf "$prefix"' EXIT
echo "[test] cmake --install build/default --prefix $prefix; examples/consumer against it" >&2
cmake --install build/default --prefix "$prefix/install" >/dev/null
# The narrow door (docs/architecture.md): the emulator's private headers
# are not installed, so a consumer cannot come to depend on them.
if private=$(find "$prefix/install" -path '*/backends/emu/runtime*' -o -name exhaustive.hpp | grep .); then
  echo "[test] the install holds private emulator headers:" >&2
  echo "$private" >&2
  exit 1
fi
cmake -S examples/consumer -B "$prefix/consumer" -DCMAKE_PREFIX_PATH="$prefix/install" \
      -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS="-Wall -Wextra -Werror" >/dev/null
cmake --build "$prefix/consumer" -j "$jobs" >&2
ctest --test-dir "$prefix/consumer" -j "$jobs" --output-on-failure
# The other route of the README: the same project with this checkout built
# as its subproject (add_subdirectory), from a clean directory and with no
# build type, as a user's first configure is.
echo "[test] examples/consumer with wspipe as a subproject (add_subdirectory)" >&2
env -u CMAKE_BUILD_TYPE cmake -S examples/consumer -B "$prefix/consumer-sub" -DWSPIPE_CHECKOUT="$root" \
      -DCMAKE_CXX_FLAGS="-Wall -Wextra -Werror" >/dev/null
cmake --build "$prefix/consumer-sub" -j "$jobs" >&2
ctest --test-dir "$prefix/consumer-sub" -j "$jobs" --output-on-failure

run_preset sanitize
run_preset asan
"$root/tools/bootstrap.sh" tsan explore_test testing_helpers_test emu_teardown_test
echo "[test] ctest --preset tsan -R 'explore_Parallel|ShardedExploration|ShardedExhaustive|TestingHelpers.RegisteredExhaustive|TestingHelpers.CorrectRingIsClean|Teardown' (parallel exploration; the teardown's fibers)" >&2
ctest --preset tsan -j "$jobs" -R 'explore_Parallel|ShardedExploration|ShardedExhaustive|TestingHelpers.RegisteredExhaustive|TestingHelpers.CorrectRingIsClean|Teardown'
# The fuzzers as libFuzzer runs (the fuzz preset: clang 14, ASan+UBSan),
# each for FUZZ_SECONDS (default 15) from its committed corpus, whose copy
# in fuzz/corpus/ is left as it is: a crash, a sanitizer report or a
# disagreement with a model fuzzer's reference fails the suite, and the
# input that did it stays in the /tmp directory printed.
fuzz_targets=(mbarrier named_barrier tmem tma schedule_decode ring_replay dpor_soundness)
"$root/tools/bootstrap.sh" fuzz "${fuzz_targets[@]/#/fuzz_}"
for t in "${fuzz_targets[@]}"; do
  work=$(mktemp -d /tmp/wspipe-fuzz-$t.XXXXXX)
  echo "[test] fuzz_$t for ${FUZZ_SECONDS:-15} s from fuzz/corpus/$t (new inputs and crashes: $work)" >&2
  build/fuzz/fuzz/fuzz_$t -max_total_time="${FUZZ_SECONDS:-15}" -artifact_prefix="$work/" "$work" "fuzz/corpus/$t" \
    2>"$work/log" || { tail -n 40 "$work/log" >&2; exit 1; }
  grep -h "^#.*DONE" "$work/log" >&2 || true
  rm -rf "$work"
done

if command -v nvcc >/dev/null 2>&1 || [[ -x /usr/local/cuda/bin/nvcc ]]; then
  # cuobjdump (and the nvdisasm it calls) for the SASS check come from PyPI
  # when the toolkit lacks them.
  if ! command -v cuobjdump >/dev/null 2>&1 && [[ ! -x /usr/local/cuda/bin/cuobjdump ]]; then
    python3 -m pip install --quiet --disable-pip-version-check nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm >&2 ||
      echo "[test] could not install cuobjdump from PyPI: the SASS check will skip" >&2
  fi
  "$root/tools/bootstrap.sh" cuda
  echo "[test] ctest --preset cuda -R '^cuda\.' (the rest ran above)" >&2
  ctest --preset cuda -j "$jobs" -R '^cuda\.'
else
  echo "[test] nvcc not found: skipping the sm_100a build (the cuda preset)" >&2
fi
echo "[test] all tests passed" >&2
