#!/usr/bin/env bash
# Installs the Debian packages flashcheck builds and tests with. Idempotent: only missing packages are
# installed, so a second run on a set-up machine does no apt work beyond the index refresh.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config
  libeigen3-dev libboost-dev libmpfr-dev libgmp-dev
  librapidcheck-dev libgtest-dev libgmock-dev
  libcli11-dev libfmt-dev nlohmann-json3-dev
  clang libclang-rt-14-dev
  coq
  python3 python3-numpy python3-matplotlib python3-pytest
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages present"
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  SUDO=sudo
else
  SUDO=
fi
echo "setup: installing ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "setup: done"
