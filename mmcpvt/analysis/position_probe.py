"""The position probe (paper, Sec. 3.2 and Appendix B.3, position through
zero padding): how much absolute position the tokens of a block carry. A
ridge probe predicts each token's (row, column) from its standardised
features, fitted on half of the images and scored on the other half. A
model without position information scores R^2 near 0 (or below); a learned
position table, or a PEG's zero padding once it has spread, lets the probe
recover position.
"""
from typing import Dict

import torch

from .blocks import token_positions
from .equivariance import region_masks


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
    n_fit = (N // 2) * H * W
    x = maps.permute(0, 2, 3, 1).reshape(-1, C).double()  # (N*H*W, C)
    y = token_positions(H, W).repeat(N, 1)
    y_mean = y[:n_fit].mean(0)
    # closed-form ridge with intercept on standardised features
    mean, std = x[:n_fit].mean(0), x[:n_fit].std(0)
    xs = (x - mean) / torch.where(std > 1e-8, std, 1.)
    fit = xs[:n_fit]
    weight = torch.linalg.solve(fit.T @ fit + alpha * torch.eye(C).double(),
                                fit.T @ (y[:n_fit] - y_mean))
    pred, y = xs[n_fit:] @ weight + y_mean, y[n_fit:]
    scores = {}
    # the regions of an unshifted map: all, interior and border tokens
    for region, mask in region_masks((H, W), 0, 0, 'zero', border).items():
        held_out = mask.flatten().repeat(N - N // 2)
        p, t = pred[held_out], y[held_out]
        ss_tot = (t - t.mean(0)).pow(2).sum(0)
        r2 = torch.where(ss_tot > 0,
                         1 - (p - t).pow(2).sum(0) / ss_tot, float('nan'))
        mae = (p - t).abs().mean(0)
        scores[region] = dict(
            r2=float(r2.mean()), r2_row=float(r2[0]), r2_col=float(r2[1]),
            mae=float(mae.mean()), mae_row=float(mae[0]),
            mae_col=float(mae[1]),
            mae_mean_guess=float((t - y_mean).abs().mean()), tokens=len(t))
    return scores
