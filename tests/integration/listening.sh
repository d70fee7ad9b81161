# wait_listening tcp://H:P | tls://H:P | unix:///PATH [PID] : until something listens
# there (at most 10 s); false when nothing does, or at once when PID exits first. It looks
# (ss, the socket file) rather than connecting: a --once server would take a probe for
# its one transfer. Sourced by functions.sh, stream_lib.sh and nbd_server_lib.sh.
wait_listening() {
  local uri=$1 pid=${2:-} i
  for i in $(seq 1 200); do
    case $uri in
      unix://*) [ -S "${uri#unix://}" ] && return 0 ;;
      *) ss -Hltn "sport = :${uri##*:}" | grep -q . && return 0 ;;
    esac
    if [ -n "$pid" ] && ! kill -0 "$pid" 2>/dev/null; then
      echo "the server exited before listening on $uri" >&2
      return 1
    fi
    sleep 0.05
  done
  echo "nothing listens on $uri" >&2
  return 1
}
