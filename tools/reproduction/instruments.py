"""The instruments of tools/analysis_tools/ (position probe, translation
equivariance) and tools/visualization/vis_attention.py on the lowest-seed
digit-canvas model of every variant (``digits_canvas.py --instruments``;
what they measure: docs/reproduction.md, "Instruments on the trained
models").
"""
import os.path as osp
import sys
from typing import List, Tuple

import numpy as np
import torch
from digits_report import markdown_table
from models import build_model, get_backbone  # tools/models.py

# the instruments' folders
TOOLS = osp.dirname(osp.dirname(osp.abspath(__file__)))
sys.path.insert(0, osp.join(TOOLS, 'analysis_tools'))
sys.path.insert(0, osp.join(TOOLS, 'visualization'))
from attention_figures import (save_matrix_png,  # noqa: E402
                               save_query_overlay)
from blocks import block_features  # noqa: E402
from position_probe import position_probe  # noqa: E402
from translation_equivariance import translation_equivariance  # noqa: E402
from vis_attention import (attention_maps, default_queries,  # noqa: E402
                           mean_attention_distance)

ATTENTION_BLOCK = 1  # the paper's Fig. 5 shows the second encoder
REGIONS = ('interior', 'border', 'all')


def run_instruments(runs: List[dict], canvases: torch.Tensor,
                    images: torch.Tensor) -> Tuple[dict, str]:
    """Run the instruments on the models of ``runs`` (as
    ``digits_canvas.run`` records them) with ``canvases`` (N, 1, H, W) in
    [0, 1] and ``images``, the same normalised as the models' input.

    Returns:
        tuple: (results per variant, markdown table). PNGs of the attention
        go to each model's work_dir.
    """
    first = {}
    for run in sorted(runs, key=lambda r: r['seed']):
        first.setdefault(run['variant'], run)
    results = {}
    for name, run in first.items():
        model, _, _ = build_model(osp.join(run['work_dir'], 'config.py'),
                                  osp.join(run['work_dir'], 'checkpoint.pth'))
        backbone = get_backbone(model)
        blocks = (0, backbone.num_layers - 1)
        maps = block_features(backbone, images, blocks)
        equiv = {e['block']: e for e in translation_equivariance(
            backbone, images, shifts=(1, 2, 3), mode='circular',
            blocks=blocks)}
        attn = attention_maps(backbone, images, ATTENTION_BLOCK)
        png = osp.join(run['work_dir'], f'attention_block{ATTENTION_BLOCK}')
        title = f'{name}: block {ATTENTION_BLOCK}, head 0'
        save_matrix_png(attn.matrix(0, 0), png + '_matrix.png', title)
        rgb = np.repeat(canvases[0, 0, :, :, None].numpy(), 3, axis=2)
        save_query_overlay(attn, rgb, default_queries(attn),
                           png + '_queries.png', title=title)
        probe = {b: position_probe(maps[b]) for b in blocks}
        results[name] = dict(
            seed=run['seed'],
            position_probe={f'block {b}': {k: probe[b][k]['r2']
                                           for k in REGIONS}
                            for b in blocks},
            equivariance={f'block {b}': {k: equiv[b][k] for k in REGIONS}
                          for b in blocks},
            attention=dict(block=ATTENTION_BLOCK, head=0,
                           mean_distance_tokens=float(np.mean([
                               mean_attention_distance(attn, image=i)
                               for i in range(len(images))])),
                           matrix_png=png + '_matrix.png',
                           queries_png=png + '_queries.png'))
        print(f'[instruments] {name}: done')
    return results, instruments_markdown(results)


def instruments_markdown(results: dict) -> str:

    def fmt(v) -> str:
        return 'n/a' if v is None or v != v else f'{v:.3f}'

    return markdown_table(
        'Position probe (R^2 of (row, column) from a token; held-out '
        'canvases) and translation equivariance (relative error, circular '
        'shifts of 1-3 patches), interior / border tokens; mean attention '
        f'distance of block {ATTENTION_BLOCK}, head 0, in tokens',
        ['probe R² block 0', 'probe R² last', 'equiv. error block 0',
         'equiv. error last', 'attention distance'],
        [(name, [f'{fmt(r[k][b]["interior"])} / {fmt(r[k][b]["border"])}'
                 for k in ('position_probe', 'equivariance') for b in r[k]] +
          [f'{r["attention"]["mean_distance_tokens"]:.2f}'])
         for name, r in results.items()])
