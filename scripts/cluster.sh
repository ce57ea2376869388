#!/usr/bin/env bash
# A cluster of K "hosts" on this one machine, for multi-host runs: each host
# is a network namespace with its own hostname (a UTS namespace per process
# started in it) and one link to a switch (a bridge in a namespace of its
# own), the link limited to a rate with tc's token bucket (tbf) in both
# directions. OpenMPI starts its daemons through an rsh agent that runs them
# inside their host, so `mpirun -H <host ips>` runs real OpenMPI over real TCP
# between the hosts. Traffic never leaves the namespaces this run made, and
# they are removed when it ends, however it ends.
#
#   scripts/cluster.sh --ranks 2,2 --rate 1gbit -- ./build/artel_mpi_suite
#   scripts/cluster.sh --ranks 2,1,2 --rate 10gbit -- ./build/artel bench comm --backend mpi
#   scripts/cluster.sh --ranks 2,2 --own-cores -- ./build/artel train --backend mpi
#
# The hosts share this machine's cores unless --own-cores gives each host
# cores of its own (this process's CPUs split evenly, by affinity): a host's
# ranks then run only there, and a host with nothing to do leaves its cores
# idle instead of lending them to another host, as separate machines would.
#
# The command runs under `mpirun -H 10.N.0.1:r1,10.N.0.2:r2,...` started
# inside host 1 (so its ranks start locally, the others through the agent),
# with the job's environment. Exit status: the command's; 77 (ctest's skip)
# when this machine does not permit network namespaces, said in one line.
# Runs on one machine take turns (a lock in $TMPDIR or /tmp): a second waits,
# saying so, until the first has ended.
set -euo pipefail

usage() {
  echo "usage: scripts/cluster.sh --ranks R1,R2[,...] [--rate RATE] [--mpirun-args \"...\"] -- COMMAND [ARGS...]" >&2
  echo "  --ranks    ranks on each host (one number per host), e.g. 2,2 or 2,1,2" >&2
  echo "  --rate     each host's link, both directions: NUMBER kbit, mbit or gbit (default 1gbit; 'none' = unlimited)" >&2
  echo "  --own-cores  each host runs on cores of its own: this process's CPUs split evenly over the hosts" >&2
  exit 2
}

ranks="" rate="1gbit" extra="" own_cores=0
while (($#)); do
  case "$1" in
    --ranks) ranks=${2:-}; shift 2 ;;
    --rate) rate=${2:-}; shift 2 ;;
    --mpirun-args) extra=${2:-}; shift 2 ;;
    --own-cores) own_cores=1; shift ;;
    --) shift; break ;;
    *) usage ;;
  esac
done
(($#)) || usage
[[ $ranks =~ ^[1-9][0-9]*(,[1-9][0-9]*)*$ ]] || { echo "cluster.sh: --ranks takes counts like 2,2, got '$ranks'" >&2; exit 2; }
IFS=, read -r -a per_host <<<"$ranks"
hosts=${#per_host[@]}

# The token bucket's depth: 8 ms of the rate. tbf needs rate/HZ at the least
# (4 ms at HZ 250) to reach the rate at all; a deeper bucket lets a burst
# after a pause leave at the veth's own speed, which no real link of that
# rate does (a fixed 4 MB let each of W2's 3 MB gradient all-reduces cross
# a 1 Gbit/s link almost free).
burst_bytes=0
if [ "$rate" != none ]; then
  [[ $rate =~ ^([1-9][0-9]*)(kbit|mbit|gbit)$ ]] ||
    { echo "cluster.sh: --rate takes a number of kbit, mbit or gbit (1gbit, 100mbit) or none, got '$rate'" >&2; exit 2; }
  case ${BASH_REMATCH[2]} in kbit) unit=1000 ;; mbit) unit=1000000 ;; gbit) unit=1000000000 ;; esac
  burst_bytes=$((BASH_REMATCH[1] * unit / 1000))  # bits/s over 8 bits a byte, times 8 ms
  ((burst_bytes >= 65536)) || burst_bytes=65536
fi

# --own-cores: host i's CPUs, "0" or "2,3", in ARTEL_CLUSTER_CORES as "0;1" (host 1's;host 2's).
cores_of_hosts=""
if ((own_cores)); then
  cpus=()
  IFS=, read -r -a spans <<<"$(awk '/^Cpus_allowed_list/ {print $2}' /proc/self/status)"
  for span in "${spans[@]}"; do
    for ((c = ${span%-*}; c <= ${span#*-}; c++)); do cpus+=("$c"); done
  done
  per=$((${#cpus[@]} / hosts))
  ((per >= 1)) || { echo "cluster.sh: --own-cores needs a CPU per host: $hosts hosts, ${#cpus[@]} CPUs" >&2; exit 2; }
  for ((i = 0; i < hosts; i++)); do
    list=$(IFS=,; echo "${cpus[*]:$((i * per)):$per}")
    cores_of_hosts+="${cores_of_hosts:+;}$list"
  done
fi

if [ "$(id -u)" != 0 ] || ! ip netns add "artel-probe-$$" 2>/dev/null; then
  echo "cluster.sh: skipped: this machine does not permit network namespaces (needs root and CAP_NET_ADMIN)" >&2
  exit 77
fi
ip netns del "artel-probe-$$"

# One cluster at a time on this machine. Two at once (9 ranks on CI's 2
# cores) now and then left a rank's TCP connect timing out inside OpenMPI
# ("failed to TCP connect ... Operation now in progress", open-mpi/ompi#11508)
# and the run hung until its timeout: seen in ctest -j2, where two tests'
# clusters overlapped. Hosts that share cores measure nothing apart anyway.
exec {lock}>"${TMPDIR:-/tmp}/artel-cluster.lock"
if ! flock -n "$lock"; then
  echo "cluster.sh: waiting for another cluster run on this machine to end" >&2
  flock "$lock"
fi

# Namespaces left by a run that was killed outright (SIGKILL skips its teardown): its pid is gone.
for ns in $(ip netns list | awk '/^artel-[0-9]+-/ {print $1}'); do
  pid=${ns#artel-}
  pid=${pid%%-*}
  if ! kill -0 "$pid" 2>/dev/null; then
    ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
    ip netns del "$ns" 2>/dev/null || true
  fi
done
# And OpenMPI's shared-memory segments of such a run's hosts (teardown's rm below).
for seg in /dev/shm/vader_segment.artel-[0-9]*-h*; do
  [ -e "$seg" ] || continue
  pid=${seg#/dev/shm/vader_segment.artel-}
  pid=${pid%%-*}
  kill -0 "$pid" 2>/dev/null || rm -f "$seg"
done

# Names unique to this run: namespaces artel-<pid>-{sw,h1,h2,...}, subnet 10.<N>.0.0/24.
tag="artel-$$"
net="10.$((100 + $$ % 100))"
switch="$tag-sw"
here=$(cd "$(dirname "$0")" && pwd)
agent="$here/cluster_agent.sh"

teardown() {
  local ns
  for ns in $(ip netns list 2>/dev/null | awk -v t="$tag-" 'index($1, t) == 1 {print $1}'); do
    ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
    ip netns del "$ns" 2>/dev/null || true
  done
  # OpenMPI's shared-memory transport names its segments by hostname; a
  # rank killed above never unlinks its own.
  rm -f /dev/shm/vader_segment."$tag"-h*
}
trap teardown EXIT
trap 'exit 130' INT TERM

limit() {  # limit NS DEV: the link's rate on DEV's egress in NS
  [ "$rate" = none ] && return 0
  # latency bounds the queue.
  ip netns exec "$1" tc qdisc add dev "$2" root tbf rate "$rate" burst "$burst_bytes" latency 100ms
}

ip netns add "$switch"
ip netns exec "$switch" ip link add br0 type bridge
ip netns exec "$switch" ip link set br0 up
ip netns exec "$switch" ip link set lo up
hostlist=""
for ((i = 1; i <= hosts; i++)); do
  ns="$tag-h$i"
  ip netns add "$ns"
  ip link add "a$$h$i" netns "$ns" type veth peer name "s$$h$i" netns "$switch"
  ip netns exec "$ns" ip link set "a$$h$i" name eth0
  ip netns exec "$ns" ip addr add "$net.0.$i/24" dev eth0
  ip netns exec "$ns" ip link set eth0 up
  ip netns exec "$ns" ip link set lo up
  ip netns exec "$switch" ip link set "s$$h$i" master br0
  ip netns exec "$switch" ip link set "s$$h$i" up
  limit "$ns" eth0            # host -> switch
  limit "$switch" "s$$h$i"    # switch -> host
  hostlist+="${hostlist:+,}$net.0.$i:${per_host[$((i - 1))]}"
done

echo "cluster.sh: $hosts hosts ($ranks ranks), links $rate, subnet $net.0.0/24${cores_of_hosts:+, cores $cores_of_hosts}:" \
  "mpirun -H $hostlist" >&2
# A host's ranks may share its cores, so a rank waiting in MPI yields its
# core (mpirun counts only the slots of -H, not the cores under them).
# With --own-cores, mpirun binds nothing: each host's ranks keep the
# affinity their host was started with (host 1 here, the others by the agent).
pin=()
if [ -n "$cores_of_hosts" ]; then
  pin=(taskset -c "${cores_of_hosts%%;*}")
  extra="--bind-to none $extra"
fi
# mpirun itself runs in host 1 (its ranks start locally); the agent finds a
# host's namespace by its address: artel-<pid>-h<last octet>. A host is
# entered with nsenter, not `ip netns exec`, which would mount a /sys of its
# own without the cgroup hierarchies: with nsenter, cgroup limits work inside
# a host (`artel launch --cpus-per-worker` under mpirun).
export ARTEL_CLUSTER_TAG="$tag" ARTEL_CLUSTER_NET="$net" ARTEL_CLUSTER_RATE="$rate" ARTEL_CLUSTER_CORES="$cores_of_hosts"
# The daemons start through the agent whatever the job's environment says:
# NVIDIA's CUDA images set OMPI_MCA_plm=isolated, under which mpirun started
# only host 1's ranks, silently (seen on a 16-core device machine).
# Connections are made in MPI_Init (mpi_preconnect_mpi), not at a pair's
# first message: the hosts share this machine's cores, and a connection made
# while a training step keeps them busy can time out (OpenMPI then warns
# "failed to TCP connect ... Operation now in progress" and the message is
# lost; open-mpi/ompi#11508).
# shellcheck disable=SC2086
${pin[@]+"${pin[@]}"} nsenter --net="/run/netns/$tag-h1" unshare --uts sh -c 'hostname "$0" && exec "$@"' "$tag-h1" \
  mpirun --allow-run-as-root -H "$hostlist" \
  --mca plm rsh --mca plm_rsh_agent "$agent" --mca plm_rsh_no_tree_spawn 1 \
  --mca btl self,vader,tcp --mca btl_tcp_if_include eth0 --mca oob_tcp_if_include eth0 \
  --mca mpi_yield_when_idle 1 --mca mpi_preconnect_mpi 1 \
  -x ARTEL_CLUSTER_TAG -x ARTEL_CLUSTER_NET -x ARTEL_CLUSTER_RATE -x ARTEL_CLUSTER_CORES $extra "$@" {lock}>&-
