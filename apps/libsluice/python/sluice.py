"""Sluice from Python: move disk images through libsluice.so.1's C ABI (ctypes).

    import sluice
    stats = sluice.copy("disk.img", "nbd://host/export", depth=16)

    with sluice.Transfer("disk.img", "tcp://host:8000") as t:
        t.start()
        for progress in t.progress_updates(interval=0.5):
            print(progress.done, "of", progress.total)
        stats = t.wait()              # raises sluice.Error on failure

    with sluice.Receiver(listen="tcp://0.0.0.0:0", output="/dev/vg/disk", once=True) as r:
        print("send to", r.address)
        r.run()

Errors are sluice.Error, with .code (an errno value), .offset (the image offset the
message names, or None) and .message. Cancel a transfer from any thread with
.cancel(). The library is found as libsluice.so.1 (the installed one), or at the path
in the SLUICE_LIBRARY environment variable.
"""

import ctypes
import errno
import os
import threading
import time
from dataclasses import dataclass
from typing import Callable, Iterator, Optional

__all__ = ["Error", "Progress", "Stats", "Transfer", "Receiver", "copy", "version"]

_ABI_VERSION = 1


class _Error(ctypes.Structure):
    _fields_ = [("code", ctypes.c_int), ("offset", ctypes.c_int64), ("message", ctypes.c_char_p)]


class _Progress(ctypes.Structure):
    _fields_ = [("done", ctypes.c_uint64), ("total", ctypes.c_uint64), ("seconds", ctypes.c_double)]


_ProgressFn = ctypes.CFUNCTYPE(None, ctypes.POINTER(_Progress), ctypes.c_void_p)


class _TransferOptions(ctypes.Structure):
    _fields_ = [
        ("size", ctypes.c_size_t),
        ("protocol", ctypes.c_char_p),
        ("depth", ctypes.c_uint32),
        ("request_size", ctypes.c_uint32),
        ("sparse", ctypes.c_uint32),
        ("no_sparse", ctypes.c_int),
        ("destination_is_zero", ctypes.c_int),
        ("allocated", ctypes.c_int),
        ("no_flush", ctypes.c_int),
        ("direct", ctypes.c_int),
        ("timeout_seconds", ctypes.c_uint32),
        ("tls_ca_file", ctypes.c_char_p),
        ("tls_certificate", ctypes.c_char_p),
        ("tls_private_key", ctypes.c_char_p),
        ("tls_psk_file", ctypes.c_char_p),
        ("tls_no_verify", ctypes.c_int),
        ("progress", _ProgressFn),
        ("progress_user_data", ctypes.c_void_p),
    ]


class _TransferStats(ctypes.Structure):
    _fields_ = [
        ("size", ctypes.c_size_t),
        ("image_size", ctypes.c_uint64),
        ("bytes_read", ctypes.c_uint64),
        ("bytes_written", ctypes.c_uint64),
        ("bytes_zeroed", ctypes.c_uint64),
        ("bytes_skipped", ctypes.c_uint64),
        ("reads", ctypes.c_uint64),
        ("writes", ctypes.c_uint64),
        ("seconds", ctypes.c_double),
    ]


class _ReceiverOptions(ctypes.Structure):
    _fields_ = [
        ("size", ctypes.c_size_t),
        ("listen", ctypes.c_char_p),
        ("protocol", ctypes.c_char_p),
        ("output", ctypes.c_char_p),
        ("image_size", ctypes.c_uint64),
        ("http", ctypes.c_int),
        ("once", ctypes.c_int),
        ("tls_certificate", ctypes.c_char_p),
        ("tls_private_key", ctypes.c_char_p),
        ("tls_ca_file", ctypes.c_char_p),
    ]


def _load() -> ctypes.CDLL:
    lib = ctypes.CDLL(os.environ.get("SLUICE_LIBRARY", "libsluice.so.1"))
    p = ctypes.c_void_p
    signatures = {
        "sluice_version": (ctypes.c_char_p, []),
        "sluice_abi_version": (ctypes.c_int, []),
        "sluice_transfer_options_init": (None, [ctypes.POINTER(_TransferOptions)]),
        "sluice_transfer_new": (p, [ctypes.c_char_p, ctypes.c_char_p, ctypes.POINTER(_TransferOptions)]),
        "sluice_transfer_run": (ctypes.c_int, [p]),
        "sluice_transfer_start": (ctypes.c_int, [p]),
        "sluice_transfer_wait": (ctypes.c_int, [p]),
        "sluice_transfer_cancel": (None, [p]),
        "sluice_transfer_progress": (_Progress, [p]),
        "sluice_transfer_stats_get": (ctypes.c_int, [p, ctypes.POINTER(_TransferStats)]),
        "sluice_transfer_error": (_Error, [p]),
        "sluice_transfer_free": (None, [p]),
        "sluice_receiver_options_init": (None, [ctypes.POINTER(_ReceiverOptions)]),
        "sluice_receiver_new": (p, [ctypes.POINTER(_ReceiverOptions), ctypes.POINTER(_Error)]),
        "sluice_receiver_listen": (ctypes.c_int, [p]),
        "sluice_receiver_address": (ctypes.c_char_p, [p]),
        "sluice_receiver_run": (ctypes.c_int, [p]),
        "sluice_receiver_start": (ctypes.c_int, [p]),
        "sluice_receiver_wait": (ctypes.c_int, [p]),
        "sluice_receiver_stop": (None, [p]),
        "sluice_receiver_abort": (None, [p]),
        "sluice_receiver_error": (_Error, [p]),
        "sluice_receiver_free": (None, [p]),
    }
    for name, (restype, argtypes) in signatures.items():
        function = getattr(lib, name)
        function.restype = restype
        function.argtypes = argtypes
    if lib.sluice_abi_version() != _ABI_VERSION:
        raise ImportError("libsluice implements ABI %d; this module speaks %d" % (lib.sluice_abi_version(), _ABI_VERSION))
    return lib


_lib = _load()


def version() -> str:
    """The library's version."""
    return _lib.sluice_version().decode()


class Error(Exception):
    """A transfer or receiver failed: `code` is an errno value, `offset` the image
    offset the message names (None when it names none), `message` the cause."""

    def __init__(self, code: int, offset: Optional[int], message: str):
        super().__init__(message)
        self.code = code
        self.offset = offset
        self.message = message

    @classmethod
    def _of(cls, error: _Error) -> "Error":
        message = error.message.decode(errors="replace") if error.message else os.strerror(error.code)
        return cls(error.code, None if error.offset < 0 else error.offset, message)


@dataclass(frozen=True)
class Progress:
    done: int  # bytes whose write completed
    total: int  # the image's size
    seconds: float


@dataclass(frozen=True)
class Stats:
    image_size: int
    bytes_read: int
    bytes_written: int
    bytes_zeroed: int
    bytes_skipped: int
    reads: int
    writes: int
    seconds: float


def _text(value: Optional[str]) -> Optional[bytes]:
    return None if value is None else value.encode()


class Transfer:
    """One image from `source` to `destination` (paths or URIs, as `sluice copy`
    takes them). Options: protocol, depth, request_size, sparse (0: no zero detection),
    destination_is_zero, allocated, flush, direct, timeout (seconds), tls_ca_file,
    tls_certificate, tls_private_key, tls_psk_file, tls_verify, and progress (a callable
    taking a Progress, called on the library's thread as writes complete)."""

    def __init__(self, source: str, destination: str, *, protocol: Optional[str] = None, depth: int = 0,
                 request_size: int = 0, sparse: Optional[int] = None, destination_is_zero: bool = False,
                 allocated: bool = False, flush: bool = True, direct: bool = False, timeout: int = 0,
                 tls_ca_file: Optional[str] = None, tls_certificate: Optional[str] = None,
                 tls_private_key: Optional[str] = None, tls_psk_file: Optional[str] = None,
                 tls_verify: bool = True, progress: Optional[Callable[[Progress], None]] = None):
        options = _TransferOptions()
        _lib.sluice_transfer_options_init(ctypes.byref(options))
        # ctypes keeps only the pointers: the bytes must live as long as the handle.
        self._keep = [_text(v) for v in (protocol, tls_ca_file, tls_certificate, tls_private_key, tls_psk_file)]
        options.protocol, options.tls_ca_file, options.tls_certificate, options.tls_private_key, \
            options.tls_psk_file = self._keep
        options.depth, options.request_size, options.timeout_seconds = depth, request_size, timeout
        if sparse is not None:
            options.sparse, options.no_sparse = sparse, int(sparse == 0)
        options.destination_is_zero, options.allocated = int(destination_is_zero), int(allocated)
        options.no_flush, options.direct, options.tls_no_verify = int(not flush), int(direct), int(not tls_verify)
        self._callback = None
        if progress is not None:
            def relay(p, _user):
                progress(Progress(p.contents.done, p.contents.total, p.contents.seconds))
            self._callback = _ProgressFn(relay)
            options.progress = self._callback
        self._handle = _lib.sluice_transfer_new(source.encode(), destination.encode(), ctypes.byref(options))
        if not self._handle:
            raise MemoryError("sluice_transfer_new")
        self._started = False
        self._ended = threading.Event()

    def _outcome(self, rc: int) -> Stats:
        self._ended.set()
        if rc != 0:
            raise Error._of(_lib.sluice_transfer_error(self._handle)) if rc != errno.EALREADY else \
                Error(rc, None, "this transfer has already run")
        stats = _TransferStats()
        stats.size = ctypes.sizeof(stats)
        _lib.sluice_transfer_stats_get(self._handle, ctypes.byref(stats))
        return Stats(stats.image_size, stats.bytes_read, stats.bytes_written, stats.bytes_zeroed,
                     stats.bytes_skipped, stats.reads, stats.writes, stats.seconds)

    def run(self) -> Stats:
        """Runs on this thread until every byte landed (and was flushed); raises Error."""
        return self._outcome(_lib.sluice_transfer_run(self._handle))

    def start(self) -> None:
        """Starts on a thread of the library's own."""
        rc = _lib.sluice_transfer_start(self._handle)
        if rc != 0:
            raise Error(rc, None, os.strerror(rc))
        self._started = True
        threading.Thread(target=self._watch, daemon=True).start()

    def _watch(self) -> None:
        self._rc = _lib.sluice_transfer_wait(self._handle)
        self._ended.set()

    def wait(self) -> Stats:
        """Waits for a started transfer; its stats, or raises Error."""
        self._ended.wait()
        return self._outcome(self._rc)

    def cancel(self) -> None:
        """Stops it wherever it is (any thread); it then fails with ECANCELED."""
        _lib.sluice_transfer_cancel(self._handle)

    def progress(self) -> Progress:
        p = _lib.sluice_transfer_progress(self._handle)
        return Progress(p.done, p.total, p.seconds)

    def progress_updates(self, interval: float = 0.2) -> Iterator[Progress]:
        """Yields progress every `interval` seconds until a started transfer ends, then
        once more with the final figures."""
        while not self._ended.wait(interval):
            yield self.progress()
        yield self.progress()

    def close(self) -> None:
        if self._handle:
            _lib.sluice_transfer_free(self._handle)
            self._handle = None

    def __enter__(self) -> "Transfer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:
        self.close()


def copy(source: str, destination: str, **options) -> Stats:
    """Copies `source` to `destination` on this thread (Transfer's options); raises Error."""
    with Transfer(source, destination, **options) as transfer:
        return transfer.run()


class Receiver:
    """Receives Chunked or raw images, as `sluice serve` does: listen is tcp://H:P
    (port 0: any), tls://H:P or unix:///PATH; output a file, device or "null:"."""

    def __init__(self, *, listen: str, output: str, protocol: Optional[str] = None, size: int = 0,
                 http: bool = False, once: bool = False, tls_certificate: Optional[str] = None,
                 tls_private_key: Optional[str] = None, tls_ca_file: Optional[str] = None):
        options = _ReceiverOptions()
        _lib.sluice_receiver_options_init(ctypes.byref(options))
        options.listen, options.output, options.protocol = listen.encode(), output.encode(), _text(protocol)
        options.image_size, options.http, options.once = size, int(http), int(once)
        options.tls_certificate, options.tls_private_key = _text(tls_certificate), _text(tls_private_key)
        options.tls_ca_file = _text(tls_ca_file)
        error = _Error()
        self._handle = _lib.sluice_receiver_new(ctypes.byref(options), ctypes.byref(error))
        if not self._handle:
            raise Error._of(error)
        rc = _lib.sluice_receiver_listen(self._handle)
        if rc != 0:
            failure = Error._of(_lib.sluice_receiver_error(self._handle))
            self.close()
            raise failure

    @property
    def address(self) -> str:
        """A URI a sender can use (the port picked for port 0)."""
        return _lib.sluice_receiver_address(self._handle).decode()

    def _check(self, rc: int) -> None:
        if rc != 0:
            raise Error._of(_lib.sluice_receiver_error(self._handle))

    def run(self) -> None:
        """Serves on this thread until stop() (or one sender with once=True)."""
        self._check(_lib.sluice_receiver_run(self._handle))

    def start(self) -> None:
        rc = _lib.sluice_receiver_start(self._handle)
        if rc != 0:
            raise Error(rc, None, os.strerror(rc))

    def wait(self) -> None:
        self._check(_lib.sluice_receiver_wait(self._handle))

    def stop(self) -> None:
        _lib.sluice_receiver_stop(self._handle)

    def abort(self) -> None:
        _lib.sluice_receiver_abort(self._handle)

    def close(self) -> None:
        if getattr(self, "_handle", None):
            _lib.sluice_receiver_free(self._handle)
            self._handle = None

    def __enter__(self) -> "Receiver":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:
        self.close()
