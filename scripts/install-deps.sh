#!/usr/bin/env bash
# Installs what LoKA builds and tests with, on Debian 12 (idempotent: installs only what is missing).
#   Debian: compiler, CMake, Ninja, libonnx, protobuf, Boost.Graph, fmt, nlohmann-json, GoogleTest, zlib,
#           the ONNX backend test data, Python; Graphviz (loka-inspect --html draws the graph with `dot`)
#           and headless Chromium (the test that opens that report in a real browser).
#           clang and its libFuzzer and sanitizer runtimes (scripts/fuzz.sh, which CI runs; the runtimes
#           are only a Recommends of clang, which --no-install-recommends would skip).
#   PyPI:   onnx (FP8 conformance data, model checks) and onnxruntime (interop tests), numpy.
# The CUDA toolkit is not installed here: CUDA code is built when nvcc is already on the PATH.
set -euo pipefail

packages=(build-essential cmake ninja-build pkg-config
          libonnx-dev libprotobuf-dev protobuf-compiler libboost-graph-dev libfmt-dev nlohmann-json3-dev
          libgtest-dev zlib1g-dev libonnx-testdata python3 python3-pip
          clang libclang-rt-14-dev graphviz chromium-headless-shell)

missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if ((${#missing[@]})); then
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  echo "install-deps: installing ${missing[*]}"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
  echo "install-deps: Debian packages present"
fi

python_packages=(onnx onnxruntime numpy)
if ! python3 -c "import onnx, onnxruntime, numpy" 2>/dev/null; then
  echo "install-deps: installing ${python_packages[*]} from PyPI"
  # Debian marks its Python as externally managed; these go to the user site (or the active venv).
  python3 -m pip install --quiet --user "${python_packages[@]}" 2>/dev/null ||
    python3 -m pip install --quiet --user --break-system-packages "${python_packages[@]}" ||
    python3 -m pip install --quiet "${python_packages[@]}"
else
  echo "install-deps: Python packages present"
fi
