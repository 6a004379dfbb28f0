#!/usr/bin/env bash
# Set up everything Foresight's build and tests take from package registries:
# Debian packages (Mininet, tshark, iproute2), the Python environment in .venv
# (P4Runtime definitions, PTF, scapy, p4runtime-shell) and, for benchmarks,
# .venv-finsy. Idempotent; run as root (apt) or with the packages present.
#
# The P4 toolchain (p4c, BMv2, PI) is not in any registry: install it as
# docs/data-plane.md says. Suites that need it are skipped, with the reason, without it.
set -euo pipefail
cd "$(dirname "$0")/.."

debian_packages=(mininet iproute2 nftables iputils-ping tshark python3-thrift ethtool tcpdump python3-yaml python3-matplotlib protobuf-compiler libprotobuf-dev etcd-server openssl chromium chromium-driver python3-selenium libtcmalloc-minimal4)
missing=()
for p in "${debian_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing Debian packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  echo "wireshark-common wireshark-common/install-setuid boolean false" | debconf-set-selections
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

python=${FORESIGHT_BASE_PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv with $($python --version)"
  "$python" -m venv .venv
fi
.venv/bin/pip install -q --disable-pip-version-check -r ci/requirements.txt
# finsy needs protobuf 6, which p4runtime-shell cannot use: its own env.
if [ ! -x .venv-finsy/bin/python ]; then "$python" -m venv .venv-finsy; fi
.venv-finsy/bin/pip install -q --disable-pip-version-check 'finsy==0.30.0'
echo "setup: done (.venv: $(.venv/bin/python -c 'import p4.v1.p4runtime_pb2, ptf, scapy; print("p4runtime, ptf, scapy ok")'))"
