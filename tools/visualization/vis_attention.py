"""The attention matrix of one head of one block on an image, as in the
paper's Figs. 5 and 6 (Appendix D.3: a head of the second encoder over the
196 x 196 patch tokens at 224 px shows whether tokens attend to their
neighbours, i.e. know where they are), and the attention of a few query
tokens over the image; the softmax weights as the block computes them.

Writes to --out-dir: <image>_block<B>_head<H>_matrix.png (the patch tokens'
matrix, min-max normalised; --with-cls adds the class token's row and
column), ..._queries.png (each query's attention upsampled onto the image;
default queries: the centre and top-left patches and the class token) and,
with --save-npy, ..._matrix.npy. PVT blocks with spatial reduction give
N x N' matrices; Swin blocks attend in windows: the first window's matrix
is drawn (--save-npy keeps every window), and no query overlay.

Examples::

    # the paper's figure: second encoder (block 1), first head
    python tools/visualization/vis_attention.py \\
        configs/cpvt/cpvt-tiny_4xb256_in1k.py CKPT demo.jpg \\
        --block 1 --head 0 --out-dir work_dirs/attn
    # DeiT baseline, own queries (row, column; or cls)
    python tools/visualization/vis_attention.py \\
        configs/cpvt/deit-tiny_4xb256_in1k.py CKPT demo.jpg --block 2 \\
        --query 7 7 --query 0 13 --query cls --save-npy
"""
import argparse
import copy
import os
import os.path as osp

import numpy as np
import torch

from mmcpvt.analysis.attention import (attention_maps, default_queries,
                                       mean_attention_distance,
                                       save_matrix_png, save_query_overlay)
from mmcpvt.analysis.blocks import list_blocks, resolve_block
from mmcpvt.apis import cli, instruments
from mmcpvt.apis.cfg_options import parse_cfg_options
from mmcpvt.utils.checkpoint import require_file
from mmcpvt.utils.path import check_output_dir


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.split('\n\n')[0],
        epilog=__doc__.split('\n\n', 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    add = parser.add_argument
    add('config', help='classifier, detector or segmentor config')
    add('checkpoint')
    add('image', help='prepared by the config\'s test pipeline')
    add('--cfg-options', nargs='+', action='extend', metavar='KEY=VALUE',
        help='e.g. model.backbone.peg_cfg.padding_mode=circular')
    add('--device', default='cuda' if torch.cuda.is_available() else 'cpu',
        help='cpu or cuda (default: cuda if available)')
    add('--block', default='1', help='global index or STAGE.BLOCK (default '
        '1, the second encoder)')
    add('--head', type=int, default=0, help='default 0')
    add('--query', nargs='+', action='append', metavar='ROW COL',
        help='a query token: ROW COL of a patch, or cls; repeat for more')
    add('--out-dir', default='work_dirs/vis_attention',
        help='default work_dirs/vis_attention')
    add('--with-cls', action='store_true', help='draw the class token\'s '
        'row and column too (default: patch tokens only, as the paper)')
    add('--save-npy', action='store_true', help='the matrix as .npy too')
    args = parser.parse_args(argv)
    try:
        require_file(args.image, 'image')
        check_output_dir('--out-dir', args.out_dir, 'the results')
        args.cfg_options = parse_cfg_options(args.cfg_options)
    except (ValueError, FileNotFoundError) as e:
        parser.error(str(e))
    for i, q in enumerate(args.query or []):
        if q == ['cls']:
            args.query[i] = 'cls'
        elif len(q) == 2 and all(v.lstrip('-').isdigit() for v in q):
            args.query[i] = tuple(map(int, q))
        else:
            parser.error(f'--query takes ROW COL (patch token) or cls, got '
                         f'{" ".join(q)}')
    return parser, args


def main(argv=None):
    parser, args = parse_args(argv)
    try:
        model, backbone, cfg = instruments.load(
            args.config, args.checkpoint, args.device, args.cfg_options)
    except instruments.USAGE_ERRORS as e:
        parser.error(str(e))
    try:  # a RuntimeError from here on is ours, not the user's: no catch
        block = resolve_block(backbone, args.block)
        batch, rgb = image_from_file(cfg, model, args.image)
        maps = attention_maps(backbone, batch, block)
        full = maps.matrix(0, args.head, extra_tokens=True)
        matrix = maps.matrix(0, args.head, extra_tokens=args.with_cls)
        queries = args.query or (default_queries(maps)
                                 if maps.kind != 'window' else [])
        for q in queries:
            maps.query_index(q)  # checks the range
    except ValueError as e:
        parser.error(str(e))
    image_name = osp.splitext(osp.basename(args.image))[0]
    stem = osp.join(args.out_dir,
                    f'{image_name}_block{block}_head{args.head}')
    os.makedirs(args.out_dir, exist_ok=True)
    H, W = maps.hw_shape
    n = maps.num_extra_tokens
    extra = f'{n} class token + ' if n and args.with_cls else ''
    name = list_blocks(backbone)[block + 1].name
    title = (f'{type(backbone).__name__} {name}, head {args.head}: '
             f'{matrix.shape[0]}x{matrix.shape[1]} ({extra}{H}x{W} patches'
             f'{", " + maps.kind if maps.kind != "global" else ""})')
    print(title)
    print(f'rows sum to one: max |sum - 1| = '
          f'{float((full.sum(-1) - 1).abs().max()):.1e}')
    if n and maps.kind != 'window':
        print(f'patch queries give the class token '
              f'{float(full[n:, :n].sum(-1).mean()):.3f} of their attention '
              f'on average' + ('' if args.with_cls else ' (not drawn)'))
    save_matrix_png(matrix, stem + '_matrix.png', title)
    print(f'wrote {stem}_matrix.png')
    if maps.kind == 'window':
        print('Swin attends within windows: drawn is the first window\'s '
              'matrix; the per-query overlay needs global attention')
    else:
        print(f'mean attention distance: '
              f'{mean_attention_distance(maps, 0, args.head):.2f} tokens')
        save_query_overlay(maps, rgb, queries, stem + '_queries.png',
                           head=args.head, title=title)
        print(f'wrote {stem}_queries.png')
    if args.save_npy:
        array = maps.attn[:, args.head] if maps.kind == 'window' else matrix
        np.save(stem + '_matrix.npy', array.numpy())
        print(f'wrote {stem}_matrix.npy')


def image_from_file(cfg, model, path: str):
    """``(batch (1, 3, H, W), rgb (H, W, 3) uint8)``: an image file through
    the config's test pipeline (no annotations) and the data preprocessor,
    and the pipeline's image before normalisation, for display."""
    from mmengine.dataset import Compose
    pipeline = copy.deepcopy(cfg.get('test_dataloader', {}).get(
        'dataset', {}).get('pipeline') or cfg.get('test_pipeline', None))
    if not pipeline:
        raise ValueError('the config has no test pipeline '
                         '(test_dataloader.dataset.pipeline)')
    pipeline = [t for t in pipeline if 'LoadAnnotations' not in t['type']]
    packed = Compose(pipeline)(dict(img_path=path, img_id=0))
    image = packed['inputs']  # uint8 (C, H, W) in the BGR order of loading
    batch = instruments.preprocess(model, [image], [packed['data_samples']])
    return batch, image.flip(0).permute(1, 2, 0).numpy()


if __name__ == '__main__':
    main()
