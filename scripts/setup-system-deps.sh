#!/usr/bin/env bash
# Debian packages the test tiers use: chromium (HTML sheet), postgresql (team store), openssh-server (SSH fan-out).
set -uo pipefail
need=()
command -v chromium >/dev/null 2>&1 || need+=(chromium)
ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || need+=(postgresql)
[ -x /usr/sbin/sshd ] || need+=(openssh-server)
[ ${#need[@]} -eq 0 ] && exit 0
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "cannot install ${need[*]}: not root or no apt-get" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null && apt-get install -y -qq "${need[@]}" >/dev/null
