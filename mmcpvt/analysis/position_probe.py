"""The position probe (paper, Sec. 3.2 and Appendix B.3, position through
zero padding): how much absolute position the tokens of a block carry. A
linear (ridge) probe predicts each token's (row, column) from its
standardised features, fitted on half of the images and scored on the
other half (R^2 and mean absolute error in tokens; whole map, interior,
border). A model without position information scores R^2 near 0 (or
below); a learned position table, or a PEG's zero padding once it has
spread, lets the probe recover position.
"""
from typing import Dict

import torch

from .blocks import token_positions
from .equivariance import region_masks


def _scores(pred: torch.Tensor, y: torch.Tensor,
            y_fit_mean: torch.Tensor) -> Dict[str, float]:
    """R^2 and mean absolute errors of ``pred`` (NaN for no tokens)."""
    ss_res = (pred - y).pow(2).sum(0)
    ss_tot = (y - y.mean(0)).pow(2).sum(0)
    r2 = torch.where(ss_tot > 0, 1 - ss_res / ss_tot, float('nan'))
    mae = (pred - y).abs().mean(0)
    return dict(
        r2=float(r2.mean()),
        r2_row=float(r2[0]),
        r2_col=float(r2[1]),
        mae=float(mae.mean()),
        mae_row=float(mae[0]),
        mae_col=float(mae[1]),
        mae_mean_guess=float((y - y_fit_mean).abs().mean()),
        tokens=len(y))


def position_probe(maps: torch.Tensor, border: int = 1,
                   alpha: float = 1.0) -> Dict[str, Dict[str, float]]:
    """The probe on ``maps`` (N, C, H, W), the features of N >= 2 images
    (e.g. an entry of :func:`block_features`): fitted on the first half of
    the images, with ridge penalty ``alpha`` > 0 on the standardised
    features, and scored on the second half.

    Returns:
        dict: ``{'all' | 'interior' | 'border': scores}``, each with ``r2``
        (mean of rows and columns), ``r2_row``, ``r2_col``, ``mae`` (mean
        absolute error in tokens, mean over rows and columns), ``mae_row``,
        ``mae_col``, ``mae_mean_guess`` (error of always guessing the mean
        position) and ``tokens`` (held-out tokens). R^2 of a region is
        against that region's own mean (NaN for an empty region or one
        without spread).
    """
    N, C, H, W = maps.shape
    if not alpha > 0:  # NaN included
        raise ValueError(f'alpha (the ridge penalty) must be > 0, got '
                         f'{alpha}: the fit is singular without it')
    if N < 2:
        raise ValueError(f'the probe needs at least 2 images (half to fit, '
                         f'half to test), got {N}')
    n_fit = N // 2
    x = maps.permute(0, 2, 3, 1).reshape(-1, C).double()  # (N*H*W, C)
    x_fit, x_test = x[:n_fit * H * W], x[n_fit * H * W:]
    y = token_positions(H, W).repeat(N, 1)
    y_fit, y_test = y[:n_fit * H * W], y[n_fit * H * W:]
    # closed-form ridge with intercept on standardised features
    mean, std = x_fit.mean(0), x_fit.std(0)
    std = torch.where(std > 1e-8, std, 1.)
    xs = (x_fit - mean) / std
    gram = xs.T @ xs + alpha * torch.eye(C, dtype=xs.dtype)
    weight = torch.linalg.solve(gram, xs.T @ (y_fit - y_fit.mean(0)))
    pred = ((x_test - mean) / std) @ weight + y_fit.mean(0)
    scores = {}
    # the regions of an unshifted map: all, interior and border tokens
    for region, mask in region_masks((H, W), 0, 0, 'zero', border).items():
        held_out = mask.flatten().repeat(N - n_fit)
        scores[region] = _scores(pred[held_out], y_test[held_out],
                                 y_fit.mean(0))
    return scores
