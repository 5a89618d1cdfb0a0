#!/usr/bin/env bash
# Installs the Debian 12 packages Quantscope needs to build, test and run.
# Idempotent: packages already present are left alone; apt-get runs only when
# something is missing. Run as root, or with sudo available.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git
  qt6-base-dev qt6-base-dev-tools qt6-charts-dev qt6-svg-dev libqt6svg6 qt6-qpa-plugins libqt6opengl6-dev libgl-dev libxkbcommon-dev libvulkan-dev
  libeigen3-dev libhdf5-dev libtbb-dev libonnx-dev libprotobuf-dev protobuf-compiler
  nlohmann-json3-dev zlib1g-dev libre2-dev libicu-dev
  libgraphviz-dev
  python3 python3-numpy python3-h5py python3-onnx python3-torch python3-torchvision python3-sklearn libonnx-testdata
  xvfb xauth
  qemu-user
  # Arm NN's TfLite parser on its CpuRef backend: a consumer of the .tflite export in tst_export_tflite
  libarmnn-dev libarmnntfliteparser-dev libarmnn-cpuref-backend22
  desktop-file-utils appstream debootstrap
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

# Node.js runs ONNX Runtime (npm onnxruntime-node) in the conformance tests. A
# node and npm already on the PATH (another vendor's build, say) are used as they
# are: Debian's npm package conflicts with such a nodejs.
command -v node >/dev/null 2>&1 || missing+=(nodejs)
command -v npm >/dev/null 2>&1 || missing+=(npm)

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
