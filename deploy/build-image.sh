#!/usr/bin/env bash
# Builds tandem's container image without any registry: a Debian 12 root
# filesystem from debootstrap (minbase plus every runtime package the
# binaries need, with bookworm-updates and bookworm-security applied),
# imported with `podman import` as a local base image, then
# deploy/image/Containerfile built on it with `buildah bud --isolation chroot`.
# The binaries come from an existing build folder ("binaries in"); nothing is
# compiled here.
#
# The runtime packages are derived, not listed: `ldd` of the binaries, each
# library's owner from `dpkg -S` on this (the build) machine. Libraries no
# Debian package owns (the CUDA variant's cuBLAS from an NVIDIA toolkit) are
# copied into the image's /opt/tandem/lib; the CUDA driver (libcuda) never is:
# the NVIDIA container toolkit mounts the node's at run time. Open MPI
# (mpirun, for TP groups), OpenSSH (the lws overlay's cross-pod launch) and
# what scripts/fetch-model.sh runs (python3-pip,
# unzip, ca-certificates) are added. The root filesystem is cached as a
# tarball keyed by that package list (TANDEM_IMAGE_CACHE), so a rerun only
# repeats the buildah step, whose layers are cached too.
#
# Usage: deploy/build-image.sh [--variant cpu|cuda] [--build-dir DIR] [--tag IMAGE]
#   --variant    cpu (default) or cuda: the CUDA runtime libraries the
#                binaries link, NVIDIA_DRIVER_CAPABILITIES set (builds
#                without a GPU; its binaries must come from a
#                -DTANDEM_CUDA_RUNTIME=gpu build)
#   --build-dir  the build folder whose bin/ holds tandem-coordinator,
#                tandem-worker, tandem-draft and tandem (default: build/ for
#                cpu, build-gpu/ for cuda)
#   --tag        default localhost/tandem:0.1 (cpu), localhost/tandem-cuda:0.1
# Env: TANDEM_IMAGE_CACHE (default ~/.cache/tandem/image), DEBIAN_MIRROR,
#      DEBIAN_SECURITY_MIRROR (default deb.debian.org's).
# Needs root (debootstrap, rootful podman) and scripts/setup-image-deps.sh's
# packages. Prints the image name as its last line.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export CONTAINERS_CONF="$root/deploy/image/containers.conf"

variant=cpu
build_dir=""
tag=""
while [ $# -gt 0 ]; do
  case "$1" in
    --variant) variant="${2:?--variant needs a value}"; shift 2 ;;
    --variant=*) variant="${1#*=}"; shift ;;
    --build-dir) build_dir="${2:?--build-dir needs a value}"; shift 2 ;;
    --build-dir=*) build_dir="${1#*=}"; shift ;;
    --tag) tag="${2:?--tag needs a value}"; shift 2 ;;
    --tag=*) tag="${1#*=}"; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "build-image: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
case "$variant" in
  cpu) build_dir="${build_dir:-$root/build}"; tag="${tag:-localhost/tandem:0.1}" ;;
  cuda) build_dir="${build_dir:-$root/build-gpu}"; tag="${tag:-localhost/tandem-cuda:0.1}" ;;
  *) echo "build-image: --variant '$variant' is neither cpu nor cuda" >&2; exit 2 ;;
esac
bin_dir="$build_dir/bin"
cache="${TANDEM_IMAGE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tandem/image}"
mirror="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
security_mirror="${DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}"
suite=bookworm
# Bump when the root filesystem recipe below changes (invalidates the cache).
recipe=3

log() { echo "build-image: $*" >&2; }
die() { log "$*"; exit 1; }

for tool in debootstrap podman buildah ldd dpkg-query; do
  command -v "$tool" >/dev/null ||
    die "'$tool' not found; install the image tools with scripts/setup-image-deps.sh"
done
[ "$(id -u)" -eq 0 ] || die "needs root (debootstrap, rootful podman); running as uid $(id -u)"

BINARIES=(tandem-coordinator tandem-worker tandem-draft tandem)
for b in "${BINARIES[@]}"; do
  [ -x "$bin_dir/$b" ] ||
    die "'$bin_dir/$b' is missing; build it first (cmake --build $build_dir --target ${BINARIES[*]})"
done

# The build context: stripped binaries, foreign libraries, the fetch script.
context="$(mktemp -d "${TMPDIR:-/tmp}/tandem-image.XXXXXX")"
rootfs=""
cleanup() {
  rm -rf "$context"
  if [ -n "$rootfs" ]; then
    # An interrupted debootstrap may leave /proc or /sys mounted inside.
    awk -v r="$rootfs/" 'index($2, r) == 1 {print $2}' /proc/mounts | sort -r |
      xargs -r -n1 umount -l || true
    rm -rf --one-file-system "$rootfs"
  fi
}
trap cleanup EXIT
mkdir -p "$context/bin" "$context/lib" "$context/scripts"
for b in "${BINARIES[@]}"; do
  if command -v strip >/dev/null; then
    strip --strip-debug -o "$context/bin/$b" "$bin_dir/$b"
  else
    cp "$bin_dir/$b" "$context/bin/$b"
  fi
  # The source's time, so that unchanged binaries hit buildah's layer cache.
  touch -r "$bin_dir/$b" "$context/bin/$b"
done
cp -p "$root/scripts/fetch-model.sh" "$context/scripts/fetch-model.sh"

ldd_out="$(ldd "${context}"/bin/*)"
if grep -q "not found" <<<"$ldd_out"; then
  die "unresolved libraries in $bin_dir:" \
    "$(grep 'not found' <<<"$ldd_out" | sort -u | tr -s '\t\n' '  ')"
fi
mapfile -t libs < <(awk '/=> \// {print $3} /^\t\/[^ ]*ld-linux/ {print $1}' <<<"$ldd_out" |
  sort -u)

# Each library's owning package. dpkg may have recorded a file under /lib or
# /usr/lib (merged /usr), or under its symlink's target: every spelling is
# asked, all in one dpkg-query call (one call per path takes seconds).
candidates_of() {
  local real
  real="$(readlink -f "$1")"
  printf '%s\n' "$1" "$real" "${1#/usr}" "/usr${1#/usr}" "${real#/usr}" "/usr${real#/usr}"
}
declare -A owner=()
mapfile -t asked < <(for lib in "${libs[@]}"; do candidates_of "$lib"; done | sort -u)
# Lines "pkg[:arch][, pkg2...]: /path"; the first owner counts.
while IFS= read -r line; do
  case "$line" in diversion*) continue ;; esac
  owner["${line#*: }"]="$(cut -d: -f1 <<<"${line%%,*}")"
done < <(dpkg-query -S "${asked[@]}" 2>/dev/null || true)

packages=(openmpi-bin openssh-client openssh-server python3 python3-pip unzip ca-certificates passwd)
cuda_libs=()
for lib in "${libs[@]}"; do
  pkg=""
  while read -r c; do
    if [ -n "${owner[$c]:-}" ]; then pkg="${owner[$c]}"; break; fi
  done < <(candidates_of "$lib")
  if [ -n "$pkg" ]; then
    packages+=("$pkg")
    continue
  fi
  name="$(basename "$lib")"
  case "$name" in
    libcuda.so*|libnvidia-*) continue ;;  # the driver: the node's, mounted at run time
  esac
  cp -L "$lib" "$context/lib/$name"
  touch -r "$lib" "$context/lib/$name"
  case "$name" in libcu*|libnccl*|libnv*) cuda_libs+=("$name") ;; esac
  log "no Debian package owns $lib: copied into /opt/tandem/lib"
done
mapfile -t packages < <(printf '%s\n' "${packages[@]}" | sort -u)

if [ "$variant" = cuda ]; then
  [ ${#cuda_libs[@]} -gt 0 ] || die "--variant cuda, but no binary in $bin_dir links a CUDA" \
    "library (libcublas...): build it with -DTANDEM_CUDA_RUNTIME=gpu"
  for b in "${BINARIES[@]}"; do
    grep -q libcublas <<<"$(ldd "$context/bin/$b")" ||
      log "warning: $bin_dir/$b links no CUDA library: its --device=cuda is the CPU emulation"
  done
elif [ ${#cuda_libs[@]} -gt 0 ]; then
  log "warning: --variant cpu with CUDA libraries (${cuda_libs[*]}):" \
    "use --variant cuda for a GPU build"
fi

# Components: non-free too when a package comes from there (Debian's CUDA
# runtime libraries do).
components=main
for p in "${packages[@]}"; do
  if dpkg-query -W -f='${Section}\n' "$p" 2>/dev/null | grep -q '^non-free'; then
    components=main,non-free
  fi
done

key="$(printf '%s\n' "recipe=$recipe" "$suite" "$components" "$mirror" "$security_mirror" \
  "${packages[@]}" | sha256sum | cut -c1-16)"
base="localhost/tandem-base:$key"
tarball="$cache/$suite-$key.tar"
mkdir -p "$cache"

if [ ! -f "$tarball" ]; then
  log "debootstrap $suite (minbase + ${#packages[@]} packages: ${packages[*]})"
  rootfs="$(mktemp -d "$cache/rootfs.XXXXXX")"
  debootstrap --variant=minbase --components="$components" \
    --include="$(IFS=,; echo "${packages[*]}")" "$suite" "$rootfs" "$mirror" >&2
  # Point-release and security updates (debootstrap takes one suite only).
  cat >"$rootfs/etc/apt/sources.list" <<EOF
deb $mirror $suite ${components//,/ }
deb $mirror $suite-updates ${components//,/ }
deb $security_mirror $suite-security ${components//,/ }
EOF
  # (apt runs as root here: its _apt sandbox user cannot write the cache.)
  apt=(apt-get -qq -o APT::Sandbox::User=root)
  chroot "$rootfs" "${apt[@]}" update >&2
  chroot "$rootfs" env DEBIAN_FRONTEND=noninteractive "${apt[@]}" -y \
    -o Dpkg::Options::=--force-confold upgrade >&2
  chroot "$rootfs" apt-get clean
  # Lean: no package lists, caches, logs, manuals or docs (copyrights stay);
  # the container runtime provides resolv.conf and hostname.
  rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/*.bin "$rootfs"/var/log/* \
    "$rootfs"/usr/share/man "$rootfs"/usr/share/info "$rootfs"/usr/share/locale \
    "$rootfs"/etc/resolv.conf "$rootfs"/etc/hostname "$rootfs"/tmp/* "$rootfs"/root/.cache
  find "$rootfs/usr/share/doc" -mindepth 1 -not -name copyright -not -type d -delete
  find "$rootfs/usr/share/doc" -mindepth 1 -type d -empty -delete
  tar --numeric-owner --xattrs -C "$rootfs" -cf "$tarball.tmp" .
  mv "$tarball.tmp" "$tarball"
  rm -rf --one-file-system "$rootfs"
  rootfs=""
  log "cached the root filesystem in $tarball ($(du -h "$tarball" | cut -f1))"
fi

if ! podman image exists "$base"; then
  log "podman import $tarball as $base"
  podman import --quiet "$tarball" "$base" >/dev/null
fi

log "buildah bud ($variant) → $tag"
# --pull=never: the base is local and nothing may come from a registry. (No
# step needs the network; chroot isolation cannot take --network=none.)
buildah bud --isolation chroot --layers --pull=never \
  --build-arg "BASE=$base" --build-arg "VARIANT=$variant" \
  -f "$root/deploy/image/Containerfile" -t "$tag" "$context" >&2
# Drop what earlier builds left untagged (their final images and the cached
# layers only they used); the label confines this to tandem's images.
podman image prune --force --filter label=org.opencontainers.image.title=tandem >/dev/null
echo "$tag"
