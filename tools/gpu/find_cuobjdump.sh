# find_cuobjdump.sh, sourced by the SASS scripts here: sets $cuobjdump to
# $CUOBJDUMP, the one on PATH or pip's (nvidia-cuda-cuobjdump), puts its
# directory on PATH (cuobjdump runs nvdisasm from there), or exits 77 (CTest
# skip) naming what to install.
cuobjdump=${CUOBJDUMP:-$(command -v cuobjdump || true)}
if [ -z "$cuobjdump" ]; then
  for py in python3 python; do
    command -v "$py" >/dev/null 2>&1 || continue
    cuobjdump=$("$py" -c 'import glob, site, sysconfig
roots = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"], *site.getsitepackages()}
hits = [p for r in sorted(roots) for p in sorted(glob.glob(r + "/nvidia/cu*/bin/cuobjdump"))]
print(hits[0] if hits else "")' 2>/dev/null)
    [ -n "$cuobjdump" ] && break
  done
fi
[ -x "${cuobjdump:-}" ] || { echo "SKIP: cuobjdump not found (pip install nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm)"; exit 77; }
export PATH="$(dirname "$cuobjdump"):$PATH"
