"""Holds one end's log from sqe_log.c to the batching rules (stream_socket_options.sh).

Usage: check_sends.py LOG splicing|sending|memory|receiving

The rules, per socket: (a) a send with MSG_MORE is followed by another send, never by
waiting for the peer (a receive or POLLIN), a shutdown or the end; (b) the cork is not
held then either; (c) the cork is released only after a write without MSG_MORE, the
burst's last; (d) the socket's last write has no MSG_MORE; (e) on TCP a payload is
spliced only under the cork; (f) "splicing" and "memory", a Chunked sender on a plain
socket: no send but the socket's last (the 12-byte terminator) is 12 bytes long, i.e. a
chunk header leaves in the same write as its payload, gathered into its sendmsg
("memory", --no-zero-copy) or ahead of it in the pipe it is spliced from ("splicing")
(the shim logs lengths, not bytes: a 12-byte send before the end can only be a header
on its own); "splicing" must splice, "memory" must not. Prints a summary; exits
non-zero with the broken rule.
"""
import collections, sys
# MODE: "splicing" (a sender that splices payloads), "sending", "memory" (a sender that
# reads payloads into memory) or "receiving".
path, mode = sys.argv[1], sys.argv[2]
per_socket = collections.defaultdict(list)
for number, line in enumerate(open(path), 1):
    f = line.split()
    if f[1] == "fixed-file":  # a registered descriptor: the shim cannot tell what it is
        print("%s:%d: an SQE on a registered file, which these rules cannot follow: %s" % (path, number, line.strip()))
        sys.exit(1)
    per_socket[(f[0], f[2])].append((number, f[1], f[3], f[4:]))
problems, sends, more_sends, splices, corked_bursts = [], 0, 0, 0, 0
for (pid, fd), events in per_socket.items():
    more = corked = False
    last_write = None
    where = lambda n: "%s:%d (pid %s fd %s)" % (path, n, pid, fd)
    def held(n, why):
        if more:
            problems.append("%s: MSG_MORE pending at %s" % (where(n), why))
        if corked:
            problems.append("%s: TCP_CORK held at %s" % (where(n), why))
    for i, (n, kind, family, rest) in enumerate(events):
        if kind in ("send", "splice", "write"):
            sends += 1
            flag = rest[1] if kind != "write" else "last"
            more = flag == "more"
            more_sends += more
            last_write = (n, kind, rest)
            if mode == "memory" and kind == "splice":
                problems.append("%s: a payload spliced by a sender meant to go through memory" % where(n))
            if kind == "splice" and family == "tcp" and not corked:
                problems.append("%s: payload spliced without TCP_CORK held" % where(n))
            splices += kind == "splice"
        elif kind == "cork":
            if rest[0] == "0":
                if more:
                    problems.append("%s: cork released after a write with MSG_MORE (the burst's last write)" % where(n))
                corked_bursts += corked
            corked = rest[0] == "1"
        elif kind == "recv" or (kind == "poll" and int(rest[0]) & 1):
            held(n, "a wait for the peer (%s)" % kind)
        elif kind == "shutdown":
            held(n, "shutdown")
    held(events[-1][0], "the end of the log")
    if mode in ("memory", "splicing"):
        writes = [e for e in events if e[1] in ("send", "splice", "write")]
        for n, kind, family, rest in writes[:-1]:
            if kind == "send" and rest[0] == "12":
                problems.append("%s: a 12-byte send before the end: a chunk header apart from its payload" % where(n))
    if last_write and last_write[1] != "write" and last_write[2][1] == "more":
        problems.append("%s: the last write on the socket carries MSG_MORE" % where(last_write[0]))
if not per_socket:
    problems.append("%s: the shim saw no socket at all (is liburing still a shared library?)" % path)
elif mode != "receiving" and sends == 0:
    problems.append("%s: no socket write was seen" % path)
if mode == "memory" and sends < 2:
    problems.append("%s: fewer than two writes (a chunk and the terminator): nothing to hold the rule to" % path)
if mode == "splicing" and splices == 0:
    problems.append("%s: nothing was spliced (was zero copy used?)" % path)
for p in problems:
    print(p)
if problems:
    sys.exit(1)
print("%d writes, %d with MSG_MORE, %d corked bursts, %d splices" % (sends, more_sends, corked_bursts, splices))
