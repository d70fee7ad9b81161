#!/usr/bin/python3
"""An NBD server that misbehaves on purpose, for tests of Sluice's NBD client.

Serves one connection on a Unix socket: a proper fixed-newstyle handshake, then
transmission that goes wrong as --mode says. The export is --image, a regular file:
READs come from it and WRITEs land in it, so a copy through the well-behaved mode
(--mode good) can be checked byte for byte, which shows that the faults, not this
server, are what the client trips over.

Modes (N is --after, counted from 1 among the requests of --command, or among all
requests for hang and drop):
  good            answers everything properly
  bad-magic       the reply to the Nth request carries a wrong reply magic
  unknown-cookie  the reply to the Nth request carries a cookie never sent
  error-reply     EIO for the request covering --offset; with structured replies a
                  READ gets its data up to --offset, then an ERROR_OFFSET chunk there
  short-read      the Nth READ's reply leaves the end of the range out (with simple
                  replies: half the data, then the connection is closed)
  read-beyond     the Nth READ gets an OFFSET_DATA chunk just past the requested range
  hang            after answering N requests, reads on and never answers again
  drop            after answering N requests, closes the connection

Every injected fault is logged as a line starting with "fault:" (stderr and --log).
Exit status: 0 when the fault was injected (good mode: the client sent DISC), 3 when
the connection ended before that, 2 when the client broke the protocol itself.
Whatever happens, the process is gone after --alarm seconds.
"""
import argparse
import os
import signal
import socket
import struct
import sys

NBD_MAGIC = 0x4E42444D41474943
OPTION_MAGIC = 0x49484156454F5054
OPTION_REPLY_MAGIC = 0x0003E889045565A9
REQUEST_MAGIC = 0x25609513
SIMPLE_REPLY_MAGIC = 0x67446698
STRUCTURED_REPLY_MAGIC = 0x668E33EF

FLAG_FIXED_NEWSTYLE = 1
FLAG_NO_ZEROES = 2

OPT_EXPORT_NAME, OPT_ABORT, OPT_INFO, OPT_GO = 1, 2, 6, 7
OPT_STRUCTURED_REPLY, OPT_SET_META_CONTEXT = 8, 10
REP_ACK, REP_INFO, REP_META_CONTEXT = 1, 3, 4
REP_ERR_UNSUP, REP_ERR_INVALID = 0x80000001, 0x80000003
INFO_EXPORT = 0

TX_HAS_FLAGS, TX_SEND_FLUSH = 1, 4

CMD_READ, CMD_WRITE, CMD_DISC, CMD_FLUSH, CMD_BLOCK_STATUS = 0, 1, 2, 3, 7
COMMAND_NAMES = {CMD_READ: "READ", CMD_WRITE: "WRITE", CMD_FLUSH: "FLUSH", CMD_BLOCK_STATUS: "BLOCK_STATUS"}

CHUNK_DONE = 1
CHUNK_OFFSET_DATA, CHUNK_BLOCK_STATUS = 1, 5
CHUNK_ERROR, CHUNK_ERROR_OFFSET = 0x8001, 0x8002

EIO, EINVAL = 5, 22
ALLOCATION_CONTEXT_ID = 1
# Never a cookie of Sluice's (they count up from 1), and easy to spot in its message.
STRANGER_COOKIE = 0xBAD0C0FFEE000000


class ConnectionEnded(Exception):
    pass


class ClientBrokeProtocol(Exception):
    pass


class Server:
    def __init__(self, conn, args):
        self.conn = conn
        self.args = args
        self.image = open(args.image, "r+b")
        self.size = os.fstat(self.image.fileno()).st_size
        self.structured = False
        self.allocation = False
        self.fault_injected = False
        self.answered = 0  # every request answered, for hang and drop
        self.targeted = 0  # requests of --command seen, for the Nth-request faults
        self.log = open(args.log, "a") if args.log else None

    def note(self, text):
        line = f"fake_nbd_server: {text}"
        print(line, file=sys.stderr, flush=True)
        if self.log:
            print(text, file=self.log, flush=True)

    def fault(self, text):
        self.fault_injected = True
        self.note(f"fault: {text}")

    # --- bytes ---------------------------------------------------------------------

    def recv_exactly(self, n):
        parts = []
        while n > 0:
            try:
                got = self.conn.recv(min(n, 1 << 20))
            except (ConnectionResetError, OSError) as e:
                raise ConnectionEnded(str(e))
            if not got:
                raise ConnectionEnded("end of stream")
            parts.append(got)
            n -= len(got)
        return b"".join(parts)

    def send(self, data):
        try:
            self.conn.sendall(data)
        except (BrokenPipeError, ConnectionResetError, OSError) as e:
            raise ConnectionEnded(str(e))

    # --- handshake -----------------------------------------------------------------

    def option_reply(self, option, reply_type, payload=b""):
        self.send(struct.pack(">QIII", OPTION_REPLY_MAGIC, option, reply_type, len(payload)) + payload)

    def negotiate(self):
        self.send(struct.pack(">QQH", NBD_MAGIC, OPTION_MAGIC, FLAG_FIXED_NEWSTYLE | FLAG_NO_ZEROES))
        (client_flags,) = struct.unpack(">I", self.recv_exactly(4))
        if client_flags & ~(FLAG_FIXED_NEWSTYLE | FLAG_NO_ZEROES):
            raise ClientBrokeProtocol(f"client flags 0x{client_flags:x}")
        while True:
            magic, option, length = struct.unpack(">QII", self.recv_exactly(16))
            if magic != OPTION_MAGIC:
                raise ClientBrokeProtocol(f"option magic 0x{magic:x}")
            if length > 65536:
                raise ClientBrokeProtocol(f"option {option} of {length} bytes")
            data = self.recv_exactly(length)
            if option == OPT_STRUCTURED_REPLY:
                if self.args.no_sr:
                    self.option_reply(option, REP_ERR_UNSUP)
                else:
                    self.structured = True
                    self.option_reply(option, REP_ACK)
            elif option == OPT_SET_META_CONTEXT:
                self.set_meta_context(data)
            elif option in (OPT_INFO, OPT_GO):
                self.option_reply(option, REP_INFO, struct.pack(">HQH", INFO_EXPORT, self.size, self.flags()))
                self.option_reply(option, REP_ACK)
                if option == OPT_GO:
                    return
            elif option == OPT_ABORT:
                self.option_reply(option, REP_ACK)
                raise ConnectionEnded("the client sent ABORT")
            elif option == OPT_EXPORT_NAME:
                # Its only possible refusal is hanging up; the client should have used GO.
                raise ClientBrokeProtocol("EXPORT_NAME, though GO is supported")
            else:
                self.option_reply(option, REP_ERR_UNSUP)

    def set_meta_context(self, data):
        if not self.structured:
            self.option_reply(OPT_SET_META_CONTEXT, REP_ERR_INVALID)
            return
        (name_length,) = struct.unpack_from(">I", data, 0)
        at = 4 + name_length
        (count,) = struct.unpack_from(">I", data, at)
        at += 4
        for _ in range(count):
            (query_length,) = struct.unpack_from(">I", data, at)
            query = data[at + 4 : at + 4 + query_length]
            at += 4 + query_length
            if query == b"base:allocation":
                self.allocation = True
                self.option_reply(OPT_SET_META_CONTEXT, REP_META_CONTEXT,
                                  struct.pack(">I", ALLOCATION_CONTEXT_ID) + query)
        self.option_reply(OPT_SET_META_CONTEXT, REP_ACK)

    def flags(self):
        # No CAN_MULTI_CONN: one connection, so one order of requests to reason about.
        return TX_HAS_FLAGS | TX_SEND_FLUSH

    # --- replies -------------------------------------------------------------------

    def simple_reply(self, cookie, error=0, data=b"", magic=SIMPLE_REPLY_MAGIC):
        self.send(struct.pack(">IIQ", magic, error, cookie) + data)

    def chunk(self, cookie, chunk_type, payload, flags=CHUNK_DONE):
        self.send(struct.pack(">IHHQI", STRUCTURED_REPLY_MAGIC, flags, chunk_type, cookie, len(payload)) + payload)

    def data_at(self, offset, length):
        self.image.seek(offset)
        return self.image.read(length)

    def answer(self, command, cookie, offset, length, payload):
        """The proper reply."""
        if command not in (CMD_FLUSH,) and offset + length > self.size:
            self.simple_reply(cookie, EINVAL)
        elif command == CMD_READ:
            data = self.data_at(offset, length)
            if self.structured:
                self.chunk(cookie, CHUNK_OFFSET_DATA, struct.pack(">Q", offset) + data)
            else:
                self.simple_reply(cookie, 0, data)
        elif command == CMD_WRITE:
            self.image.seek(offset)
            self.image.write(payload)
            self.simple_reply(cookie)
        elif command == CMD_FLUSH:
            self.image.flush()
            self.simple_reply(cookie)
        elif command == CMD_BLOCK_STATUS and self.allocation:
            # One extent of plain data (status 0): every byte gets read.
            self.chunk(cookie, CHUNK_BLOCK_STATUS, struct.pack(">III", ALLOCATION_CONTEXT_ID, length, 0))
        else:
            self.simple_reply(cookie, EINVAL)
        self.answered += 1

    # --- transmission --------------------------------------------------------------

    def transmit(self):
        mode = self.args.mode
        target = {"read": CMD_READ, "write": CMD_WRITE}[self.args.command]
        if mode in ("short-read", "read-beyond"):
            target = CMD_READ
        while True:
            if mode == "drop" and self.answered >= self.args.after:
                self.fault(f"closed the connection after answering {self.answered} requests")
                return
            magic, flags, command, cookie, offset, length = struct.unpack(">IHHQQI", self.recv_exactly(28))
            if magic != REQUEST_MAGIC:
                raise ClientBrokeProtocol(f"request magic 0x{magic:x}")
            payload = self.recv_exactly(length) if command == CMD_WRITE else b""
            if command == CMD_DISC:
                if mode == "good":
                    self.fault_injected = True  # nothing to inject: a clean end is the goal
                raise ConnectionEnded("the client sent DISC")
            what = f"{COMMAND_NAMES.get(command, f'command {command}')} of {length} bytes at offset {offset}"
            if mode == "hang" and self.answered >= self.args.after:
                if not self.fault_injected:
                    self.fault(f"stopped answering after {self.answered} requests, from the {what}")
                continue
            nth = False
            if command == target:
                self.targeted += 1
                nth = self.targeted == self.args.after
            if mode == "bad-magic" and nth:
                self.fault(f"reply magic 0x{SIMPLE_REPLY_MAGIC + 1:x} for the {what}")
                self.simple_reply(cookie, 0, magic=SIMPLE_REPLY_MAGIC + 1)
            elif mode == "unknown-cookie" and nth:
                self.fault(f"cookie 0x{STRANGER_COOKIE:x} in the reply to the {what}")
                self.answer(command, STRANGER_COOKIE, offset, length, payload)
            elif mode == "error-reply" and command == target and offset <= self.args.offset < offset + length:
                self.fault(f"EIO for the {what}")
                self.error_reply(command, cookie, offset)
            elif mode == "short-read" and nth:
                self.short_read(cookie, offset, length, what)
            elif mode == "read-beyond" and nth:
                if not self.structured:
                    raise SystemExit("read-beyond needs structured replies")
                self.fault(f"OFFSET_DATA chunk at offset {offset + length} for the {what}")
                self.chunk(cookie, CHUNK_OFFSET_DATA, struct.pack(">Q", offset + length) + bytes(512))
            else:
                self.answer(command, cookie, offset, length, payload)

    def error_reply(self, command, cookie, offset):
        message = b"injected by fake_nbd_server"
        if not self.structured:
            self.simple_reply(cookie, EIO)
        elif command == CMD_READ:
            at = self.args.offset
            if at > offset:
                self.chunk(cookie, CHUNK_OFFSET_DATA, struct.pack(">Q", offset) + self.data_at(offset, at - offset), 0)
            self.chunk(cookie, CHUNK_ERROR_OFFSET, struct.pack(">IH", EIO, len(message)) + message + struct.pack(">Q", at))
        else:
            self.chunk(cookie, CHUNK_ERROR, struct.pack(">IH", EIO, len(message)) + message)

    def short_read(self, cookie, offset, length, what):
        half = length // 2
        if self.structured:
            self.fault(f"OFFSET_DATA for only bytes [{offset}, {offset + half}) of the {what}, then DONE")
            self.chunk(cookie, CHUNK_OFFSET_DATA, struct.pack(">Q", offset) + self.data_at(offset, half))
        else:
            # A simple reply cannot leave anything out: the data just stops.
            self.fault(f"simple reply with {half} of {length} bytes for the {what}, then closed")
            self.simple_reply(cookie, 0, self.data_at(offset, half))
            raise ConnectionEnded("closed mid-reply")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--socket", required=True)
    parser.add_argument("--image", required=True, help="the export's bytes (a regular file)")
    parser.add_argument("--mode", required=True, choices=["good", "bad-magic", "unknown-cookie", "error-reply",
                                                          "short-read", "read-beyond", "hang", "drop"])
    parser.add_argument("--after", type=int, default=1)
    parser.add_argument("--command", choices=["read", "write"], default="write")
    parser.add_argument("--offset", type=int, default=0, help="error-reply: the failing byte")
    parser.add_argument("--no-sr", action="store_true", help="refuse structured replies")
    parser.add_argument("--ready", help="written once the socket listens")
    parser.add_argument("--log")
    parser.add_argument("--alarm", type=int, default=20)
    args = parser.parse_args()

    # Whatever the client does (or fails to do), nothing outlives the test.
    signal.alarm(args.alarm)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        os.unlink(args.socket)
    except FileNotFoundError:
        pass
    listener.bind(args.socket)
    listener.listen(1)
    if args.ready:
        with open(args.ready, "w") as f:
            f.write("ready\n")
    conn, _ = listener.accept()
    listener.close()
    os.unlink(args.socket)

    server = Server(conn, args)
    status = 0
    try:
        server.negotiate()
        server.note(f"negotiated: structured replies {'on' if server.structured else 'off'}, "
                    f"base:allocation {'on' if server.allocation else 'off'}")
        server.transmit()
    except ConnectionEnded as e:
        server.note(f"connection ended: {e}")
    except ClientBrokeProtocol as e:
        server.note(f"the client broke the protocol: {e}")
        status = 2
    conn.close()
    if status == 0 and not server.fault_injected:
        server.note(f"the connection ended before the {args.mode} fault was injected")
        status = 3
    sys.exit(status)


if __name__ == "__main__":
    main()
