#!/bin/bash
# Prints the Secret the lws overlay needs, tandem-mpi-ssh, as YAML: a key pair
# the leaders' mpirun logs in to the worker pods with (authorized_keys allows
# commands only: no forwarding, no tty) and the worker pods' host key, pinned
# in known_hosts so that the leaders trust no other host. New keys each run.
# Usage: make-ssh-secret.sh | kubectl apply -n NAMESPACE -f -
# Needs ssh-keygen and kubectl (scripts/setup-k8s-venv.sh has one).
set -euo pipefail
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
ssh-keygen -q -t ed25519 -N '' -C tandem-mpi -f "$dir/id_ed25519"
ssh-keygen -q -t ed25519 -N '' -C tandem-mpi-host -f "$dir/host_ed25519"
printf 'restrict %s\n' "$(cat "$dir/id_ed25519.pub")" >"$dir/authorized_keys"
printf '* %s\n' "$(cat "$dir/host_ed25519.pub")" >"$dir/known_hosts"
kubectl create secret generic tandem-mpi-ssh --dry-run=client -o yaml \
  --from-file="$dir/id_ed25519" --from-file="$dir/known_hosts" \
  --from-file="$dir/host_ed25519" --from-file="$dir/authorized_keys"
