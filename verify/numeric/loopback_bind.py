"""Keep the local ranks' listening sockets on the loopback interface.

Paddle 3.3.1 offers no way to choose the address its TCP store listens on:
the store's master (rank 0, on ``PADDLE_MASTER``'s port; and every
``core.TCPStore`` a worker makes for a sub-group) binds the wildcard address
0.0.0.0 whatever host it is given (the host is only used to connect; see
docs/faults.md for the lines of Paddle's source).  A rank pool runs on one
machine, so nothing needs to reach those ports from outside it.

This module builds (once, with the system's C compiler, cached under the
project's cache directory) a tiny ``LD_PRELOAD`` library whose ``bind()``
turns a bind to the IPv4/IPv6 wildcard address into one to 127.0.0.1 /
::1 and leaves every other bind alone.  The pool preloads it into the
launcher and the ranks (``LD_PRELOAD``).  Without a C compiler it is not
built: :func:`library` says why, the pool logs it, and the store listens on
0.0.0.0 as Paddle makes it.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

SOURCE = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>

typedef int (*bind_fn)(int, const struct sockaddr *, socklen_t);

/* bind() to the wildcard address becomes bind() to loopback (rank pool). */
int bind(int fd, const struct sockaddr *addr, socklen_t len) {
    static bind_fn real = 0;
    if (!real) real = (bind_fn)dlsym(RTLD_NEXT, "bind");
    if (addr && addr->sa_family == AF_INET && len >= sizeof(struct sockaddr_in)) {
        struct sockaddr_in in;
        memcpy(&in, addr, sizeof in);
        if (in.sin_addr.s_addr == htonl(INADDR_ANY)) {
            in.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
            return real(fd, (const struct sockaddr *)&in, sizeof in);
        }
    } else if (addr && addr->sa_family == AF_INET6
               && len >= sizeof(struct sockaddr_in6)) {
        struct sockaddr_in6 in6;
        memcpy(&in6, addr, sizeof in6);
        if (memcmp(&in6.sin6_addr, &in6addr_any, sizeof in6addr_any) == 0) {
            in6.sin6_addr = in6addr_loopback;
            return real(fd, (const struct sockaddr *)&in6, sizeof in6);
        }
    }
    return real(fd, addr, len);
}
"""

_BUILT: tuple[str | None, str] | None = None


def _entry(target: Path) -> Path:
    return target.with_name(target.name + ".entry")


def _intact(target: Path, key: str) -> bool:
    """Whether ``target`` is the library built from SOURCE: its entry
    (``verify/cache_files.py``, under ``key``) names the sha256 of its bytes.
    A damaged, edited or unrecorded library is built again."""
    import hashlib

    from verify.cache_files import MISS, read_entry

    want = read_entry(_entry(target), key, bytes.decode)
    try:
        return want is not MISS and hashlib.sha256(target.read_bytes()).hexdigest() == want
    except OSError:
        return False


def _build(target: Path, key: str) -> str:
    """Compile SOURCE to ``target`` (written whole, then renamed), its entry
    (the sha256 of its bytes, under ``key``) written first."""
    import hashlib

    from verify.cache_files import write_entry

    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if not cc:
        raise OSError("no C compiler (cc, gcc) on PATH")
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        src = Path(tmp) / "loopback_bind.c"
        src.write_text(SOURCE)
        out = Path(tmp) / target.name
        proc = subprocess.run([cc, "-shared", "-fPIC", "-O2", "-o", str(out), str(src),
                               "-ldl"], capture_output=True, text=True, timeout=120)
        if proc.returncode != 0:
            raise OSError(f"{cc} failed: {proc.stderr.strip()[-500:]}")
        write_entry(_entry(target), key, hashlib.sha256(out.read_bytes()).hexdigest().encode())
        os.replace(out, target)
    return str(target)


def library() -> tuple[str | None, str]:
    """``(path of the preload library, "")`` or ``(None, why not)``;
    built at the first call in a process, reused from the cache after."""
    global _BUILT
    if _BUILT is not None:
        return _BUILT
    from verify.cache_files import root

    key = hashlib.sha256(SOURCE.encode()).hexdigest()
    name = f"loopback_bind-{key}.so"
    # the fallback is a fresh private directory (0700), never a shared,
    # guessable path in /tmp another local user could have filled first
    places = [lambda: root() / "loopback-bind" / name,
              lambda: Path(tempfile.mkdtemp(prefix="loopback_bind_")) / name]
    why = ""
    for place in places:
        try:
            target = place()
        except OSError as exc:
            why = f"{why}; {exc}" if why else str(exc)
            continue
        if _intact(target, key):
            _BUILT = (str(target), "")
            return _BUILT
        try:
            _BUILT = (_build(target, key), "")
            return _BUILT
        except (OSError, subprocess.SubprocessError) as exc:
            why = f"{why}; {exc}" if why else str(exc)
    _BUILT = (None, f"the loopback bind library could not be built ({why})")
    return _BUILT


def preload(env: dict) -> str:
    """Put the library in ``env['LD_PRELOAD']``; '' or why it could not."""
    path, why = library()
    if path is None:
        return why
    current = env.get("LD_PRELOAD", "")
    env["LD_PRELOAD"] = f"{path} {current}".strip() if path not in current.split() \
        else current
    return ""
