#!/usr/bin/env bash
# A private nginx for the benchmarks: serves DIR on http://127.0.0.1:PORT (HTTP/1.1, keep-alive, sendfile, no access
# log) and, unless TLS_PORT=0, the same DIR over HTTPS + HTTP/2 on 127.0.0.1:TLS_PORT (default PORT+1) with a
# throw-away self-signed certificate. Stock static serving: Range, ETag, Last-Modified, If-None-Match, and
# If-Modified-Since answered 304 when the file is not newer (as S3, Apache and CDNs do; nginx's default is an exact
# match).
#
#   server.sh start DIR PORT      fails when PORT (or TLS_PORT) is taken
#   server.sh stop [DIR] PORT     stops the nginx this script started for PORT
#   server.sh status [DIR] PORT   exit 0 while it runs
#
# Env: NGINX (binary; default nginx on PATH, else /usr/sbin/nginx), NGINX_WORKERS (auto), TLS_PORT,
# BENCH_STATE (default ${TMPDIR:-/tmp}/haul-bench-nginx-<uid>-<port>): configuration, pid file, cert.pem, error log
# and temporary folders all live there, and stop removes it. Only the pid in that pid file is ever signalled.
set -euo pipefail
HARNESS=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
usage() { awk 'NR > 1 && !/^#/ {exit} NR > 1 {sub(/^# ?/, ""); print}' "$0" >&2; exit 2; }
[ $# -ge 2 ] || usage
command=$1; shift
case $command in
  start) [ $# -eq 2 ] || usage; DIR=$1 PORT=$2 ;;
  stop|status) PORT=${!#} ;;
  *) usage ;;
esac
[[ $PORT =~ ^[0-9]+$ ]] || { echo "server.sh: bad port '$PORT'" >&2; exit 2; }
STATE=${BENCH_STATE:-${TMPDIR:-/tmp}/haul-bench-nginx-$(id -u)-$PORT}
PIDFILE=$STATE/nginx.pid

running() { [ -s "$PIDFILE" ] && kill -0 "$(cat "$PIDFILE")" 2>/dev/null; }
listening() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

case $command in
  status)
    if running; then echo "running, pid $(cat "$PIDFILE"), state in $STATE"; exit 0; fi
    echo "not running"; exit 1 ;;
  stop)
    if running; then
      pid=$(cat "$PIDFILE")
      kill -QUIT "$pid"
      for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      ! kill -0 "$pid" 2>/dev/null || { kill -TERM "$pid"; sleep 0.5; }
      echo "server.sh: stopped nginx pid $pid (port $PORT)"
    else
      echo "server.sh: nothing running for port $PORT"
    fi
    rm -rf "$STATE"
    exit 0 ;;
esac

# shellcheck source=tools.sh
. "$HARNESS/tools.sh"
TLS_PORT=${TLS_PORT:-$((PORT + 1))}
if [ "$TLS_PORT" = 0 ]; then bench_tools nginx; else bench_tools nginx -- openssl; fi
NGINX=${NGINX:-$(command -v nginx || echo /usr/sbin/nginx)}
[ -d "$DIR" ] || { echo "server.sh: no such folder: $DIR" >&2; exit 1; }
DIR=$(cd "$DIR" && pwd)
if running; then echo "server.sh: already running for port $PORT (pid $(cat "$PIDFILE"))" >&2; exit 1; fi
[ "$TLS_PORT" = 0 ] || command -v openssl >/dev/null || { echo "server.sh: no openssl, no TLS listener" >&2; TLS_PORT=0; }
for port in "$PORT" "$TLS_PORT"; do
  [ "$port" = 0 ] || ! listening "$port" || { echo "server.sh: port $port is already in use" >&2; exit 1; }
done

rm -rf "$STATE"
mkdir -p "$STATE/tmp"
tls=""
if [ "$TLS_PORT" != 0 ]; then
  openssl req -x509 -newkey rsa:2048 -nodes -days 30 -subj "/CN=127.0.0.1" \
    -addext "subjectAltName=IP:127.0.0.1,DNS:localhost" \
    -keyout "$STATE/key.pem" -out "$STATE/cert.pem" >/dev/null 2>&1
  tls="
    server {
        listen 127.0.0.1:$TLS_PORT ssl http2;
        ssl_certificate     $STATE/cert.pem;
        ssl_certificate_key $STATE/key.pem;
        ssl_protocols TLSv1.2 TLSv1.3;
        root $DIR;
    }"
fi
# As root, nginx's workers would run as nobody, who may not be able to read DIR.
cat > "$STATE/nginx.conf" <<CONF
$([ "$(id -u)" = 0 ] && echo "user root;")
worker_processes ${NGINX_WORKERS:-auto};
pid $PIDFILE;
error_log $STATE/error.log warn;
events { worker_connections 4096; }
http {
    access_log off;
    sendfile on;
    tcp_nopush on;
    tcp_nodelay on;
    keepalive_timeout 75s;
    keepalive_requests 1000000;     # also the cap on requests per HTTP/2 connection
    if_modified_since before;
    default_type application/octet-stream;
    types { }
    client_body_temp_path $STATE/tmp/body;
    proxy_temp_path       $STATE/tmp/proxy;
    fastcgi_temp_path     $STATE/tmp/fastcgi;
    uwsgi_temp_path       $STATE/tmp/uwsgi;
    scgi_temp_path        $STATE/tmp/scgi;
    server {
        listen 127.0.0.1:$PORT;
        root $DIR;
    }$tls
}
CONF
"$NGINX" -p "$STATE" -e "$STATE/error.log" -c "$STATE/nginx.conf" -t -q
"$NGINX" -p "$STATE" -e "$STATE/error.log" -c "$STATE/nginx.conf"
for _ in $(seq 50); do listening "$PORT" && break; sleep 0.1; done
listening "$PORT" || { echo "server.sh: nginx did not come up; see $STATE/error.log" >&2; exit 1; }
echo "server.sh: nginx pid $(cat "$PIDFILE") serves $DIR on http://127.0.0.1:$PORT/$(
  [ "$TLS_PORT" = 0 ] || echo " and https://127.0.0.1:$TLS_PORT/ (HTTP/2, self-signed: $STATE/cert.pem)")"
