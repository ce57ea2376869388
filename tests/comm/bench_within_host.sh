#!/bin/bash
# `artel bench comm --within-host` on 2 hosts x 2 ranks: each host's pair
# benches as a group of its own, on artel's shared memory (Note [Subgroups on
# one host]), every result right (exit 3 otherwise). 77: no namespaces here.
# Usage: bench_within_host.sh ARTEL
artel=$1
out=$("$(dirname "$0")/../../scripts/cluster.sh" --ranks 2,2 --rate 1gbit -- \
      "$artel" bench comm --backend mpi --within-host --max-bytes 1M --iters 2 2>&1)
rc=$?
echo "$out"
[ "$rc" = 0 ] || exit "$rc"
echo "$out" | grep -q "2 ranks within each host of 2 hosts" || { echo "no 'within each host' header"; exit 1; }
