#!/bin/sh
# install-deps.sh - install the Debian 12 packages onnxcc needs to build and test, if missing
# (chromium: tests/report.sh opens --report's page in it).
# Run as root (the README's commands call it through make). Prints nothing when all is there.
set -eu
PKGS="build-essential pkg-config llvm-19-dev libprotobuf-c-dev protobuf-c-compiler zlib1g-dev
      libonnx-dev libonnx-testdata python3-onnx python3-numpy cmake chromium
      gcc-arm-none-eabi libnewlib-arm-none-eabi qemu-system-arm
      gcc-riscv64-unknown-elf picolibc-riscv64-unknown-elf qemu-system-misc
      clang-19 libclang-rt-19-dev"
missing=""
for p in $PKGS; do
    dpkg-query -W -f='${db:Status-Status}\n' "$p" 2>/dev/null | grep -qx installed || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
echo "install-deps: installing:$missing"
if [ "$(id -u)" != 0 ]; then
    echo "install-deps: not root; please run: apt-get install$missing" >&2
    exit 1
fi
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing >/dev/null
