#!/usr/bin/env bash
# sass_check.sh OBJECT...: disassemble the sm_100a build of device_build.cu
# and check that every backend operation compiles to the instructions it
# stands for (one extern "C" kernel per operation, wspipe_op_<name>), and
# that the ring example contains the whole protocol.
#
# Exit 0: all present; 1: something missing or unexpected; 77 (CTest skip):
# no cuobjdump / nvdisasm. Neither ships with every CUDA toolkit; from PyPI:
#   pip install nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm
# (both land in <site-packages>/nvidia/cu13/bin). $CUOBJDUMP overrides.
set -u

skip() {
  echo "SKIP: $*" >&2
  echo "  install: pip install nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm (or set CUOBJDUMP=/path/to/cuobjdump)" >&2
  exit 77
}

if [ "$#" -lt 1 ]; then
  echo "usage: $0 OBJECT..." >&2
  exit 2
fi
for f in "$@"; do
  [ -f "$f" ] || { echo "sass_check: no such object file: $f (build wspipe_cuda_device_build first)" >&2; exit 1; }
done

# --- find cuobjdump: $CUOBJDUMP, PATH, the toolkit, then pip's nvidia/cu*/bin
find_cuobjdump() {
  if [ -n "${CUOBJDUMP:-}" ]; then echo "$CUOBJDUMP"; return; fi
  if command -v cuobjdump >/dev/null 2>&1; then command -v cuobjdump; return; fi
  local d
  for d in "${CUDA_HOME:-}" "${CUDA_PATH:-}" /usr/local/cuda; do
    if [ -n "$d" ] && [ -x "$d/bin/cuobjdump" ]; then echo "$d/bin/cuobjdump"; return; fi
  done
  local py
  for py in python3 python; do
    command -v "$py" >/dev/null 2>&1 || continue
    "$py" - <<'EOF' 2>/dev/null && return
import glob, os, site, sys, sysconfig
roots = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
roots.update(site.getsitepackages() if hasattr(site, "getsitepackages") else [])
roots.add(site.getusersitepackages())
for r in sorted(roots):
    for p in sorted(glob.glob(os.path.join(r, "nvidia", "cu*", "bin", "cuobjdump"))):
        if os.access(p, os.X_OK):
            print(p)
            sys.exit(0)
sys.exit(1)
EOF
  done
  return 1
}

CUOBJDUMP_BIN=$(find_cuobjdump) || skip "cuobjdump not found"
[ -x "$CUOBJDUMP_BIN" ] || skip "cuobjdump not executable: $CUOBJDUMP_BIN"
# cuobjdump -sass runs nvdisasm: look beside cuobjdump first (pip puts both there).
export PATH="$(dirname "$CUOBJDUMP_BIN"):$PATH"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if ! "$CUOBJDUMP_BIN" -sass "$@" >"$tmp/sass" 2>"$tmp/err"; then
  if grep -q nvdisasm "$tmp/err"; then
    skip "cuobjdump ($CUOBJDUMP_BIN) cannot find nvdisasm: $(head -c 300 "$tmp/err")"
  fi
  echo "sass_check: cuobjdump failed:" >&2
  cat "$tmp/err" >&2
  exit 1
fi
if grep -q nvdisasm "$tmp/err"; then
  skip "cuobjdump ($CUOBJDUMP_BIN) cannot find nvdisasm: $(head -c 300 "$tmp/err")"
fi

# One line per instruction: "<function>\t<instruction>" (no address, no
# encoding, no trailing ';'), up to the self-branch that ends each function
# (the NOPs after it are padding; NOPs before it are kept: a fence that
# ptxas lowers to nothing leaves one).
awk '
  /Function :/ { fn = $3; done = 0; next }
  /^[ \t]*\/\*[0-9a-f]+\*\// {
    if (done) next
    line = $0
    addr = line
    sub(/^[ \t]*\/\*/, "", addr)
    sub(/\*\/.*$/, "", addr)
    sub(/^[ \t]*\/\*[0-9a-f]+\*\/[ \t]*/, "", line)
    sub(/[ \t]*\/\*.*$/, "", line)
    sub(/[ \t]*;[ \t]*$/, "", line)
    if (line ~ /^BRA 0x[0-9a-f]+$/) {
      target = substr(line, 7)
      sub(/^0+/, "", addr)
      if (target == (addr == "" ? "0" : addr)) { done = 1; next }
    }
    if (line != "") print fn "\t" line
  }' "$tmp/sass" >"$tmp/ops"

if ! [ -s "$tmp/ops" ]; then
  echo "sass_check: no SASS found in $* (was it built for sm_100a?)" >&2
  exit 1
fi
if ! grep -q "EF_CUDA_SM100" "$tmp/sass"; then
  echo "sass_check: the object holds no sm_100 SASS" >&2
  exit 1
fi

failures=0
checks=0
instrs() { awk -F'\t' -v fn="$1" '$1 == fn { print $2 }' "$tmp/ops"; }
# expect FUNCTION REGEX WHAT: some instruction of FUNCTION matches REGEX (ERE).
expect() {
  checks=$((checks + 1))
  if instrs "$1" | grep -Eq -- "$2"; then
    printf '  ok    %-32s %s\n' "$1" "$3"
  else
    printf '  FAIL  %-32s %s: no instruction matches /%s/\n' "$1" "$3" "$2"
    failures=$((failures + 1))
  fi
}
# reject FUNCTION REGEX WHY: no instruction of FUNCTION matches REGEX.
reject() {
  checks=$((checks + 1))
  if instrs "$1" | grep -Eq -- "$2"; then
    printf '  FAIL  %-32s %s: found /%s/\n' "$1" "$3" "$2"
    failures=$((failures + 1))
  else
    printf '  ok    %-32s %s\n' "$1" "$3"
  fi
}

echo "sass_check: $CUOBJDUMP_BIN -sass $*"
# identity
expect wspipe_op_warp_idx 'SHFL\.IDX' 'warp_idx: threadIdx.x/32 broadcast from lane 0'
expect wspipe_op_lane_idx 'SR_LANEID' 'lane_idx: %laneid'
expect wspipe_op_cta_rank 'SR_CgaCtaId' 'cta_rank: %cluster_ctarank'
expect wspipe_op_cluster_size 'SR_CgaSize' 'cluster_size: %cluster_nctarank'
expect wspipe_op_elect_one '(^|[ @!A-Z0-9]+ )ELECT ' 'elect_one: elect.sync'
# mbarrier
expect wspipe_op_init 'SYNCS\.EXCH\.64 ' 'init: mbarrier.init'
expect wspipe_op_inval 'SYNCS\.CCTL\.IV ' 'inval: mbarrier.inval'
expect wspipe_op_arrive 'SYNCS\.ARRIVE\.TRANS64(\.RED)?\.A1T0 ' 'arrive: arrive 1, tx 0'
reject wspipe_op_arrive 'MEMBAR' 'arrive: local .release.cta, no fence'
expect wspipe_op_arrive_remote 'UPRMT .*0x654' 'arrive_remote: mapa (rank into bits 24+)'
expect wspipe_op_arrive_remote 'MEMBAR\.ALL\.GPU' 'arrive_remote: .release.cluster fence'
expect wspipe_op_arrive_remote 'SYNCS\.ARRIVE\.TRANS64\.RED\.A1T0 ' 'arrive_remote: arrive 1 on .shared::cluster'
expect wspipe_op_arrive_expect_tx 'SYNCS\.ARRIVE\.TRANS64 ' 'arrive_expect_tx: arrive 1, tx += n'
expect wspipe_op_expect_tx 'SYNCS\.ARRIVE\.TRANS64\.RED\.A0TR ' 'expect_tx: arrive 0, tx += n'
expect wspipe_op_complete_tx 'SYNCS\.ARRIVE\.TRANS64\.RED\.A0TX ' 'complete_tx: arrive 0, tx -= n'
expect wspipe_op_try_wait 'SYNCS\.PHASECHK\.TRANS64\.TRYWAIT ' 'try_wait: try_wait.parity'
reject wspipe_op_try_wait 'CCTL\.IVALL' 'try_wait: .acquire.cta, no L1 invalidate'
expect wspipe_op_wait 'SYNCS\.PHASECHK\.TRANS64\.TRYWAIT ' 'wait: try_wait.parity loop'
# named and cluster barriers
expect wspipe_op_named_sync 'BAR\.SYNC(\.DEFER_BLOCKING)? 0x1, 0xa0' 'named_sync(1, 160): bar.sync'
expect wspipe_op_named_arrive 'BAR\.ARV 0x1, 0xa0' 'named_arrive(1, 160): bar.arrive'
expect wspipe_op_named_sync_runtime 'BAR\.SYNC(\.DEFER_BLOCKING)? R[0-9]+, R[0-9]+' 'named_sync(id, n) at run time'
expect wspipe_op_named_arrive_runtime 'BAR\.ARV R[0-9]+, R[0-9]+' 'named_arrive(id, n) at run time'
expect wspipe_op_cluster_sync 'UCGABAR_ARV' 'cluster_sync: barrier.cluster.arrive.release'
expect wspipe_op_cluster_sync 'UCGABAR_WAIT' 'cluster_sync: barrier.cluster.wait.acquire'
# checks
expect wspipe_op_check 'BPT\.TRAP' 'check: __trap'
# the ring example, every stage count
for s in 1 2 4 8; do
  f=wspipe_ring_$s
  expect $f 'SYNCS\.EXCH\.64 ' 'ring: init'
  expect $f '(^|[ @!A-Z0-9]+ )ELECT ' 'ring: elect_one'
  expect $f 'UCGABAR_ARV' 'ring: cluster_sync arrive'
  expect $f 'UCGABAR_WAIT' 'ring: cluster_sync wait'
  expect $f 'SYNCS\.PHASECHK\.TRANS64\.TRYWAIT ' 'ring: wait'
  expect $f 'SYNCS\.ARRIVE\.TRANS64(\.RED)?\.A1T0 ' 'ring: arrive'
  expect $f 'BPT\.TRAP' 'ring: check'
done

# The summary: each operation's synchronisation instructions, as compiled.
echo
echo "SASS per operation (sm_100a):"
interesting='SYNCS|BAR\.|UCGABAR|ELECT|MEMBAR|ERRBAR|FENCE|CCTL|UPRMT .*0x654|SHFL|SR_LANEID|SR_CgaCtaId|SR_CgaSize|BPT\.TRAP|WARPSYNC|^NOP$'
for fn in $(awk -F'\t' '$1 ~ /^wspipe_op_/ { print $1 }' "$tmp/ops" | sort -u); do
  # S2UR URx, SR_CgaCtaId is the base of the CTA's shared window (bits 24+
  # hold the cluster rank) in every address computation: left out.
  seen=$(instrs "$fn" | grep -E -- "$interesting" | grep -Ev 'S2UR .*SR_CgaCtaId' | sed -E 's/ +/ /g' |
    paste -sd';' - | sed 's/;/; /g')
  printf '  %-26s %s\n' "${fn#wspipe_op_}" "${seen:-(no synchronisation instruction)}"
done

echo
if [ "$failures" -ne 0 ]; then
  echo "sass_check: $failures of $checks checks FAILED"
  exit 1
fi
echo "sass_check: all $checks checks passed"
