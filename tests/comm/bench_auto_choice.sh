#!/bin/bash
# `artel bench comm` on 2 hosts x 2 ranks says what "auto" ran: the
# hierarchical all-reduce, in the header and in every row's last column; and
# `--algorithm native` runs MPI's own. 77: no namespaces here.
# Usage: bench_auto_choice.sh ARTEL
artel=$1
cluster="$(dirname "$0")/../../scripts/cluster.sh"
for algo in auto native; do
  out=$("$cluster" --ranks 2,2 --rate 10gbit -- "$artel" bench comm --backend mpi --algorithm "$algo" \
        --max-bytes 64K --iters 2 2>&1)
  rc=$?
  echo "$out"
  [ "$rc" = 0 ] || exit "$rc"
  ran=hierarchical header="algorithm auto -> hierarchical"
  [ "$algo" = native ] && ran=native header="algorithm native"
  echo "$out" | grep -q "^# artel bench comm: .*$header\$" || { echo "header lacks '$header'"; exit 1; }
  rows=$(echo "$out" | grep -c '^ ')
  [ "$rows" -gt 0 ] && [ "$(echo "$out" | grep '^ ' | grep -c " $ran\$")" = "$rows" ] ||
    { echo "not every row ran $ran"; exit 1; }
done
