#!/usr/bin/env bash
# Make the Dockerfile's base image, python:3.11-slim-bookworm, available to the local Docker
# daemon: pulled when a registry is reachable, else built from Debian packages (bookworm's
# python3 is 3.11) with mmdebstrap and imported under the same tag, so the Dockerfile stays
# as it is for everyone else. tests/deploy/test_docker.py calls it; usable by hand too:
#
#   bash deploy/docker/base-image.sh [--refresh] [TAG]     # TAG: python:3.11-slim-bookworm
#
# The stand-in behaves like the real image for our Dockerfile: `python` on PATH, `python -m
# venv` (python3-venv), pip (python3-pip, for the build stage), apt sources, ca-certificates,
# LANG=C.UTF-8. Its root filesystem tarball is cached (CHAZBOT_DOCKER_CACHE, default
# ~/.cache/chazbot/docker) and reused on later runs; --refresh makes it again (new security
# updates). Needs root and the mmdebstrap package when it has to build.
set -euo pipefail

refresh=0
if [ "${1:-}" = "--refresh" ]; then refresh=1; shift; fi
TAG="${1:-python:3.11-slim-bookworm}"
SUITE=bookworm
MIRROR="${CHAZBOT_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
SECURITY="${CHAZBOT_DEBIAN_SECURITY:-http://deb.debian.org/debian-security}"
PACKAGES=python3,python3-venv,python3-pip,python-is-python3,ca-certificates,netbase,tzdata
CACHE="${CHAZBOT_DOCKER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/chazbot/docker}"
# The host's own extra CA certificates (a TLS-inspecting proxy in front of PyPI, say) are
# trusted in the stand-in too, or pip in the build stage could not reach the index.
EXTRA_CAS=/usr/local/share/ca-certificates
cas="$(cat "$EXTRA_CAS"/*.crt 2>/dev/null || true)"
# The name changes with what goes in, so an edit of this script never reuses an old tarball.
recipe_id="$(printf '%s\n' "$SUITE" "$MIRROR" "$SECURITY" "$PACKAGES" "$cas" v3 \
    | sha256sum | cut -c1-12)"
TARBALL="$CACHE/debian-$SUITE-python3-$recipe_id.tar"

if [ "$refresh" = 0 ] && docker image inspect "$TAG" >/dev/null 2>&1; then
    echo "base image $TAG: present"
    exit 0
fi
if [ "$refresh" = 0 ] && docker pull -q "$TAG" >/dev/null 2>&1; then
    echo "base image $TAG: pulled"
    exit 0
fi
if [ "$refresh" = 1 ] || [ ! -s "$TARBALL" ]; then
    command -v mmdebstrap >/dev/null || {
        echo "cannot pull $TAG and mmdebstrap is missing (apt-get install mmdebstrap)" >&2
        exit 1
    }
    mkdir -p "$CACHE"
    partial="$TARBALL.$$.part"
    trap 'rm -f "$partial"' EXIT
    # minbase + Python; no documentation or man pages (as in Debian's own slim images),
    # but the copyright files stay. The merged-usr hook sets up merged /usr as debootstrap
    # does, instead of the usrmerge package (which brings 46 MB of perl). mmdebstrap leaves
    # no apt lists or package cache behind.
    mmdebstrap --quiet --format=tar --variant=minbase --include="$PACKAGES" \
        --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr \
        --dpkgopt='path-exclude=/usr/share/man/*' \
        --dpkgopt='path-exclude=/usr/share/doc/*' \
        --dpkgopt='path-include=/usr/share/doc/*/copyright' \
        --dpkgopt='path-exclude=/usr/share/locale/*' \
        --customize-hook='rm -rf "$1"/usr/lib/python3.11/test "$1"/var/log/*.log' \
        --customize-hook="if ls $EXTRA_CAS/*.crt >/dev/null 2>&1; then
            cp $EXTRA_CAS/*.crt \"\$1\"$EXTRA_CAS/ && chroot \"\$1\" update-ca-certificates >/dev/null 2>&1; fi" \
        "$SUITE" "$partial" \
        "deb $MIRROR $SUITE main" \
        "deb $MIRROR $SUITE-updates main" \
        "deb $SECURITY $SUITE-security main"
    mv "$partial" "$TARBALL"
    trap - EXIT
    find "$CACHE" -maxdepth 1 -name 'debian-*.tar' ! -name "${TARBALL##*/}" -delete
    echo "base image tarball: built $TARBALL ($(du -h "$TARBALL" | cut -f1))"
else
    echo "base image tarball: cached $TARBALL"
fi
previous="$(docker image inspect --format '{{.Id}}' "$TAG" 2>/dev/null || true)"
docker import \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV LANG=C.UTF-8' \
    --change 'LABEL org.chazbot.base="python3 from Debian packages (deploy/docker/base-image.sh)"' \
    --change 'CMD ["python3"]' \
    "$TARBALL" "$TAG" >/dev/null
# The image this tag named before (--refresh) would be left untagged: remove it if unused.
if [ -n "$previous" ] && [ "$previous" != "$(docker image inspect --format '{{.Id}}' "$TAG")" ]; then
    docker image rm "$previous" >/dev/null 2>&1 || true
fi
echo "base image $TAG: imported from Debian packages"
