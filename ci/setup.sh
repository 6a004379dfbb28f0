#!/usr/bin/env bash
# Set up everything Foresight's build, tests and lab need:
# - from package registries: Debian packages (Mininet, tshark, iproute2, etcd,
#   Chromium), the Python environment in .venv (P4Runtime definitions, PTF,
#   scapy, p4runtime-shell), .venv-jax (the lab's JAX job) and, for
#   benchmarks, .venv-finsy;
# - the P4 toolchain, which no registry has: ci/p4-toolchain.sh builds PI and
#   BMv2 (and p4c with --p4c, the Tofino p4c with --tofino) from local clones
#   (FORESIGHT_P4_SOURCES) or p4lang's repositories. Without sources it says
#   so in one line and setup goes on; the suites that need the tools say
#   SKIPPED.
#
#   bash ci/setup.sh [--p4c] [--tofino] [--no-toolchain]
#
# Idempotent (a second run takes seconds); run as root (apt) or with the
# packages present.
set -euo pipefail
cd "$(dirname "$0")/.."
toolchain_args=(); build_toolchain=1
for arg in "$@"; do
  case "$arg" in
    --p4c|--tofino|--no-nice|--jobs=*) toolchain_args+=("$arg") ;;
    --no-toolchain) build_toolchain= ;;
    *) echo "usage: bash ci/setup.sh [--p4c] [--tofino] [--no-toolchain]" >&2; exit 2 ;;
  esac
done

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
# The lab's JAX job (experiment.py jax and t5) runs its ranks under .venv-jax,
# with this checkout's NDSP client (reinstalled when its sources change).
client_hash=$(cd clients/python && find . -name '*.py' -o -name '*.toml' -o -name '*.cfg' | grep -v -e build/ -e egg-info | sort | xargs cat ../../proto/ndsp/v1/*.proto | sha256sum | cut -c1-16)
if ! .venv-jax/bin/python -c 'import jax, foresight_ndsp.jax' 2>/dev/null \
   || [ "$(cat .venv-jax/.foresight-client 2>/dev/null)" != "$client_hash" ]; then
  echo "setup: installing .venv-jax (jax[cpu] and this checkout's NDSP client; the first time ~100 MB from PyPI)"
  [ -x .venv-jax/bin/python ] || "$python" -m venv .venv-jax
  .venv-jax/bin/pip install -q --disable-pip-version-check --force-reinstall --no-deps ./clients/python
  .venv-jax/bin/pip install -q --disable-pip-version-check './clients/python[jax]'
  echo "$client_hash" > .venv-jax/.foresight-client
fi

if [ -n "$build_toolchain" ]; then
  toolchain_start=$(date +%s)
  rc=0; bash ci/p4-toolchain.sh "${toolchain_args[@]}" || rc=$?
  case "$rc" in
    0) echo "setup: P4 toolchain ready ($(( $(date +%s) - toolchain_start )) s)" ;;
    3) echo "setup: going on without the P4 toolchain (see the line above)" ;;
    *) echo "setup: the P4 toolchain build failed (exit $rc)" >&2; exit "$rc" ;;
  esac
fi
echo "setup: done (.venv: $(.venv/bin/python -c 'import p4.v1.p4runtime_pb2, ptf, scapy; print("p4runtime, ptf, scapy ok")'))"
