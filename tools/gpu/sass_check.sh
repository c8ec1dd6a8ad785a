#!/usr/bin/env bash
# sass_check.sh [--arch sm_90a] OBJECT...: disassemble the sm_100a builds of
# device_build.cu and examples_build.cu (or, with --arch sm_90a, the sm_90a
# build of device_build.cu: the arch-neutral operations and the ring) and check that every backend operation compiles to
# the instructions it stands for (one extern "C" kernel per operation,
# wspipe_op_<name>), that none fell back to a generic path (a CCCL "not
# supported" stub, a call, a plain spin loop), that the ring example
# contains the whole protocol, and that each gemm and blockwise-fp8 kernel
# holds the instructions its cluster shape and element type imply.
# docs/sass-check.md explains each assertion and records a run.
#
# --instrumented: the object is device_build.cu built with the event log
# and the seeded delays on (WSPIPE_CUDA_EVENT_LOG, WSPIPE_CUDA_DELAYS, the
# watchdog): every operation must still compile to its instructions; the
# calls allowed are the instrumentation's out-of-line parts (a CALL.REL into
# the same function) and the watchdog's printf; each operation that may
# sleep holds a NANOSLEEP, the others none; the examples are not required.
# Without it, no operation holds a NANOSLEEP.
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

arch=sm_100a
instrumented=0
while [ "${1:-}" = --arch ] || [ "${1:-}" = --instrumented ]; do
  if [ "$1" = --instrumented ]; then
    instrumented=1
    shift
  else
    arch=${2:-}
    shift 2 || true
  fi
done
if [ "$arch" != sm_100a ] && [ "$arch" != sm_90a ]; then
  echo "sass_check: --arch must be sm_100a or sm_90a, not '$arch'" >&2
  exit 2
fi
# tensor: the Tensor Memory, tcgen05 and .cta_group::2 checks and the
# examples' kernels, which exist on sm_100a only.
tensor=$([ "$arch" = sm_100a ] && echo 1 || echo 0)
if [ "$#" -lt 1 ]; then
  echo "usage: $0 [--arch sm_100a|sm_90a] [--instrumented] OBJECT..." >&2
  exit 2
fi
for f in "$@"; do
  [ -f "$f" ] || { echo "sass_check: no such object file: $f (build wspipe_cuda_device_build and wspipe_cuda_examples first)" >&2; exit 1; }
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
echo "sass_check: cuobjdump $("$CUOBJDUMP_BIN" --version | grep -o 'release [0-9.]*, V[0-9.]*')"
# cuobjdump reads one file per call: dump OPTION OUT writes its output for
# every object to OUT, one after the other.
dump() {
  local f
  : >"$2"
  for f in "${objects[@]}"; do
    if ! "$CUOBJDUMP_BIN" "$1" "$f" >>"$2" 2>"$tmp/err" || grep -q nvdisasm "$tmp/err"; then
      if grep -q nvdisasm "$tmp/err"; then
        skip "cuobjdump ($CUOBJDUMP_BIN) cannot find nvdisasm: $(head -c 300 "$tmp/err")"
      fi
      echo "sass_check: cuobjdump $1 $f failed:" >&2
      cat "$tmp/err" >&2
      exit 1
    fi
  done
}
objects=("$@")
dump -sass "$tmp/sass"

# One line per instruction: "<function>\t<address>\t<instruction>" (no
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
    sub(/^0+/, "", addr)
    if (addr == "") addr = "0"
    sub(/^[ \t]*\/\*[0-9a-f]+\*\/[ \t]*/, "", line)
    sub(/[ \t]*\/\*.*$/, "", line)
    sub(/[ \t]*;[ \t]*$/, "", line)
    if (line ~ /^BRA 0x[0-9a-f]+$/ && substr(line, 7) == addr) { done = 1; next }
    if (line != "") print fn "\t" addr "\t" line
  }' "$tmp/sass" >"$tmp/ops"

if ! [ -s "$tmp/ops" ]; then
  echo "sass_check: no SASS found in $* (was it built for sm_100a?)" >&2
  exit 1
fi
elf_arch=$([ "$arch" = sm_100a ] && echo EF_CUDA_SM100 || echo EF_CUDA_SM90)
if ! grep -q "$elf_arch" "$tmp/sass"; then
  echo "sass_check: the object holds no ${arch%a} SASS" >&2
  exit 1
fi

# The ELF view: symbols, relocations, and each kernel's .nv.info attributes
# as "<function>\t<attribute or value>" lines; and each kernel's resources
# as "<function>\tREG:n STACK:n SHARED:n LOCAL:n ..." lines.
dump -elf "$tmp/elf"
dump -res-usage "$tmp/res"
awk '/^ Function [^ ]+:$/ { fn = substr($2, 1, length($2) - 1); next }
     fn != "" && /REG:/ { sub(/^[ \t]+/, ""); print fn "\t" $0; fn = "" }' "$tmp/res" >"$tmp/resources"
toolkit=$(grep -m 1 -o 'toolkit=[0-9.]*' "$tmp/elf" | cut -d= -f2)
echo "sass_check: object built by CUDA $toolkit for $(grep -m 1 -o 'sm_[0-9]*[a-z]*' "$tmp/sass")"
awk '
  /^\.nv\.info\./ { fn = substr($1, 10); next }
  /^[^ \t<]/ { fn = "" }
  fn != "" && /(Attribute|Value):/ { sub(/^[ \t]*(Attribute|Value):[ \t]*/, ""); print fn "\t" $0 }
' "$tmp/elf" >"$tmp/attrs"

failures=0
checks=0
instrs() { awk -F'\t' -v fn="$1" '$1 == fn { print $3 }' "$tmp/ops"; }
# An instruction's start, after an optional predicate (@P0, @!UP1, ...).
I='^(@!?U?P[0-9T] )?'
result() {  # result OK? FUNCTION WHAT DETAIL
  checks=$((checks + 1))
  if [ "$1" = ok ]; then
    printf '  ok    %-40s %s\n' "$2" "$3"
  else
    printf '  FAIL  %-40s %s: %s\n' "$2" "$3" "$4"
    failures=$((failures + 1))
  fi
}
# expect FUNCTION REGEX WHAT: some instruction of FUNCTION matches REGEX (ERE).
expect() {
  if instrs "$1" | grep -Eq -- "$2"; then
    result ok "$1" "$3"
  else
    result FAIL "$1" "$3" "no instruction matches /$2/"
  fi
}
# reject FUNCTION REGEX WHY: FUNCTION exists and none of its instructions
# matches REGEX.
reject() {
  if ! instrs "$1" | grep -q .; then
    result FAIL "$1" "$3" "no such function"
  elif instrs "$1" | grep -Eq -- "$2"; then
    result FAIL "$1" "$3" "found /$2/"
  else
    result ok "$1" "$3"
  fi
}
# expect_pair FUNCTION REGEX1 REGEX2 WHAT: an instruction matching REGEX1
# directly followed by one matching REGEX2 (the regexes pass through the
# environment: awk -v would take their backslashes as escapes).
expect_pair() {
  if instrs "$1" | R1="$2" R2="$3" awk 'prev ~ ENVIRON["R1"] && $0 ~ ENVIRON["R2"] { f = 1 } { prev = $0 }
                                          END { exit !f }'; then
    result ok "$1" "$4"
  else
    result FAIL "$1" "$4" "no /$2/ directly followed by /$3/"
  fi
}
# expect_count FUNCTION REGEX N WHAT: exactly N instructions match.
expect_count() {
  local n
  n=$(instrs "$1" | grep -Ec -- "$2")
  if [ "$n" -eq "$3" ]; then result ok "$1" "$4"; else result FAIL "$1" "$4" "$n instructions match /$2/, not $3"; fi
}
# expect_attr FUNCTION ATTRIBUTE WHAT: the kernel's .nv.info holds it.
expect_attr() {
  if awk -F'\t' -v fn="$1" -v a="$2" '$1 == fn && index($2, a) { f = 1 } END { exit !f }' "$tmp/attrs"; then
    result ok "$1" "$3"
  else
    result FAIL "$1" "$3" "no $2 in its .nv.info"
  fi
}
# no_calls FUNCTION: everything is inlined. The only calls allowed are
# ptxas's own tcgen05 guardrails: a CALL.REL whose target is a BPT.TRAP in
# the same function (alloc after relinquish, dealloc of columns that alloc
# did not return). Any other call leaves the operation: a function that was
# not inlined (CALL.REL) or an external one such as a CCCL "not supported"
# stub (CALL.ABS through a relocated address).
no_calls() {
  local bad
  bad=$(awk -F'\t' -v fn="$1" -v inst="$instrumented" -v printf_ok="$(grep -q vprintf "$tmp/elf" && echo 1)" '
    $1 == fn { at[$2] = $3; if ($3 ~ /CALL/) calls[$2] = $3 }
    END {
      for (a in calls) {
        c = calls[a]
        if (c ~ /^CALL\.REL(\.NOINC)? 0x[0-9a-f]+$/) {
          t = c; sub(/^.* 0x/, "", t)
          if (at[t] ~ /^BPT\.TRAP/) continue
          if (inst && (t in at)) continue
        }
        if (inst && printf_ok && c ~ /^CALL\.ABS(\.NOINC)? R[0-9]+$/) continue
        print c
      }
    }' "$tmp/ops")
  if [ -z "$bad" ]; then
    result ok "$1" "no calls (inlined; guardrail traps only)"
  else
    result FAIL "$1" "no calls" "$(echo "$bad" | paste -sd';' -)"
  fi
}

echo "sass_check: $CUOBJDUMP_BIN -sass -elf $*"
# No CCCL fallback anywhere: on an architecture it does not support, a
# cuda::ptx wrapper calls an undefined __cuda_ptx_*_is_not_supported_* stub.
if grep -q '__cuda_ptx_' "$tmp/elf"; then
  result FAIL "(object)" "no CCCL fallback" \
    "stubs referenced: $(grep -o '__cuda_ptx_[A-Za-z0-9_]*' "$tmp/elf" | sort -u | paste -sd' ' -)"
else
  result ok "(object)" "no CCCL fallback: no __cuda_ptx_*_is_not_supported_* stub referenced"
fi
for fn in $(awk -F'\t' '$1 ~ /^wspipe_op_/ && $1 != "wspipe_op_check" { print $1 }' "$tmp/ops" | sort -u); do
  no_calls "$fn"
done

# identity
expect wspipe_op_warp_idx 'SHFL\.IDX' 'warp_idx: threadIdx.x/32 broadcast from lane 0'
expect wspipe_op_lane_idx 'SR_LANEID' 'lane_idx: %laneid'
expect wspipe_op_cta_rank 'SR_CgaCtaId' 'cta_rank: %cluster_ctarank'
if [ "$arch" = sm_100a ]; then
  expect wspipe_op_cluster_size 'SR_CgaSize' 'cluster_size: %cluster_nctarank'
else  # sm_90a reads the launch's cluster shape from the constant bank
  expect wspipe_op_cluster_size '^LDC R[0-9]+, c\[0x0\]\[0x1[0-9a-f]+\]$' 'cluster_size: %cluster_nctarank (constant bank)'
fi
expect wspipe_op_elect_one "${I}ELECT " 'elect_one: elect.sync'
# mbarrier
expect wspipe_op_init 'SYNCS\.EXCH\.64 ' 'init: mbarrier.init'
expect wspipe_op_inval 'SYNCS\.CCTL\.IV ' 'inval: mbarrier.inval'
expect wspipe_op_arrive 'SYNCS\.ARRIVE\.TRANS64(\.RED)?\.A1T0 ' 'arrive: arrive 1, tx 0'
reject wspipe_op_arrive 'MEMBAR' 'arrive: local .release.cta, no fence'
expect wspipe_op_arrive_remote 'U?PRMT .*0x654' 'arrive_remote: mapa (rank into bits 24+)'
expect wspipe_op_arrive_remote 'MEMBAR\.ALL\.GPU' 'arrive_remote: .release.cluster fence'
expect wspipe_op_arrive_remote 'SYNCS\.ARRIVE\.TRANS64\.RED\.A1T0 ' 'arrive_remote: arrive 1 on .shared::cluster'
expect wspipe_op_arrive_expect_tx 'SYNCS\.ARRIVE\.TRANS64 ' 'arrive_expect_tx: arrive 1, tx += n'
expect wspipe_op_arrive_expect_tx_remote 'U?PRMT .*0x654' 'arrive_expect_tx_remote: mapa (rank into bits 24+)'
expect wspipe_op_arrive_expect_tx_remote 'MEMBAR\.ALL\.GPU' 'arrive_expect_tx_remote: .release.cluster fence'
expect wspipe_op_arrive_expect_tx_remote '^SYNCS\.ARRIVE\.TRANS64\.RED RZ, \[[^]]*\], R[0-9]+$' \
  'arrive_expect_tx_remote: arrive 1, tx += n on .shared::cluster'
expect wspipe_op_expect_tx 'SYNCS\.ARRIVE\.TRANS64\.RED\.A0TR ' 'expect_tx: arrive 0, tx += n'
expect wspipe_op_complete_tx 'SYNCS\.ARRIVE\.TRANS64\.RED\.A0TX ' 'complete_tx: arrive 0, tx -= n'
expect wspipe_op_try_wait 'SYNCS\.PHASECHK\.TRANS64\.TRYWAIT ' 'try_wait: try_wait.parity'
reject wspipe_op_try_wait 'CCTL\.IVALL' 'try_wait: .acquire.cta, no L1 invalidate'
expect wspipe_op_wait 'SYNCS\.PHASECHK\.TRANS64\.TRYWAIT ' 'wait: try_wait.parity loop'
expect wspipe_op_test_wait 'SYNCS\.PHASECHK\.TRANS64 ' 'test_wait: test_wait.parity'
reject wspipe_op_test_wait 'TRYWAIT' 'test_wait: no potentially blocking try_wait'
# named and cluster barriers
expect wspipe_op_named_sync 'BAR\.SYNC(\.DEFER_BLOCKING)? 0x1, 0xa0' 'named_sync(1, 160): bar.sync'
expect wspipe_op_named_arrive 'BAR\.ARV 0x1, 0xa0' 'named_arrive(1, 160): bar.arrive'
expect wspipe_op_named_sync_runtime 'BAR\.SYNC(\.DEFER_BLOCKING)? R[0-9]+, R[0-9]+' 'named_sync(id, n) at run time'
expect wspipe_op_named_arrive_runtime 'BAR\.ARV R[0-9]+, R[0-9]+' 'named_arrive(id, n) at run time'
expect wspipe_op_cluster_sync 'UCGABAR_ARV' 'cluster_sync: barrier.cluster.arrive.release'
expect wspipe_op_cluster_sync 'UCGABAR_WAIT' 'cluster_sync: barrier.cluster.wait.acquire'

if [ "$tensor" = 1 ]; then
# Tensor Memory allocation. ptxas records each kernel's .cta_group in its
# .nv.info (EIATTR_TCGEN05_{1,2}CTA_USED): dealloc is UTCATOMSWS.AND for both.
for g in 1 2; do
  cta=$([ $g = 2 ] && echo '\.2CTA' || echo '')
  expect "wspipe_op_tmem_alloc_cg$g" "${I}UTCATOMSWS${cta}\.FIND_AND_SET\.ALIGN " \
    "tmem_alloc<$g>: tcgen05.alloc.cta_group::$g"
  expect "wspipe_op_tmem_relinquish_cg$g" "${I}UVIRTCOUNT\.DEALLOC\.SMPOOL " \
    "tmem_relinquish<$g>: relinquish_alloc_permit"
  expect "wspipe_op_tmem_dealloc_cg$g" "${I}UTCATOMSWS\.AND " "tmem_dealloc<$g>: tcgen05.dealloc"
  for op in tmem_alloc tmem_relinquish tmem_dealloc mma_f16 mma_f8f6f4 mma_commit mma_commit_multicast; do
    expect_attr "wspipe_op_${op}_cg$g" "EIATTR_TCGEN05_${g}CTA_USED" "$op: .cta_group::$g"
  done
done
reject wspipe_op_tmem_alloc_cg1 'UTCATOMSWS\.2CTA' 'tmem_alloc<1>: not the pair form'

# tcgen05.ld / tcgen05.st: one LDTM / STTM of the shape and .num asked for
# (two for .16x32bx2, the second half at +HalfSplit columns, HalfSplit =
# num in device_build.cu); the store's wait::st is FENCE.VIEW.ASYNC.T.
for spec in 32x32b: 16x64b:.16dp64bit 16x128b:.16dp128bit 16x256b:.16dp256bit 16x32bx2:.16dp32bit_t0_t15; do
  shape=${spec%%:*}
  mod=${spec#*:}
  mod=${mod//./\\.}
  case $shape in
    16x128b) nums="1 8 64" ;;
    16x256b) nums="1 8 32" ;;
    *) nums="1 8 128" ;;
  esac
  for n in $nums; do
    x=$([ "$n" = 1 ] && echo '' || echo "\\.x$n")
    ld="wspipe_op_tmem_load_${shape}_x$n"
    st="wspipe_op_tmem_store_${shape}_x$n"
    if [ "$shape" = 16x32bx2 ]; then
      off=$(printf '0x%x' "$n")
      expect "$ld" "${I}LDTM${mod}${x} R[0-9]+, tmem\[UR[0-9]+\]" "tmem_load<$shape, $n>: first half"
      expect "$ld" "${I}LDTM\.16dp32bit_t16_t31${x} R[0-9]+, tmem\[UR[0-9]+\+${off}\]" \
        "tmem_load<$shape, $n>: second half at +$n"
      expect_count "$ld" "${I}LDTM" 2 "tmem_load<$shape, $n>: two LDTM, nothing split"
      expect "$st" "${I}STTM${mod}${x} tmem\[UR[0-9]+\], R[0-9]+" "tmem_store<$shape, $n>: first half"
      expect "$st" "${I}STTM\.16dp32bit_t16_t31${x} tmem\[UR[0-9]+\+${off}\], R[0-9]+" \
        "tmem_store<$shape, $n>: second half at +$n"
      expect_count "$st" "${I}STTM" 2 "tmem_store<$shape, $n>: two STTM, nothing split"
    else
      expect "$ld" "${I}LDTM${mod}${x} R[0-9]+, tmem\[" "tmem_load<$shape, $n>: tcgen05.ld.$shape.x$n"
      expect_count "$ld" "${I}LDTM" 1 "tmem_load<$shape, $n>: one LDTM"
      expect "$st" "${I}STTM${mod}${x} tmem\[UR[0-9]+\], R[0-9]+" "tmem_store<$shape, $n>: tcgen05.st.$shape.x$n"
      expect_count "$st" "${I}STTM" 1 "tmem_store<$shape, $n>: one STTM"
    fi
    expect "$st" "${I}FENCE\.VIEW\.ASYNC\.T$" "tmem_store<$shape, $n>: then wait::st"
  done
done
expect wspipe_op_tmem_wait_store "${I}FENCE\.VIEW\.ASYNC\.T$" 'tmem_wait_store: tcgen05.wait::st'

# The tensor core: UTCHMMA for .kind::f16, UTCQMMA for .kind::f8f6f4, with
# both operands from shared-memory descriptors; .2CTA for cta_group::2. A
# single-thread instruction: ptxas issues it once per active thread in an
# ELECT loop (BRA.U.ANY), hence elect_one around it in kernels.
for g in 1 2; do
  cta=$([ $g = 2 ] && echo '\.2CTA' || echo '')
  expect "wspipe_op_mma_f16_cg$g" "${I}UTCHMMA${cta} gdesc\[UR[0-9]+\], gdesc\[UR[0-9]+\], tmem\[" "mma<f16, $g>"
  reject "wspipe_op_mma_f16_cg$g" 'UTC[QIO]MMA' "mma<f16, $g>: no other kind"
  expect "wspipe_op_mma_f8f6f4_cg$g" "${I}UTCQMMA${cta} gdesc\[UR[0-9]+\], gdesc\[UR[0-9]+\], tmem\[" "mma<f8f6f4, $g>"
  reject "wspipe_op_mma_f8f6f4_cg$g" 'UTC[HIO]MMA' "mma<f8f6f4, $g>: no other kind"
  expect "wspipe_op_mma_f16_cg$g" "${I}BRA\.U\.ANY " "mma<f16, $g>: once per active thread"
  expect "wspipe_op_mma_commit_cg$g" "${I}UTCBAR${cta} \[UR[0-9]+\], URZ$" "mma_commit<$g>: tcgen05.commit"
  expect "wspipe_op_mma_commit_multicast_cg$g" "${I}UTCBAR${cta}\.MULTICAST \[UR[0-9]+\], URZ, UR[0-9]+$" \
    "mma_commit_multicast<$g>: 16-bit mask"
done
reject wspipe_op_mma_f16_cg1 '2CTA' 'mma<f16, 1>: not the pair form'
reject wspipe_op_mma_commit_cg1 '2CTA|MULTICAST' 'mma_commit<1>: plain commit'

fi  # tensor

# TMA: UTMALDG.<rank>D, .MULTICAST with a mask, .2CTA for cta_group::2 (sm_100a),
# whose barrier is the pair's even CTA's: rank & ~1 (LOP3 0xfffffffe) put
# into the address by mapa (UPRMT 0x654).
for g in $([ "$tensor" = 1 ] && echo 1 2 || echo 1); do
  for r in 1 2 3 4 5; do
    uni="wspipe_op_tma_load_cg${g}_rank$r"
    mc="wspipe_op_tma_load_multicast_cg${g}_rank$r"
    if [ $g = 1 ]; then
      expect "$uni" "${I}UTMALDG\.${r}D \[UR[0-9]+\], \[UR[0-9]+\]$" "tma_load<1, $r>: cp.async.bulk.tensor.${r}d"
      expect "$mc" "${I}UTMALDG\.${r}D\.MULTICAST \[UR[0-9]+\], \[UR[0-9]+\], UR[0-9]+$" "tma_load_multicast<1, $r>"
    else
      expect "$uni" "${I}UTMALDG\.${r}D\.2CTA \[UR[0-9]+\], \[UR[0-9]+\]$" "tma_load<2, $r>: .cta_group::2"
      expect "$mc" "${I}UTMALDG\.${r}D\.MULTICAST\.2CTA \[UR[0-9]+\], \[UR[0-9]+\], UR[0-9]+$" \
        "tma_load_multicast<2, $r>"
      for f in "$uni" "$mc"; do
        expect "$f" 'LOP3\.LUT .*0xfffffffe' "tma<2, $r>: the pair's even CTA (rank & ~1)"
        expect "$f" 'UPRMT .*0x654' "tma<2, $r>: its barrier's address (mapa)"
      done
    fi
  done
done

# TMA stores and bulk async-groups (sm_90a and sm_100a): UTMASTG.<rank>D;
# commit_group is UTMACMDFLUSH; wait_group N is DEPBAR.LE SB0, N, and the
# full wait also invalidates L1 (CCTL.IVALL: the writes made visible to this
# thread), which .read, waiting for the reads of shared memory only, does not.
for r in 1 2 3 4 5; do
  expect "wspipe_op_tma_store_rank$r" "${I}UTMASTG\.${r}D \[UR[0-9]+\], \[UR[0-9]+\]$" \
    "tma_store<$r>: cp.async.bulk.tensor.${r}d.global.shared::cta"
done
expect wspipe_op_bulk_commit_group "${I}UTMACMDFLUSH$" 'bulk_commit_group: cp.async.bulk.commit_group'
for n in 0 3; do
  expect "wspipe_op_bulk_wait_group_$n" "${I}DEPBAR\.LE SB0, 0x$n$" "bulk_wait_group<$n>: cp.async.bulk.wait_group $n"
  expect "wspipe_op_bulk_wait_group_$n" "${I}CCTL\.IVALL$" "bulk_wait_group<$n>: writes made visible"
  expect "wspipe_op_bulk_wait_group_read_$n" "${I}DEPBAR\.LE SB0, 0x$n$" "bulk_wait_group_read<$n>: .read"
  reject "wspipe_op_bulk_wait_group_read_$n" 'CCTL' "bulk_wait_group_read<$n>: reads only, no invalidation"
done

# cluster launch control (sm_100a only): try_cancel is UGETNEXTWORKID,
# SELFCAST for the plain form, BROADCAST for .multicast::cluster::all;
# query_cancel decodes the response from one 16-byte shared load. The tile
# scheduler's walk kernel holds the CLC protocol on sm_100a and none of it
# on sm_90a, where the same source is the static grid stride.
if [ "$tensor" = 1 ]; then
  expect wspipe_op_clc_try_cancel "${I}UGETNEXTWORKID\.SELFCAST \[UR[0-9]+\], \[UR[0-9]+\]$" \
    'clc_try_cancel: clusterlaunchcontrol.try_cancel'
  expect wspipe_op_clc_try_cancel "${I}ELECT " 'clc_try_cancel: issued by one lane'
  expect wspipe_op_clc_try_cancel_multicast "${I}UGETNEXTWORKID\.BROADCAST \[UR[0-9]+\], \[UR[0-9]+\]$" \
    'clc_try_cancel_multicast: .multicast::cluster::all'
  expect wspipe_op_clc_query_cancel "${I}LDS\.128 " 'clc_query_cancel: the 16-byte response, one load'
  expect wspipe_tile_scheduler_walk "${I}UGETNEXTWORKID\.(SELFCAST|BROADCAST) " 'TileScheduler<2>: CLC requests'
  expect wspipe_tile_scheduler_walk 'SYNCS\.PHASECHK\.TRANS64\.TRYWAIT ' 'TileScheduler<2>: response and throttle waits'
else
  reject wspipe_tile_scheduler_walk 'UGETNEXTWORKID' 'TileScheduler<2> on sm_90a: the static schedule, no CLC'
  reject wspipe_tile_scheduler_walk 'SYNCS\.PHASECHK' 'TileScheduler<2> on sm_90a: no response or throttle wait'
fi

# proxy fence; shared-memory tiles: smem_addr is address arithmetic, the
# access hooks add no instruction
expect wspipe_op_fence_proxy_async "${I}FENCE\.VIEW\.ASYNC\.S$" 'fence_proxy_async: fence.proxy.async.shared::cta'
sync_like='SYNCS|BAR|MEMBAR|FENCE|ELECT|CCTL|UTC|UTMA|LDTM|STTM'
reject wspipe_op_smem_addr "$sync_like" 'smem_addr: address arithmetic only'
reject wspipe_op_smem_access "$sync_like" 'smem_read/smem_write: empty hooks'
# checks
expect wspipe_op_check 'BPT\.TRAP' 'check: __trap'
# The seeded delays (docs/delays.md): compiled in, a NANOSLEEP before each
# wait, arrival and issue of asynchronous work, and nowhere else among the
# operations; left out, none anywhere.
for fn in $(awk -F'\t' '$1 ~ /^wspipe_op_/ { print $1 }' "$tmp/ops" | sort -u); do
  case ${fn#wspipe_op_} in
    arrive | arrive_remote | arrive_expect_tx | arrive_expect_tx_remote | complete_tx | try_wait | test_wait | wait | \
      named_sync | named_arrive | named_sync_runtime | named_arrive_runtime | cluster_sync | tma_load_* | \
      tma_load_multicast_* | tma_store* | mma_f16_* | mma_f8f6f4_* | mma_commit_* | mma_commit_multicast_* | \
      clc_try_cancel | clc_try_cancel_multicast)
      if [ "$instrumented" = 1 ]; then
        expect "$fn" "${I}NANOSLEEP" 'delays on: a seeded sleep first'
      else
        reject "$fn" 'NANOSLEEP' 'delays off: no sleep'
      fi ;;
    tmem_alloc_*) ;;  # tcgen05.alloc's own retry loop sleeps (ptxas), delays or not
    *) reject "$fn" 'NANOSLEEP' 'never a sleep (not a wait, an arrival or an issue)' ;;
  esac
done
# the ring example, every stage count
for s in 1 2 4 8; do
  f=wspipe_ring_$s
  # mbarrier.init: SYNCS.EXCH.64, or a plain STS.64 of the initial state,
  # which ptxas emits when the barrier's address is not in a uniform
  # register: the planted lane-divergence variants (release-in-elect-one,
  # lane-guarded-wait) make the consumer's lanes diverge, and with one
  # stage the init shares that address (ptxas 13.0)
  expect $f '(SYNCS\.EXCH\.64|STS\.64) ' 'ring: init'
  expect $f "${I}ELECT " 'ring: elect_one'
  expect $f 'UCGABAR_ARV' 'ring: cluster_sync arrive'
  expect $f 'UCGABAR_WAIT' 'ring: cluster_sync wait'
  expect $f 'SYNCS\.PHASECHK\.TRANS64\.TRYWAIT ' 'ring: wait'
  expect $f 'SYNCS\.ARRIVE\.TRANS64(\.RED)?\.A1T0 ' 'ring: arrive'
  expect $f 'BPT\.TRAP' 'ring: check'
done

# The examples' kernels (examples_build.cu). What every one holds: the
# tensor core's kind and .cta_group, TMEM alloc/relinquish/dealloc, the
# epilogue's tcgen05.ld, mbarrier waits, the named barrier that publishes
# the TMEM address (id 1, MMA + epilogue threads: 160), the cluster barrier
# around the barrier inits, shared_storage's alignment check, and no call
# or local memory. example_common FUNCTION CTA_GROUP MMA (UTCHMMA/UTCQMMA)
# [CHECKED]: with CHECKED (persistent-gemm, which B::check's its cluster
# shape), the one call and the stack are that check's printf.
example_common() {
  local fn=$1 g=$2 mma=$3 checked=${4:-} cta other
  cta=$([ "$g" = 2 ] && echo '\.2CTA' || echo '')
  other=$([ "$mma" = UTCHMMA ] && echo 'UTC[QIO]MMA' || echo 'UTC[HIO]MMA')
  if [ -n "$checked" ]; then no_calls_but_check "$fn"; else no_calls "$fn"; fi
  expect "$fn" "${I}${mma}${cta} gdesc\[UR[0-9]+\], gdesc\[UR[0-9]+\], tmem\[" "mma: ${mma}${cta//\\/}"
  reject "$fn" "$other" "mma: no other kind"
  expect_attr "$fn" "EIATTR_TCGEN05_${g}CTA_USED" ".cta_group::$g"
  [ "$g" = 1 ] && reject "$fn" '2CTA' 'cta_group 1: no pair form anywhere'
  expect "$fn" "${I}UTCATOMSWS${cta}\.FIND_AND_SET\.ALIGN " 'tmem_alloc'
  expect "$fn" "${I}UVIRTCOUNT\.DEALLOC\.SMPOOL " 'tmem_relinquish'
  expect "$fn" "${I}UTCATOMSWS\.AND " 'tmem_dealloc'
  expect "$fn" 'SYNCS\.EXCH\.64 ' 'mbarrier init'
  expect "$fn" 'SYNCS\.PHASECHK\.TRANS64\.TRYWAIT ' 'mbarrier waits'
  expect "$fn" 'UCGABAR_ARV' 'cluster_sync arrive'
  expect "$fn" 'UCGABAR_WAIT' 'cluster_sync wait'
  expect "$fn" 'BAR\.ARV 0x1, 0xa0' 'TMEM address published: bar.arrive 1, 160'
  expect "$fn" 'BAR\.SYNC(\.DEFER_BLOCKING)? 0x1, 0xa0' 'TMEM address awaited: bar.sync 1, 160'
  dynamic_smem_base "$fn"
  # The check's printf passes its arguments on the stack (at most 32 bytes);
  # nothing else may use it.
  local stack='STACK:0' what='no stack, no local memory (nothing spilled)'
  if [ -n "$checked" ]; then
    stack='STACK:(0|8|16|24|32)'
    what='no local memory (nothing spilled), on the stack only the arguments of the check'"'"'s printf'
  fi
  if awk -F'\t' -v fn="$fn" -v st=" $stack " '$1 == fn && $2 ~ st && $2 ~ / LOCAL:0 / { f = 1 } END { exit !f }' \
    "$tmp/resources"; then
    result ok "$fn" "$what"
  else
    result FAIL "$fn" 'no stack, no local memory' "$(awk -F'\t' -v fn="$fn" '$1 == fn { print $2 }' "$tmp/resources")"
  fi
}

# no_calls_but_check FUNCTION: as no_calls, but one CALL.ABS is allowed:
# the printf of the kernel's B::check (CudaBackend::check prints, then traps).
no_calls_but_check() {
  local abs bad
  abs=$(awk -F'\t' -v fn="$1" '$1 == fn && $3 ~ /^CALL\.ABS/ { n++ } END { print n + 0 }' "$tmp/ops")
  bad=$(awk -F'\t' -v fn="$1" '
    $1 == fn { at[$2] = $3; if ($3 ~ /CALL\.REL/) calls[$2] = $3 }
    END {
      for (a in calls) {
        t = calls[a]; sub(/^.* 0x/, "", t)
        if (at[t] !~ /^BPT\.TRAP/) print calls[a]
      }
    }' "$tmp/ops")
  if [ "$abs" -le 1 ] && [ -z "$bad" ] && grep -q 'vprintf' "$tmp/elf"; then
    result ok "$1" "no calls but the check's printf (inlined; guardrail traps only)"
  else
    result FAIL "$1" 'no calls but the check' "$abs CALL.ABS; $(echo "$bad" | paste -sd';' -)"
  fi
}

# dynamic_smem_base FUNCTION: shared_storage's alignment check is there
# (base & 1023, then a trap), and the base it tests is a constant that ptxas
# chose (the end of the kernel's shared section), possibly plus the CTA id
# shifted above bit 10 (the shared::cluster address), and 1024-aligned:
# the alignment holds by construction, and the check can never fire.
dynamic_smem_base() {
  local base
  base=$(instrs "$1" | awk '
    { n = split($0, w, /[ ,]+/) }
    w[1] == "UMOV" && n == 3 && w[3] ~ /^0x[0-9a-f]+$/ { value[w[2]] = w[3] }
    # The base may also come as (CTA id << s) + constant, s >= 10 (the
    # shared::cluster form): its low bits are the constant.
    w[1] == "ULEA" && n == 5 && w[5] ~ /^0x(1[0-9a-f]|[a-f])$/ && (w[4] in value) { value[w[2]] = value[w[4]] }
    /^ULOP3\.LUT UP[0-6], URZ, UR[0-9]+, 0x3ff, URZ, 0xc0, !UPT$/ { print (w[4] in value) ? value[w[4]] : "?"; exit }')
  if [ -z "$base" ]; then
    result FAIL "$1" 'shared_storage: 1024-byte alignment check' 'no ULOP3.LUT UPn, URZ, URx, 0x3ff test'
  elif [ "$base" = '?' ]; then
    result FAIL "$1" 'shared_storage: dynamic shared memory base' 'the tested address is not a UMOV constant'
  elif [ $((base % 1024)) -ne 0 ]; then
    result FAIL "$1" 'shared_storage: dynamic shared memory base' "$base is not 1024-aligned"
  else
    result ok "$1" "shared_storage: dynamic shared memory at $base, 1024-aligned"
  fi
}

# gemm: wspipe_gemm_cg<G>_c<C>_s<S>_a<A>_<dtype>. The loads and commits
# follow the cluster shape: cta_group 1 alone loads and commits locally; a
# cluster of two shares B (each CTA multicasts its half) and frees an input
# slot in both CTAs with a multicast commit; cta_group 2 loads signal the
# pair's even CTA's barrier (.2CTA) and every commit reaches both CTAs.
# Manual A (ordinary stores, then fence.proxy.async) is a run-time flag
# that only cta_group 1 with clusters of 1 accepts.
gemm_fns=$(awk -F'\t' '$1 ~ /^wspipe_gemm_/ { print $1 }' "$tmp/ops" | sort -u)
[ -n "$gemm_fns" ] || [ "$tensor" = 0 ] || [ "$instrumented" = 1 ] || result FAIL '(objects)' 'gemm kernels' 'no wspipe_gemm_* kernel: is examples_build.cu.o among them?'
for fn in $gemm_fns; do
  if ! [[ $fn =~ ^wspipe_gemm_cg([12])_c([12])_s[0-9]+_a[0-9]+_(bf16|e4m3)$ ]]; then
    result FAIL "$fn" 'gemm kernel name' 'not wspipe_gemm_cg<1|2>_c<1|2>_s<S>_a<A>_<bf16|e4m3>'
    continue
  fi
  g=${BASH_REMATCH[1]}
  c=${BASH_REMATCH[2]}
  example_common "$fn" "$g" "$([ "${BASH_REMATCH[3]}" = bf16 ] && echo UTCHMMA || echo UTCQMMA)"
  expect "$fn" "${I}LDTM\.16dp256bit\.x8 R[0-9]+, tmem\[" 'epilogue: tcgen05.ld.16x256b.x8'
  if [ "$g" = 2 ]; then
    expect "$fn" "${I}UTMALDG\.2D\.2CTA \[UR[0-9]+\], \[UR[0-9]+\]$" 'A and B: tma_load<2>'
    reject "$fn" 'UTMALDG\.[1-5]D(\.MULTICAST)? \[' "loads: every one signals the pair's barrier (.2CTA)"
    expect "$fn" 'LOP3\.LUT .*0xfffffffe' "loads: the pair's even CTA (rank & ~1)"
    expect "$fn" 'UPRMT .*0x654' "loads: its barrier's address (mapa)"
    expect "$fn" "${I}UTCBAR\.2CTA\.MULTICAST \[UR[0-9]+\], URZ, UR[0-9]+$" 'commits: to both CTAs of the pair'
    reject "$fn" 'UTCBAR(\.MULTICAST)? \[' 'commits: .cta_group::2 only'
  elif [ "$c" = 2 ]; then
    expect "$fn" "${I}UTMALDG\.2D \[UR[0-9]+\], \[UR[0-9]+\]$" 'A: tma_load<1>'
    expect "$fn" "${I}UTMALDG\.2D\.MULTICAST \[UR[0-9]+\], \[UR[0-9]+\], UR[0-9]+$" 'B half: multicast to both CTAs'
    expect "$fn" "${I}UTCBAR\.MULTICAST \[UR[0-9]+\], URZ, UR[0-9]+$" 'input slot freed in both CTAs'
    expect "$fn" "${I}UTCBAR \[UR[0-9]+\], URZ$" 'accumulator stage: local commit'
  else
    expect "$fn" "${I}UTMALDG\.2D \[UR[0-9]+\], \[UR[0-9]+\]$" 'A and B: tma_load<1>'
    reject "$fn" 'UTMALDG.*MULTICAST' 'loads: no multicast'
    expect "$fn" "${I}UTCBAR \[UR[0-9]+\], URZ$" 'commits: local'
    reject "$fn" 'UTCBAR.*MULTICAST' 'commits: no multicast'
    # Not FENCE.VIEW.ASYNC.S alone: ptxas puts one before mbarrier.init too.
    expect_pair "$fn" "${I}MEMBAR\.ALL\.CTA$" "${I}FENCE\.VIEW\.ASYNC\.S$" 'manual A: fence.proxy.async'
  fi
done

# persistent-gemm: wspipe_persistent_gemm_cg<G>_x<X>_y<Y>_clc<C>
# (examples/persistent_gemm.hpp, docs/tile-scheduler.md). The epilogue:
# four tcgen05.ld.32x32b.x16 (its 32 lanes by 64 columns; a fifth, on the
# accum-released-early variant's path, loads the last fragment after the
# release, a run-time branch the device code keeps), then per
# 16-column piece cp.async.bulk.wait_group.read 1 (DEPBAR.LE SB0, 0x1: the
# staging buffer's previous store has read it), fence.proxy.async, a TMA
# store and its commit_group; one full wait_group 0 before exit. The
# scheduler with CLC (C > 0): try_cancel in both forms (the cluster size is
# a run-time value: .multicast::cluster::all is BROADCAST, the plain form
# SELFCAST), query_cancel's 16-byte load, and the remote arrive.expect_tx
# that arms every CTA's response barrier; with C = 0 none of them. The
# loads: A multicast along y when Y > 1, B along x when more than one CTA
# holds the same rows; commits multicast whenever other CTAs fed the MMA.
for fn in $(awk -F'\t' '$1 ~ /^wspipe_persistent_gemm_/ { print $1 }' "$tmp/ops" | sort -u); do
  if ! [[ $fn =~ ^wspipe_persistent_gemm_cg([12])_x([1248])_y([1248])_clc([0-9])$ ]]; then
    result FAIL "$fn" 'persistent-gemm kernel name' 'not wspipe_persistent_gemm_cg<1|2>_x<X>_y<Y>_clc<C>'
    continue
  fi
  g=${BASH_REMATCH[1]}
  x=${BASH_REMATCH[2]}
  y=${BASH_REMATCH[3]}
  c=${BASH_REMATCH[4]}
  cta=$([ "$g" = 2 ] && echo '\.2CTA' || echo '')
  example_common "$fn" "$g" UTCHMMA checked
  expect_count "$fn" "${I}LDTM\.x16 R[0-9]+, tmem\[" 5 'epilogue: four tcgen05.ld.32x32b.x16, and the variant'"'"'s late one'
  expect_count "$fn" "${I}UTMASTG\.2D \[UR[0-9]+\], \[UR[0-9]+\]$" 4 'epilogue: four TMA stores (tma_store<2>)'
  expect_count "$fn" "${I}UTMACMDFLUSH$" 4 'epilogue: a bulk_commit_group per store'
  expect_count "$fn" "${I}DEPBAR\.LE SB0, 0x1$" 4 'epilogue: bulk_wait_group_read<1> before each staging write'
  expect "$fn" "${I}DEPBAR\.LE SB0, 0x0$" 'epilogue: bulk_wait_group<0> before exit'
  expect_pair "$fn" "${I}MEMBAR\.ALL\.CTA$" "${I}FENCE\.VIEW\.ASYNC\.S$" 'epilogue: fence.proxy.async before the store'
  if [ "$c" = 0 ]; then
    reject "$fn" 'UGETNEXTWORKID' 'static schedule: no try_cancel'
    reject "$fn" '^SYNCS\.ARRIVE\.TRANS64\.RED RZ, \[[^]]*\], R[0-9]+$' 'static schedule: no remote arrive.expect_tx'
  else
    expect "$fn" "${I}UGETNEXTWORKID\.SELFCAST \[UR[0-9]+\], \[UR[0-9]+\]$" 'scheduler: try_cancel'
    expect "$fn" "${I}UGETNEXTWORKID\.BROADCAST \[UR[0-9]+\], \[UR[0-9]+\]$" 'scheduler: try_cancel.multicast::cluster::all'
    expect "$fn" "${I}LDS\.128 R[0-9]+, \[" 'workers: query_cancel reads the 16-byte response'
    expect "$fn" '^SYNCS\.ARRIVE\.TRANS64\.RED RZ, \[[^]]*\], R[0-9]+$' 'scheduler: remote arrive.expect_tx(16) on each CTA'
    expect "$fn" 'SYNCS\.ARRIVE\.TRANS64\.RED\.A1T0 ' 'workers: release a response on CTA 0 (remote arrive)'
  fi
  if [ "$y" != 1 ]; then
    expect "$fn" "${I}UTMALDG\.2D\.MULTICAST${cta} \[UR[0-9]+\], \[UR[0-9]+\], UR[0-9]+$" 'A: multicast along y'
  fi
  if [ $((x / g)) -gt 1 ]; then
    expect "$fn" "${I}UTMALDG\.2D\.MULTICAST${cta} \[UR[0-9]+\], \[UR[0-9]+\], UR[0-9]+$" 'B: multicast along x'
  fi
  if [ "$y" = 1 ] && [ $((x / g)) -le 1 ]; then
    reject "$fn" 'UTMALDG.*MULTICAST' 'loads: no multicast (nothing shared)'
    expect "$fn" "${I}UTMALDG\.2D${cta} \[UR[0-9]+\], \[UR[0-9]+\]$" "loads: tma_load<$g>"
  fi
  if [ "$g" = 2 ]; then
    reject "$fn" 'UTMALDG\.[1-5]D(\.MULTICAST)? \[' "loads: every one signals the pair's barrier (.2CTA)"
    expect "$fn" "${I}UTCBAR\.2CTA\.MULTICAST \[UR[0-9]+\], URZ, UR[0-9]+$" 'commits: to the CTAs of the pair and of the masks'
    reject "$fn" 'UTCBAR(\.MULTICAST)? \[' 'commits: .cta_group::2 only'
  else
    expect "$fn" "${I}UTCBAR \[UR[0-9]+\], URZ$" 'accumulator stage: local commit'
    if [ "$x" = 1 ] && [ "$y" = 1 ]; then
      reject "$fn" 'UTCBAR.*MULTICAST' 'commits: no multicast'
    else
      expect "$fn" "${I}UTCBAR\.MULTICAST \[UR[0-9]+\], URZ, UR[0-9]+$" 'input slot freed in every CTA that fed it'
    fi
  fi
done

# blockwise-fp8: wspipe_blockwise_fp8_cg<G>_s<S>_a<A>, clusters of G CTAs.
# Per stage three loads (A, B, the A-scales); the epilogue frees the input
# slot with ordinary arrives besides the MMA warp's commit.
for fn in $(awk -F'\t' '$1 ~ /^wspipe_blockwise_fp8_/ { print $1 }' "$tmp/ops" | sort -u); do
  if ! [[ $fn =~ ^wspipe_blockwise_fp8_cg([12])_s[0-9]+_a[0-9]+$ ]]; then
    result FAIL "$fn" 'blockwise-fp8 kernel name' 'not wspipe_blockwise_fp8_cg<1|2>_s<S>_a<A>'
    continue
  fi
  g=${BASH_REMATCH[1]}
  example_common "$fn" "$g" UTCQMMA
  expect "$fn" "${I}LDTM\.16dp256bit\.x8 R[0-9]+, tmem\[" 'epilogue: tcgen05.ld.16x256b.x8'
  expect "$fn" 'SYNCS\.ARRIVE\.TRANS64(\.RED)?\.A1T0 ' 'epilogue: arrives on input-empty'
  if [ "$g" = 2 ]; then
    expect_count "$fn" "${I}UTMALDG\.2D\.2CTA \[UR[0-9]+\], \[UR[0-9]+\]$" 3 'A, B, A-scales: tma_load<2>'
    expect "$fn" "${I}UTCBAR\.2CTA\.MULTICAST \[UR[0-9]+\], URZ, UR[0-9]+$" 'commits: to both CTAs of the pair'
    reject "$fn" 'UTCBAR(\.MULTICAST)? \[' 'commits: .cta_group::2 only'
  else
    expect_count "$fn" "${I}UTMALDG\.2D \[UR[0-9]+\], \[UR[0-9]+\]$" 3 'A, B, A-scales: tma_load<1>'
    expect "$fn" "${I}UTCBAR \[UR[0-9]+\], URZ$" 'commits: local'
    reject "$fn" 'UTCBAR.*MULTICAST' 'commits: no multicast'
  fi
done

# The summary: each operation's instruction count (up to its final
# self-branch) and its synchronisation, tensor-core, TMEM and TMA
# instructions with how often each occurs, in order of first appearance.
echo
echo "SASS per operation ($arch): instructions, then the interesting ones (xN: N occurrences)"
interesting='SYNCS|BAR\.|UCGABAR|ELECT|MEMBAR|ERRBAR|FENCE|CCTL|UPRMT .*0x654|SHFL|SR_LANEID|SR_CgaCtaId|SR_CgaSize'
interesting+='|BPT\.TRAP|WARPSYNC|NANOSLEEP|CALL|UTC|UTMA|LDTM|STTM|UVIRTCOUNT|UGETNEXTWORKID|^NOP$'
# seen FUNCTION OPERANDS: its interesting instructions, "op xN; ...". With
# OPERANDS 1, S2R, S2UR, UPRMT and SHFL.IDX are shown whole.
seen() {
  # S2UR URx, SR_CgaCtaId is the base of the CTA's shared window (bits 24+
  # hold the cluster rank) in every address computation: left out.
  instrs "$1" | sed -E 's/^@!?U?P[0-9T] //' | grep -E -- "$interesting" | grep -Ev 'S2UR .*SR_CgaCtaId' |
    awk -v whole="$2" '{ op = (whole && $1 ~ /^(S2R|S2UR|UPRMT|SHFL\.IDX)$/) ? $0 : $1; sub(/, *c\[.*/, "", op)
           if (!(op in n)) order[++k] = op; n[op]++ }
         END { for (i = 1; i <= k; i++) {
                 op = order[i]
                 printf "%s%s%s", (i > 1 ? "; " : ""), op, (n[op] > 1 ? " x" n[op] : "")
               } }'
}
for fn in $(awk -F'\t' '$1 ~ /^wspipe_op_/ { print $1 }' "$tmp/ops" | sort -u); do
  s=$(seen "$fn" 1)
  printf '  %-34s %3d  %s\n' "${fn#wspipe_op_}" "$(instrs "$fn" | wc -l)" "${s:-(no synchronisation instruction)}"
done

echo
echo "SASS per example kernel: instructions, registers, then the interesting ones"
for fn in $(awk -F'\t' '$1 ~ /^wspipe_(gemm|blockwise_fp8|persistent_gemm)_/ { print $1 }' "$tmp/ops" | sort -u); do
  regs=$(awk -F'\t' -v fn="$fn" '$1 == fn { match($2, /REG:[0-9]+/); print substr($2, RSTART + 4, RLENGTH - 4) }' \
    "$tmp/resources")
  printf '  %s: %d instructions, %s registers\n    %s\n' "${fn#wspipe_}" "$(instrs "$fn" | wc -l)" "${regs:-?}" \
    "$(seen "$fn" 0)"
done

echo
if [ "$failures" -ne 0 ]; then
  echo "sass_check: $failures of $checks checks FAILED"
  exit 1
fi
echo "sass_check: all $checks checks passed"
