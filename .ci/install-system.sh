#!/usr/bin/env bash
# Installs the system packages the test suite uses: Debian's chromium (headless dashboard
# test), postgresql (shared-storage tests) and dataset-fashion-mnist (the idx files under
# /usr/share/datasets/fashion-mnist/ that dataset: fashion_mnist reads offline, and the
# real-data test). Idempotent: does nothing when all exist.
set -euo pipefail

packages=(chromium postgresql dataset-fashion-mnist)

missing=()
for pkg in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" \
        || missing+=("$pkg")
done
[[ ${#missing[@]} -eq 0 ]] && exit 0

sudo=""
[[ $(id -u) -ne 0 ]] && sudo="sudo"

export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "install-system: installed ${missing[*]}"
