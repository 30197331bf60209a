"""The README's configs (a PEG backbone in a user's own mmdet, mmseg and
mmpretrain config) load from the installed libraries, build and run: each
python block of README.md that imports mmcpvt is written to a file and used
as a user would, with the ImageNet checkpoint left out (it is not here)."""
import os.path as osp
import re

import pytest
import torch
from mmengine.config import Config
from mmengine.registry import init_default_scope
from mmengine.utils import import_modules_from_strings
from tests.utils import ROOT

with open(osp.join(ROOT, 'README.md')) as f:
    BLOCKS = [b for b in re.findall(r'```python\n(.*?)```', f.read(), re.S)
              if 'custom_imports' in b]


def test_readme_has_a_config_for_each_library():
    scopes = [re.search(r"_base_ = '(\w+)::", b)[1] for b in BLOCKS]
    assert sorted(scopes) == ['mmdet', 'mmpretrain', 'mmseg']


@pytest.mark.parametrize('block', BLOCKS,
                         ids=lambda b: re.search(r'# (\w+)', b)[1])
def test_readme_config_builds_and_runs(block, tmp_path):
    path = tmp_path / 'my_config.py'
    path.write_text(block)
    cfg = Config.fromfile(str(path))
    import_modules_from_strings(**cfg.custom_imports)
    init_default_scope(cfg.default_scope)
    assert cfg.model.backbone.type.startswith('mmcpvt.')
    cfg.model.backbone.pop('init_cfg', None)  # the checkpoint is not here
    from mmengine.registry import MODELS
    model = MODELS.build(cfg.model).eval()
    x = torch.randn(1, 3, 64, 96)  # not square, a multiple of 32
    with torch.no_grad():
        if cfg.default_scope == 'mmpretrain':
            out = model(torch.randn(1, 3, 224, 224), mode='tensor')
            assert out.shape == (1, 1000)
        else:  # the FPN's maps; RetinaNet's FPN starts at stride 8
            outs = model.extract_feat(x)
            stride = 8 if cfg.default_scope == 'mmdet' else 4
            assert outs[0].shape[-2:] == (64 // stride, 96 // stride)
            assert all(torch.isfinite(o).all() for o in outs)
