"""What a Paddle checkout changed: the files between a base revision and the
working tree, sorted into what the pre-merge run can check.

* Python files under ``python/paddle/`` (added, modified, deleted; renames
  count as a deletion plus an addition) are overlaid on the installed
  package (``verify/premerge/overlay.py``);
* C++/CUDA/build files (``paddle/``'s ``.cc``, ``.h``, ``.cu``, ops YAML,
  ``CMakeLists.txt`` ...) need a build: listed as not checked;
* everything else (docs, tests, tools) is listed as ignored, and so is a
  ``python/paddle`` path that is not a regular file inside the checkout (a
  symlink, tracked or not: its target is never copied into the overlay).

The base is ``--base`` when given, else the merge base of ``HEAD`` with its
upstream branch, else ``HEAD~1``.  The working tree includes uncommitted and
untracked (not ignored) files, as a pre-merge run must check what is there.
"""
from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass, field

PY_ROOT = "python/"  # python/paddle/x.py -> paddle/x.py in the installed tree
NATIVE_SUFFIXES = (".cc", ".cpp", ".cxx", ".c", ".h", ".hpp", ".hh", ".cu", ".cuh",
                   ".proto", ".yaml", ".yml", ".cmake", ".pyx", ".pxd", ".so")
NATIVE_NAMES = ("CMakeLists.txt", "setup.py", "setup.py.in")


class CheckoutError(Exception):
    """Bad input: not a git checkout, unknown revision, no python/paddle tree."""


@dataclass
class Change:
    path: str  # relative to the checkout root
    status: str  # A | M | D

    @property
    def package_path(self) -> str:
        """``python/paddle/a.py`` -> ``paddle/a.py`` (relative to site-packages)."""
        return self.path[len(PY_ROOT):]


@dataclass
class Changes:
    root: str
    base: str  # the base revision, as a full hash
    base_how: str  # how it was chosen: "--base X" | "merge base with U" | "HEAD~1"
    python: list = field(default_factory=list)  # [Change] under python/paddle, .py
    native: list = field(default_factory=list)  # [Change] needing a build
    other: list = field(default_factory=list)  # [Change] neither
    unreadable: dict = field(default_factory=dict)  # python path -> why not overlaid

    def overlay_files(self) -> dict:
        """``{package path: text}`` of the added/modified Python files (each
        a regular file inside the checkout, never a symlink's target:
        :func:`regular_text`)."""
        out = {}
        for c in self.python:
            if c.status != "D" and not self.undecodable(c):
                out[c.package_path] = regular_text(self.root, c.path)
        return out

    def deleted(self) -> list:
        return [c.package_path for c in self.python if c.status == "D"]

    def undecodable(self, change) -> str:
        """Why ``change``'s file cannot be overlaid ("" if it can): a file
        that is not UTF-8 text is reported as not checked (``unreadable``),
        never a traceback.  Irregular files are left to the reader."""
        if change.path in self.unreadable:
            return self.unreadable[change.path]
        try:
            fd = os.open(os.path.join(self.root, change.path), os.O_RDONLY |
                         getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
        except OSError:
            return ""
        with os.fdopen(fd, "rb") as f:
            import stat

            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                return ""
            data = f.read()
        try:
            data.decode("utf-8")
        except UnicodeDecodeError as exc:
            self.unreadable[change.path] = (f"not UTF-8 text ({exc.reason} at byte "
                                            f"{exc.start}): not overlaid, not checked")
            return self.unreadable[change.path]
        return ""


def _regular_inside(root: str, rel: str) -> bool:
    """``rel`` is a regular file (not a symlink, FIFO, device) inside
    ``root``, no directory on the way a symlink leading out of it."""
    import stat

    path = os.path.join(root, rel)
    base = os.path.realpath(root)
    if not os.path.realpath(path).startswith(base.rstrip(os.sep) + os.sep):
        return False
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def regular_text(root: str, rel: str) -> str:
    """The text of ``rel``, a regular file inside ``root``, opened without
    following a symlink (``O_NOFOLLOW``) or blocking on a FIFO; CheckoutError
    otherwise."""
    import stat

    if not _regular_inside(root, rel):
        raise CheckoutError(f"{root}: {rel} is not a regular file inside the checkout")
    try:
        fd = os.open(os.path.join(root, rel),
                     os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        raise CheckoutError(f"{root}: cannot read {rel}: {exc.strerror}") from None
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            raise CheckoutError(f"{root}: {rel} is not a regular file inside the checkout")
        return f.read().decode("utf-8")


def _git(root: str, *args) -> str:
    proc = subprocess.run(["git", "-C", root, *args], capture_output=True, text=True)
    if proc.returncode != 0:
        raise subprocess.CalledProcessError(proc.returncode, args, proc.stdout, proc.stderr)
    return proc.stdout


def _toplevel(path: str) -> str:
    if not os.path.isdir(path):
        raise CheckoutError(f"{path} is not a directory")
    try:
        top = _git(path, "rev-parse", "--show-toplevel").strip()
    except (subprocess.CalledProcessError, FileNotFoundError):
        raise CheckoutError(f"{path} is not a git checkout") from None
    return top


def _resolve_base(root: str, base: str | None) -> tuple:
    if base is not None:
        try:
            rev = _git(root, "rev-parse", "--verify", "--quiet", f"{base}^{{commit}}").strip()
        except subprocess.CalledProcessError:
            rev = ""
        if not rev:
            raise CheckoutError(f"unknown revision {base!r} in {root}")
        return rev, f"--base {base}"
    try:
        upstream = _git(root, "rev-parse", "--abbrev-ref", "--symbolic-full-name",
                        "@{upstream}").strip()
        rev = _git(root, "merge-base", "HEAD", "@{upstream}").strip()
        if rev:
            return rev, f"merge base with {upstream}"
    except subprocess.CalledProcessError:
        pass
    try:
        return _git(root, "rev-parse", "--verify", "HEAD~1^{commit}").strip(), "HEAD~1"
    except subprocess.CalledProcessError:
        raise CheckoutError(f"{root} has no upstream branch and no HEAD~1: "
                            "give --base") from None


def _kind(path: str) -> str:
    if path.startswith(PY_ROOT + "paddle/") and path.endswith(".py"):
        return "python"
    if path.endswith(NATIVE_SUFFIXES) or os.path.basename(path) in NATIVE_NAMES:
        return "native"
    return "other"


def changes(checkout: str, base: str | None = None) -> Changes:
    """The changes of ``checkout``'s working tree against its base revision."""
    root = _toplevel(os.path.abspath(checkout))
    if not os.path.isdir(os.path.join(root, PY_ROOT, "paddle")):
        raise CheckoutError(f"{root} has no python/paddle tree (not a Paddle checkout)")
    rev, how = _resolve_base(root, base)
    out = Changes(root, rev, how)
    listed = _git(root, "diff", "--name-status", "--no-renames", "-z", rev, "--").split("\0")
    entries = [(listed[i], listed[i + 1]) for i in range(0, len(listed) - 1, 2)]
    untracked = _git(root, "ls-files", "--others", "--exclude-standard", "-z").split("\0")
    entries += [("A", p) for p in untracked if p]
    for status, path in sorted(entries, key=lambda e: e[1]):
        change = Change(path, status[0] if status[0] in "AMD" else "M")
        kind = _kind(path)
        if kind == "python" and change.status != "D" and not _regular_inside(root, path):
            # a symlink (tracked or not), FIFO or device is never overlaid: its
            # target may lie outside the checkout; listed as ignored
            kind = "other"
        getattr(out, kind).append(change)
    return out
