#!/usr/bin/env bash
# Builds the llama-cpp-python wheel once into a wheelhouse keyed by its build flags.
#
# llama-cpp-python ships as source only; pip's own cache ignores CMAKE_ARGS, and
# the default native build uses instructions (AMX) that crash with SIGILL on
# some of the machines overt runs on. So: an AVX2 build, plus the AVX-512
# extensions this machine's CPU reports in /proc/cpuinfo (never AMX, never a
# guess: an extension the CPU does not list crashes), made once, kept in
# $OVERT_WHEELHOUSE/<flags digest>/, reused by every later install. A machine
# with other extensions gets other flags, so another digest and its own build.
# Usage: scripts/llama-wheel.sh PYTHON   (prints the wheelhouse directory last)
set -euo pipefail
python=${1:?usage: llama-wheel.sh PYTHON}
version=0.3.36
flags="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF"
cpu=" $( { grep -m1 '^flags' /proc/cpuinfo 2>/dev/null || true; } | cut -d: -f2) "
has() { for f in "$@"; do [[ "$cpu" == *" $f "* ]] || return 1; done; }
if has avx512f avx512cd avx512vl avx512dq avx512bw; then
  flags="$flags -DGGML_AVX512=ON"
  if has avx512_vnni; then flags="$flags -DGGML_AVX512_VNNI=ON"; fi
  if has avx512vbmi; then flags="$flags -DGGML_AVX512_VBMI=ON"; fi
  if has avx512_bf16; then flags="$flags -DGGML_AVX512_BF16=ON"; fi
fi
if has avx_vnni; then flags="$flags -DGGML_AVX_VNNI=ON"; fi
base=${OVERT_WHEELHOUSE:-${XDG_CACHE_HOME:-$HOME/.cache}/overt/wheelhouse}
house="$base/$(printf '%s %s' "$version" "$flags" | sha256sum | cut -c1-12)"
mkdir -p "$house"
if ls "$house"/llama_cpp_python-$version-*.whl >/dev/null 2>&1; then
  echo "$house"
  exit 0
fi
log="$house/build.log"
echo "overt: building llama-cpp-python $version from source (about 8-10 minutes on 2 cores; flags: $flags)" >&2
echo "overt: build log: $log" >&2
CMAKE_ARGS="$flags" "$python" -m pip wheel --no-cache-dir --no-deps -v -w "$house.tmp" \
  "llama-cpp-python==$version" >"$log" 2>&1 &
pid=$!
start=$(date +%s)
while kill -0 "$pid" 2>/dev/null; do
  sleep 20
  step=$(grep -aoE '\[[0-9]+/[0-9]+\]' "$log" | tail -n 1 || true)
  echo "overt: still building ($(( $(date +%s) - start ))s) ${step:+compiled $step}" >&2
done
if ! wait "$pid"; then
  echo "overt: llama-cpp-python build failed; the last lines of $log:" >&2
  tail -n 30 "$log" >&2
  rm -rf "$house.tmp"
  exit 1
fi
mv "$house.tmp"/llama_cpp_python-*.whl "$house"/
rm -rf "$house.tmp"
echo "overt: built $(ls "$house"/llama_cpp_python-*.whl)" >&2
echo "$house"
