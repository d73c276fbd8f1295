#!/usr/bin/env bash
# Makes sure a JDK (javac) is present: the grok tests compile tests/support/grok/GrokHarness.java
# against the Elasticsearch grok jars. Idempotent; prints nothing on stdout.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

if [ -n "${JAVA_HOME:-}" ] && [ -x "$JAVA_HOME/bin/javac" ]; then exit 0; fi
command -v javac >/dev/null && exit 0
ensure_debs openjdk-17-jdk-headless
