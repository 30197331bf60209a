"""Parameters and FLOPs of a config's model (or of every config).

Uses mmengine's counter, as mmpretrain / mmdet / mmseg's get_flops do
(multiply-adds counted as FLOPs). For classifiers only the backbone is
counted (mmpretrain's convention); detectors and segmentors are counted
whole, without post-processing. The fused attention kernel is invisible to
the counter, so attention runs on its explicit path while counting.

    python tools/analysis_tools/get_flops.py configs/cpvt/cpvt-tiny_4xb256_in1k.py
    python tools/analysis_tools/get_flops.py --all configs --markdown
"""
import argparse
import glob
import os.path as osp
import sys

sys.path.insert(0, osp.dirname(osp.dirname(osp.abspath(__file__))))
import common  # noqa: E402  (tools/common.py)

common.setup()
import torch  # noqa: E402
from mmengine.analysis import get_model_complexity_info  # noqa: E402
from mmengine.config import Config  # noqa: E402
from mmengine.logging import MMLogger  # noqa: E402

from mmcpvt.analysis import init_model  # noqa: E402
from mmcpvt.models.layers import Attention  # noqa: E402


def build(cfg: Config):
    """The model of ``cfg`` by its library's init function, in eval mode
    (counting needs no weights: ``Pretrained`` init_cfg dropped)."""
    model = init_model(cfg).eval()
    for m in model.modules():
        if isinstance(m, Attention):
            m.fused_attn = False
    return model


def count(config: str, shape):
    cfg = Config.fromfile(config)
    model = build(cfg)
    inputs = torch.randn(1, 3, *shape)
    if hasattr(model, 'extract_feat') and cfg.default_scope == 'mmpretrain':
        model.forward = model.extract_feat
        result = get_model_complexity_info(
            model, inputs=(inputs, ), show_table=False, show_arch=False)
    else:  # detector / segmentor: the network without post-processing
        model.forward = model._forward
        result = get_model_complexity_info(
            model, inputs=(inputs, ), show_table=False, show_arch=False)
    params = sum(p.numel() for p in model.parameters())
    return params, result['flops']


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('config', nargs='?', help='config file')
    parser.add_argument('--all', metavar='DIR',
                        help='count every config under DIR instead')
    parser.add_argument('--shape', type=int, nargs='+', default=None,
                        help='input H [W]; default 224 for classifiers, '
                        '1280 800 for detectors, 512 512 for segmentors')
    parser.add_argument('--markdown', action='store_true')
    args = parser.parse_args()
    if not args.config and not args.all:
        parser.error('give a config or --all DIR')
    MMLogger.get_instance('mmengine').setLevel('ERROR')
    configs = sorted(
        glob.glob(osp.join(args.all, '**', '*.py'), recursive=True)
    ) if args.all else [args.config]
    configs = [c for c in configs if '_base_' not in c]
    if args.markdown:
        print('| config | input | params (M) | FLOPs (G) |')
        print('|---|---|---|---|')
    for config in configs:
        if not osp.isfile(config):
            raise SystemExit(f'error: no config file at {config}')
        scope = Config.fromfile(config).get('default_scope', 'mmpretrain')
        default = {'mmpretrain': [224], 'mmdet': [800, 1280],
                   'mmseg': [512]}.get(scope, [224])
        shape = args.shape or default
        shape = shape * 2 if len(shape) == 1 else shape
        params, flops = count(config, shape)
        if args.markdown:
            print(f'| {config} | {shape[0]}x{shape[1]} | {params / 1e6:.2f} '
                  f'| {flops / 1e9:.2f} |')
        else:
            print(f'{config}: input {shape[0]}x{shape[1]}, params '
                  f'{params / 1e6:.2f} M, FLOPs {flops / 1e9:.2f} G')


if __name__ == '__main__':
    main()
