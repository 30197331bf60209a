"""How much absolute position the tokens of each block carry (paper, Sec. 3.2
and Appendix B.3, position through zero padding): a linear (ridge) probe
predicts each token's (row, column) from its standardised features, fitted
on half of the images and scored on the other half (R^2 and mean absolute
error in tokens; whole map, interior, border: the tokens within --border of
an edge). A model without position information scores R^2 near 0 (or
below); a learned position table, or a PEG's zero padding once it has
spread, lets the probe recover position.

Examples::

    # blocks 0 and 1 of a trained CPVT-Ti on 64 ImageNet validation images
    python tools/analysis_tools/position_probe.py \\
        configs/cpvt/cpvt-tiny_4xb256_in1k.py CKPT --block 0 1 --out p.json
    # every block, untrained, noise images (no data needed)
    python tools/analysis_tools/position_probe.py \\
        configs/cpvt/cpvt-tiny_4xb256_in1k.py --random-images
    # PVT / Swin blocks as STAGE.BLOCK
    python tools/analysis_tools/position_probe.py \\
        configs/pvt_peg/pvt-t-peg-gap_8xb128_in1k.py CKPT --block 0.0 1.1
"""
import os.path as osp
import sys
from typing import Dict, List

import torch

# tools/ (common.py, models.py) and this folder (analysis_cli.py, blocks.py)
sys.path.insert(0, osp.dirname(osp.dirname(osp.abspath(__file__))))
sys.path.insert(0, osp.dirname(osp.abspath(__file__)))
import common  # noqa: E402

common.setup()
import analysis_cli as cli  # noqa: E402
from blocks import block_features, token_positions  # noqa: E402
# REGIONS: the keys of position_probe's result
from translation_equivariance import REGIONS, region_masks  # noqa: E402


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


def parse_args(argv=None):
    return cli.parse_instrument_args(
        __doc__, argv, 'probe', num_images=64, out_example='probe.json',
        alpha=dict(type=common.checked(
            float, lambda v: v > 0, 'the ridge penalty must be > 0 (0 '
            'leaves the fit singular where features are constant)'),
            default=1.0, help='ridge penalty, > 0 (default 1.0)'))


def main(argv=None):
    parser, args = parse_args(argv)
    backbone, infos, images = cli.backbone_blocks_images(parser, args)
    if len(images) < 2:
        parser.error('the probe needs at least 2 images (half to fit, half '
                     'to test)')
    stride = max(i.stride for i in infos)
    # every region's R^2 needs an interior of 2x2 inside the border
    side = 2 * args.border + 2
    if min(images.shape[-2:]) < side * stride:
        parser.error(
            f'{cli.size_option(args, images)} gives too few tokens for the '
            f'probe: it needs {side}x{side} tokens (an interior of 2x2 '
            f'inside a border of {args.border}) at every block probed, '
            f'whose largest stride is {stride} px: at least {side * stride} '
            'px')
    feats = block_features(backbone, images, [i.index for i in infos],
                           progress=cli.stderr_progress('features (images)'))
    rows = [dict(block=i.index, name=i.name,
                 grid=list(feats[i.index].shape[-2:]),
                 channels=feats[i.index].shape[1],
                 **position_probe(feats[i.index], args.border, args.alpha))
            for i in infos]
    n_fit = len(images) // 2
    print(f'position probe: ridge (alpha {args.alpha}) fitted on {n_fit} '
          f'images, scored on {len(images) - n_fit} held-out images; border '
          f'= {args.border} token(s); MAE in tokens')
    print(format_table(rows))
    cli.write_results(args, images, alpha=args.alpha, blocks=rows)


def format_table(rows: List[dict]) -> str:
    """Rows ``{'name', 'grid', 'all', 'interior', 'border'}`` (scores as
    :func:`position_probe` returns them) as a text table."""
    return cli.text_table(
        ['block', 'grid', 'R2 all', 'R2 int', 'R2 bord', 'MAE all',
         'MAE int', 'MAE bord', 'MAE guess'],
        [[r['name'], 'x'.join(map(str, r['grid']))] +
         [f'{r[k]["r2"]:.3f}' for k in REGIONS] +
         [f'{r[k]["mae"]:.2f}' for k in REGIONS] +
         [f'{r["all"]["mae_mean_guess"]:.2f}'] for r in rows])


if __name__ == '__main__':
    main()
