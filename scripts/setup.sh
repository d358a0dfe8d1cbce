#!/usr/bin/env bash
# Installs everything Varuna needs on Debian 12 (apt + pip). Idempotent: when
# everything is present it only checks, in a few seconds.
# Every dependency and its version is listed here, in one place.
set -euo pipefail

# Debian 12 packages. MLIR/LLVM are pinned by their major version (16) in the
# package names; clang-16 must match the compiler Debian built MLIR with.
APT_PACKAGES=(
  llvm-16-dev libmlir-16-dev mlir-16-tools llvm-16-tools clang-16
  libonnx-dev libprotobuf-dev protobuf-compiler libgloo-dev
  ninja-build cmake iproute2
)

# PyPI packages (exact versions).
PIP_PACKAGES=(
  torch==2.15.0
  onnx==1.23.2
  onnxruntime==1.31.1
  onnxscript==0.7.2
  safetensors==0.8.0
  numpy==2.4.6
  lit==23.1.5
  pytest==9.2.0
  transformers==5.23.0
  pillow==13.0.0
)

PYTHON=${PYTHON:-python3}
SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing Debian packages: ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# pip: install only what is missing or at another version.
need_pip=$("$PYTHON" - "${PIP_PACKAGES[@]}" <<'PY'
import sys
from importlib import metadata
out = []
for spec in sys.argv[1:]:
    name, version = spec.split("==")
    try:
        have = metadata.version(name)
    except metadata.PackageNotFoundError:
        have = None
    if have is None or have.split("+")[0] != version:
        out.append(spec)
print(" ".join(out))
PY
)
if [[ -n "$need_pip" ]]; then
  echo "setup: installing Python packages: $need_pip"
  # shellcheck disable=SC2086
  "$PYTHON" -m pip install -q --disable-pip-version-check $need_pip
fi
echo "setup: all dependencies present"
