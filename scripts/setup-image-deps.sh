#!/usr/bin/env bash
# Installs what deploy/build-image.sh and the image smoke test need on Debian
# 12, from Debian's packages: debootstrap (the base root filesystem), buildah
# (the build), podman (import, run) and runc (the OCI runtime that
# deploy/image/containers.conf selects). Idempotent: when everything is
# present it only checks and returns. Needs root (or sudo) to install.
# Usage: scripts/setup-image-deps.sh
set -euo pipefail

PACKAGES=(debootstrap buildah podman runc conmon uidmap golang-github-containers-common)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup-image-deps: all ${#PACKAGES[@]} packages present"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if ! sudo -n true 2>/dev/null; then
    echo "setup-image-deps: missing ${missing[*]} and neither root nor passwordless sudo" >&2
    exit 1
  fi
  SUDO="sudo -n"
fi
echo "setup-image-deps: installing ${missing[*]}"
$SUDO apt-get update -qq
# runc is listed explicitly so that it, not crun, satisfies podman's
# "crun | runc"; recommends (fuse-overlayfs, slirp4netns, ...) serve rootless
# use and are left out.
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "setup-image-deps: done"
