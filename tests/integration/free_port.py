"""Prints a TCP port on 127.0.0.1 that nothing listens on, for a test's server.

Picked at random below the kernel's ephemeral range rather than by binding port 0:
a port from bind(0) is back in the ephemeral pool once this script closes it, so the
next bind(0) or outgoing connection of a test running beside this one may take it
before the server binds (EADDRINUSE in CI). Below the range only another test's
pick can collide, and the bind check makes that need the same port within the
moment between a pick and its server's bind; so each pick is also reserved, as a
directory made atomically under RESERVATIONS, for ten minutes (a server whose port
another test's server took reached that one instead, and failed on its data).
"""
import os
import random
import socket
import time

RESERVATIONS = "/tmp/sluice-test-ports"
RESERVED_FOR = 600  # seconds


def reserve(port):
    """True when this call made the port's reservation; stale ones are taken over."""
    path = os.path.join(RESERVATIONS, str(port))
    try:
        os.mkdir(path)
        return True
    except PermissionError:  # a test running as another user: pick as before
        return True
    except FileExistsError:
        try:
            if time.time() - os.stat(path).st_mtime < RESERVED_FOR:
                return False
            os.utime(path)  # taken over; a racing taker may win too, as without reservations
            return True
        except OSError:
            return False


def ephemeral_low():
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def main():
    try:
        os.mkdir(RESERVATIONS)
        os.chmod(RESERVATIONS, 0o1777)  # shared by tests running as other users
    except OSError:
        pass
    high = ephemeral_low()
    low = max(1024, high - 12000)
    for _ in range(200):
        port = random.randrange(low, high)
        if not reserve(port):
            continue
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            continue
        finally:
            s.close()
        print(port)
        return 0
    raise SystemExit("free_port: no free port below the ephemeral range")


if __name__ == "__main__":
    raise SystemExit(main())
