"""Generic checks that run over every registered backbone, and over
TinyPEG: a fourth backbone written here on the skeleton, to show what a new
one takes."""
import pytest
import torch
from mmengine.model import ModuleList

import mmcpvt  # noqa: F401
from mmcpvt.models.backbones.base import BaseBackbone, patch_embed
from mmcpvt.models.layers import TransformerBlock, nlc_to_nchw
from mmcpvt.registry import MODELS
from tests.utils import (BACKBONES, SMALL_BACKBONES,
                         assert_compiles_at_two_sizes)

NON_BACKBONES = {'ConditionalPositionEncoding'}


class TinyPEG(BaseBackbone):
    """Two stages of transformer blocks at strides 4 and 8, PEGs at
    ``peg_positions`` (one entry per stage), NCHW maps out."""

    def __init__(self, dims=(16, 32), depths=(2, 1),
                 peg_positions=((-1, 0), 0), peg_cfg=None, frozen_stages=-1,
                 norm_eval=False, with_cp=False, init_cfg=None):
        super().__init__(len(depths), peg_cfg, frozen_stages, norm_eval,
                         with_cp, init_cfg)
        self.patch_embeds = ModuleList(
            patch_embed(c_in, c, p)
            for c_in, c, p in zip((3, *dims), dims, (4, 2)))
        self.stages = ModuleList(
            ModuleList(TransformerBlock(c, 2, 2 * c) for _ in range(d))
            for c, d in zip(dims, depths))
        self.pegs = ModuleList(
            self.build_pegs(p, d, c)
            for p, d, c in zip(peg_positions, depths, dims))
        self.train(self.training)

    def frozen_modules(self) -> list:
        return [m for i in range(self.frozen_stages)
                for m in (self.patch_embeds[i], self.stages[i], self.pegs[i])]

    def forward(self, x):
        outs = []
        for embed, blocks, pegs in zip(self.patch_embeds, self.stages,
                                       self.pegs):
            x, hw = embed(x)  # (B, C, H, W) -> (B, H*W, C)
            x, hw = pegs(-1, x, hw)
            for j, block in enumerate(blocks):
                x = self.run_block(block, x, hw)
                x, hw = pegs(j, x, hw)
            x = nlc_to_nchw(x, hw).contiguous()  # -> (B, C, H, W)
            outs.append(x)
        return tuple(outs)


CASES = BACKBONES + [('TinyPEG', {})]


def build(name, cfg, **kwargs):
    cls = TinyPEG if name == 'TinyPEG' else MODELS.get(name)
    return cls(**cfg, **kwargs)


def test_every_backbone_is_covered():
    registered = set(MODELS.module_dict) - NON_BACKBONES
    assert registered == set(SMALL_BACKBONES)


def test_tiny_backbone_trains_a_step():
    torch.manual_seed(0)
    model = TinyPEG(frozen_stages=1)
    model.init_weights()
    model.train()
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    optimizer = torch.optim.AdamW(
        [p for p in model.parameters() if p.requires_grad], lr=1e-3)
    outs = model(torch.randn(2, 3, 40, 56))
    assert [o.shape for o in outs] == [(2, 16, 10, 14), (2, 32, 5, 7)]
    sum(o.square().mean() for o in outs).backward()
    optimizer.step()
    moved = {n for n, p in model.named_parameters()
             if not torch.equal(p, before[n])}
    assert {'pegs.1.0.proj.0.weight', 'stages.1.0.ln1.weight'} <= moved
    assert not any(n.startswith(('pegs.0.', 'stages.0.', 'patch_embeds.0.'))
                   for n in moved)  # frozen_stages=1
    assert sorted(model.pegs[0]) == ['-1', '0']


@pytest.mark.parametrize('name, cfg', CASES)
def test_forward_backward_reaches_every_parameter(name, cfg):
    model = build(name, cfg)
    model.init_weights()
    model.train()
    outs = model(torch.randn(2, 3, 61, 83))
    loss = sum(o.float().mean() for o in outs)
    assert torch.isfinite(loss)
    loss.backward()
    missing = [n for n, p in model.named_parameters()
               if p.requires_grad and (p.grad is None)]
    assert not missing, f'no gradient reaches {missing}'


@pytest.mark.parametrize('name, cfg', BACKBONES)
@pytest.mark.parametrize('scope', ['mmpretrain', 'mmdet', 'mmseg'])
def test_found_from_every_downstream_scope(name, cfg, scope):
    import importlib

    from mmengine.registry import DefaultScope
    registry = importlib.import_module(f'{scope}.registry').MODELS
    with DefaultScope.overwrite_default_scope(scope):
        for type_name in (name, f'mmcpvt.{name}'):
            model = registry.build(dict(type=type_name, **cfg))
            assert type(model) is MODELS.get(name)


def _build(name, cfg, seed=0, **kwargs):
    torch.manual_seed(seed)
    model = build(name, cfg, **kwargs)
    model.init_weights()
    return model


@pytest.mark.parametrize('name, cfg', CASES)
def test_pretrained_init_loads_a_classifier_checkpoint(name, cfg, tmp_path):
    """init_cfg Pretrained round trip: a classifier checkpoint of one
    model, loaded into a differently seeded one, gives its weights."""
    src = _build(name, cfg, seed=1)
    state = {f'backbone.{k}': v for k, v in src.state_dict().items()}
    state['head.fc.weight'] = torch.zeros(3, 3)
    path = tmp_path / 'cls.pth'
    torch.save({'state_dict': state, 'meta': {}}, path)
    dst = _build(name, cfg, seed=2,
                 init_cfg=dict(type='Pretrained', checkpoint=str(path),
                               prefix='backbone.'))
    assert src.state_dict().keys() == dst.state_dict().keys()
    for k, v in src.state_dict().items():
        assert torch.equal(v, dst.state_dict()[k]), k
    x = torch.randn(1, 3, 40, 56)
    for a, b in zip(src.eval()(x), dst.eval()(x)):
        assert torch.equal(a, b)


def test_missing_pretrained_checkpoint_is_explained(tmp_path):
    name, cfg = BACKBONES[0]
    model = MODELS.build(
        dict(type=name, **cfg,
             init_cfg=dict(type='Pretrained',
                           checkpoint=str(tmp_path / 'none.pth'))))
    with pytest.raises(FileNotFoundError, match='init_cfg=None'):
        model.init_weights()


@pytest.mark.parametrize('name, cfg', CASES)
def test_default_init_is_the_transformer_init(name, cfg):
    model = build(name, cfg)
    model.init_weights()
    for n, m in model.named_modules():
        if isinstance(m, torch.nn.Linear):
            assert m.weight.std() < 0.05, n  # trunc normal .02, not kaiming
            if m.bias is not None:
                assert not m.bias.any(), n
        if isinstance(m, torch.nn.LayerNorm):
            assert (m.weight == 1).all() and not m.bias.any(), n


@pytest.mark.parametrize('name, cfg', CASES)
def test_inference_without_autograd_gives_the_same_outputs(name, cfg):
    """Without autograd the FFN activates in place: the same numbers as
    with autograd (up to rounding: with an attention mask, SDPA may pick
    another kernel when it records), and the input is untouched."""
    model = _build(name, cfg).eval()
    x = torch.randn(2, 3, 61, 83)
    x_copy = x.clone()
    ref = model(x)
    with torch.no_grad():
        outs = model(x)
    with torch.inference_mode():
        outs_inf = model(x)
    assert torch.equal(x, x_copy)
    for o, o_inf, r in zip(outs, outs_inf, ref):
        torch.testing.assert_close(o, r.detach())
        torch.testing.assert_close(o_inf, r.detach())


@pytest.mark.parametrize('name, cfg', CASES)
def test_gradient_checkpointing_gives_the_same_outputs_and_gradients(
        name, cfg):
    x = torch.randn(2, 3, 45, 61)
    results = []
    for with_cp in (False, True):
        model = _build(name, cfg, with_cp=with_cp).train()
        torch.manual_seed(0)  # the same stochastic-depth draws
        outs = model(x)
        sum(o.float().sum() for o in outs).backward()
        grads = {n: p.grad for n, p in model.named_parameters()}
        results.append((outs, grads))
    (outs, grads), (outs_cp, grads_cp) = results
    for a, b in zip(outs, outs_cp):
        torch.testing.assert_close(a, b)
    assert grads.keys() == grads_cp.keys()
    for n in grads:
        torch.testing.assert_close(grads[n], grads_cp[n], msg=n)


@pytest.mark.parametrize('name', [*SMALL_BACKBONES, 'TinyPEG'])
def test_compiles_in_one_graph_at_two_sizes(name):
    """torch.compile(fullgraph=True) traces the whole backbone without a
    graph break (fullgraph raises on one) at two input sizes, and gives
    eager's outputs. The 'eager' backend runs the captured graph without
    code generation: the tracing is what is tested here, inductor's speed
    is measured by tools/analysis_tools/benchmark.py --compile."""
    cfg = SMALL_BACKBONES[name][0] if name in SMALL_BACKBONES else {}
    assert_compiles_at_two_sizes(_build(name, cfg).eval())
