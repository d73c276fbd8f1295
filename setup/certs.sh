#!/usr/bin/env bash
# Creates the stack's CA and certificates with elasticsearch-certutil, once: the CA and
# every certificate that already exists are kept, so compute nodes that trust the CA keep
# working across re-runs. A server certificate is re-issued only when the names it must
# carry (HEAD_NODE_DNS / HEAD_NODE_IPS) change.
#
# Writes into $CERTS_DIR: ca/ca.crt, ca/ca.key, and <name>/<name>.crt|.key for
# elasticsearch, kibana, logstash (servers) and filebeat (the client certificate every
# compute node presents to Logstash). Runs in the Elasticsearch image (`certs` service of
# elk-compose.yml); ES_HOME points elsewhere to run it outside (the tests do).
set -euo pipefail

certs="${CERTS_DIR:?CERTS_DIR must name the directory for the certificates}"
certutil="${ES_HOME:-/usr/share/elasticsearch}/bin/elasticsearch-certutil"
days="${CERT_DAYS:-1095}"

log() { printf '==> %s\n' "$*" >&2; }
die() { printf 'xx %s\n' "$*" >&2; exit 2; }

[ -x "$certutil" ] || die "no elasticsearch-certutil at $certutil: run this in the Elasticsearch image or set ES_HOME"
command -v unzip >/dev/null || die "unzip is missing: it unpacks certutil's output"

# YAML list items for `dns:` / `ip:` from a comma-separated variable (blanks ignored).
yaml_items() {
  local item
  IFS=',' read -ra items <<<"$1"
  for item in "${items[@]}"; do
    item="${item// /}"
    [ -n "$item" ] && printf '      - "%s"\n' "$item"
  done
  return 0
}

# One certutil instance: its service name, localhost and the head node's names.
instance() {
  printf '  - name: %s\n    dns:\n      - %s\n      - localhost\n' "$1" "$1"
  yaml_items "${HEAD_NODE_DNS:-}"
  printf '    ip:\n      - "127.0.0.1"\n'
  yaml_items "${HEAD_NODE_IPS:-}"
}

mkdir -p "$certs"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

if [ ! -f "$certs/ca/ca.crt" ] || [ ! -f "$certs/ca/ca.key" ]; then
  log "creating the certificate authority"
  "$certutil" ca --silent --pem --days "$days" --out "$work/ca.zip" >&2
  unzip -q -o "$work/ca.zip" -d "$certs"
fi

{
  echo "instances:"
  for name in elasticsearch kibana logstash; do instance "$name"; done
  printf '  - name: filebeat\n'
} >"$work/instances.yml"

# Re-issue when the requested names changed or a certificate is missing.
if ! cmp -s "$work/instances.yml" "$certs/instances.yml" \
  || [ ! -f "$certs/elasticsearch/elasticsearch.crt" ] || [ ! -f "$certs/filebeat/filebeat.crt" ]; then
  log "issuing certificates for elasticsearch, kibana, logstash and filebeat"
  "$certutil" cert --silent --pem --days "$days" --in "$work/instances.yml" --out "$work/certs.zip" \
    --ca-cert "$certs/ca/ca.crt" --ca-key "$certs/ca/ca.key" >&2
  unzip -q -o "$work/certs.zip" -d "$certs"
  cp "$work/instances.yml" "$certs/instances.yml"
  # The beats input wants a PKCS#8 key; setup/provision.py writes it from the new key.
  rm -f "$certs/logstash/logstash.pkcs8.key"
fi

# Readable by the services' users, not others: Elasticsearch and Kibana run as uid 1000
# with group 0, Logstash as uid 1000 with its own group. The CA key stays root's: no
# service needs it.
chown -R 1000:0 "$certs" 2>/dev/null || true
find "$certs" -type d -exec chmod 750 {} +
find "$certs" -type f -exec chmod 640 {} +
chown 0:0 "$certs/ca/ca.key" 2>/dev/null || true
chmod 600 "$certs/ca/ca.key"
log "certificates ready in $certs (CA fingerprint: $(sha256sum <"$certs/ca/ca.crt" | cut -c1-16)...)"
