#!/bin/bash
# A rank that skips a hierarchical all-reduce on 3 hosts of 2, 1 and 2 ranks
# is named by the group's numbering: its host's other rank times out
# "waiting for rank(s) [4]", not the host's own "[1]", and the job ends with
# an error instead of hanging. 77: no namespaces here.
# Usage: hierarchical_timeout.sh MPI_SUITE
suite=$1
cluster="$(dirname "$0")/../../scripts/cluster.sh"
out=$("$cluster" --ranks 2,1,2 --rate 1gbit -- "$suite" --name-the-missing-rank 2>&1)
rc=$?
echo "$out"
[ "$rc" = 77 ] && exit 77
[ "$rc" != 0 ] || { echo "the job ended well; expected rank 3's timeout"; exit 1; }
echo "$out" | grep -q "^rank 3: all_reduce #[0-9]* in group 'world' timed out: waiting for rank(s) \[4\] which did not arrive" ||
  { echo "rank 3 did not name rank 4"; exit 1; }
