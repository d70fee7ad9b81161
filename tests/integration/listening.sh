# wait_listening tcp://H:P | tls://H:P | unix:///PATH : until something listens there
# (at most 5 s); false when nothing does. Sourced by functions.sh and stream_lib.sh.
wait_listening() {
  local uri=$1 i
  for i in $(seq 1 100); do
    case $uri in
      unix://*) [ -S "${uri#unix://}" ] && return 0 ;;
      *) ss -Hltn "sport = :${uri##*:}" | grep -q . && return 0 ;;
    esac
    sleep 0.05
  done
  echo "nothing listens on $uri" >&2
  return 1
}
