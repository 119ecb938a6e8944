"""A small git checkout of Paddle's source made from the installed files, for
the ``verify premerge`` tests and benchmark: ``python/paddle/...`` holds only
the files a test changes (copied from the installed package), and
``paddle/phi/...`` one C++ file; the first commit is the installed state."""
from __future__ import annotations

import os
import shutil
import subprocess

from verify.premerge.affected import installed_root

PASS_UTILS = "paddle/distributed/passes/pass_utils.py"
KERNEL = "paddle/phi/kernels/impl/matmul_grad_kernel_impl.h"

# The fold of the first two dims, as 3.3.1 writes it (twice: legacy and PIR).
FOLD_331 = "new_x_dims = [x_dims[0] * x_dims[1], *list(x_dims[2:])]"
# A mend: a dynamic dim folds to -1 (the product of static dims -1 * S is not
# a valid target), as the kernel's FoldInitDims does at run time.
FOLD_MENDED = ("new_x_dims = [-1 if x_dims[0] < 0 or x_dims[1] < 0 else "
               "x_dims[0] * x_dims[1], *list(x_dims[2:])]")
OUT_FOLD_331 = "out_grad_dims[0] * out_grad_dims[1],"
OUT_FOLD_MENDED = ("-1 if out_grad_dims[0] < 0 or out_grad_dims[1] < 0 else "
                   "out_grad_dims[0] * out_grad_dims[1],")
# The PIR split's dW matmul, and a broken one (operands swapped: dOut^T X,
# the transpose of dW, reshaped back to W's shape).
DW_331 = "new_y_grad = paddle._C_ops.matmul(new_x, new_out_grad, True, False)"
DW_BROKEN = "new_y_grad = paddle._C_ops.matmul(new_out_grad, new_x, True, False)"


def git(root, *args) -> str:
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.com",
               GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@example.com")
    return subprocess.run(["git", "-C", str(root), *args], check=True, env=env,
                          capture_output=True, text=True).stdout


def make(root, files=(PASS_UTILS,)) -> str:
    """A checkout at ``root`` whose one commit holds ``files`` as installed."""
    os.makedirs(root, exist_ok=True)
    site = installed_root()
    for rel in files:
        dest = os.path.join(root, "python", rel)
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        shutil.copyfile(os.path.join(site, rel), dest)
    kernel = os.path.join(root, KERNEL)
    os.makedirs(os.path.dirname(kernel), exist_ok=True)
    with open(kernel, "w") as f:
        f.write("// FoldInitDims: [B, S, K] -> [B*S, K]\n")
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "installed Paddle")
    return str(root)


def edit(root, rel, old, new, count=-1) -> None:
    path = os.path.join(root, "python", rel) if not rel.startswith("paddle/phi") \
        else os.path.join(root, rel)
    with open(path) as f:
        text = f.read()
    assert old in text, f"{old!r} not in {rel}"
    with open(path, "w") as f:
        f.write(text.replace(old, new, count))


def commit(root, message) -> None:
    git(root, "commit", "-q", "-am", message)


def mend_fold(root) -> None:
    edit(root, PASS_UTILS, FOLD_331, FOLD_MENDED)
    edit(root, PASS_UTILS, OUT_FOLD_331, OUT_FOLD_MENDED)
    commit(root, "pass_utils: fold a dynamic leading dim to -1")


def break_dw(root) -> None:
    edit(root, PASS_UTILS, DW_331, DW_BROKEN)
    commit(root, "pass_utils: swap the dW matmul's operands")


def touch_kernel(root) -> None:
    edit(root, KERNEL, "FoldInitDims", "FoldInitDims (comment edited)")
    commit(root, "kernel comment")
