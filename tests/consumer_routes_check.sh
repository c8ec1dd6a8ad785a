#!/usr/bin/env bash
# A project of the user's, by both routes the README gives, configured from
# a clean directory with no build type (compile_commands.json read back):
#  - add_subdirectory(wspipe): GTest::gtest_main is there to link; wspipe's
#    libraries are compiled -O2 while the project's own code and its build
#    type are left alone; the project's code notes the project's root
#    (WSPIPE_PROJECT_SOURCE_DIR), wspipe's libraries note none;
#    WSPIPE_SOURCE_ROOT set by the project replaces the root;
#  - find_package(wspipe) from an install of BUILD_DIR: the project's code
#    notes its own root, and nothing installed names wspipe's source tree;
#  - by both routes the project's code, not wspipe's libraries, is compiled
#    with the access instrumentation, and WSPIPE_INSTRUMENT_ACCESSES=OFF
#    turns it off.
# Usage: consumer_routes_check.sh WSPIPE_SOURCE_DIR BUILD_DIR
set -euo pipefail
src=$(cd "$1" && pwd)
build=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

write_project() {  # DIR LINES...: a project with one test linking wspipe::testing and GTest::gtest_main
  local dir=$1; shift
  mkdir -p "$dir"
  {
    echo 'cmake_minimum_required(VERSION 3.25)'
    echo 'project(mine LANGUAGES CXX)'
    printf '%s\n' "$@"
    echo 'add_executable(my_test my_test.cpp)'
    echo 'target_link_libraries(my_test PRIVATE wspipe::testing GTest::gtest_main)'
  } >"$dir/CMakeLists.txt"
  echo '#include "backends/emu/testing/gtest.hpp"' >"$dir/my_test.cpp"
}

configure() {  # DIR ARGS...
  local dir=$1; shift
  env -u CMAKE_BUILD_TYPE -u CMAKE_GENERATOR -u CMAKE_CONFIGURATION_TYPES \
    cmake -S "$dir" -B "$dir/build" -DCMAKE_EXPORT_COMPILE_COMMANDS=ON -DWSPIPE_CUDA=OFF "$@" \
    >"$dir/configure.log" 2>&1 || { cat "$dir/configure.log" >&2; fail "$dir: configure"; }
}

# Checks compile_commands.json of DIR: FILE_SUFFIX must (+) or must not (-) hold TEXT.
expect() {
  python3 - "$1/build/compile_commands.json" "$2" "$3" "$4" <<'PY' || fail "$1: $3 $4 in the command of $2"
import json, sys
path, suffix, sign, text = sys.argv[1:]
cmds = [c["command"] for c in json.load(open(path)) if c["file"].endswith(suffix)]
if not cmds:
    sys.exit(f"no command compiles {suffix}")
ok = all((text in c) == (sign == "+") for c in cmds)
if not ok:
    print("\n".join(cmds), file=sys.stderr)
sys.exit(0 if ok else 1)
PY
}

# --- add_subdirectory
sub=$tmp/sub
write_project "$sub" "add_subdirectory($src wspipe)"
configure "$sub"
grep -q '^CMAKE_BUILD_TYPE:[A-Z]*=$' "$sub/build/CMakeCache.txt" || fail "the including project's build type was set"
expect "$sub" backends/emu/explore.cpp + " -O2 "
expect "$sub" backends/emu/runtime/world.cpp + " -O2 "
expect "$sub" /my_test.cpp - " -O"
expect "$sub" /my_test.cpp + "WSPIPE_PROJECT_SOURCE_DIR=\\\"$sub\\\""
for lib in backends/emu/explore.cpp backends/emu/testing/testing.cpp tools/cli.cpp; do
  expect "$sub" $lib - WSPIPE_PROJECT_SOURCE_DIR
done
# the project's code is compiled with the access instrumentation (plain
# shared-memory accesses race-checked), wspipe's libraries without it; the
# option turns it off
expect "$sub" /my_test.cpp + "-fsanitize=thread"
for lib in backends/emu/explore.cpp backends/emu/runtime/world.cpp backends/emu/testing/testing.cpp tools/cli.cpp; do
  expect "$sub" $lib - "-fsanitize=thread"
done
configure "$sub" -DWSPIPE_SOURCE_ROOT=/somewhere/else -DWSPIPE_INSTRUMENT_ACCESSES=OFF
expect "$sub" /my_test.cpp + 'WSPIPE_PROJECT_SOURCE_DIR=\"/somewhere/else\"'
expect "$sub" /my_test.cpp - "-fsanitize=thread"

# --- find_package from an install
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
if grep -rlF "$src" "$tmp/prefix/lib" --include='*.cmake' >&2; then fail "the installed package names $src"; fi
inst=$tmp/inst
write_project "$inst" "find_package(wspipe CONFIG REQUIRED)"
configure "$inst" -DCMAKE_PREFIX_PATH="$tmp/prefix"
expect "$inst" /my_test.cpp + "WSPIPE_PROJECT_SOURCE_DIR=\\\"$inst\\\""
# (a ThreadSanitizer build of wspipe leaves the entry points to the sanitizer: no instrumentation)
hooks=+
if grep -q '^WSPIPE_SANITIZE:STRING=.*thread' "$build/CMakeCache.txt"; then hooks=-; fi
expect "$inst" /my_test.cpp $hooks "-fsanitize=thread"
configure "$inst" -DCMAKE_PREFIX_PATH="$tmp/prefix" -DWSPIPE_INSTRUMENT_ACCESSES=OFF
expect "$inst" /my_test.cpp - "-fsanitize=thread"
echo "both routes: ok"
