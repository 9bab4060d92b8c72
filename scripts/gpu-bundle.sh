#!/usr/bin/env bash
# Packs what scripts/gpu-check.sh runs on a lent GPU machine (a driver and
# Python with PyTorch there, but no build tools, no network, and maybe
# another Linux): meshtrain, unit_cuda and gemm_rate from a CUDA build,
# stripped, with the shared libraries they load (found with ldd), except
#   - libcuda (the machine's own driver) and libcublasLt (541 MB: the
#     machine's pip nvidia packages or CUDA install have it; gpu-check.sh
#     finds it), and the other CUDA libraries of that kind;
#   - glibc, kept apart in lib/glibc/: the wrappers in bin/ use it, through
#     its own loader, only where the machine's glibc is older than the build
#     machine's (the binaries and libstdc++ need symbols of the newer one).
#
#   bin/NAME       wrapper: the bundle's lib/ first on the library path
#   libexec/NAME   the stripped binary
#   lib/           its libraries (sonames, no links); lib/glibc/ the C library
#   GLIBC_VERSION  the build machine's glibc; MANIFEST what is inside
#
# and the same packed as BUNDLE_DIR.tar.gz (about 20 MB), which gpu-check.sh
# also takes. Usage: scripts/gpu-bundle.sh [BUNDLE_DIR] (default
# build/gpu-bundle; BUILD_DIR picks another build tree). A device run carries
# one of them with the working tree: carry = ["build/gpu-bundle.tar.gz"]
# (the folder is about 55 MB of the 64 MiB a run carries).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${BUILD_DIR:-$root/build}
bundle=${1:-$build/gpu-bundle}

binaries=("$build/src/meshtrain/meshtrain" "$build/tests/unit_cuda" "$build/bench/gpu/gemm_rate")
for b in "${binaries[@]}"; do
  [ -x "$b" ] || { echo "gpu-bundle: $b is missing: build with the CUDA path first (docs/gpu.md)" >&2; exit 1; }
done
# NCCL's tests, where the build found NCCL (the GPU machine provides libnccl.so.2, or they are skipped).
if [ -x "$build/tests/unit_nccl" ]; then binaries+=("$build/tests/unit_nccl"); fi
ldd "$build/tests/unit_cuda" | grep -q 'libcublasLt\.so' ||
  { echo "gpu-bundle: $build/tests/unit_cuda does not load libcublasLt: not a CUDA build?" >&2; exit 1; }

# Sonames the GPU machine provides: its driver, and the CUDA libraries too
# large to carry (gpu-check.sh puts the machine's on the library path).
from_machine='^(libcuda\.so|libnvidia-|libcublasLt\.so|libcublas\.so|libcudnn|libnccl)'
# glibc's libraries: used only with its loader (see the top).
glibc_part='^(ld-linux|libc\.so|libm\.so|libmvec\.so|libpthread\.so|libdl\.so|librt\.so|libresolv\.so|libutil\.so|libanl\.so)'
multiarch=/lib/x86_64-linux-gnu

rm -rf "$bundle"
mkdir -p "$bundle/bin" "$bundle/libexec" "$bundle/lib/glibc"

declare -A copied=()
for b in "${binaries[@]}"; do
  name=$(basename "$b")
  cp "$b" "$bundle/libexec/$name"
  strip --strip-unneeded "$bundle/libexec/$name"
  # "libfoo.so.1 => /path/libfoo.so.1 (0x...)", "libfoo.so.1 => not found", or the loader's own line.
  while read -r soname arrow path _; do
    [ "$arrow" = "=>" ] || continue
    [[ $soname =~ $from_machine ]] && continue
    [ "$path" != "not" ] || { echo "gpu-bundle: $name needs $soname, which is not found here" >&2; exit 1; }
    [ -z "${copied[$soname]:-}" ] || continue
    copied[$soname]=$path
    if [[ $soname =~ $glibc_part ]]; then
      cp -L "$path" "$bundle/lib/glibc/$soname"
    else
      cp -L "$path" "$bundle/lib/$soname"
      chmod u+w "$bundle/lib/$soname"
      strip --strip-unneeded "$bundle/lib/$soname"
    fi
  done < <(ldd "$b")
done

# The whole of glibc's runtime beside its loader, whatever ldd listed: the
# driver's libcuda, loaded later, asks for libdl, libpthread and librt.
cp -L /lib64/ld-linux-x86-64.so.2 "$bundle/lib/glibc/"
for lib in libc.so.6 libm.so.6 libmvec.so.1 libpthread.so.0 libdl.so.2 librt.so.1 libresolv.so.2; do
  if [ -e "$multiarch/$lib" ] && [ ! -e "$bundle/lib/glibc/$lib" ]; then cp -L "$multiarch/$lib" "$bundle/lib/glibc/"; fi
done
getconf GNU_LIBC_VERSION | awk '{print $2}' > "$bundle/GLIBC_VERSION"

# One wrapper per program: the bundle's libraries first, then the caller's
# LD_LIBRARY_PATH (where gpu-check.sh has put the machine's cuBLASLt).
for b in "${binaries[@]}"; do
  name=$(basename "$b")
  cat > "$bundle/bin/$name" <<'WRAPPER'
#!/usr/bin/env bash
# Runs the bundled program of this name (scripts/gpu-bundle.sh) with the
# bundle's libraries first on the library path; where this machine's glibc
# is older than the build machine's, under the bundled glibc's loader
# (MESHTRAIN_DRIVER_LIB_DIR: where the driver's libcuda.so.1 is, for it).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
name=$(basename "${BASH_SOURCE[0]}")
built=$(cat "$here/GLIBC_VERSION")
have=$(getconf GNU_LIBC_VERSION 2> /dev/null | awk '{print $2}' || true)
libs="$here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
if [ -n "$have" ] && [ "$(printf '%s\n%s\n' "$built" "$have" | sort -V | head -n 1)" = "$built" ]; then
  export LD_LIBRARY_PATH="$libs"
  exec "$here/libexec/$name" "$@"
fi
exec "$here/lib/glibc/ld-linux-x86-64.so.2" \
  --library-path "$here/lib/glibc:$libs${MESHTRAIN_DRIVER_LIB_DIR:+:$MESHTRAIN_DRIVER_LIB_DIR}" \
  --argv0 "$name" "$here/libexec/$name" "$@"
WRAPPER
  chmod +x "$bundle/bin/$name"
done

{
  echo "made $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname) ($(. /etc/os-release && echo "$PRETTY_NAME"), glibc $(cat "$bundle/GLIBC_VERSION"))"
  echo "source $(git -C "$root" rev-parse --short HEAD 2> /dev/null || echo unknown)$(git -C "$root" diff --quiet HEAD 2> /dev/null || echo ' + uncommitted changes')"
  echo "programs: $(cd "$bundle/libexec" && echo *)"
  echo "libraries: $(find "$bundle/lib" -maxdepth 1 -type f -printf '%f\n' | sort | tr '\n' ' ')"
  echo "glibc (used where the machine's is older): $(cd "$bundle/lib/glibc" && echo *)"
  echo "from the GPU machine: libcuda.so.1 (driver), libcublasLt.so.13 (pip nvidia-cublas for CUDA 13, or a CUDA 13 install), libnccl.so.2 for unit_nccl (pip nvidia-nccl, optional)"
} > "$bundle/MANIFEST"

tar -czf "$bundle.tar.gz" -C "$(dirname "$bundle")" "$(basename "$bundle")"
echo "gpu-bundle: $bundle ($(du -sm "$bundle" | cut -f1) MB), $bundle.tar.gz ($(du -sm "$bundle.tar.gz" | cut -f1) MB)"
sed 's/^/  /' "$bundle/MANIFEST"
