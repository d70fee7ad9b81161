"""Prints a TCP port on 127.0.0.1 that nothing listens on, for a test's server.

Picked at random below the kernel's ephemeral range rather than by binding port 0:
a port from bind(0) is back in the ephemeral pool once this script closes it, so the
next bind(0) or outgoing connection of a test running beside this one may take it
before the server binds (EADDRINUSE in CI). Below the range only another test's
pick can collide, and the bind check makes that need the same port within the
moment between a pick and its server's bind.
"""
import random
import socket


def ephemeral_low():
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def main():
    high = ephemeral_low()
    low = max(1024, high - 12000)
    for _ in range(200):
        port = random.randrange(low, high)
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
