#!/bin/bash
# `artel bench comm` on 2 hosts x 2 ranks says what "auto" ran: the
# hierarchical all-reduce, in the header and in every row's last column,
# with the bytes each rank sent across hosts, 2(H-1)/H * S/g = S/2 (measured,
# in sent/rank); and `--algorithm native` runs MPI's own, whose bytes
# artel cannot see ("-"). 77: no namespaces here.
# Usage: bench_auto_choice.sh ARTEL
artel=$1
cluster="$(dirname "$0")/../../scripts/cluster.sh"
for algo in auto native; do
  out=$("$cluster" --ranks 2,2 --rate 10gbit -- "$artel" bench comm --backend mpi --algorithm "$algo" \
        --min-bytes 64K --max-bytes 256K --iters 2 2>&1)
  rc=$?
  echo "$out"
  [ "$rc" = 0 ] || exit "$rc"
  header="algorithm auto -> hierarchical"
  [ "$algo" = native ] && header="algorithm native"
  echo "$out" | grep -q "^# artel bench comm: .*$header\$" || { echo "header lacks '$header'"; exit 1; }
  # Each row: size ... sent/rank ran
  echo "$out" | grep '^ ' | awk -v algo="$algo" '
    { n++; size = $1; sent = $(NF - 1); ran = $NF }
    algo == "auto" && (ran != "hierarchical" || sent != size / 2) { print "row " size ": ran " ran ", sent " sent; bad = 1 }
    algo == "native" && (ran != "native" || sent != "-") { print "row " size ": ran " ran ", sent " sent; bad = 1 }
    END { if (n != 3) { print n " rows, expected 3"; bad = 1 } exit bad }' || exit 1
done
