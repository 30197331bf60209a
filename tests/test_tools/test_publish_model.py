"""tools/model_converters/publish_model.py: a training checkpoint becomes a
published one (meta and state_dict only, its sha256 in its name)."""
import hashlib
import os
import os.path as osp

import pytest
import torch
from mmengine.logging import MessageHub
from mmengine.optim.scheduler import CosineAnnealingLR
from mmengine.runner import save_checkpoint

from mmcpvt.registry import MODELS
from tests.utils import load_script

publish_model = load_script('tools/model_converters/publish_model.py')

TINY = dict(type='CPVT', arch=dict(embed_dims=32, num_layers=2, num_heads=2,
                                   feedforward_channels=64))


def _training_checkpoint(path):
    """What mmengine's Runner.save_checkpoint writes after a step of
    AdamW: meta, state_dict, optimizer, param_schedulers, message_hub."""
    torch.manual_seed(0)
    model = MODELS.build(TINY)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    scheduler = CosineAnnealingLR(optimizer, T_max=10)
    model(torch.randn(1, 3, 32, 32))[0].sum().backward()
    optimizer.step()
    scheduler.step()
    hub = MessageHub.get_instance('publish_model_test')
    hub.update_scalar('train/loss', 0.5)
    meta = dict(epoch=1, iter=4, cfg='model = dict(type="CPVT")',
                mmengine_version='0.10.7', dataset_meta=dict(classes=['a']))
    save_checkpoint(dict(
        meta=meta, state_dict=model.state_dict(),
        optimizer=optimizer.state_dict(),
        param_schedulers=[scheduler.state_dict()],
        message_hub=hub.state_dict()), str(path))
    return model, meta


def test_published_checkpoint_is_stripped_hashed_and_loads(tmp_path, capsys):
    src = tmp_path / 'work_dirs' / 'epoch_1.pth'
    model, meta = _training_checkpoint(src)
    out = tmp_path / 'published' / 'cpvt-tiny_in1k.pth'
    publish_model.main([str(src), str(out)])
    printed = capsys.readouterr().out
    final = printed.strip().splitlines()[-1]
    assert 'removed: optimizer, param_schedulers, message_hub' in printed

    with open(final, 'rb') as f:
        sha = hashlib.sha256(f.read()).hexdigest()
    assert final == str(out)[:-len('.pth')] + f'-{sha[:8]}.pth'
    # the name torch.hub's check_hash verifies against the file's sha256
    assert sha.startswith(torch.hub.HASH_REGEX.search(
        osp.basename(final)).group(1))
    assert os.listdir(out.parent) == [osp.basename(final)]

    published = torch.load(final, weights_only=True)
    assert set(published) == {'meta', 'state_dict'}
    assert published['meta'] == meta
    fresh = MODELS.build(TINY)
    fresh.load_state_dict(published['state_dict'], strict=True)
    for k, v in model.state_dict().items():
        assert torch.equal(fresh.state_dict()[k], v), k
    assert osp.getsize(final) < osp.getsize(src) / 2  # AdamW state gone

    # as mmdet's publish_model.py: --save-keys names the top-level keys kept
    publish_model.main([str(src), str(tmp_path / 'out.pth'), '--save-keys',
                        'state_dict', 'message_hub'])
    printed = capsys.readouterr().out
    assert 'removed: meta, optimizer, param_schedulers' in printed, printed
    published = torch.load(printed.strip().splitlines()[-1],
                           weights_only=True)
    assert set(published) == {'state_dict', 'message_hub'}


@pytest.mark.parametrize('keys, message', [
    (['state_dict', 'nosuchkey'], '--save-keys nosuchkey: {src} has no such '
     'key (it has: meta, state_dict, optimizer, param_schedulers, '
     'message_hub)'),
    (['meta'], '--save-keys meta: keep state_dict too'),
])
def test_save_keys_that_would_lose_the_weights_are_refused(
        tmp_path, capsys, keys, message):
    """A key the checkpoint lacks (it used to give an empty checkpoint) and
    a list without state_dict are refused; nothing is written."""
    src = tmp_path / 'epoch_1.pth'
    _training_checkpoint(src)
    with pytest.raises(SystemExit) as e:
        publish_model.main([str(src), str(tmp_path / 'pub.pth'),
                            '--save-keys', *keys])
    assert message.format(src=src) in f'{e.value} {capsys.readouterr().err}'
    assert os.listdir(tmp_path) == ['epoch_1.pth']


@pytest.mark.parametrize('case', ['the input', 'directory', 'under a file'])
def test_out_file_is_refused_before_reading(tmp_path, monkeypatch, case):
    """An OUT_FILE that is IN_FILE (here through a link;
    test_utils/test_convert.py checks the other spellings of the same file
    on the shared check), a directory (it used to give a file named
    '<dir>-<hash>.pth' beside it), or under a file (it used to fail after
    loading and hashing), is refused before IN_FILE is read."""
    src = tmp_path / 'epoch_1.pth'
    torch.save({'state_dict': {'w': torch.zeros(2)}}, src)
    before = src.read_bytes()
    os.symlink(src, tmp_path / 'link.pth')
    os.makedirs(tmp_path / 'published')
    monkeypatch.setattr(publish_model, 'read_checkpoint',
                        lambda *a, **k: pytest.fail('read'))
    out, message = {
        'the input': (str(tmp_path / 'link.pth'), f'error: OUT_FILE '
                      f'{tmp_path / "link.pth"} is {src}, an input of this '
                      'run'),
        'directory': (str(tmp_path / 'published'), f'error: OUT_FILE '
                      f'{tmp_path / "published"} is a directory; it takes '
                      'the file to write, e.g. '
                      f'{tmp_path / "published" / "epoch_1.pth"}'),
        'under a file': (str(src / 'cpvt.pth'), f'error: OUT_FILE '
                         f'{src / "cpvt.pth"}: {src} is a file, not a '
                         'directory; it takes a file path in a directory'),
    }[case]
    with pytest.raises(SystemExit) as e:
        publish_model.main([str(src), out])
    assert str(e.value).startswith(message), str(e.value)
    assert src.read_bytes() == before
    assert sorted(os.listdir(tmp_path)) == ['epoch_1.pth', 'link.pth',
                                            'published']
    assert os.listdir(tmp_path / 'published') == []
