#!/usr/bin/env bash
# tools/silicon.sh [ARGS...]: build wspipe_silicon (tools/gpu/silicon.cu)
# with nvcc alone and run it: `all` by default, or the ARGS given
# (ring | tile-reduce | tma-store | clusters | variants | conformance
# [--seed S] [--count N] | conformance-mw [--seed S] [--count N] [--reps R]);
# `tools/silicon.sh ring-cost [ITEMS] [REPS]` builds and runs the
# abstraction's cost benchmark (tools/gpu/ring_cost.cu) instead, and
# `tools/silicon.sh tma-bandwidth [--size-gib G] [--reps N] ...` the TMA input
# pipeline's bandwidth benchmark (tools/gpu/tma_bandwidth.cu; --help lists its
# options); `tools/silicon.sh event-log` the event log's GPU program
# (tools/gpu/event_log_gpu.cu: a logged ring, a planted hang; its logs go to
# the results directory) and `tools/silicon.sh ring-cost-event-log [ITEMS]
# [REPS]` the cost benchmark with the log on (docs/event-log.md;
# WSPIPE_CUDA_EVENT_LOG_COST_PARTS=1 or 2 in the environment keeps only part
# of each record's work, docs/silicon.md "The event log"). `variants` is
# built with the event log on (WSPIPE_CUDA_EVENT_LOG=$WSPIPE_SILICON_EVENT_LOG
# events per warp, default 512; 0: no log) as build/wspipe_silicon_variants: each
# variant's log goes to event_logs/ in the results directory, or to
# `--event-logs DIR` (docs/silicon.md "Broken variants on silicon").
# `tools/silicon.sh explore TARGET [OPTIONS]` builds build/wspipe_silicon_explore
# with the seeded delays and the log on and runs a catalogue kernel under
# many delay seeds, shrinking a failing one's sites (docs/delays.md;
# `build/wspipe_silicon_explore` alone lists the options). For a GPU machine
# that has the CUDA toolkit but not the rest of wspipe's dependencies (no
# Boost, no GoogleTest); where those exist, the cuda preset builds the same
# program and CTest runs it (label gpu). Needs an sm_90 or later GPU; the
# build targets sm_90a, or $WSPIPE_SILICON_ARCH (e.g. 100a). Results go to
# $WSPIPE_SILICON_OUT (default: build/silicon).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
nvcc=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
arch=${WSPIPE_SILICON_ARCH:-90a}
out=${WSPIPE_SILICON_OUT:-$root/build/silicon}
mkdir -p "$out" "$root/build"
defines=()  # compile definitions of the program built
# build_and_run PROGRAM SOURCE OPT [ARGS...]: build tools/gpu/SOURCE with
# nvcc (optimisation OPT) into build/PROGRAM and run it with ARGS in this
# shell's place.
build_and_run() {
  local program=$1 source=$2 opt=$3
  shift 3
  echo "[silicon] $nvcc -gencode arch=compute_$arch,code=sm_$arch tools/gpu/$source" >&2
  "$nvcc" -std=c++20 "$opt" "${defines[@]}" -gencode "arch=compute_$arch,code=sm_$arch" -I "$root" \
    "$root/tools/gpu/$source" -o "$root/build/$program"
  exec "$root/build/$program" "$@"
}
case "${1:-}" in
  ring-cost) shift; build_and_run wspipe_ring_cost ring_cost.cu -O3 "$@" ;;
  tma-bandwidth) shift; build_and_run wspipe_tma_bandwidth tma_bandwidth.cu -O3 "$@" ;;
  event-log) shift; build_and_run wspipe_event_log_gpu event_log_gpu.cu -O2 "$out" ;;
  variants)
    defines=("-DWSPIPE_CUDA_EVENT_LOG=${WSPIPE_SILICON_EVENT_LOG:-512}")
    export WSPIPE_SILICON_OUT=$out
    build_and_run wspipe_silicon_variants silicon.cu -O2 "$@"
    ;;
  explore)
    # Seeded delays and the event log (docs/delays.md); a watchdog of
    # 200,000 tries (about 0.9 s) so that each hang costs about a second.
    defines=(-DWSPIPE_CUDA_DELAYS=1 "-DWSPIPE_CUDA_EVENT_LOG=${WSPIPE_SILICON_EVENT_LOG:-512}"
             -DWSPIPE_CUDA_WATCHDOG_SPINS=200000)
    export WSPIPE_SILICON_OUT=$out
    build_and_run wspipe_silicon_explore silicon.cu -O2 "$@"
    ;;
  ring-cost-event-log)
    shift
    defines=(-DWSPIPE_CUDA_EVENT_LOG=1024 "-DWSPIPE_CUDA_EVENT_LOG_COST_PARTS=${WSPIPE_CUDA_EVENT_LOG_COST_PARTS:-3}")
    build_and_run wspipe_ring_cost_event_log ring_cost.cu -O3 "$@"
    ;;
esac
[ "$#" -gt 0 ] || set -- all
export WSPIPE_SILICON_OUT=$out
build_and_run wspipe_silicon silicon.cu -O2 "$@"
