#!/bin/bash
# A worker pod of a tandem worker group spread over several pods (the
# LeaderWorkerSet overlay): an sshd through which the leader's mpirun starts
# this pod's Open MPI daemon (orted) and, through it, this pod's rank(s) —
# see launch-group.sh. Only the key in the tandem-mpi-ssh Secret logs in; it
# runs as the pod's own (non-root) user, on $TANDEM_MPI_PORT (2222).
set -euo pipefail
keys=/etc/tandem-mpi-ssh
# sshd refuses a host key that others may read if it is the user's own;
# Secret files' modes depend on the pod's fsGroup, so use a 0600 copy. For
# the same reason StrictModes is off: the Secret's directories may be group
# writable, and its files are read-only to this pod anyway.
install -d -m 0700 /tmp/ssh
install -m 0600 "$keys/host_ed25519" /tmp/ssh/host_ed25519
exec /usr/sbin/sshd -D -e -f /dev/null -p "${TANDEM_MPI_PORT:-2222}" \
  -o HostKey=/tmp/ssh/host_ed25519 -o AuthorizedKeysFile="$keys/authorized_keys" \
  -o PidFile=/tmp/ssh/sshd.pid -o StrictModes=no -o UsePAM=no \
  -o PasswordAuthentication=no -o KbdInteractiveAuthentication=no -o PermitRootLogin=no \
  -o AllowTcpForwarding=no -o AllowAgentForwarding=no -o X11Forwarding=no -o PermitTTY=no \
  -o PrintMotd=no
