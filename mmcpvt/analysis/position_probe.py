"""How much absolute position a block's tokens carry: a linear probe
(paper, Sec. 3.2 and Appendix B.3, position through zero padding).

A ridge regression predicts each token's (row, column) from its
standardised feature vector. It is fitted on the tokens of the first half
of the images and scored on the other, held-out half: R^2 and mean absolute
error (in tokens), for the whole map, the interior and the border (tokens
within ``border`` of an edge). A model without position information scores
R^2 near 0 (or below); a learned position table, or a PEG's zero padding
once it has spread, lets the probe recover position.
"""
from typing import Dict

import torch

REGIONS = ('all', 'interior', 'border')


def _grid(H: int, W: int) -> torch.Tensor:
    """(H*W, 2) (row, column) of the tokens, row-major."""
    rows, cols = torch.meshgrid(
        torch.arange(H, dtype=torch.float64),
        torch.arange(W, dtype=torch.float64),
        indexing='ij')
    return torch.stack((rows.flatten(), cols.flatten()), dim=1)


def border_mask(H: int, W: int, border: int = 1) -> torch.Tensor:
    """(H*W,) True for tokens within ``border`` of the edge."""
    rows, cols = _grid(H, W).unbind(1)
    return ((rows < border) | (rows >= H - border) | (cols < border)
            | (cols >= W - border))


def _tokens(maps: torch.Tensor) -> torch.Tensor:
    # (B, C, H, W) -> (B*H*W, C)
    return maps.permute(0, 2, 3, 1).reshape(-1, maps.shape[1]).double()


def fit_ridge(x: torch.Tensor, y: torch.Tensor, alpha: float = 1.0):
    """Closed-form ridge with intercept on standardised features.

    Returns:
        callable: ``predict(x) -> y`` (same standardisation).
    """
    mean, std = x.mean(0), x.std(0)
    std = torch.where(std > 1e-8, std, torch.ones_like(std))
    xs = (x - mean) / std
    y_mean = y.mean(0)
    gram = xs.T @ xs + alpha * torch.eye(x.shape[1], dtype=x.dtype)
    weight = torch.linalg.solve(gram, xs.T @ (y - y_mean))

    def predict(x_new: torch.Tensor) -> torch.Tensor:
        return ((x_new - mean) / std) @ weight + y_mean

    return predict


def _scores(pred: torch.Tensor, y: torch.Tensor,
            y_train_mean: torch.Tensor) -> Dict[str, float]:
    nan = float('nan')
    if len(y) == 0:
        return dict(r2=nan, r2_row=nan, r2_col=nan, mae=nan, mae_row=nan,
                    mae_col=nan, mae_mean_guess=nan, tokens=0)
    ss_res = (pred - y).pow(2).sum(0)
    ss_tot = (y - y.mean(0)).pow(2).sum(0)
    r2 = torch.where(ss_tot > 0, 1 - ss_res / ss_tot,
                     torch.full_like(ss_tot, nan))
    mae = (pred - y).abs().mean(0)
    return dict(
        r2=float(r2.mean()),
        r2_row=float(r2[0]),
        r2_col=float(r2[1]),
        mae=float(mae.mean()),
        mae_row=float(mae[0]),
        mae_col=float(mae[1]),
        # the error of always guessing the training mean position
        mae_mean_guess=float((y - y_train_mean).abs().mean()),
        tokens=len(y))


def position_probe(maps: torch.Tensor, border: int = 1,
                   alpha: float = 1.0) -> Dict[str, Dict[str, float]]:
    """Fit the probe on the first half of the images of ``maps`` and score
    it on the second half.

    Args:
        maps (Tensor): (N, C, H, W) features of N >= 2 images (e.g. one
            entry of :func:`block_features`).
        border (int): Border width in tokens. Defaults to 1.
        alpha (float): Ridge penalty on the standardised features, > 0.
            Defaults to 1.0.

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
                         f'{alpha}: without it the fit is singular where '
                         f'features are constant or collinear')
    if N < 2:
        raise ValueError(f'the probe needs at least 2 images (half to fit, '
                         f'half to test), got {N}')
    n_fit = N // 2
    pos = _grid(H, W)
    x_fit, x_test = _tokens(maps[:n_fit]), _tokens(maps[n_fit:])
    y_fit, y_test = pos.repeat(n_fit, 1), pos.repeat(N - n_fit, 1)
    predict = fit_ridge(x_fit, y_fit, alpha)
    pred = predict(x_test)
    edge = border_mask(H, W, border).repeat(N - n_fit)
    masks = dict(all=torch.ones_like(edge), interior=~edge, border=edge)
    return {
        region: _scores(pred[mask], y_test[mask], y_fit.mean(0))
        for region, mask in masks.items()
    }
