#!/usr/bin/env bash
# On the device: gathers the wheels of scripts/device/fa4_wheels.sh from the folder a call carried into
# /tmp/fa4-wheels (kept while the machine stays warm), and once every piece is there joins the split wheel
# and installs all of them into /tmp/fa4-site, which scripts/device/h200_batch.sh puts on PYTHONPATH.
set -euo pipefail
src=${1:?usage: fa4_install.sh CARRIED_FOLDER}
mkdir -p /tmp/fa4-wheels
cp "$src"/* /tmp/fa4-wheels/
cd /tmp/fa4-wheels
parts=(*.part00 *.part01)
if [ ! -f "${parts[0]}" ] || [ ! -f "${parts[1]}" ]; then
  echo "fa4_install: have $(ls | tr '\n' ' '); waiting for the other piece"
  exit 0
fi
cat "${parts[0]}" "${parts[1]}" > "${parts[0]%.part00}"
rm -f "${parts[@]}"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/fa4-site ./*.whl
# (the .pth file that would put the CuTe DSL's packages on sys.path is not read from PYTHONPATH: h200_batch.sh
# names that folder too)
PYTHONPATH=/tmp/fa4-site:/tmp/fa4-site/nvidia_cutlass_dsl/dsl_packages python3 -c "from flash_attn.cute import flash_attn_func; print('fa4: flash_attn.cute imports')"
