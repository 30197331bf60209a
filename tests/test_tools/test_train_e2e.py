"""tools/train.py and tools/test.py, beyond the runs of test_resume.py
(train, resume, test) and test_det_seg_e2e.py: the data set they train on,
and refusals of what they are given, as a user meets them.
"""
import os.path as osp

import pytest

from mmcpvt.datasets.synthetic.imagenet import make_imagenet
from tests.utils import ROOT, explain, run_tool

CONFIG = osp.join(ROOT, 'configs', 'cpvt', 'cpvt-tiny_4xb256_in1k.py')


def test_make_imagenet_layout(tmp_path):
    """The generator writes what mmpretrain's ImageNet reads."""
    from mmpretrain.datasets import ImageNet
    root = str(tmp_path / 'a')
    info = make_imagenet(root, num_classes=3, train_per_class=2,
                         val_per_class=2, size=16, seed=1)
    assert info['wnids'] == sorted(info['wnids'])
    for split, n in (('train', 6), ('val', 6)):
        ds = ImageNet(data_root=root, split=split, lazy_init=False)
        assert len(ds) == n
        assert sorted({ds.get_data_info(i)['gt_label']
                       for i in range(n)}) == [0, 1, 2]
    train = ImageNet(data_root=root, split='train')
    wnid = info['wnids'][1]
    first = train.get_data_info(2)
    assert first['img_path'] == osp.join(root, 'train', wnid,
                                         f'{wnid}_1.JPEG')
    assert first['gt_label'] == 1


@pytest.mark.parametrize('tool, args, message', [
    ('train.py', ['{x}'], 'config file not found: {x}'),
    ('test.py', ['{x}', 'x.pth'], 'config file not found: {x}'),
    ('test.py', ['{config}', '{x}'], 'checkpoint file not found: {x}'),
    ('train.py', ['{config}', '--work-dir', '{w}', '--cfg-options',
                  'train_dataloder.batch_size=1'],
     "train.py: error: --cfg-options train_dataloder.batch_size: the config "
     "has no top-level key 'train_dataloder'"),
])
def test_refusal_as_a_user_meets_it(tmp_path, tool, args, message):
    """A missing file, or a refused --cfg-options key, is named; nothing
    is built (no work dir), no traceback."""
    names = dict(x=str(tmp_path / 'no_such'), config=CONFIG,
                 w=str(tmp_path / 'w'))
    proc = run_tool(f'tools/{tool}', *[a.format(**names) for a in args],
                    timeout=120)
    assert proc.returncode in (1, 2), explain(proc)
    assert message.format(**names) in proc.stderr, explain(proc)
    assert 'Traceback' not in proc.stderr
    assert not (tmp_path / 'w').exists()
