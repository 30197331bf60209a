"""tools/analysis_tools/eval_resolutions.py as a user runs it: a tiny
CPVT-GAP classifier trained a few epochs, then it and the
untrained model swept over two sizes; the tiny detector and segmentor of
test_det_seg_e2e.py untrained. The pipeline rewrite of each protocol and
bad inputs in-process."""
import json
import math
import os.path as osp
import re

import pytest
from mmengine.config import Config
from PIL import Image

import mmcpvt.apis.resolution as evaluation
from mmcpvt.datasets.synthetic.imagenet import make_imagenet
from tests.test_tools.test_det_seg_e2e import det_config, seg_config
from tests.utils import ROOT, explain, load_script, run_tool

TOOL = 'tools/analysis_tools/eval_resolutions.py'
CLS_CONFIG = osp.join(ROOT, 'configs', 'cpvt', 'cpvt-tiny_4xb256_in1k.py')
SIZE = 48  # training size of the tiny classifier
# seconds a tool may take: a few CPU seconds, far longer on a busy machine
TIMEOUT = 900


TINY_CLS = """\
_base_ = {base!r}
model = dict(
    backbone=dict(arch=dict(_delete_=True, embed_dims=32, num_layers=5,
                            num_heads=2, feedforward_channels=64),
                  img_size={size}),
    head=dict(num_classes=4, in_channels=32))
data_preprocessor = dict(num_classes=4)
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='RandomResizedCrop', scale={size}, backend='pillow'),
    dict(type='RandomFlip', prob=0.5, direction='horizontal'),
    dict(type='PackInputs')]
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='ResizeEdge', scale={resize}, edge='short', backend='pillow'),
    dict(type='CenterCrop', crop_size={size}), dict(type='PackInputs')]
loader = dict(batch_size=8, num_workers=0, persistent_workers=False)
train_dataloader = dict(**loader, dataset=dict(data_root={root!r},
                                               pipeline=train_pipeline))
val_dataloader = dict(**loader, dataset=dict(data_root={root!r},
                                             pipeline=test_pipeline))
test_dataloader = val_dataloader
val_evaluator = dict(type='Accuracy', topk=(1, ))
test_evaluator = val_evaluator
param_scheduler = []  # the base's rate throughout
randomness = dict(seed=0)
"""


def tiny_cls_config(tmp_path):
    """A tiny CPVT-GAP config over a generated ImageNet-layout set."""
    root = str(tmp_path / 'imagenet')
    make_imagenet(root, num_classes=4, train_per_class=16, val_per_class=8,
                  size=SIZE, seed=0)
    config = tmp_path / 'cpvt_tiny.py'
    config.write_text(TINY_CLS.format(
        base=osp.join(ROOT, 'configs', 'cpvt',
                      'cpvt-tiny-gap-p0-4_4xb256_in1k.py'),
        root=root, size=SIZE, resize=SIZE * 8 // 7))
    return str(config)


def finite_metrics(report, label, metric):
    """The model's ``metric`` at each size of the report, checked finite."""
    model = next(m for m in report['models'] if m['label'] == label)
    values = [model['metrics'][str(s)][metric] for s in report['sizes']]
    assert all(math.isfinite(v) for v in values), values
    return values


def test_cls_sweep_untrained_and_trained(tmp_path):
    config = tiny_cls_config(tmp_path)
    work_dir = str(tmp_path / 'train')
    proc = run_tool('tools/train.py', config, '--work-dir', work_dir,
                    '--cfg-options', 'train_cfg.max_epochs=6',
                    'train_cfg.val_interval=6',
                    'default_hooks.checkpoint.interval=6', timeout=TIMEOUT)
    assert proc.returncode == 0, explain(proc)
    ckpt = osp.join(work_dir, 'epoch_6.pth')

    out = str(tmp_path / 'sweep')
    proc = run_tool(TOOL, config, ckpt, '--no-checkpoint', '--sizes',
                    str(SIZE), '64', '--out-dir', out, timeout=TIMEOUT)
    assert proc.returncode == 0, explain(proc)
    # a progress line per run, then the table
    assert re.search(r'epoch_6\.pth: size 2/2 \(64 px\): accuracy/top1 '
                     r'[\d.]+ \(\d+ s; elapsed [\d:]+, ETA 0:00:00\)',
                     proc.stdout), explain(proc)
    assert re.search(rf'model +{SIZE}\* +64\nuntrained +[\d.]+ +[\d.]+\n'
                     r'epoch_6\.pth +[\d.]+ +[\d.]+', proc.stdout), \
        explain(proc)

    with open(osp.join(out, 'eval_resolutions.json')) as f:
        report = json.load(f)
    assert report['sizes'] == [SIZE, 64]
    assert report['train_size'] == SIZE
    assert report['metric'] == 'accuracy/top1'
    assert [m['label'] for m in report['models']] == [
        'untrained', 'epoch_6.pth']
    before = finite_metrics(report, 'untrained', 'accuracy/top1')
    after = finite_metrics(report, 'epoch_6.pth', 'accuracy/top1')
    assert all(b != a for b, a in zip(before, after)), (before, after)
    assert after[0] > before[0]  # the checkpoint was loaded and learned

    with Image.open(osp.join(out, 'eval_resolutions.png')) as png:
        png.verify()
        assert png.format == 'PNG' and png.size[0] > 100
    # the runner ran the rewritten pipeline (it dumps the config it ran)
    ran = Config.fromfile(
        osp.join(out, 'runs', 'epoch_6.pth', '64', 'cpvt_tiny.py'))
    assert [t.get('crop_size') for t in ran.test_dataloader.dataset.pipeline
            if t['type'] == 'CenterCrop'] == [64]


@pytest.mark.parametrize('task, sizes, says, metrics', [
    ('det', ('96', '128'), '96 px: Resize(scale=(144, 96), keep_ratio=True)',
     ('coco/bbox_mAP', 'coco/bbox_mAP_50')),
    ('seg', ('64', '96'), '96 px: Resize(scale=(256, 96), keep_ratio=True)',
     ('mIoU', ))])
def test_dense_sweep(tmp_path, task, sizes, says, metrics):
    config = (det_config(tmp_path, 1, 4, 160) if task == 'det' else
              seg_config(tmp_path, 1, 2, 64))
    out = str(tmp_path / 'sweep')
    proc = run_tool(TOOL, str(config), '--no-checkpoint', '--sizes', *sizes,
                    '--out-dir', out, timeout=TIMEOUT)
    assert proc.returncode == 0, explain(proc)
    assert says in proc.stdout, proc.stdout
    with open(osp.join(out, 'eval_resolutions.json')) as f:
        report = json.load(f)
    assert report['metric'] == metrics[0]
    for metric in metrics:
        assert min(finite_metrics(report, 'untrained', metric)) >= 0
    resize, = [t for t in report['test_pipelines']['96']
               if t['type'] == 'Resize']
    assert f'scale={tuple(resize["scale"])}' in says
    assert osp.isfile(osp.join(out, 'eval_resolutions.png'))


# ------------------------------------------------------ pipeline rewrite


def pipeline_at(config, size, protocol=None):
    cfg = Config.fromfile(config)
    return evaluation.set_test_size(cfg, size, protocol)


def test_cls_protocols():
    """DeiT's resize-crop and the whole-image resize on the real CPVT
    config; the config's pillow/bicubic resampling is kept."""
    resample = dict(backend='pillow', interpolation='bicubic')
    pipeline = pipeline_at(CLS_CONFIG, 384)  # the default: resize-crop
    assert pipeline == [
        dict(type='LoadImageFromFile'),
        dict(type='ResizeEdge', scale=438, edge='short', **resample),
        dict(type='CenterCrop', crop_size=384),
        dict(type='PackInputs'),
    ]
    for size, short in ((160, 182), (224, 256), (448, 512), (512, 585)):
        assert pipeline_at(CLS_CONFIG, size)[1]['scale'] == short
    assert pipeline_at(CLS_CONFIG, 160, 'resize') == [
        dict(type='LoadImageFromFile'),
        dict(type='Resize', scale=(160, 160), **resample),
        dict(type='PackInputs'),
    ]
    # a Resize-only pipeline gets DeiT's transform for resize-crop
    only_resize = [dict(type='LoadImageFromFile'),
                   dict(type='mmpretrain.Resize', scale=(64, 64)),
                   dict(type='PackInputs')]
    assert evaluation.resized_pipeline(
        only_resize, 96, 'classification') == [
            dict(type='LoadImageFromFile'),
            dict(type='ResizeEdge', scale=109, edge='short'),
            dict(type='CenterCrop', crop_size=96),
            dict(type='PackInputs'),
    ]
    # the runner builds what the rewrite gives, and it yields the size
    import numpy as np
    from mmengine.dataset import Compose
    from mmengine.registry import init_default_scope
    init_default_scope('mmpretrain')
    for protocol in ('resize-crop', 'resize'):
        steps = pipeline_at(CLS_CONFIG, 96, protocol)[1:-1]
        out = Compose(steps)(dict(img=np.zeros((120, 200, 3), np.uint8)))
        assert out['img'].shape[:2] == (96, 96)


@pytest.mark.parametrize('config, size, scale', [
    ('configs/retinanet_pvt_tiny_peg_1x_coco.py', 512, (853, 512)),
    ('configs/retinanet_pvt_tiny_peg_1x_coco.py', 800, (1333, 800)),
    ('configs/pvt_peg/fpn_pvt-t-peg_4xb4-80k_ade20k-512x512.py', 256,
     (1024, 256)),
])
def test_dense_short_side(config, size, scale):
    """The test Resize's scale: the config's times size / its shorter
    entry, keep_ratio kept; the rest of the pipeline as it was."""
    cfg = Config.fromfile(osp.join(ROOT, config))
    before = [dict(t) for t in cfg.test_dataloader.dataset.pipeline]
    after = evaluation.set_test_size(cfg, size)
    assert cfg.test_dataloader.dataset.pipeline == after
    i = [t['type'] for t in before].index('Resize')
    assert after[i] == dict(before[i], scale=scale)
    assert after[i]['keep_ratio'] is True
    assert after[:i] + after[i + 1:] == before[:i] + before[i + 1:]


def test_rewrite_errors():
    """Those the tool cannot reach (its refusals of a pipeline without
    resize and of another task's protocol: test_bad_inputs)."""
    with pytest.raises(ValueError, match='must be positive, got 0'):
        pipeline_at(CLS_CONFIG, 0)
    with pytest.raises(ValueError, match='scale_factor=0.5'):
        evaluation.resized_pipeline(
            [dict(type='Resize', scale_factor=0.5, keep_ratio=True)], 96,
            'detection')


# ------------------------------------------------------------ bad input


@pytest.fixture(scope='module')
def tool():
    return load_script(TOOL)


def test_help_documents_protocols(tool, capsys):
    with pytest.raises(SystemExit):
        tool.parse_args(['--help'])
    text = capsys.readouterr().out
    for word in ('resize-crop', 'short-side', '256 // 224',
                 'resize their tables bicubically', '--no-checkpoint',
                 '1 to 4096'):
        assert word in text


def test_bad_inputs(tool, capsys, tmp_path):
    ckpt = tmp_path / 'a.pth'
    ckpt.write_bytes(b'')
    no_test = tmp_path / 'no_test.py'
    no_test.write_text("default_scope = 'mmpretrain'\n"
                       "model = dict(type='ImageClassifier')\n")
    no_resize = tmp_path / 'no_resize.py'
    no_resize.write_text(
        f'_base_ = {CLS_CONFIG!r}\n'
        "test_dataloader = dict(dataset=dict(pipeline=[\n"
        "    dict(type='LoadImageFromFile'), dict(type='PackInputs')]))\n")
    cases = [
        (['missing.py', str(ckpt)], 'config file not found: missing.py'),
        ([CLS_CONFIG], 'give at least one CHECKPOINT; to evaluate the model '
         'as initialised, pass --no-checkpoint'),
        ([CLS_CONFIG, 'nope.pth'], 'checkpoint file not found: nope.pth'),
        ([CLS_CONFIG, str(ckpt), '--sizes', '224', '0'],
         'argument --sizes: a size is 1 to 4096 px (larger test images do '
         'not fit in memory), got 0'),
        # refused, not killed for memory
        ([CLS_CONFIG, str(ckpt), '--sizes', '224', '100000'],
         'argument --sizes: a size is 1 to 4096 px (larger test images do '
         'not fit in memory), got 100000'),
        ([CLS_CONFIG, str(ckpt), '--out-dir', str(ckpt / 'out')],
         f'--out-dir {ckpt / "out"}: {ckpt} is a file; it takes a '
         'directory'),
        ([CLS_CONFIG, str(ckpt), '--protocol', 'short-side'],
         '--protocol short-side is not one of classification: resize-crop, '
         'resize'),
        ([CLS_CONFIG, str(ckpt), '--labels', 'a', 'b'],
         '--labels gives 2 names for 1 checkpoints'),
        ([str(no_test), str(ckpt)],
         'has no test_dataloader and no test_evaluator: there is no test '
         'loop to run'),
        ([str(no_resize), str(ckpt)],
         'its transforms are: LoadImageFromFile, PackInputs'),
    ]
    for argv, message in cases:
        with pytest.raises(SystemExit) as e:
            tool.main(argv)
        err = capsys.readouterr().err
        assert e.value.code == 2 and message in err, (argv, err)
