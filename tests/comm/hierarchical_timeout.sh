#!/bin/bash
# A rank that skips a hierarchical all-reduce on 3 hosts of 2, 1 and 2 ranks
# is named, and the job ends with an error instead of hanging:
#  - rank 4 skips: its host's other rank, 3, times out "waiting for rank(s)
#    [4]", the group's numbering, not the host's own "[1]";
#  - rank 2, the one-rank host's leader, skips: rank 0 waits inside MPI in
#    the ring across hosts, which MPI cannot cancel, and its watchdog names
#    the ring's ranks on either side of it, 3 and 2, then aborts the job.
# 77: no namespaces here.
# Usage: hierarchical_timeout.sh MPI_SUITE
suite=$1
cluster="$(dirname "$0")/../../scripts/cluster.sh"

# run MODE EXPECTED_LINE_REGEX WHAT
run() {
  out=$("$cluster" --ranks 2,1,2 --rate 1gbit -- "$suite" "$1" 2>&1)
  rc=$?
  echo "$out"
  [ "$rc" = 77 ] && exit 77
  [ "$rc" != 0 ] || { echo "$1: the job ended well; expected a timeout"; exit 1; }
  echo "$out" | grep -q "$2" || { echo "$1: $3"; exit 1; }
}

run --name-the-missing-rank \
  "^rank 3: all_reduce #[0-9]* in group 'world' timed out: waiting for rank(s) \[4\] which did not arrive" \
  "rank 3 did not name rank 4"
run --stuck-across-hosts \
  "^artel: rank 0: error: all_reduce #[0-9]* in group 'world' timed out: .*stuck inside MPI in the ring across hosts, between rank 3, which it receives from, and rank 2, which it sends to.*the job is aborted$" \
  "rank 0 did not name its ring neighbours 3 and 2"
