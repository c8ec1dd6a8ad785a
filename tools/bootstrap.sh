#!/usr/bin/env bash
# Installs what wspipe needs that this Debian machine lacks, then configures
# and builds one CMake preset (default: "default"), all of it or the targets
# named. Safe to run repeatedly: it installs nothing that is already there
# and rebuilds incrementally.
#   tools/bootstrap.sh [PRESET [TARGET...]]
set -euo pipefail
preset=${1:-default}
shift || true
targets=("$@")
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

log() { echo "[bootstrap] $*" >&2; }

packages=(g++ make cmake libboost-fiber-dev libboost-context-dev librapidcheck-dev libgtest-dev
          libbenchmark-dev python3)
# The fuzz preset: clang++ 14 and its runtime libraries (libFuzzer, ASan, UBSan).
[[ $preset == fuzz ]] && packages+=(clang-14 libclang-rt-14-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  log "installing: ${missing[*]}"
  sudo=""
  if [[ $(id -u) != 0 ]]; then
    command -v sudo >/dev/null || { log "need root (or sudo) to install: ${missing[*]}"; exit 2; }
    sudo=sudo
  fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
fi

jobs=$(nproc 2>/dev/null || echo 2)
if [[ ! -f "build/$preset/CMakeCache.txt" ]]; then
  log "configuring preset $preset"
  cmake --preset "$preset" >&2
fi
log "building preset $preset${targets:+ (${targets[*]})}"
if ((${#targets[@]})); then
  cmake --build --preset "$preset" -j "$jobs" --target "${targets[@]}" >&2
else
  cmake --build --preset "$preset" -j "$jobs" >&2
fi
