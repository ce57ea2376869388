#!/usr/bin/env bash
# One rank under `scripts/cluster.sh --own-cores`: it must run on its host's
# CPUs and no others (ARTEL_CLUSTER_CORES: "0;1", host 1's;host 2's).
set -euo pipefail
cpus() {  # "0-2,5" or "0,1,2,5" -> "0 1 2 5"
  local span out=()
  IFS=, read -r -a spans <<<"$1"
  for span in "${spans[@]}"; do
    for ((c = ${span%-*}; c <= ${span#*-}; c++)); do out+=("$c"); done
  done
  echo "${out[*]}"
}
IFS=';' read -r -a hosts <<<"${ARTEL_CLUSTER_CORES:?run by scripts/cluster.sh --own-cores}"
host=$(hostname)
want=$(cpus "${hosts[$((${host##*-h} - 1))]}")
got=$(cpus "$(awk '/^Cpus_allowed_list/ {print $2}' /proc/self/status)")
[ "$got" = "$want" ] || { echo "a rank on $host runs on CPUs $got, not its host's ($want)" >&2; exit 1; }
