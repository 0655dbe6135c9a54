#!/bin/sh
# Installs the Debian packages Labstream builds, tests and demos with. Idempotent: does nothing
# when every package is already installed. Uses sudo when not root.
set -eu
PACKAGES="pkg-config libfuse3-dev fuse3 libcurl4-openssl-dev libsqlite3-dev libssl-dev libxxhash-dev libwebsockets-dev libmpv-dev ffmpeg mpv attr python3 samba smbclient groff-base chromium chromium-driver python3-selenium"
missing=""
for p in $PACKAGES; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
echo "Installing:$missing"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing
