#!/usr/bin/env bash
# Creates the stack's certificate authorities and certificates with elasticsearch-certutil,
# keeping everything that exists, and says what it did for each file.
#
#   certs.sh                       CAs, the three server certificates, and a client
#                                  certificate per node in FILEBEAT_NODES (comma-separated)
#   certs.sh filebeat NODE...      also a client certificate for each NODE (one command for
#                                  a whole cluster: `docker compose run --rm certs filebeat n1 n2`)
#
# Rules (an operator's own CA and certificates are kept exactly):
# - A CA certificate is never replaced, with or without its key. A CA is created only when
#   neither its certificate nor its key exists. A CA certificate without its key can still
#   serve: nothing is issued from it, and a missing certificate is then an error.
# - A certificate is never re-issued while it and its key exist, except one this script
#   issued whose names (HEAD_NODE_DNS / HEAD_NODE_IPS) changed since. Deleting a service's
#   folder re-issues exactly that service.
#
# Layout of $CERTS_DIR (elk-compose.yml mounts each service only its own folder and the CA
# certificates it needs; the CA keys stay with this one-off):
#   ca/ca.crt                         stack CA: signs the servers' certificates; trusted by all
#   ca-key/ca.key                     its key (root only)
#   filebeat-ca/ca.crt                client CA: signs Filebeat certificates only; Logstash
#                                     accepts client certificates from this CA alone
#   filebeat-ca-key/ca.key            its key (root only)
#   elasticsearch/ kibana/ logstash/  <name>.crt, <name>.key (+ logstash.pkcs8.key, which
#                                     the beats input needs)
#   filebeat/<node>/                  filebeat.crt (CN = the node's name), filebeat.key and
#                                     ca.crt: the folder to copy to that node
#
# CERT_DAYS: validity of new CAs and certificates (default 1095). Runs in the Elasticsearch
# image (`certs` service); ES_HOME points elsewhere to run it outside (the tests do).
set -euo pipefail

certs="${CERTS_DIR:?CERTS_DIR must name the directory for the certificates}"
certutil="${ES_HOME:-/usr/share/elasticsearch}/bin/elasticsearch-certutil"
days="${CERT_DAYS:-1095}"
SERVICES=(elasticsearch kibana logstash)

log() { printf '==> %s\n' "$*" >&2; }
die() { printf 'xx %s\n' "$*" >&2; exit 2; }

[[ "$days" =~ ^[1-9][0-9]*$ ]] || die "CERT_DAYS must be a number of days, not '$days'"
[ -x "$certutil" ] || die "no elasticsearch-certutil at $certutil: run this in the Elasticsearch image or set ES_HOME"
command -v unzip >/dev/null || die "unzip is missing: it unpacks certutil's output"

nodes=()
if [ "${1:-}" = "filebeat" ]; then
  shift
  [ "$#" -gt 0 ] || die "usage: certs.sh filebeat NODE..."
  nodes+=("$@")
elif [ "$#" -gt 0 ]; then
  die "usage: certs.sh [filebeat NODE...]"
fi
IFS=',' read -ra listed <<<"${FILEBEAT_NODES:-}"
for node in "${listed[@]}"; do
  node="${node// /}"
  [ -n "$node" ] && nodes+=("$node")
done
for node in "${nodes[@]}"; do
  # A host name: it becomes a folder name and the certificate's CN.
  [[ "$node" =~ ^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$ ]] || die "'$node' is not a node name (letters, digits, '.', '_', '-')"
done

mkdir -p "$certs"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# Older layouts kept the CA key beside its certificate, which every service mounts.
if [ -f "$certs/ca/ca.key" ] && [ ! -f "$certs/ca-key/ca.key" ]; then
  mkdir -p "$certs/ca-key"
  mv "$certs/ca/ca.key" "$certs/ca-key/ca.key"
  log "moved ca/ca.key to ca-key/ca.key (services no longer see the CA key)"
fi

# ensure_ca DIR KEYDIR LABEL: create the CA in DIR/ca.crt + KEYDIR/ca.key only when neither exists.
ensure_ca() {
  local dir="$1" keydir="$2" label="$3"
  if [ -f "$certs/$dir/ca.crt" ]; then
    if [ -f "$certs/$keydir/ca.key" ]; then
      log "kept $label $dir/ca.crt"
    else
      log "kept $label $dir/ca.crt (no $keydir/ca.key: nothing can be issued from it here)"
    fi
    return
  fi
  [ ! -f "$certs/$keydir/ca.key" ] || die "$keydir/ca.key exists without $dir/ca.crt: put the CA certificate back (a new CA would not match the key)"
  "$certutil" ca --silent --pem --days "$days" --out "$work/$dir.zip" >&2
  rm -rf "$work/ca" && unzip -q -o "$work/$dir.zip" -d "$work"
  mkdir -p "$certs/$dir" "$certs/$keydir"
  mv "$work/ca/ca.crt" "$certs/$dir/ca.crt"
  mv "$work/ca/ca.key" "$certs/$keydir/ca.key"
  log "created $label $dir/ca.crt (valid $days days)"
}

ensure_ca ca ca-key "certificate authority"
ensure_ca filebeat-ca filebeat-ca-key "Filebeat client certificate authority"

# YAML list items for `dns:` / `ip:` from a comma-separated variable (blanks ignored).
yaml_items() {
  local item items
  IFS=',' read -ra items <<<"$1"
  for item in "${items[@]}"; do
    item="${item// /}"
    [ -n "$item" ] && printf '      - "%s"\n' "$item"
  done
  return 0
}

# One server instance: its service name, localhost and the head node's names.
server_instance() {
  printf '  - name: %s\n    dns:\n      - %s\n      - localhost\n' "$1" "$1"
  yaml_items "${HEAD_NODE_DNS:-}"
  printf '    ip:\n      - "127.0.0.1"\n'
  yaml_items "${HEAD_NODE_IPS:-}"
}

# issue CA_DIR CA_KEYDIR WHAT INSTANCES_YAML: one certutil run for every certificate in
# INSTANCES_YAML, unpacked into $work/out/<name>/<name>.crt|.key.
issue() {
  local ca_dir="$1" ca_keydir="$2" what="$3"
  [ -f "$certs/$ca_keydir/ca.key" ] || die "$what need(s) a certificate, but $ca_keydir/ca.key is missing: $ca_dir/ca.crt is kept as it is, so put its key there, or put the certificate and key of $what in place yourself"
  printf 'instances:\n%s\n' "$4" >"$work/instances.yml"
  rm -rf "$work/out" "$work/certs.zip"
  "$certutil" cert --silent --pem --days "$days" --in "$work/instances.yml" --out "$work/certs.zip" \
    --ca-cert "$certs/$ca_dir/ca.crt" --ca-key "$certs/$ca_keydir/ca.key" >&2
  mkdir -p "$work/out" && unzip -q -o "$work/certs.zip" -d "$work/out"
}

issued=()
servers=() server_yaml=""
for name in "${SERVICES[@]}"; do
  dir="$certs/$name"
  wanted="$(server_instance "$name")"
  if [ -f "$dir/$name.crt" ] && [ -f "$dir/$name.key" ]; then
    if [ -f "$dir/.issued-for" ] && [ "$(cat "$dir/.issued-for")" != "$wanted" ]; then
      log "re-issuing $name/$name.crt: HEAD_NODE_DNS / HEAD_NODE_IPS changed"
    else
      log "kept $name/$name.crt"
      continue
    fi
  fi
  servers+=("$name")
  server_yaml+="$wanted"$'\n'
done
if [ "${#servers[@]}" -gt 0 ]; then
  issue ca ca-key "${servers[*]}" "$server_yaml"
  for name in "${servers[@]}"; do
    dir="$certs/$name"
    mkdir -p "$dir"
    mv "$work/out/$name/$name.crt" "$work/out/$name/$name.key" "$dir/"
    server_instance "$name" >"$dir/.issued-for"
    rm -f "$dir/$name.pkcs8.key"
    issued+=("$name")
    log "issued $name/$name.crt (valid $days days)"
  done
fi

new_nodes=() node_yaml=""
for node in "${nodes[@]}"; do
  dir="$certs/filebeat/$node"
  if [ -f "$dir/filebeat.crt" ] && [ -f "$dir/filebeat.key" ]; then
    log "kept filebeat/$node/filebeat.crt"
  elif [[ " ${new_nodes[*]} " != *" $node "* ]]; then
    new_nodes+=("$node")
    node_yaml+="$(printf '  - name: "%s"\n    dns:\n      - "%s"' "$node" "$node")"$'\n'
  fi
done
if [ "${#new_nodes[@]}" -gt 0 ]; then
  issue filebeat-ca filebeat-ca-key "filebeat ${new_nodes[*]}" "$node_yaml"
  for node in "${new_nodes[@]}"; do
    dir="$certs/filebeat/$node"
    mkdir -p "$dir"
    mv "$work/out/$node/$node.crt" "$dir/filebeat.crt"
    mv "$work/out/$node/$node.key" "$dir/filebeat.key"
    issued+=("filebeat/$node")
    log "issued filebeat/$node/filebeat.crt for node $node (CN=$node, valid $days days)"
  done
fi
for node in "${nodes[@]}"; do
  # What the node needs besides its own pair: the CA that signed Logstash's certificate.
  cp "$certs/ca/ca.crt" "$certs/filebeat/$node/ca.crt"
done

# The beats input refuses PKCS#1 keys (certutil's): wrap the RSA key into PKCS#8. That is
# a lossless re-framing (SEQUENCE { 0, rsaEncryption, OCTET STRING(pkcs1) }), so no
# openssl is needed (the Elasticsearch image has none).
der_length() {
  local n="$1"
  if ((n < 128)); then printf '%02x' "$n"
  elif ((n < 256)); then printf '81%02x' "$n"
  else printf '82%04x' "$n"; fi
}
pkcs8_from() {
  local key="$1" hex body
  if grep -q -- '-----BEGIN PRIVATE KEY-----' "$key"; then
    cat "$key"
    return
  fi
  grep -q -- '-----BEGIN RSA PRIVATE KEY-----' "$key" || die "$key is neither a PKCS#8 nor an unencrypted RSA key: the beats input cannot use it"
  hex="$(sed '/-----/d' "$key" | base64 -d | od -An -v -tx1 | tr -d ' \n')"
  body="020100300d06092a864886f70d010101050004$(der_length $((${#hex} / 2)))$hex"
  hex="30$(der_length $((${#body} / 2)))$body"
  printf -- '-----BEGIN PRIVATE KEY-----\n'
  printf '%b' "$(sed 's/../\\x&/g' <<<"$hex")" | base64 -w 64
  printf -- '-----END PRIVATE KEY-----\n'
}
if [ -f "$certs/logstash/logstash.key" ] && [ ! -f "$certs/logstash/logstash.pkcs8.key" ]; then
  pkcs8_from "$certs/logstash/logstash.key" >"$work/logstash.pkcs8.key"
  mv "$work/logstash.pkcs8.key" "$certs/logstash/logstash.pkcs8.key"
  log "wrote logstash/logstash.pkcs8.key (PKCS#8, for the beats input)"
fi

# Owners: the services run as uid 1000 (Elasticsearch and Kibana with group 0, Logstash
# with its own group), so their folders are 1000's; CA keys are root's alone. Each
# service mounts only its folder and the CA certificates (elk-compose.yml).
chown -R 1000:0 "$certs" 2>/dev/null || true
find "$certs" -type d -exec chmod 750 {} +
find "$certs" -type f -exec chmod 640 {} +
for keydir in ca-key filebeat-ca-key; do
  if [ -d "$certs/$keydir" ]; then
    chown -R 0:0 "$certs/$keydir" 2>/dev/null || true
    chmod 700 "$certs/$keydir"
    find "$certs/$keydir" -type f -exec chmod 600 {} +
  fi
done
[ -f "$certs/ca/ca.crt" ] || die "no ca/ca.crt"
fingerprint="$(sha256sum <"$certs/ca/ca.crt" | cut -c1-16)"
if [ "${#issued[@]}" -eq 0 ]; then
  log "certificates ready in $certs: nothing issued, everything kept (CA fingerprint: $fingerprint...)"
else
  log "certificates ready in $certs: issued ${issued[*]} (CA fingerprint: $fingerprint...)"
fi
