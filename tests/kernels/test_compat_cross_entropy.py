"""A cross-entropy forward + backward written the way Liger-Kernel writes its fused one,
run unchanged on both backends against float64 numpy (issue 10, family 6).

One program per row of logits: an online softmax walks the row in ``BLOCK_SIZE`` chunks
(running max ``m`` and rescaled sum ``d``, starting from ``float("-inf")`` and ``0.0``),
a second walk overwrites the logits *in place* with the gradient, then
``ml.debug_barrier()`` makes those stores visible before the program reads the target's
gradient back (written by whichever thread held that column) to subtract the one-hot
term, and finally writes the loss. Rows whose target is ``ignore_index`` get a zero
gradient and no loss; label smoothing and ``reduction="mean"``/``"sum"`` follow the
published formulas. The row length is not a multiple of the block, so the tail is
masked; the loss array is poisoned before the launch.
"""
from __future__ import annotations

import numpy as np
import pytest

import mutile
import mutile.language as tl

from ..conftest import poison


@mutile.jit
def cross_entropy_kernel(X_ptr, X_stride, Y_ptr, Y_stride, loss_ptr, loss_stride, n_cols,
                         n_non_ignore, ignore_index, label_smoothing: tl.constexpr,
                         reduction: tl.constexpr, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    Y_ptr += row * Y_stride
    X_ptr += row * X_stride
    loss_ptr += row * loss_stride
    y = tl.load(Y_ptr)

    # an ignored row: zero gradient, no loss
    if y == ignore_index:
        for i in range(0, n_cols, BLOCK_SIZE):
            offs = i + tl.arange(0, BLOCK_SIZE)
            tl.store(X_ptr + offs, 0.0, mask=offs < n_cols)
        tl.store(loss_ptr, 0.0)
        return

    # pass 1: online softmax statistics over the row
    m = float("-inf")
    d = 0.0
    x_y = tl.load(X_ptr + y).cast(tl.float32)
    eps = label_smoothing / n_cols
    smooth_sum = 0.0
    for i in range(0, n_cols, BLOCK_SIZE):
        offs = i + tl.arange(0, BLOCK_SIZE)
        block = tl.load(X_ptr + offs, mask=offs < n_cols, other=float("-inf")).cast(tl.float32)
        block_max = tl.max(block)
        if label_smoothing > 0:
            smooth_sum += tl.sum(tl.where(offs < n_cols, -eps * block, 0.0))
        m_new = tl.maximum(m, block_max)
        d = d * tl.exp(m - m_new) + tl.sum(tl.exp(block - m_new))
        m = m_new

    # pass 2: the gradient softmax(x) - eps, in place of the logits
    for i in range(0, n_cols, BLOCK_SIZE):
        offs = i + tl.arange(0, BLOCK_SIZE)
        block = tl.load(X_ptr + offs, mask=offs < n_cols, other=float("-inf")).cast(tl.float32)
        if reduction == "mean":
            block = (tl.exp(block - m) / d - eps) / n_non_ignore
        else:
            block = tl.exp(block - m) / d - eps
        tl.store(X_ptr + offs, block, mask=offs < n_cols)

    # the stores above must land before this program reads X[y] back
    tl.debug_barrier()

    loss = -(x_y - m - tl.log(d))
    if label_smoothing > 0:
        smooth_loss = smooth_sum + label_smoothing * (m + tl.log(d))
        loss = loss * (1 - label_smoothing) + smooth_loss
    if reduction == "mean":
        loss = loss / n_non_ignore

    grad_y = tl.load(X_ptr + y)
    if reduction == "mean":
        grad_y += -(1 - label_smoothing) / n_non_ignore
    else:
        grad_y += -(1 - label_smoothing)
    tl.store(loss_ptr, loss)
    tl.store(X_ptr + y, grad_y)


def cross_entropy(logits, target, ignore_index=-100, label_smoothing=0.0, reduction="mean",
                  block=32, backend=None):
    """Host side, as the library's: the logits become their gradient; returns the loss."""
    n_rows, n_cols = logits.shape
    n_non_ignore = int((target != ignore_index).sum())
    loss = poison(n_rows, np.float32)
    cross_entropy_kernel[(n_rows,)](logits, logits.strides[0] // logits.itemsize, target,
                                    target.strides[0] // target.itemsize, loss, 1, n_cols,
                                    n_non_ignore, ignore_index, label_smoothing=label_smoothing,
                                    reduction=reduction, BLOCK_SIZE=block, backend=backend)
    return loss.sum() if reduction != "none" else loss, loss


def reference(x, target, ignore_index, ls, reduction):
    """float64 loss per row and gradient of the (mean or summed) smoothed cross-entropy."""
    x = x.astype(np.float64)
    n_rows, n_cols = x.shape
    keep = target != ignore_index
    n = keep.sum()
    lse = np.log(np.exp(x - x.max(1, keepdims=True)).sum(1)) + x.max(1)
    p = np.exp(x - lse[:, None])
    safe_t = np.where(keep, target, 0)
    nll = lse - x[np.arange(n_rows), safe_t]
    smooth = lse - x.mean(1)                      # the uniform target's cross-entropy
    loss = (1 - ls) * nll + ls * smooth
    grad = p - ls / n_cols
    grad[np.arange(n_rows), safe_t] -= 1 - ls
    if reduction == "mean":
        loss, grad = loss / n, grad / n
    loss[~keep], grad[~keep] = 0, 0
    return loss, grad


@pytest.mark.parametrize("n_cols,ls,reduction", [(100, 0.0, "mean"), (77, 0.1, "sum"),
                                                 (128, 0.2, "mean")])
def test_cross_entropy_forward_and_gradient(n_cols, ls, reduction, rng, backend):
    n_rows, ignore = 6, -100
    x = (rng.standard_normal((n_rows, n_cols)) * 3).astype(np.float32)
    target = rng.integers(0, n_cols, n_rows).astype(np.int64)
    target[2] = ignore
    want_loss, want_grad = reference(x, target, ignore, ls, reduction)
    logits = x.copy()
    total, per_row = cross_entropy(logits, target, ignore, ls, reduction, backend=backend)
    np.testing.assert_allclose(per_row, want_loss, rtol=2e-5, atol=1e-6, err_msg="loss")
    np.testing.assert_allclose(logits, want_grad, rtol=2e-5, atol=1e-7, err_msg="gradient")
    np.testing.assert_allclose(total, want_loss.sum(), rtol=2e-5)
    assert (logits[2] == 0).all() and per_row[2] == 0, "the ignored row"
    kept = target != ignore                       # softmax sums to 1: each gradient row to 0
    np.testing.assert_allclose(logits[kept].sum(1), 0, atol=1e-5)
