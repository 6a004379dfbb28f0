#!/usr/bin/env bash
# Build and install the pinned P4 toolchain on Debian 12: PI and BMv2
# (simple_switch_grpc with P4Runtime and the Thrift CLI) always, p4c with
# --p4c, the Tofino-enabled p4c with --tofino (a prefix of its own).
#
#   bash ci/p4-toolchain.sh [--p4c] [--tofino] [--jobs N] [--no-nice] [--check]
#
# Environment:
#   FORESIGHT_P4_PREFIX      where PI, BMv2 and p4c go        (default /opt/p4tools)
#   FORESIGHT_TOFINO_PREFIX  where the Tofino p4c goes        (default /opt/p4c-tofino)
#   FORESIGHT_P4_SOURCES     a directory of local clones, one per repository
#                            name: PI behavioral-model p4c p4runtime gnmi public
#                            uthash googletest abseil-cpp protobuf (+ z3 spdlog
#                            for --tofino). Without it, GitHub at the pinned tags.
#   FORESIGHT_P4_BUILD       sources, build trees and logs    (default /var/tmp/foresight-p4build)
#
# Idempotent: each component leaves a stamp (version and flags) in its prefix
# and is skipped while the stamp and its binaries are there. Resumable: an
# interrupted run keeps its checkouts and build trees, and make goes on from
# the objects built. --check only says what is installed and what is missing.
# Exit status: 0 when everything asked for is installed, 3 when sources could
# not be had (setup goes on; the suites that need the tools say SKIPPED), 1 on
# a build failure (its log is named).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)

prefix=${FORESIGHT_P4_PREFIX:-/opt/p4tools}
tofino_prefix=${FORESIGHT_TOFINO_PREFIX:-/opt/p4c-tofino}
work=${FORESIGHT_P4_BUILD:-/var/tmp/foresight-p4build}
sources=${FORESIGHT_P4_SOURCES:-}
jobs=$(nproc)
nice_builds=1
want_p4c=; want_tofino=; check_only=

for arg in "$@"; do
  case "$arg" in
    --p4c) want_p4c=1 ;;
    --tofino) want_tofino=1 ;;
    --no-nice) nice_builds= ;;
    --check) check_only=1 ;;
    --jobs=*) jobs=${arg#--jobs=} ;;
    -h|--help) sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "p4-toolchain: unknown argument '$arg' (see --help)" >&2; exit 2 ;;
  esac
done

# The pinned versions: the newest that build on Debian 12 (GCC 12, protobuf
# 3.21, gRPC 1.51, Thrift 0.17) with the patches in ci/p4-patches/.
PI_REF=v0.1.2
BMV2_REF=1.15.5
P4C_REF=v1.2.5.16
# p4c v1.2.5.16's own pins (cmake/Abseil.cmake, cmake/Protobuf.cmake, the
# top-level CMakeLists.txt, backends/tofino/cmake/, cmake/Z3.cmake).
ABSEIL_REF=20240722.1
PROTOBUF_REF=v25.3
P4RUNTIME_P4C_REF=ec4eb5ef70dbcbcbf2f8357a4b2b8c2f218845a5
Z3_REF=z3-4.13.3
SPDLOG_REF=v1.8.3

mkdir -p "$work/logs"
started=$(date +%s)
step_started=$started
elapsed() { local s=$(( $(date +%s) - $1 )); printf '%dm%02ds' $((s / 60)) $((s % 60)); }
say() { echo "p4-toolchain: $*"; }
step() { step_started=$(date +%s); say "[$(elapsed "$started")] $*"; }
done_step() { say "[$(elapsed "$started")]   done in $(elapsed "$step_started")"; }

# A build command, run in DIR and logged, at the lowest priority unless
# --no-nice. A new session gets its own scheduler autogroup, whose niceness
# is what counts against other sessions' processes when the kernel groups
# by session. The script waits for it with `wait`, so an interrupt (Ctrl-C,
# SIGTERM) reaches the trap at once and stops the whole build.
child=
on_interrupt() {
  [ -n "$child" ] && kill -TERM -- "-$child" 2>/dev/null
  say "interrupted; run again to resume (checkouts and objects are kept)"
  exit 130
}
trap on_interrupt INT TERM
run_logged() {
  local dir=$1 log=$2; shift 2
  local rc=0 nice_level=0
  [ -n "$nice_builds" ] && nice_level=19
  NICE=$nice_level setsid bash -c 'cd "$1" && shift && { echo "$NICE" > /proc/self/autogroup; } 2>/dev/null; exec nice -n "$NICE" "$@"' \
    _ "$dir" "$@" >>"$log" 2>&1 &
  child=$!
  wait "$child" || rc=$?
  child=
  if [ "$rc" != 0 ]; then
    say "FAILED (exit $rc): $*"
    say "log: $log (last lines below)"
    tail -n 25 "$log" | sed 's/^/    /'
    exit 1
  fi
}

# Stamps: "<name> <ref> <flags>" in <prefix>/share/foresight-toolchain/<name>.
stamp_file() { echo "$1/share/foresight-toolchain/$2"; }
stamp_line() { echo "$1 $2 $3"; }
is_stamped() { [ -f "$(stamp_file "$1" "$2")" ] && [ "$(cat "$(stamp_file "$1" "$2")")" = "$(stamp_line "$2" "$3" "$4")" ]; }
write_stamp() { mkdir -p "$1/share/foresight-toolchain"; stamp_line "$2" "$3" "$4" > "$(stamp_file "$1" "$2")"; }

PI_FLAGS="--with-proto --without-internal-rpc --without-cli --without-bmv2"
BMV2_FLAGS="--with-pi --with-thrift --disable-logging-macros --disable-elogger CXXFLAGS=-O2"
P4C_FLAGS="-DCMAKE_BUILD_TYPE=Release -DENABLE_GTESTS=OFF -DENABLE_EBPF=OFF -DENABLE_UBPF=OFF -DENABLE_DPDK=OFF -DENABLE_P4TC=OFF -DENABLE_P4FMT=OFF -DENABLE_P4C_GRAPHS=OFF -DENABLE_DOCS=OFF -DP4C_USE_PREINSTALLED_BDWGC=ON"
TOFINO_FLAGS="$P4C_FLAGS -DENABLE_TOFINO=ON"

have_pi() { [ -f "$prefix/lib/libpi.so" ] && [ -f "$prefix/include/PI/pi.h" ]; }
have_bmv2() { [ -x "$prefix/bin/simple_switch_grpc" ] && [ -x "$prefix/bin/simple_switch_CLI" ]; }
have_p4c() { [ -x "$prefix/bin/p4c" ] && [ -x "$prefix/bin/p4c-bm2-ss" ]; }
have_tofino() { [ -x "$tofino_prefix/bin/p4c" ] && [ -x "$tofino_prefix/bin/p4c-barefoot" ]; }

# What this run is asked to do, and what of it is already done.
todo=()
is_stamped "$prefix" pi "$PI_REF" "$PI_FLAGS" && have_pi || todo+=(pi)
is_stamped "$prefix" bmv2 "$BMV2_REF" "$BMV2_FLAGS" && have_bmv2 || todo+=(bmv2)
if [ -n "$want_p4c" ]; then is_stamped "$prefix" p4c "$P4C_REF" "$P4C_FLAGS" && have_p4c || todo+=(p4c); fi
if [ -n "$want_tofino" ]; then is_stamped "$tofino_prefix" p4c-tofino "$P4C_REF" "$TOFINO_FLAGS" && have_tofino || todo+=(tofino); fi

if [ -n "$check_only" ] || [ ${#todo[@]} = 0 ]; then
  have_pi && say "PI $PI_REF: $prefix" || say "PI: missing"
  have_bmv2 && say "BMv2 $BMV2_REF: $prefix/bin/simple_switch_grpc" || say "BMv2: missing"
  have_p4c && say "p4c: $prefix/bin/p4c" || say "p4c: missing (bash ci/p4-toolchain.sh --p4c builds it, ~60 min on 2 cores)"
  have_tofino && say "Tofino p4c: $tofino_prefix/bin/p4c" || say "Tofino p4c: missing (bash ci/p4-toolchain.sh --tofino, 1.5-3 h on 2 cores)"
  [ ${#todo[@]} = 0 ] && say "up to date (${todo[*]:-nothing to build})" && exit 0
  say "to build: ${todo[*]}"
  exit 0
fi

if grep -qi '^ID=ubuntu' /etc/os-release 2>/dev/null; then
  say "on Ubuntu, p4lang's published packages (p4lang-p4c, p4lang-bmv2 from its openSUSE Build Service repositories) are the quicker route; building from source anyway"
fi

# ---- sources ---------------------------------------------------------------
# Where a repository comes from: FORESIGHT_P4_SOURCES/<name> if there,
# otherwise GitHub. One lookup of the network, once, when it is needed.
declare -A github_owner=([PI]=p4lang [behavioral-model]=p4lang [p4c]=p4lang [p4runtime]=p4lang
  [gnmi]=openconfig [public]=openconfig [uthash]=troydhanson [googletest]=google
  [abseil-cpp]=abseil [protobuf]=protocolbuffers [z3]=Z3Prover [spdlog]=gabime)
origin_of() {
  local name=$1
  if [ -n "$sources" ]; then
    for cand in "$sources/$name" "$sources/$name.git"; do
      [ -e "$cand" ] && { echo "$cand"; return 0; }
    done
  fi
  echo "https://github.com/${github_owner[$name]}/$name.git"
}
no_sources() {
  say "cannot build ${todo[*]}: no source for $1 (not in ${sources:-FORESIGHT_P4_SOURCES, unset}; $(origin_of "$1") not reachable); set FORESIGHT_P4_SOURCES to a directory of clones named PI, behavioral-model, p4c, p4runtime, gnmi, public, uthash, googletest, abseil-cpp, protobuf and run it again (the suites that need the tools say SKIPPED meanwhile)"
  exit 3
}
reachable() {
  local url=$1
  case "$url" in
    https://*) timeout 20 git ls-remote --exit-code "$url" HEAD >/dev/null 2>&1 ;;
    *) git -C "$url" rev-parse --git-dir >/dev/null 2>&1 ;;
  esac
}

# checkout NAME REF DIR [sparse patterns...]: DIR holds NAME at REF (a tag or
# commit). An existing checkout at that commit is kept as it is (resume).
checkout() {
  local name=$1 ref=$2 dir=$3; shift 3
  local url; url=$(origin_of "$name")
  if [ -d "$dir/.git" ]; then
    local want; want=$(git -C "$dir" rev-parse -q --verify "$ref^{commit}" 2>/dev/null || true)
    if [ -n "$want" ] && [ "$(git -C "$dir" rev-parse HEAD)" = "$want" ]; then return 0; fi
  fi
  reachable "$url" || no_sources "$name"
  rm -rf "$dir"
  git -c protocol.file.allow=always clone -q --no-checkout "$url" "$dir"
  if [ $# -gt 0 ]; then
    git -C "$dir" sparse-checkout set --no-cone "$@"
  fi
  git -C "$dir" -c advice.detachedHead=false checkout -q "$ref"
}

# Submodules from the same place as their parent: local clones by the last
# part of their URL when FORESIGHT_P4_SOURCES is set.
submodules() {
  local dir=$1
  git -C "$dir" submodule init -q
  local path url name
  while read -r key url; do
    path=${key#submodule.}; path=${path%.url}
    name=$(basename "$url" .git)
    local origin; origin=$(origin_of "$name")
    reachable "$origin" || no_sources "$name"
    git -C "$dir" config "submodule.$path.url" "$origin"
  done < <(git -C "$dir" config --get-regexp '^submodule\..*\.url$')
  git -C "$dir" -c protocol.file.allow=always submodule update -q --init --recursive
}

apply_patches() {
  local dir=$1 set=$2
  for p in "$here/p4-patches/$set"/*.patch; do
    [ -e "$p" ] || continue
    if git -C "$dir" apply --check "$p" 2>/dev/null; then
      git -C "$dir" apply "$p"; say "  applied $(basename "$p")"
    elif git -C "$dir" apply --reverse --check "$p" 2>/dev/null; then
      :  # already applied by an earlier, interrupted run
    else
      say "patch $p does not apply to $dir"; exit 1
    fi
  done
}

# ---- Debian packages the builds need ----------------------------------------
debian_build_packages=(build-essential autoconf automake libtool pkg-config cmake git bison flex
  libboost-dev libboost-system-dev libboost-filesystem-dev libboost-thread-dev
  libboost-program-options-dev libboost-iostreams-dev libboost-graph-dev libgmp-dev
  libpcap-dev libjudy-dev libreadline-dev libssl-dev libnanomsg-dev libthrift-dev
  thrift-compiler python3-thrift libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev
  libprotoc-dev protobuf-compiler libxxhash-dev libjsoncpp-dev libgc-dev libfl-dev python3-venv)
[ -n "$want_tofino" ] && debian_build_packages+=(rapidjson-dev)
missing=()
for p in "${debian_build_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  step "installing build packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >"$work/logs/apt.log" 2>&1 \
    || { say "apt-get failed, see $work/logs/apt.log"; exit 1; }
  done_step
fi

say "building ${todo[*]} into $prefix$([ -n "$want_tofino" ] && echo " and $tofino_prefix"), $jobs jobs$([ -n "$nice_builds" ] && echo ", nice 19"); work in $work, logs in $work/logs"
mkdir -p "$prefix"
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
export LD_LIBRARY_PATH="$prefix/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# Debian's interpreter: it has python3-thrift, which BMv2's CLI imports.
export PYTHON=/usr/bin/python3

# configure_once DIR LOG COMMAND...: run COMMAND in DIR unless this exact
# configuration already succeeded there (a resumed run goes straight to make).
configure_once() {
  local dir=$1 log=$2; shift 2
  local want="$*"
  if [ -f "$dir/.foresight-configured" ] && [ "$(cat "$dir/.foresight-configured")" = "$want" ]; then
    say "  (configured by an earlier run)"
    return 0
  fi
  rm -f "$dir/.foresight-configured"
  run_logged "$dir" "$log" "$@"
  echo "$want" > "$dir/.foresight-configured"
}

build_pi() {
  local src=$work/PI log=$work/logs/pi.log
  step "PI $PI_REF: sources"
  checkout PI "$PI_REF" "$src"; submodules "$src"; done_step
  step "PI: configure (log $log)"
  configure_once "$src" "$log" bash -c "./autogen.sh && ./configure --prefix='$prefix' $PI_FLAGS CPPFLAGS='-I$prefix/include' LDFLAGS='-L$prefix/lib'"
  done_step
  step "PI: make -j$jobs and install"
  run_logged "$src" "$log" make -j"$jobs"
  run_logged "$src" "$log" make install
  write_stamp "$prefix" pi "$PI_REF" "$PI_FLAGS"; done_step
}

build_bmv2() {
  local src=$work/behavioral-model log=$work/logs/bmv2.log
  step "BMv2 $BMV2_REF: sources"
  checkout behavioral-model "$BMV2_REF" "$src"; done_step
  step "BMv2: configure (log $log)"
  # shellcheck disable=SC2086
  configure_once "$src" "$log" bash -c "./autogen.sh && ./configure --prefix='$prefix' $BMV2_FLAGS CPPFLAGS='-I$prefix/include' LDFLAGS='-L$prefix/lib -Wl,-rpath,$prefix/lib' PYTHON=/usr/bin/python3"
  done_step
  step "BMv2: make -j$jobs and install (the longest part: ~25 min on 2 cores)"
  run_logged "$src" "$log" make -j"$jobs"
  run_logged "$src" "$log" make install
  # The CLIs run under Debian's python3, which has the thrift module; a
  # python3 earlier on PATH (pyenv, a venv) usually has not.
  for cli in "$prefix"/bin/*_CLI; do
    [ -f "$cli" ] && sed -i '1s|^#!.*python.*$|#!/usr/bin/python3|' "$cli"
  done
  ldconfig 2>/dev/null || true
  write_stamp "$prefix" bmv2 "$BMV2_REF" "$BMV2_FLAGS"; done_step
}

# p4c's dependencies, which its CMake would download, from pinned checkouts.
p4c_dependencies() {
  checkout abseil-cpp "$ABSEIL_REF" "$work/deps/abseil-cpp"
  checkout protobuf "$PROTOBUF_REF" "$work/deps/protobuf"
  checkout p4runtime "$P4RUNTIME_P4C_REF" "$work/deps/p4runtime"
}

build_p4c_into() {
  local into=$1 flags=$2 stamp_name=$3 builddir=$4 log=$5 what=$6
  local src=$work/p4c
  step "$what $P4C_REF: sources"
  # docs/ holds a large slide deck some mirrors lack; nothing here needs it.
  checkout p4c "$P4C_REF" "$src" '/*' '!/docs/'
  apply_patches "$src" p4c
  p4c_dependencies
  done_step
  local fetch="-DFETCHCONTENT_SOURCE_DIR_ABSEIL=$work/deps/abseil-cpp -DFETCHCONTENT_SOURCE_DIR_PROTOBUF=$work/deps/protobuf -DFETCHCONTENT_SOURCE_DIR_P4RUNTIME=$work/deps/p4runtime"
  if [ "$stamp_name" = p4c-tofino ]; then
    checkout z3 "$Z3_REF" "$work/deps/z3"
    # p4c patches Z3 when it downloads it; a given source directory skips
    # that step, so the same patch is applied here (once).
    if ! git -C "$work/deps/z3" apply --reverse --check "$src/cmake/z3.patch" 2>/dev/null; then
      git -C "$work/deps/z3" apply "$src/cmake/z3.patch"
    fi
    # The backend's cmake adds spdlog from backends/tofino/third_party
    # whatever FetchContent is told, so it goes there.
    checkout spdlog "$SPDLOG_REF" "$src/backends/tofino/third_party/spdlog"
    fetch="$fetch -DFETCHCONTENT_SOURCE_DIR_Z3=$work/deps/z3"
    # The Tofino backend's Python generators (p4c-build-logs and friends).
    if [ ! -x "$work/tofino-venv/bin/pyinstaller" ]; then
      /usr/bin/python3 -m venv "$work/tofino-venv"
      "$work/tofino-venv/bin/pip" install -q pyinstaller jsl 'jsonschema<4' pyyaml
    fi
    # First on PATH, and named to cmake, so the generators run with them
    # rather than whichever python3 a shell finds first.
    export PATH="$work/tofino-venv/bin:$PATH"
    fetch="$fetch -DPython3_EXECUTABLE=$work/tofino-venv/bin/python3 -DPYTHON_EXECUTABLE=$work/tofino-venv/bin/python3"
  fi
  mkdir -p "$builddir"
  step "$what: cmake (log $log)"
  # shellcheck disable=SC2086
  configure_once "$builddir" "$log" cmake "$src" -DCMAKE_INSTALL_PREFIX="$into" $flags $fetch
  done_step
  step "$what: make -j$jobs (the longest part)"
  run_logged "$builddir" "$log" make -j"$jobs"
  run_logged "$builddir" "$log" make install
  write_stamp "$into" "$stamp_name" "$P4C_REF" "$flags"; done_step
}

for c in "${todo[@]}"; do
  case "$c" in
    pi) build_pi ;;
    bmv2) build_bmv2 ;;
    p4c) build_p4c_into "$prefix" "$P4C_FLAGS" p4c "$work/p4c-build" "$work/logs/p4c.log" p4c ;;
    tofino) build_p4c_into "$tofino_prefix" "$TOFINO_FLAGS" p4c-tofino "$work/p4c-build-tofino" "$work/logs/p4c-tofino.log" "Tofino p4c" ;;
  esac
done
say "finished in $(elapsed "$started"); $(du -sh "$work" 2>/dev/null | cut -f1) of sources and build trees in $work (removable), $(du -sh "$prefix" 2>/dev/null | cut -f1) installed in $prefix"
