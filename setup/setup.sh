#!/usr/bin/env bash
# One-off setup of the secured stack (the `setup` and `kibana-objects` services of
# elk-compose.yml), docker-elk style: bash and curl in the Elasticsearch image, applying
# the JSON files committed under setup/roles/, elasticsearch/ and kibana/ (which
# `python -m hvdlog.elastic.generate` writes and tests/elastic/test_templates.py keeps current).
# Needs no package registry, runs as a non-root user, reads the CA certificate only.
#
#   setup.sh                 passwords, wait, roles, users, kibana_system, elasticsearch
#   setup.sh kibana          wait for Kibana, then import the saved objects in the shape its
#                            version imports (kibana/hvdlog-8.ndjson or -9, by kibana/shapes.txt)
#   setup.sh STEP...         only those steps (the tests run them one by one)
#
# Safe to re-run: every call creates or updates. Refuses empty, well-known and short
# passwords before it contacts anything. Never changes a password it did not create
# unless told to (SET_KIBANA_SYSTEM_PASSWORD=yes, SETUP_TAKE_OVER_USERS=yes).
set -euo pipefail

assets="${HVDLOG_ASSETS:-/assets}"
es_url="${ELASTICSEARCH_HOSTS:-https://elasticsearch:9200}"
es_url="${es_url%%,*}"
es_url="${es_url%/}"
ca="${ELASTICSEARCH_CA:-/certs/ca/ca.crt}"
namespace="${HVDLOG_NAMESPACE:-default}"
replicas="${HVDLOG_REPLICAS:-0}"
retention="${HVDLOG_RETENTION_DAYS:-14}"
wait_seconds="${SETUP_WAIT_SECONDS:-300}"
# The bundled node is the one this stack created: its built-in passwords are ours to set.
bundled_url="https://elasticsearch:9200"

log() { printf '==> %s\n' "$*" >&2; }
warn() { printf '!! %s\n' "$*" >&2; }
die() { printf 'xx %s\n' "$*" >&2; exit 2; }

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
chmod 700 "$work"

# --- passwords ------------------------------------------------------------------------
WELL_KNOWN=" changeme change_me changeit elastic elasticsearch kibana kibana_system logstash logstash_internal password passw0rd secret admin root 123456 12345678 123456789 qwerty letmein hvdlog horovod test "

step_passwords() {
  local name value lower problems=()
  for name in ELASTIC_PASSWORD KIBANA_SYSTEM_PASSWORD LOGSTASH_WRITER_PASSWORD HVDLOG_READER_PASSWORD; do
    value="${!name:-}"
    lower="$(printf '%s' "$value" | tr '[:upper:]' '[:lower:]' | tr -d '[:space:]')"
    if [ -z "$lower" ]; then
      problems+=("$name is empty: set it in .env")
    elif [[ "$WELL_KNOWN" == *" $lower "* ]]; then
      problems+=("$name is a well-known password: choose another in .env")
    elif [ "${#value}" -lt 12 ]; then
      problems+=("$name is shorter than 12 characters")
    fi
  done
  [[ "$namespace" =~ ^[a-z0-9_]{1,100}$ ]] || problems+=("HVDLOG_NAMESPACE '$namespace' is not valid: lower-case letters, digits and '_' only")
  [[ "$replicas" =~ ^[0-9]+$ ]] || problems+=("HVDLOG_REPLICAS must be a whole number, not '$replicas'")
  [[ "$retention" =~ ^[1-9][0-9]*$ ]] || problems+=("HVDLOG_RETENTION_DAYS must be a number of days, not '$retention'")
  if [ "${#problems[@]}" -gt 0 ]; then
    printf 'xx refusing to set up the stack:\n' >&2
    printf '   %s\n' "${problems[@]}" >&2
    exit 2
  fi
  log "passwords and settings accepted"
}

# --- HTTP -----------------------------------------------------------------------------
# Credentials go to curl in a config file (mode 600), never on its command line (ps).
auth_file() {
  local user="$1" password="$2" file="$work/auth-$1"
  password="${password//\\/\\\\}"
  printf 'user = "%s:%s"\n' "$user" "${password//\"/\\\"}" >"$file"
  printf '%s' "$file"
}

# http USER_FILE METHOD URL [BODY_FILE]: sets $status (000 = no answer), body in $work/response.
status=000
http() {
  local auth="$1" method="$2" url="$3" body="${4:-}" args=()
  [ -n "$body" ] && args=(--data-binary "@$body" -H 'Content-Type: application/json')
  status="$(curl -sS -o "$work/response" -w '%{http_code}' --cacert "$ca" -K "$auth" --max-time 60 \
    -X "$method" "${args[@]}" "$url" 2>"$work/curl-error")" || status=000
}

es() { http "$ELASTIC_AUTH" "$@"; }

# must WHAT: fail with the server's answer unless the last call succeeded.
must() {
  case "$status" in
    2??) return 0 ;;
    000) die "$1: no answer from $es_url ($(cat "$work/curl-error"))" ;;
    401) die "$1: Elasticsearch refused the elastic user (401). ELASTIC_PASSWORD only applies on the first start of an empty data volume; see docs/deploy.md, Troubleshooting" ;;
    *) die "$1 failed with HTTP $status: $(head -c 400 "$work/response")" ;;
  esac
}

# --- steps ----------------------------------------------------------------------------
# wait_for WHAT URL CHECK GIVE_UP_HINT: poll until the function CHECK succeeds (it may die),
# printing progress every 10 s, or give up after SETUP_WAIT_SECONDS with the last answer.
wait_for() {
  local what="$1" url="$2" check="$3" hint="$4" start=$SECONDS next=0
  while ! "$check"; do
    if ((SECONDS - start >= wait_seconds)); then
      die "$what at $url did not answer within ${wait_seconds} s (HTTP $status $(cat "$work/curl-error")): $hint"
    fi
    if ((SECONDS >= next)); then
      log "waiting for $what at $url ($((SECONDS - start)) s; HTTP $status $(head -c 120 "$work/curl-error"))"
      next=$((SECONDS + 10))
    fi
    sleep 3
  done
}

elasticsearch_answers() {
  es GET "$es_url/_security/_authenticate"
  [ "$status" = 401 ] && must "logging in as elastic"
  [ "$status" = 200 ]
}

kibana_available() {
  es GET "$kibana_url/api/status"
  [ "$status" = 401 ] && die "Kibana at $kibana_url refused the elastic user (401): check ELASTIC_PASSWORD"
  [ "$status" = 200 ] && grep -q '"level" *: *"available"' "$work/response"
}

step_wait() {
  [ -f "$ca" ] || die "the CA file $ca does not exist: check ELASTICSEARCH_CA"
  wait_for Elasticsearch "$es_url" elasticsearch_answers "is it running and healthy?"
  log "Elasticsearch at $es_url answers"
}

step_roles() {
  local file name
  for file in "$assets/roles/"*.json; do
    name="$(basename "$file" .json)"
    es PUT "$es_url/_security/role/$name" "$file"
    must "putting role $name"
    log "role $name"
  done
}

# A user we manage carries metadata.managed_by = hvdlog; one someone else made is left alone.
put_user() {
  local user="$1" password="$2" role="$3"
  es GET "$es_url/_security/user/$user"
  if [ "$status" = 200 ] && ! grep -q '"managed_by" *: *"hvdlog"' "$work/response"; then
    if [ "${SETUP_TAKE_OVER_USERS:-no}" != yes ]; then
      warn "user $user exists and was not created by hvdlog: left unchanged (its password and roles are not ours to change)."
      warn "  Give it the role $role and set its password in .env, or set SETUP_TAKE_OVER_USERS=yes to let setup reset it."
      return
    fi
    warn "user $user was not created by hvdlog: taking it over (SETUP_TAKE_OVER_USERS=yes)"
  fi
  [ "$status" = 200 ] || [ "$status" = 404 ] || must "reading user $user"
  USER_PASSWORD="$password" USER_ROLE="$role" json_user >"$work/user.json"
  es PUT "$es_url/_security/user/$user" "$work/user.json"
  must "putting user $user"
  log "user $user ($role)"
}

# The user body; the password is escaped for JSON.
json_user() {
  local password="${USER_PASSWORD//\\/\\\\}"
  password="${password//\"/\\\"}"
  printf '{"password": "%s", "roles": ["%s"], "metadata": {"managed_by": "hvdlog"}}\n' "$password" "$USER_ROLE"
}

step_users() {
  put_user hvdlog_logstash "$LOGSTASH_WRITER_PASSWORD" hvdlog_logstash_writer
  put_user hvdlog_reader "$HVDLOG_READER_PASSWORD" hvdlog_reader
}

# kibana_system is built in: on the bundled node this stack created it, elsewhere it may
# serve an existing Kibana. SET_KIBANA_SYSTEM_PASSWORD: auto (default: bundled node only),
# yes, no.
step_kibana_system() {
  local mode="${SET_KIBANA_SYSTEM_PASSWORD:-auto}"
  http "$(auth_file kibana_system "$KIBANA_SYSTEM_PASSWORD")" GET "$es_url/_security/_authenticate"
  if [ "$status" = 200 ]; then
    log "kibana_system already has KIBANA_SYSTEM_PASSWORD: unchanged"
    return
  fi
  if [ "$mode" = no ] || { [ "$mode" = auto ] && [ "$es_url" != "$bundled_url" ]; }; then
    warn "kibana_system's password on $es_url is not KIBANA_SYSTEM_PASSWORD, and setup leaves it unchanged on a cluster it did not create"
    warn "  (an existing Kibana there may use it). Put that cluster's kibana_system password in .env, or set"
    warn "  SET_KIBANA_SYSTEM_PASSWORD=yes to let setup change it. Until then our Kibana cannot log in."
    return
  fi
  USER_PASSWORD="$KIBANA_SYSTEM_PASSWORD" json_password >"$work/password.json"
  es POST "$es_url/_security/user/kibana_system/_password" "$work/password.json"
  must "setting the kibana_system password"
  log "password of kibana_system"
}

json_password() {
  local password="${USER_PASSWORD//\\/\\\\}"
  printf '{"password": "%s"}\n' "${password//\"/\\\"}"
}

# The committed templates carry the defaults (0 replicas, 14 days); .env's values replace them.
render() {
  sed -E -e "s/\"number_of_replicas\": \"[0-9]+\"/\"number_of_replicas\": \"$replicas\"/" \
    -e "s/\"min_age\": \"[0-9]+d\"/\"min_age\": \"${retention}d\"/" \
    -e "s/delete after [0-9]+ days/delete after $retention days/" "$1" >"$work/rendered.json"
  printf '%s' "$work/rendered.json"
}

# Endpoints a build without the module answers with 400/405 "no handler" or similar.
missing_api() { [ "$status" = 400 ] || [ "$status" = 405 ] || { [ "$status" = 404 ] && grep -q 'no handler found' "$work/response"; }; }

step_elasticsearch() {
  local file name has_ilm=yes dataset stream
  es GET "$es_url/_ilm/status"
  if missing_api; then
    has_ilm=no
    warn "this Elasticsearch has no ILM API: nothing deletes data after $retention days (ILM policy and hvdlog-lifecycle skipped)"
  else
    must "reading the ILM status"
    for file in "$assets/elasticsearch/ilm_policy/"*.json; do
      name="$(basename "$file" .json)"
      es PUT "$es_url/_ilm/policy/$name" "$(render "$file")"
      must "putting ILM policy $name"
      log "ILM policy $name (delete after $retention days)"
    done
  fi
  for file in "$assets/elasticsearch/component_template/"*.json; do
    name="$(basename "$file" .json)"
    if [ "$has_ilm" = no ] && grep -q '"lifecycle"' "$file"; then
      log "component template $name skipped (needs ILM)"
      continue
    fi
    es PUT "$es_url/_component_template/$name" "$(render "$file")"
    must "putting component template $name"
    log "component template $name"
  done
  for file in "$assets/elasticsearch/index_template/"*.json; do
    name="$(basename "$file" .json)"
    es PUT "$es_url/_index_template/$name" "$file"
    must "putting index template $name"
    log "index template $name"
  done
  while read -r dataset; do
    case "$dataset" in "" | "#"*) continue ;; esac  # the first line says the file is generated
    stream="logs-$dataset-$namespace"
    es PUT "$es_url/_data_stream/$stream"
    if [ "$status" = 400 ] && grep -q 'resource_already_exists_exception' "$work/response"; then
      log "data stream $stream (exists)"
    elif missing_api; then
      log "data stream $stream skipped (no data stream API here: the first write creates it from the template)"
    else
      must "creating data stream $stream"
      log "data stream $stream"
    fi
  done <"$assets/elasticsearch/datasets.txt"
}

# kibana_objects_file VERSION: the saved-object file for that Kibana version: the last row of
# kibana/shapes.txt (generated from hvdlog/elastic/kibana_versions.py) whose range holds it.
kibana_objects_file() {
  local major minor first last file chosen=""
  IFS=. read -r major minor _ <<<"${1%%-*}"
  minor="${minor:-0}"
  [[ "$major" =~ ^[0-9]+$ && "$minor" =~ ^[0-9]+$ ]] || return 1
  while read -r first last file; do
    case "$first" in '' | '#'*) continue ;; esac
    if ((major <= last && (major > ${first%%.*} || (major == ${first%%.*} && minor >= ${first#*.})))); then
      chosen="$file"
    fi
  done <"$assets/kibana/shapes.txt"
  [ -n "$chosen" ] && printf '%s\n' "$chosen"
}

step_kibana() {
  local version file
  kibana_url="${KIBANA_URL:?KIBANA_URL is empty: nothing to import the Kibana objects into}"
  kibana_url="${kibana_url%/}"
  ca="${KIBANA_CA:-$ca}"
  wait_for Kibana "$kibana_url" kibana_available "see docker compose logs kibana"
  version="$(grep -o '"number" *: *"[^"]*"' "$work/response" | head -n 1 | sed 's/.*"\([^"]*\)"$/\1/')" || true
  file="$(kibana_objects_file "$version")" \
    || die "Kibana ${version:-of unknown version} at $kibana_url is not supported: hvdlog's saved objects are for the versions in kibana/shapes.txt"
  log "Kibana $version: importing kibana/$file"
  status="$(curl -sS -o "$work/response" -w '%{http_code}' --cacert "$ca" -K "$ELASTIC_AUTH" --max-time 120 \
    -H 'kbn-xsrf: hvdlog' -F "file=@$assets/kibana/$file" "$kibana_url/api/saved_objects/_import?overwrite=true" 2>"$work/curl-error")" || status=000
  [ "$status" = 200 ] && grep -q '"success" *: *true' "$work/response" \
    || die "Kibana refused the saved-object import (HTTP $status): $(head -c 600 "$work/response")"
  log "Kibana objects imported: $(grep -o '"successCount" *: *[0-9]*' "$work/response")"
}

ELASTIC_AUTH="$(auth_file elastic "${ELASTIC_PASSWORD:-}")"
steps=("$@")
[ "${#steps[@]}" -gt 0 ] || steps=(passwords wait roles users kibana_system elasticsearch)
[ "${steps[*]}" = kibana ] && steps=(passwords kibana)
for step in "${steps[@]}"; do
  case "$step" in
    passwords | wait | roles | users | kibana_system | elasticsearch | kibana) "step_$step" ;;
    *) die "unknown step '$step' (passwords wait roles users kibana_system elasticsearch kibana)" ;;
  esac
done
log "done: ${steps[*]}"
