#!/usr/bin/env bash
# OpenMPI's rsh agent for scripts/cluster.sh: `cluster_agent.sh HOST COMMAND...`
# runs COMMAND (a shell command line, as ssh would) inside HOST's network
# namespace, under that host's hostname, on that host's cores when
# cluster.sh --own-cores gave it some. HOST is the host's address,
# 10.N.0.<i>, whose namespace is $ARTEL_CLUSTER_TAG-h<i>.
set -euo pipefail
[ -n "${ARTEL_CLUSTER_TAG:-}" ] || { echo "cluster_agent.sh: run by scripts/cluster.sh only" >&2; exit 2; }
host=$1
shift
[[ $host == "$ARTEL_CLUSTER_NET".0.* ]] || { echo "cluster_agent.sh: $host is not a host of this cluster" >&2; exit 2; }
i=${host##*.}
name="$ARTEL_CLUSTER_TAG-h$i"
pin=()
if [ -n "${ARTEL_CLUSTER_CORES:-}" ]; then
  IFS=';' read -r -a cores <<<"$ARTEL_CLUSTER_CORES"
  pin=(taskset -c "${cores[$((i - 1))]}")
fi
exec ${pin[@]+"${pin[@]}"} nsenter --net="/run/netns/$name" unshare --uts sh -c "hostname $name && $*"
