#!/usr/bin/env bash
# One rank under `scripts/cluster.sh --ranks 1,1`: both ranks start, rank r on
# host r + 1, whatever the job's environment asks of mpirun. The test sets
# OMPI_MCA_plm=isolated, as NVIDIA's CUDA images do: under it mpirun once
# started only host 1's ranks, and said nothing.
set -euo pipefail
rank=${OMPI_COMM_WORLD_RANK:?run by mpirun}
[ "$OMPI_COMM_WORLD_SIZE" = 2 ] || { echo "$OMPI_COMM_WORLD_SIZE rank(s) started, not 2" >&2; exit 1; }
host=$(hostname)
[ "${host##*-h}" = $((rank + 1)) ] || { echo "rank $rank runs on $host, not on host $((rank + 1))" >&2; exit 1; }
