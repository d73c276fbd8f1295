#!/usr/bin/env bash
# Prints the home of a JDK 21 or newer on stdout: Elasticsearch 9 refuses Java 17, the JDK
# the rest of the tests use. Looks, in order, at $HVDLOG_ES9_JAVA_HOME, $JAVA_HOME and
# /usr/lib/jvm/* (the polyglot machine image ships Temurin 25 there); else installs
# Debian's openjdk-25 or openjdk-21 where the mirror has one (bookworm has neither).
# Idempotent; installs nothing when a JDK 21+ is already there.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

# The feature release of the JDK at $1 (e.g. 17, 21, 25), or 0 when it is none.
java_major() {
  [ -x "$1/bin/java" ] || { echo 0; return; }
  "$1/bin/java" -XshowSettings:properties -version 2>&1 \
    | sed -n 's/^ *java\.specification\.version = \([0-9]*\).*/\1/p' | head -1
}

pick() {
  local home best="" best_major=0 major
  for home in "${HVDLOG_ES9_JAVA_HOME:-}" "${JAVA_HOME:-}" /usr/lib/jvm/*; do
    [ -n "$home" ] && [ -d "$home" ] || continue
    home="$(cd "$home" && pwd -P)"
    major="$(java_major "$home")"
    if [ "${major:-0}" -ge 21 ] && [ "$major" -gt "$best_major" ]; then best="$home"; best_major="$major"; fi
  done
  [ -n "$best" ] && echo "$best"
}

if home="$(pick)"; then echo "$home"; exit 0; fi
command -v apt-get >/dev/null || die "no JDK 21+ found (Elasticsearch 9 needs one): install one and set HVDLOG_ES9_JAVA_HOME"
as_root apt-get update -qq || die "apt-get update failed: is a Debian mirror reachable?"
for pkg in openjdk-25-jdk-headless openjdk-21-jdk-headless; do
  if [ -n "$(apt-cache policy "$pkg" 2>/dev/null | sed -n 's/^ *Candidate: \(.*\)/\1/p' | grep -v '(none)')" ]; then
    ensure_debs "$pkg"
    home="$(pick)" && { echo "$home"; exit 0; }
  fi
done
die "no JDK 21+ found and the Debian mirror offers none (Elasticsearch 9 needs one): install one and set HVDLOG_ES9_JAVA_HOME"
