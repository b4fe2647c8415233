# Sourced by the scripts that need a web server for a folder (examples/run.sh, release.sh and the shell tests).
#
# serve_folder FOLDER [REQUEST-LOG]: serves FOLDER over HTTP on 127.0.0.1 (python3 -m http.server), on a port the
# kernel picks when the server binds, so that nothing can take it between choosing and listening. Sets `server`
# (its pid: the caller stops it) and `port`. Each request is logged to REQUEST-LOG (default: nowhere).
serve_folder() {
  local banner
  banner=$(mktemp)
  python3 -u -m http.server --bind 127.0.0.1 --directory "$1" 0 >"$banner" 2>"${2:-/dev/null}" &
  server=$!
  port=""
  for _ in $(seq 100); do
    port=$(sed -n 's/^Serving HTTP on [^ ]* port \([0-9]*\).*/\1/p' "$banner")
    [ -n "$port" ] && break
    sleep 0.1
  done
  rm -f "$banner"
  [ -n "$port" ] || { echo "could not serve $1 on 127.0.0.1" >&2; return 1; }
}
