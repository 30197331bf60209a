"""mmcpvt.analysis.blocks: which blocks, what shapes, and that they are
what the backbones themselves return at out_indices; and mmcpvt.apis.model,
which builds and loads the models."""
import pytest
import torch

import mmcpvt.apis.model as models
from mmcpvt.analysis.blocks import (INPUT, block_features, list_blocks,
                                    resolve_block)
from mmcpvt.apis.instruments import random_images
from mmcpvt.apis.model import build_model, get_backbone
from mmcpvt.models.layers import nchw_to_nlc, nlc_to_nchw
from mmcpvt.utils.checkpoint import CheckpointMismatchError
from tests.test_analysis.helpers import PVT_ARCH, SWIN_ARCH, build, images


def test_cpvt_blocks_and_shapes():
    model = build(peg_positions=(-1, 0), out_type='cls_token')
    infos = list_blocks(model)
    assert [i.index for i in infos] == [INPUT, 0, 1, 2]
    assert [i.name for i in infos] == ['input', 'block 0', 'block 1',
                                       'block 2']
    assert [i.peg_after for i in infos] == [True, True, False, False]
    feats = block_features(model, images(3), batch_size=2)
    assert list(feats) == [INPUT, 0, 1, 2]
    # class token dropped: 8x8 patch tokens of 32 channels
    assert all(f.shape == (3, 32, 8, 8) for f in feats.values())
    assert list(block_features(model, images(1), blocks=[1])) == [1]
    block_features(model.train(), images(1))  # hooks removed, mode restored
    assert model.training and not any(
        m._forward_hooks or m._forward_pre_hooks for m in model.modules())


@pytest.mark.parametrize('type, kwargs, sizes', [
    ('CPVT', dict(peg_positions=(0, 1)), [8] * 4),
    ('CPVT', dict(peg_positions=(-1, 2), pos_embed='learned'), [8] * 4),
    ('CPVT', dict(peg_positions=(), pos_embed='sincos2d',
                  with_cls_token=True), [8] * 4),
    # a PEG without padding shrinks the map: 8x8 -> 6x6 after block 0
    ('CPVT', dict(peg_positions=(0, ), peg_cfg=dict(padding=0)),
     [8, 6, 6, 6]),
    ('CPVT', dict(peg_positions=(-1, 1), peg_cfg=dict(padding=0)),
     [6, 6, 4, 4]),
    # position tables after encoders, the last one included
    ('CPVT', dict(peg_positions=(2, ), pos_embed='learned',
                  pos_embed_positions=(-1, 0, 2)), [8] * 4),
    # the QK-only blocks receive the unchanged tokens
    ('CPVTQKOnly', dict(peg_positions=(-1, 0, 1)), [8] * 4),
])
def test_cpvt_features_are_its_own_outputs(type, kwargs, sizes):
    x = images(2)
    for i in range(3):
        model = build(type, out_type='featmap', out_indices=i,
                      final_norm=False, **kwargs)
        assert torch.allclose(block_features(model, x)[i], model(x)[0],
                              atol=1e-6)
    feats = block_features(model, x)
    assert [f.shape[-1] for f in feats.values()] == sizes


@pytest.mark.parametrize('type, kwargs, blocks, pegs', [
    ('PVTPEG', dict(arch=PVT_ARCH, peg_positions=(0, (0, 1), 0, -1)),
     [(0, 0), (1, 0), (1, 1), (2, 0), (3, 0)], [0, 1, 1, 1, 1, 0]),
    ('SwinPEG', dict(arch=SWIN_ARCH, window_size=4),
     [(s, b) for s in range(4) for b in range(2)], [0] + [1, 0] * 4),
])
def test_hierarchical_blocks_shapes_and_stage_outputs(type, kwargs, blocks,
                                                      pegs):
    model = build(type, drop_path_rate=0., **kwargs)
    infos = list_blocks(model)
    assert [(i.stage, i.block) for i in infos] == [(0, -1)] + blocks
    assert [i.name for i in infos] == ['input'] + [
        f'stage {s} block {b}' for s, b in blocks]
    assert [i.peg_after for i in infos] == [bool(p) for p in pegs]
    x = images(2)
    feats, outs = block_features(model, x), model(x)
    dims = kwargs['arch']['embed_dims']
    dims = dims if isinstance(dims, list) else [dims * 2**s for s in range(4)]
    for info in infos:
        assert info.stride == 4 * 2**info.stage
        s = 64 // info.stride
        assert feats[info.index].shape == (2, dims[info.stage], s, s)
    for stage in range(4):
        # the stage's output: its last block, then the stage's norm
        f = feats[max(i.index for i in infos if i.stage == stage)]
        tokens = model.norms[stage](nchw_to_nlc(f))
        assert torch.allclose(nlc_to_nchw(tokens, f.shape[-2:]),
                              outs[stage], atol=1e-5)


def test_resolve_block_and_its_errors():
    cpvt = build()
    assert resolve_block(cpvt, 'input') == INPUT
    assert resolve_block(cpvt, '2') == 2
    with pytest.raises(ValueError, match=r'allowed: -1 \(input\) to 2'):
        resolve_block(cpvt, 3)
    pvt = build('PVTPEG', arch=PVT_ARCH)
    assert resolve_block(pvt, '1.1') == 2
    assert resolve_block(pvt, (3, 0)) == 4
    with pytest.raises(ValueError, match='stages have 1, 2, 1, 1 blocks'):
        resolve_block(pvt, '1.2')
    with pytest.raises(ValueError, match='block last out of range'):
        resolve_block(pvt, 'last')


TINY_CLS = dict(
    type='ImageClassifier',
    backbone=dict(type='CPVT', arch=dict(embed_dims=32, num_layers=2,
                                         num_heads=2, feedforward_channels=64),
                  img_size=32, patch_size=8),
    head=dict(type='LinearClsHead', num_classes=3, in_channels=32))


def _config(**backbone):
    from mmengine.config import Config
    model = dict(TINY_CLS, backbone=dict(TINY_CLS['backbone'], **backbone))
    return Config(dict(model=model, default_scope='mmpretrain'))


def test_build_model_and_load_weights(tmp_path):
    cfg = _config(init_cfg=dict(type='Pretrained', checkpoint='nowhere.pth'))
    src, _, report = build_model(cfg)  # Pretrained dropped, random weights
    assert report is None and not src.training
    # the random weights are seeded, the caller's random state untouched
    state = torch.random.get_rng_state()
    again, _, _ = build_model(cfg)
    assert torch.equal(torch.random.get_rng_state(), state)
    assert all(torch.equal(a, b) for a, b in zip(
        src.state_dict().values(), again.state_dict().values()))
    whole = tmp_path / 'whole.pth'
    torch.save({'state_dict': src.state_dict(), 'meta': {}}, whole)
    dst, _, report = build_model(_config(), str(whole))
    assert report == dict(target='model', loaded=len(dst.state_dict()))
    for a, b in zip(src.state_dict().values(), dst.state_dict().values()):
        assert torch.equal(a, b)
    # a bare backbone checkpoint goes into the backbone
    bare = tmp_path / 'bare.pth'
    torch.save(get_backbone(src).state_dict(), bare)
    report = models.load_checkpoint(dst, str(bare))
    assert report == dict(target='backbone',
                          loaded=len(get_backbone(dst).state_dict()))
    # nothing fits, other shapes, another depth: refused, naming the keys
    other = tmp_path / 'other.pth'
    torch.save({'state_dict': {'foo.weight': torch.zeros(1)}}, other)
    with pytest.raises(CheckpointMismatchError, match='foo.weight'):
        models.load_checkpoint(dst, str(other))
    small, _, _ = build_model(_config(patch_size=4))
    with pytest.raises(CheckpointMismatchError,
                       match=r'1 of another shape \(backbone.patch_embed'):
        models.load_checkpoint(small, str(whole))
    deep, _, _ = build_model(_config(arch=dict(
        TINY_CLS['backbone']['arch'], num_layers=3)))
    torch.save({'state_dict': deep.state_dict()}, tmp_path / 'deep.pth')
    with pytest.raises(CheckpointMismatchError,
                       match=r'not in the module \(backbone.layers.2.'):
        models.load_checkpoint(dst, str(tmp_path / 'deep.pth'))
    with pytest.raises(FileNotFoundError, match='missing.pth'):
        models.load_checkpoint(dst, str(tmp_path / 'missing.pth'))


def test_random_images_have_the_backbones_input_channels():
    gray = build(in_channels=1)
    x = random_images(gray, 2, (32, 48))
    assert x.shape == (2, 1, 32, 48) and x.dtype == torch.float32
    assert block_features(gray, x)[0].shape == (2, 32, 4, 6)
    assert random_images(build(), 1, (16, 16)).shape == (1, 3, 16, 16)


def test_models_come_from_the_libraries_init_functions(monkeypatch):
    import mmpretrain.apis
    from mmengine.config import Config
    calls = []
    real = mmpretrain.apis.init_model

    def spy(cfg, checkpoint=None, **kwargs):
        calls.append(checkpoint)
        return real(cfg, checkpoint, **kwargs)

    monkeypatch.setattr(mmpretrain.apis, 'init_model', spy)
    model, _, _ = build_model(_config())
    assert calls == [None] and type(model).__name__ == 'ImageClassifier'
    with pytest.raises(ValueError, match="default_scope is 'mmengine'; "
                       'models are built for mmpretrain, mmdet, mmseg'):
        models.init_model(
            Config(dict(model=TINY_CLS, default_scope='mmengine')))
