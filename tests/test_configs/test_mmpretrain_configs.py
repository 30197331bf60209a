"""Generic checks over every mmpretrain config (configs/cpvt, ablations, and
the ImageNet-1k configs of configs/pvt_peg and configs/swin_peg): it builds,
classifies any image size, trains through its own preprocessor and batch
augments, and carries its family's recipe: DeiT's, which CPVT keeps
(appendix, "The Hyperparameters of CPVT"), PVT's or Swin's; PVT+PEG and
Swin+PEG use "the same training settings" as their baselines (Sec. 4.6).
"""
import glob
import math
import os.path as osp
import re

import numpy as np
import pytest
import torch

from mmengine.config import Config
from mmengine.optim import build_optim_wrapper
from mmengine.registry import init_default_scope
from mmpretrain.registry import MODELS, TRANSFORMS
from mmpretrain.structures import DataSample

import mmcpvt  # noqa: F401  (registers CPVT and the PEG)
from mmcpvt.models.layers.peg import ConditionalPositionEncoding
from tests.utils import ROOT, n_params

CONFIGS = sorted(
    glob.glob(osp.join(ROOT, 'configs', 'cpvt', '*.py')) +
    glob.glob(osp.join(ROOT, 'configs', 'ablations', '*.py')) +
    # the folders also hold mmdet / mmseg configs (tests/test_configs/
    # test_dense_configs.py)
    glob.glob(osp.join(ROOT, 'configs', 'pvt_peg', '*in1k*.py')) +
    glob.glob(osp.join(ROOT, 'configs', 'swin_peg', '*in1k*.py')))
IDS = [osp.relpath(p, osp.join(ROOT, 'configs')) for p in CONFIGS]
# Model families: folder -> (backbone type, metafile)
FAMILIES = {
    'cpvt': ('CPVT', 'cpvt/metafile.yml'),
    'ablations': ('CPVT', None),
    'pvt_peg': ('PVTPEG', 'pvt_peg/metafile_in1k.yml'),
    'swin_peg': ('SwinPEG', 'swin_peg/metafile_in1k.yml'),
}
# Single-purpose ablations with a backbone class of their own.
BACKBONES = {'ablations/cpvt-tiny-qk-only_4xb256_in1k.py': 'CPVTQKOnly'}


def _peg(C, k=3):
    """One depth-wise k x k convolution with bias."""
    return C * k * k + C


def _table(C):
    """DeiT's learned position table, class token slot included."""
    return (14 * 14 + 1) * C


def _rpe(head_dims, K=8):
    """One encoder's 2-D relative key table (Shaw et al.): (2K+1)^2 clipped
    offsets and the class-token row, a head-sized vector each."""
    return ((2 * K + 1)**2 + 1) * head_dims


# Published DeiT counts (with the 1000-class head); the others follow the
# paper's arithmetic (Sec. "Complexity of PEG"): remove the table, add PEGs.
# Every config has its count here: add one for a new config.
PARAMS = {}
for size, deit, C in (('tiny', 5_717_416, 192), ('small', 22_050_664, 384),
                      ('base', 86_567_656, 768)):
    cpvt = deit - _table(C) + _peg(C)  # CPVT-Ti: 5,681,512
    PARAMS.update({
        f'cpvt/deit-{size}_4xb256_in1k.py': deit,
        f'cpvt/cpvt-{size}_4xb256_in1k.py': cpvt,
        # double dagger: PEGs after encoders 0-4, i.e. four more than CPVT
        f'cpvt/cpvt-{size}-p0-4_4xb256_in1k.py': cpvt + 4 * _peg(C),
        # GAP: no class token
        f'cpvt/cpvt-{size}-gap-p0-4_4xb256_in1k.py': cpvt + 4 * _peg(C) - C,
    })
DEIT_TI, CPVT_TI = (PARAMS[f'cpvt/{m}-tiny_4xb256_in1k.py']
                    for m in ('deit', 'cpvt'))
NOPE_TI = DEIT_TI - _table(192)  # neither table nor PEG
DENSE_3X3 = 192 * 192 * 9
# the PEG moves, or is fixed, circular or unpadded: same count
PARAMS.update({f'ablations/cpvt-tiny-{name}_4xb256_in1k.py': CPVT_TI
               for name in ('p-1', 'p3', 'p6', 'p10', 'fixed',
                            'fixed-learned-init', 'no-zero-pad', 'no-pad',
                            'qk-only')})
PARAMS.update({
    'ablations/cpvt-tiny-p0-10_4xb256_in1k.py': CPVT_TI + 10 * _peg(192),
    # beyond the paper: RoPE-Mixed's frequencies, (x, y) x 12 encoders x 3
    # heads x 64 / 2
    'cpvt/cpvt-tiny-rope-mixed_4xb256_in1k.py': CPVT_TI + 2 * 12 * 3 * 32,
    # other forms of PEG
    'ablations/cpvt-tiny-k27-p-1_4xb256_in1k.py': NOPE_TI + _peg(192, 27),
    'ablations/cpvt-tiny-k7_4xb256_in1k.py': NOPE_TI + _peg(192, 7),
    'ablations/cpvt-tiny-dense_4xb256_in1k.py': NOPE_TI + DENSE_3X3 + 192,
    # conv + BN (weight, bias): the conv has no bias
    'ablations/cpvt-tiny-4xdw-bn-relu_4xb256_in1k.py':
    NOPE_TI + 4 * (192 * 9 + 2 * 192),
    'ablations/cpvt-tiny-4xdense-bn-relu_4xb256_in1k.py':
    NOPE_TI + 4 * (DENSE_3X3 + 2 * 192),
    'ablations/cpvt-tiny-k1-dense-p0-11_4xb256_in1k.py':
    NOPE_TI + 12 * (192 * 192 + 192),  # the paper's 6.13M
    # other position encodings
    'ablations/cpvt-tiny-learned-pe_4xb256_in1k.py': CPVT_TI + _table(192),
    'ablations/deit-tiny-sincos2d_4xb256_in1k.py': NOPE_TI,  # not learned
    'ablations/deit-tiny-nope_4xb256_in1k.py': NOPE_TI,
    # 12 encoders x 18,560 = 222,720 (not the paper's 40,011: see the README)
    'ablations/deit-tiny-rpe_4xb256_in1k.py': NOPE_TI + 12 * _rpe(64),
    'ablations/deit-tiny-learned-pe-rpe_4xb256_in1k.py':
    DEIT_TI + 12 * _rpe(64),
    # a table at the start and after each of encoders 0-4
    'ablations/deit-tiny-learned-pe-6_4xb256_in1k.py':
    DEIT_TI + 5 * _table(192),
    # no class token, so no class slot in the table either
    'ablations/deit-tiny-gap_4xb256_in1k.py': DEIT_TI - 192 - 192,
})

# PVT v1 (+ PEG + GAP), 1000-class head. PVT-S/M+PEG+GAP are Twins-PCPVT-S/B,
# whose training logs (Meituan-AutoML/Twins, logs/pcpvt_{s,b}.txt) report
# 24,106,216 and 43,828,456; tiny and large (Twins-PCPVT-L, 60.99 M in
# mmpretrain's metafile) are counted on the built model.
PVT_T_PEG_GAP, PVT_S_PEG_GAP, PVT_M_PEG_GAP = (12_849_640, 24_106_216,
                                               43_828_456)
PVT_L_PEG_GAP = 60_989_672
PVT_DIMS = (64, 128, 320, 512)
PVT_PEGS = sum(_peg(C) for C in PVT_DIMS)  # 10,240: one PEG per stage
# PVT's learned tables at 224x224: 56x56, 28x28, 14x14, 7x7 tokens ...
PVT_TABLES = sum((224 // s)**2 * C for s, C in zip((4, 8, 16, 32), PVT_DIMS))
PVT_CLS = 512  # ... and the class token, with a slot of its own in table 4
PVT_T = PVT_T_PEG_GAP - PVT_PEGS + PVT_TABLES + 2 * PVT_CLS  # 13,229,288
# Swin-T: timm's swin_tiny_patch4_window7_224; a PEG per stage (96-768)
SWIN_T = 28_288_354
SWIN_T_PEG = SWIN_T + sum(_peg(96 * 2**i) for i in range(4))  # 28,302,754
PARAMS.update({
    'pvt_peg/pvt-t-peg-gap_8xb128_in1k.py': PVT_T_PEG_GAP,
    'pvt_peg/pvt-s-peg-gap_8xb128_in1k.py': PVT_S_PEG_GAP,
    'pvt_peg/pvt-m-peg-gap_8xb128_in1k.py': PVT_M_PEG_GAP,
    'pvt_peg/pvt-l-peg-gap_8xb128_in1k.py': PVT_L_PEG_GAP,
    'pvt_peg/pvt-t_8xb128_in1k.py': PVT_T,
    'pvt_peg/pvt-s_8xb128_in1k.py':
    PVT_S_PEG_GAP - PVT_PEGS + PVT_TABLES + 2 * PVT_CLS,
    'pvt_peg/pvt-m_8xb128_in1k.py':
    PVT_M_PEG_GAP - PVT_PEGS + PVT_TABLES + 2 * PVT_CLS,
    # the paper's two ablations: tables + GAP; PEG + class token (no slot)
    'pvt_peg/pvt-t-gap_8xb128_in1k.py': PVT_T_PEG_GAP - PVT_PEGS + PVT_TABLES,
    'pvt_peg/pvt-t-peg_8xb128_in1k.py': PVT_T_PEG_GAP + PVT_CLS,
    'swin_peg/swin-t_16xb64_in1k.py': SWIN_T,
    'swin_peg/swin-t-peg_16xb64_in1k.py': SWIN_T_PEG,
})
# Each baseline is its PEG config with only the position encoding changed.
BASELINES = {
    'pvt_peg/pvt-t_8xb128_in1k.py': 'pvt_peg/pvt-t-peg-gap_8xb128_in1k.py',
    'pvt_peg/pvt-s_8xb128_in1k.py': 'pvt_peg/pvt-s-peg-gap_8xb128_in1k.py',
    'pvt_peg/pvt-m_8xb128_in1k.py': 'pvt_peg/pvt-m-peg-gap_8xb128_in1k.py',
    'pvt_peg/pvt-t-gap_8xb128_in1k.py': 'pvt_peg/pvt-t-peg-gap_8xb128_in1k.py',
    'pvt_peg/pvt-t-peg_8xb128_in1k.py': 'pvt_peg/pvt-t-peg-gap_8xb128_in1k.py',
    'swin_peg/swin-t_16xb64_in1k.py': 'swin_peg/swin-t-peg_16xb64_in1k.py',
}

LR = 5e-4 * 1024 / 512  # DeiT's lr formula at the global batch of 1024


@pytest.fixture(scope='module', autouse=True)
def mmpretrain_scope():
    init_default_scope('mmpretrain')


@pytest.fixture(scope='module', params=CONFIGS, ids=IDS)
def cfg(request):
    return Config.fromfile(request.param)


def _name(cfg):
    return osp.relpath(cfg.filename, osp.join(ROOT, 'configs'))


def _family(name):
    return name.split('/')[0]


def test_every_config_has_a_reference_count():
    # the paper's 12 and CPVT-Ti + RoPE-Mixed (beyond the paper)
    assert len([n for n in IDS if n.startswith('cpvt/')]) == 13
    assert len([n for n in IDS if n.startswith('pvt_peg/')]) == 9
    assert len([n for n in IDS if n.startswith('swin_peg/')]) == 2
    assert set(IDS) - set(PARAMS) == set(), 'add their counts to PARAMS'
    assert set(PARAMS) - set(IDS) == set(), 'these configs are gone'


METAFILES = sorted(m for _, m in FAMILIES.values() if m)


@pytest.mark.parametrize('metafile', METAFILES)
def test_metafile_matches_the_configs(metafile):
    """Every ImageNet config of the family is in its metafile, or in the
    metafile_*.yml beside it (configs/cpvt/metafile_deit.yml: the DeiT
    baselines, kept out of mmpretrain's hub), with its parameter count; the
    model-index imports the metafile."""
    import yaml
    with open(osp.join(ROOT, 'model-index.yml')) as f:
        assert 'configs/' + metafile in yaml.safe_load(f)['Import']
    family = osp.dirname(metafile)
    with open(osp.join(ROOT, 'configs', metafile)) as f:
        collections = {c['Name'] for c in yaml.safe_load(f)['Collections']}
    listed = {}
    for path in glob.glob(osp.join(ROOT, 'configs', family, 'metafile*.yml')):
        with open(path) as f:
            for m in yaml.safe_load(f)['Models']:
                if m['Results'][0]['Task'] != 'Image Classification':
                    continue
                name = osp.relpath(m['Config'], 'configs')
                assert m['Name'] == osp.splitext(osp.basename(name))[0]
                assert m['Metadata']['Parameters'] == PARAMS[name], name
                assert m['In Collection'] in collections
                listed[name] = m
    assert set(listed) == {n for n in IDS if _family(n) == family}


def test_count_forward_loss_and_optimizer(cfg):
    """The reference count; logits at any image size; a finite training
    loss through the preprocessor and batch augments; the optimizer, with
    the PEGs, norms, biases and tables not decayed."""
    model_cfg = cfg.model.copy()
    # as mmengine's Runner does
    model_cfg.setdefault('data_preprocessor', cfg.get('data_preprocessor'))
    model = MODELS.build(model_cfg)
    assert n_params(model) == PARAMS[_name(cfg)]
    model.eval()
    with torch.no_grad():
        # 64 x 88 (not a multiple of 16): a 4 x 6 token map after padding,
        # not the 14 x 14 of training
        logits = model(torch.randn(1, 3, 64, 88), mode='tensor')
    assert logits.shape == (1, 1000)
    assert not torch.isnan(logits).any()

    model.train()
    data = dict(
        inputs=list(torch.randint(0, 256, (2, 3, 48, 48), dtype=torch.uint8)),
        data_samples=[DataSample().set_gt_label(i) for i in (3, 7)])
    data = model.data_preprocessor(data, training=True)
    # Mixup / CutMix turned the labels into soft one-hot scores
    assert data['data_samples'][0].gt_score.shape == (1000, )
    with torch.no_grad():
        losses = model(**data, mode='loss')
    assert math.isfinite(losses['loss'].item())

    optim_wrapper = build_optim_wrapper(model, cfg.optim_wrapper)
    expected = 'Lamb' if _name(cfg).startswith('cpvt/cpvt-base') else 'AdamW'
    assert type(optim_wrapper.optimizer).__name__ == expected
    names = {id(p): n for n, p in model.named_parameters()}
    decay = {names[id(p)]: group['weight_decay']
             for group in optim_wrapper.optimizer.param_groups
             for p in group['params']}
    # a frozen PEG is left out: never updated
    assert set(decay) == {n for n, p in model.named_parameters()
                          if p.requires_grad}
    # the PEGs are not decayed, as in the authors' code (Twins gvt.py
    # PosCNN.no_weight_decay, CPVTV2.no_weight_decay)
    pegs = {id(p) for m in model.modules()
            if isinstance(m, ConditionalPositionEncoding)
            for p in m.parameters()}
    for name, wd in decay.items():
        param = model.get_parameter(name)
        no_decay = (
            name.endswith(('.bias', 'cls_token', '.pos_embed',
                           'relative_position_bias_table',
                           'relative_key_table', '.rope.embed.freqs'))
            or param.ndim == 1 or id(param) in pegs)
        assert wd == (0. if no_decay else 0.05), name


# Per family: warm-up epochs, its start factor, final lr, train sampler.
# DeiT's (kept by CPVT, appendix) and PVT's (its main.py is DeiT's) are the
# same; Swin's is microsoft/Swin-Transformer's config.py.
SCHEDULES = {
    'deit': (5, 1e-3, 1e-5, 'RepeatAugSampler'),
    'swin': (20, 5e-4, 5e-6, 'DefaultSampler'),
}


def _recipe(name):
    """(schedule, drop path, gradient clipping) that a config must carry."""
    if name.startswith('swin_peg/'):
        return 'swin', 0.2, 5.0  # Swin-T
    if name.startswith(('pvt_peg/pvt-m', 'pvt_peg/pvt-l')):
        return 'deit', 0.3, 1.0  # PVT's configs/pvt/pvt_{medium,large}.py
    return 'deit', 0.1, None  # DeiT / CPVT, PVT-Tiny and -Small


def test_scope_imports_and_recipe(cfg):
    """The recipe of the config's family (see SCHEDULES and _recipe)."""
    name = _name(cfg)
    assert cfg.default_scope == 'mmpretrain'
    assert cfg.custom_imports == dict(
        imports=['mmcpvt'], allow_failed_imports=False)
    assert cfg.model.type == 'ImageClassifier'
    assert cfg.model.backbone.type == BACKBONES.get(name,
                                                    FAMILIES[_family(name)][0])
    schedule, drop_path, clip = _recipe(name)
    opt = cfg.optim_wrapper.optimizer
    assert opt.lr == pytest.approx(LR)
    assert opt.weight_decay == 0.05
    assert opt.eps == 1e-8
    if clip is None:  # DeiT / CPVT: "Gradient Clip. x"
        assert cfg.optim_wrapper.get('clip_grad') is None
    else:
        assert cfg.optim_wrapper.clip_grad == dict(max_norm=clip)
    paramwise = cfg.optim_wrapper.paramwise_cfg
    assert paramwise.norm_decay_mult == 0. and paramwise.bias_decay_mult == 0.
    assert all(v.decay_mult == 0. for v in paramwise.custom_keys.values())
    if schedule == 'deit':
        assert {'.cls_token', '.pos_embed'} <= set(paramwise.custom_keys)
    else:
        assert '.relative_position_bias_table' in paramwise.custom_keys
    # the name's GPUs x images per GPU is the global batch of 1024
    gpus, per_gpu = map(int, re.search(r'_(\d+)xb(\d+)_', name).groups())
    assert cfg.train_dataloader.batch_size == per_gpu
    assert gpus * per_gpu == cfg.auto_scale_lr.base_batch_size == 1024

    warmup_epochs, start_factor, eta_min, sampler = SCHEDULES[schedule]
    warmup, cosine = cfg.param_scheduler
    assert warmup.type == 'LinearLR' and warmup.by_epoch
    assert (warmup.begin, warmup.end) == (0, warmup_epochs)
    assert warmup.start_factor == start_factor
    assert warmup.convert_to_iter_based
    assert cosine.type == 'CosineAnnealingLR'
    assert (cosine.begin, cosine.end) == (warmup_epochs, 300)
    assert cosine.eta_min == eta_min
    assert cfg.train_cfg.max_epochs == 300

    model = cfg.model
    assert model.backbone.drop_path_rate == drop_path
    assert model.head.loss == dict(
        type='LabelSmoothLoss', label_smooth_val=0.1, mode='original')
    augments = {a.type: a.alpha for a in model.train_cfg.augments}
    assert augments == {'Mixup': 0.8, 'CutMix': 1.0}

    assert cfg.train_dataloader.sampler.type == sampler
    if sampler == 'RepeatAugSampler':
        assert cfg.train_dataloader.sampler.num_repeats == 3
    steps = {t.type: t for t in cfg.train_dataloader.dataset.pipeline}
    assert steps['RandomErasing'].erase_prob == 0.25
    assert steps['RandomErasing'].mode == 'rand'
    rand_aug = steps['RandAugment']
    assert (rand_aug.num_policies, rand_aug.magnitude_level,
            rand_aug.magnitude_std) == (2, 9, 0.5)
    assert steps['RandomResizedCrop'].scale == 224
    # (a `_scope_` key marks what comes from mmpretrain's own base files)
    assert (cfg.val_evaluator.type, cfg.val_evaluator.topk) == ('Accuracy',
                                                                (1, 5))
    for loader, split in ((cfg.train_dataloader, 'train'),
                          (cfg.val_dataloader, 'val'),
                          (cfg.test_dataloader, 'val')):
        assert loader.dataset.type == 'ImageNet'
        assert loader.dataset.data_root == 'data/imagenet'
        assert loader.dataset.split == split


@pytest.mark.parametrize('baseline', sorted(BASELINES))
def test_baseline_differs_only_in_position_encoding(baseline):
    """"The same training settings to make a fair comparison" (Sec. 4.6)."""
    cfgs = []
    for name in (baseline, BASELINES[baseline]):
        cfg = Config.fromfile(osp.join(ROOT, 'configs', name)).to_dict()
        for key in ('pos_embed', 'peg_positions', 'out_type'):
            cfg['model']['backbone'].pop(key, None)
        cfgs.append(cfg)
    assert cfgs[0] == cfgs[1]


def test_pipelines_run(cfg):
    img = np.random.default_rng(0).integers(0, 256, (300, 400, 3), np.uint8)
    for loader in (cfg.train_dataloader, cfg.val_dataloader):
        results = dict(img=img, img_shape=img.shape[:2],
                       ori_shape=img.shape[:2], gt_label=1)
        for t in loader.dataset.pipeline:
            if t.type != 'LoadImageFromFile':
                results = TRANSFORMS.build(t)(results)
        assert tuple(results['inputs'].shape) == (3, 224, 224)


def test_fixed_learned_init_loads_the_peg(tmp_path):
    cfg = Config.fromfile(
        osp.join(ROOT, 'configs', 'ablations',
                 'cpvt-tiny-fixed-learned-init_4xb256_in1k.py'))
    weight = torch.randn(192, 1, 3, 3)
    ckpt = tmp_path / 'cpvt-tiny.pth'
    torch.save(
        dict(state_dict={
            'backbone.pegs.0.proj.0.weight': weight,
            'backbone.pegs.0.proj.0.bias': torch.zeros(192),
            'head.fc.weight': torch.zeros(1000, 192),  # must not be read
        }), ckpt)
    cfg.model.backbone.peg_cfg.init_cfg.checkpoint = str(ckpt)
    model = MODELS.build(cfg.model)
    model.init_weights()
    peg = model.backbone.pegs['0'].proj[0]
    assert torch.equal(peg.weight, weight)
    assert not peg.weight.requires_grad
    assert model.head.fc.weight.abs().sum() > 0
