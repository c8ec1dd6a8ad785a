#!/usr/bin/env bash
# The emulator's narrow door, checked on a build tree: no object outside the
# emulator library depends on a private emulator header (backends/emu/runtime/,
# backends/emu/exhaustive.hpp), so that editing a model rebuilds the
# emulator's objects and nothing else (docs/architecture.md). The white-box
# tests of the runtime's internals are the only exceptions, named below.
# Reads the compiler's dependency records: `ninja -t deps` in a Ninja build,
# the .o.d files a Makefile build keeps.
#   tests/private_headers_check.sh BUILD_DIR
set -euo pipefail
build=${1:?usage: private_headers_check.sh BUILD_DIR}
private='backends/emu/runtime/|backends/emu/exhaustive\.hpp'
# Objects allowed to see the runtime: the emulator itself and the tests of
# its internals (the scheduler's enabled set, the shadow tables, the models)
# and the differential tests of the exhaustive search's reduction, which drive
# the search directly.
allowed='(wspipe_emu|emu_scheduler_test|emu_shadow_test|models_test|explore_soundness_test|fuzz_dpor_soundness)\.dir/'

deps() {
  if [[ -f $build/build.ninja ]]; then
    # "obj: #deps N, ..." then one indented dependency per line.
    ninja -C "$build" -t deps | awk '/^[^ ]/ {obj=$1} /^ +/ {print obj " " $1}'
  else
    # Makefile builds: the compiler's own .d files next to each object.
    find "$build" -name '*.o.d' -print0 | while IFS= read -r -d '' d; do
      tr -d '\\' <"$d" | tr ' ' '\n' | grep -v '^$' | tail -n +2 | sed "s|^|${d%.d} |"
    done
  fi
}

records=$(deps)
if [[ -z $records ]]; then
  echo "private_headers_check: no dependency records in $build (build it first)" >&2
  exit 2
fi
objects=$(awk '{print $1}' <<<"$records" | sort -u | wc -l)
bad=$(grep -E " [^ ]*($private)" <<<"$records" | grep -Ev "$allowed" | awk '{print $1 " -> " $2}' | sort -u || true)
if [[ -n $bad ]]; then
  echo "private_headers_check: objects outside the emulator include its private headers:" >&2
  echo "$bad" >&2
  exit 1
fi
echo "private_headers_check: $objects objects checked; none outside the emulator depends on a private header"
