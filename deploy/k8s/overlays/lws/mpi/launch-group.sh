#!/bin/bash
# The leader pod of a tandem worker group spread over several pods (the
# LeaderWorkerSet overlay): starts the group's one MPI world and becomes its
# mpirun (exec), so that SIGTERM to the pod reaches every rank.
#
#   launch-group.sh tandem-worker [worker flags...]
#
# How the ranks in different pods join one world: this mpirun is the world's
# launcher (Open MPI's HNP). Rank 0 runs here, in this pod, and serves gRPC.
# For every worker pod, mpirun runs `$TANDEM_MPI_AGENT <pod> orted ...`
# (ssh into the pod's sshd, started by rank-sshd.sh): the pod's Open MPI
# daemon, which dials back to this mpirun over TCP, receives the job and
# starts that pod's rank(s). MPI traffic then runs rank to rank over TCP
# (btl tcp); the tandem-worker binary is unchanged — under mpirun it is one
# rank of the world, exactly as with `mpirun -np N` on one machine.
#
# Environment:
#   LWS_LEADER_ADDRESS, LWS_GROUP_SIZE  set by LeaderWorkerSet on every pod;
#                       worker i (1..size-1) is <leader pod>-<i>.<its domain>
#   TANDEM_MPI_HOSTS    the worker pods' addresses, comma-separated, instead
#                       of deriving them from the two above
#   TANDEM_MPI_SELF     this pod in the host list (localhost)
#   TANDEM_MPI_SLOTS    ranks per pod (1)
#   TANDEM_MPI_PORT     the workers' sshd port, waited for (2222)
#   TANDEM_MPI_AGENT    the remote shell (ssh with the keys and known hosts of
#                       the tandem-mpi-ssh Secret; see deploy/k8s/README.md)
#   TANDEM_MPI_EXPORT   names of variables every rank gets (-x), e.g. NCCL_*
#   TANDEM_MPI_WAIT_S   seconds to wait for every worker's sshd (600)
# Open MPI settings in the environment (OMPI_MCA_*) reach every pod's daemon.
set -euo pipefail

die() { echo "launch-group.sh: $*" >&2; exit 1; }

[ $# -ge 1 ] || die "usage: launch-group.sh PROGRAM [ARGS...]"
program="$(command -v "$1")" || die "$1 is not on PATH"
shift

# The worker pods, one address per line.
worker_hosts() {
  if [ -n "${TANDEM_MPI_HOSTS:-}" ]; then
    tr ',' '\n' <<<"$TANDEM_MPI_HOSTS"
    return
  fi
  : "${LWS_LEADER_ADDRESS:?neither TANDEM_MPI_HOSTS nor LWS_LEADER_ADDRESS is set}"
  : "${LWS_GROUP_SIZE:?LWS_GROUP_SIZE is not set}"
  local leader="${LWS_LEADER_ADDRESS%%.*}" domain="${LWS_LEADER_ADDRESS#*.}" i
  for ((i = 1; i < LWS_GROUP_SIZE; i++)); do echo "$leader-$i.$domain"; done
}

# Waits until every worker pod's sshd accepts a connection: the pods of a
# group start together, and mpirun gives up on the first daemon it cannot
# start.
wait_for_workers() {
  local port="${TANDEM_MPI_PORT:-2222}" deadline=$((SECONDS + ${TANDEM_MPI_WAIT_S:-600})) h
  for h in "$@"; do
    until timeout 2 bash -c "exec 3<>/dev/tcp/$h/$port" 2>/dev/null; do
      ((SECONDS < deadline)) || die "worker $h:$port did not answer within ${TANDEM_MPI_WAIT_S:-600} s"
      sleep 1
    done
  done
}

mapfile -t workers < <(worker_hosts | sed '/^$/d')
slots="${TANDEM_MPI_SLOTS:-1}"
hosts="${TANDEM_MPI_SELF:-localhost}:$slots"
for h in "${workers[@]}"; do hosts+=",$h:$slots"; done
np=$(((${#workers[@]} + 1) * slots))
wait_for_workers "${workers[@]}"

# Ranks of one pod talk through shared memory, ranks of different pods
# through TCP; no other transport (InfiniBand verbs, ...) is probed.
btl="tcp,self"
((slots == 1)) || btl="tcp,vader,self"
exports=()
for name in ${TANDEM_MPI_EXPORT:-}; do
  if [ -n "${!name+set}" ]; then exports+=(-x "$name"); fi
done
agent="${TANDEM_MPI_AGENT:-}"
if [ -z "$agent" ]; then
  # ssh refuses a private key that others may read if it is the user's own;
  # Secret files' modes depend on the pod's fsGroup, so use a 0600 copy.
  install -d -m 0700 /tmp/ssh
  install -m 0600 /etc/tandem-mpi-ssh/id_ed25519 /tmp/ssh/id_ed25519
  agent="ssh -F /dev/null -p ${TANDEM_MPI_PORT:-2222} -i /tmp/ssh/id_ed25519 -o BatchMode=yes"
  agent+=" -o StrictHostKeyChecking=yes -o UserKnownHostsFile=/etc/tandem-mpi-ssh/known_hosts"
  agent+=" -o LogLevel=ERROR"
fi

echo "launch-group.sh: $np ranks on $hosts" >&2
# --bind-to none: each rank runs a thread pool over its pod's CPUs.
# plm_rsh_no_tree_spawn: only this pod starts daemons (the workers hold no
# client key). btl_vader_single_copy_mechanism none: cross-process memory
# copies need ptrace rights a restricted pod lacks.
exec mpirun -np "$np" --host "$hosts" --map-by slot --bind-to none \
  --mca plm_rsh_agent "$agent" --mca plm_rsh_no_tree_spawn 1 \
  --mca btl "$btl" --mca btl_vader_single_copy_mechanism none \
  "${exports[@]}" "$program" "$@"
