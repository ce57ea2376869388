#!/usr/bin/env bash
# One script for every set-up: installs what is missing (Debian 12 packages),
# builds, then runs the main job or every test.
#
#   bash scripts/setup.sh run    # install, build, train the main job
#   bash scripts/setup.sh test   # install, build, run all tests (the lower layers' also under ASan+UBSan, and MPI)
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-run}

packages=(g++ cmake make pkg-config libdnnl-dev libopenblas-dev zlib1g-dev libcli11-dev nlohmann-json3-dev
          libgtest-dev libgmock-dev libbenchmark-dev openmpi-bin libopenmpi-dev python3-torch iproute2
          libgoogle-perftools-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  sudo=""
  [ "$(id -u)" = 0 ] || sudo=sudo
  echo "== installing: ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

jobs=$(nproc)
build() {  # build DIR TARGET [cmake args...]
  local dir=$1 target=$2
  shift 2
  cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
  cmake --build "$dir" -j"$jobs" --target "$target"
}

case "$mode" in
  run)
    build build all
    ./build/artel
    ;;
  test)
    build build all
    ctest --test-dir build --output-on-failure -j"$jobs"
    echo "== installed into build/prefix: the examples built against it, each run with 2 workers"
    rm -rf build/prefix build/examples
    cmake --install build --prefix build/prefix >/dev/null
    cmake -S examples -B build/examples -DCMAKE_PREFIX_PATH="$PWD/build/prefix" >/dev/null
    cmake --build build/examples -j"$jobs"
    ctest --test-dir build/examples --output-on-failure
    echo "== every installed header compiles on its own, without -march=native"
    find build/prefix/include -name '*.h' -printf '%P\n' | sort |
      xargs -P"$jobs" -I{} sh -c 'echo "#include <{}>" | g++ -std=c++20 -fsyntax-only -Ibuild/prefix/include -x c++ - || exit 255'
    echo "== the unit tests of the layers that index memory, again under AddressSanitizer + UndefinedBehaviorSanitizer"
    build build-asan artel_sanitized_tests -DARTEL_SANITIZE=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo
    # Tests that run workers under mpirun are left out here: OpenMPI keeps
    # allocations (op tables, plugins) until exit, which LeakSanitizer reports
    # against the library's unloaded plugins. They run in the build above.
    ctest --test-dir build-asan --output-on-failure -j"$jobs" -L asan -E "Mpi"
    ;;
  *)
    echo "usage: bash scripts/setup.sh run|test" >&2
    exit 2
    ;;
esac
