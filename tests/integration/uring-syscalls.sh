#!/bin/bash
# The data path runs on io_uring: under strace, a copy shows io_uring_enter, no
# readiness loop (epoll/poll/select) at all, and no read/write-family system call on
# the image files.
#
# What exactly is asserted, and why:
#  - io_uring_enter: at least one per wave of requests (256 MiB / 2 MiB requests /
#    depth 8 = 16 waves). Fewer would mean the data moved some other way.
#  - epoll_*, poll, ppoll, select, pselect6: none, anywhere in the run. Asio is built
#    with ASIO_DISABLE_EPOLL, so its reactor and timers are on the ring too; any of
#    these would be a second event loop.
#  - read, write, pread64, pwrite64, readv, writev, preadv(2), pwritev(2), sendfile,
#    copy_file_range, splice: none on a descriptor of either image (strace -y names the
#    file behind each descriptor, dup()s included). The dynamic loader's reads of
#    shared libraries are allowed, so the total bytes moved by these calls on any
#    descriptor must stay under 1 MiB, far below the 256 MiB image: data cannot be
#    flowing through some descriptor the name check would miss.
#  - with --lanes 2, io_uring_enter from two threads at least: each lane has its ring.
#  fallocate, fdatasync, lseek(SEEK_DATA/SEEK_HOLE) and fstat are synchronous but touch
#  metadata only, never the payload; they are not checked.
. "$(dirname "$0")/functions.sh"
requires strace

random_file "$scratch/src.img" 256M

data_calls=read,write,pread64,pwrite64,readv,writev,preadv,pwritev,preadv2,pwritev2,sendfile,copy_file_range,splice
loop_calls=epoll_create,epoll_create1,epoll_ctl,epoll_wait,epoll_pwait,epoll_pwait2,poll,ppoll,select,pselect6

# check_trace TRACE IMAGE...: the assertions above on one strace log.
check_trace() {
  "$PYTHON" - "$@" <<'EOF'
import os, re, sys
trace, images = sys.argv[1], sys.argv[2:]
data_calls = {"read", "write", "pread64", "pwrite64", "readv", "writev", "preadv", "pwritev",
              "preadv2", "pwritev2", "sendfile", "copy_file_range", "splice"}
loop_calls = {"epoll_create", "epoll_create1", "epoll_ctl", "epoll_wait", "epoll_pwait",
              "epoll_pwait2", "poll", "ppoll", "select", "pselect6"}
name_re = re.compile(r"^\d+\s+(?:<\.\.\. )?(\w+)(?:\(| resumed>)")
result_re = re.compile(r"\)\s+=\s+(-?\d+)")
enters, moved, problems = 0, 0, []
for line in open(trace):
    m = name_re.match(line)
    if not m:
        continue
    call = m.group(1)
    resumed = " resumed>" in line[:80]
    if call == "io_uring_enter" and not resumed:
        enters += 1
    elif call in loop_calls:
        problems.append("event loop call: " + line.strip())
    elif call in data_calls:
        if not resumed and any(f"<{image}>" in line for image in images):
            problems.append("data call on an image: " + line.strip()[:200])
        r = result_re.search(line)
        if r and int(r.group(1)) > 0:
            moved += int(r.group(1))
min_threads = int(os.environ.get("MIN_RING_THREADS", "1"))
threads = {line.split()[0] for line in open(trace) if name_re.match(line) and name_re.match(line).group(1) == "io_uring_enter"}
if len(threads) < min_threads:
    problems.append(f"io_uring_enter from {len(threads)} threads, expected at least {min_threads}")
if enters < 16:
    problems.append(f"only {enters} io_uring_enter calls")
if moved >= 1 << 20:
    problems.append(f"{moved} bytes moved by read/write-family calls")
print(f"io_uring_enter: {enters}; bytes through read/write-family calls: {moved}")
for p in problems[:20]:
    print("  " + p)
sys.exit(1 if problems else 0)
EOF
}

# run_traced IMAGE... -- sluice copy arguments
run_traced() {
  local images=()
  while [[ $1 != -- ]]; do
    images+=("$1")
    shift
  done
  shift
  under_strace -f -y -qq -e trace="io_uring_setup,io_uring_enter,$data_calls,$loop_calls" \
    -o "$scratch/trace" -- "$SLUICE" copy "$@" >/dev/null 2>"$scratch/stderr" ||
    fail "sluice copy $* under strace failed: $(cat "$scratch/stderr")"
  check_trace "$scratch/trace" "${images[@]}" || fail "sluice copy $*: not on the io_uring data path"
}

log "file -> file"
run_traced "$scratch/src.img" "$scratch/dst.img" -- "$scratch/src.img" "$scratch/dst.img"
same_content "$scratch/src.img" "$scratch/dst.img"

log "file -> file, O_DIRECT"
rm -f "$scratch/dst.img"
run_traced "$scratch/src.img" "$scratch/dst.img" -- --direct "$scratch/src.img" "$scratch/dst.img"
same_content "$scratch/src.img" "$scratch/dst.img"

log "file -> null:"
run_traced "$scratch/src.img" -- --lanes 1 "$scratch/src.img" null:
# The thread count check can fail: one lane is one ring.
if MIN_RING_THREADS=2 check_trace "$scratch/trace" "$scratch/src.img" >/dev/null; then
  fail "the ring-thread check passes for one lane, so it proves nothing"
fi

log "file -> null: in two lanes, each reading through its own thread's ring"
MIN_RING_THREADS=2 run_traced "$scratch/src.img" -- --lanes 2 "$scratch/src.img" null:

# The check itself can fail: cp moves the data with read/write or copy_file_range.
strace -f -y -qq -e trace="io_uring_setup,io_uring_enter,$data_calls,$loop_calls" \
  -o "$scratch/trace" cp "$scratch/src.img" "$scratch/cp.img"
if check_trace "$scratch/trace" "$scratch/src.img" "$scratch/cp.img" >/dev/null; then
  fail "the syscall check passes for cp, so it proves nothing"
fi

log "ok"
