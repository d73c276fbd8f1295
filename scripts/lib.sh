# Shared helpers for the setup scripts: one cache root, versions pinned in one place,
# and log lines that say which step is running (sourced, not executed).

# Versions that key every cache entry; change one and its cache is rebuilt.
PYTHON_BIN="${PYTHON:-python3}"
TORCH_VERSION="${HVDLOG_TORCH_VERSION:-2.15.0}"
HOROVOD_VERSION="0.28.1"
ELASTICSEARCH_VERSION="8.19.21"
# The current major beside it: every Elasticsearch test runs on both. 9.2.0 is the newest
# 9.x integ-test-zip Maven Central serves (9.5.6 is not there); it needs a JDK 21+.
ELASTICSEARCH9_VERSION="9.2.0"
MUSTACHE_VERSION="v0.5.3"
JRUBY_VERSION="9.4.13.0"  # the JRuby line Logstash 8.19 embeds (tests run its ruby filter)

# Caches live outside the clone so a fresh clone (CI) reuses them.
HVDLOG_CACHE="${HVDLOG_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/hvdlog}"
command -v "$PYTHON_BIN" >/dev/null || { printf 'xx no Python at %s: install Python 3.10+ or set PYTHON\n' "$PYTHON_BIN" >&2; exit 2; }
PY_TAG="$("$PYTHON_BIN" -c 'import sys; print(f"py{sys.version_info[0]}.{sys.version_info[1]}")')"
VENV="${HVDLOG_VENV:-$HVDLOG_CACHE/venv-$PY_TAG-torch$TORCH_VERSION}"
REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

log() { printf '\033[1m==>\033[0m %s\n' "$*" >&2; }
sublog() { printf '    %s\n' "$*" >&2; }
err() { printf '\033[31mxx\033[0m %s\n' "$*" >&2; }
die() { err "$*"; exit 2; }

# Runs a command as root, through sudo when we are not root.
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

# Installs Debian packages that are missing (apt-get update only when needed).
ensure_debs() {
  local missing=()
  for pkg in "$@"; do dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg"); done
  [ ${#missing[@]} -eq 0 ] && return 0
  command -v apt-get >/dev/null || die "missing packages ${missing[*]} and no apt-get: install them by hand"
  log "installing Debian packages: ${missing[*]}"
  as_root apt-get update -qq || die "apt-get update failed: is a Debian mirror reachable?"
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq "${missing[@]}" >/dev/null \
    || die "apt-get install ${missing[*]} failed"
}
