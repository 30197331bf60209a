"""The demo's training loss curve (tools/demo.py): read from the scalar log
that mmengine's LocalVisBackend writes during training, drawn as a PNG.

The logs here are written by LocalVisBackend itself, with the keys and
steps the runner's LoggerHook gives it (training lines every logger
interval, a validation line per evaluation), so the reader is checked
against mmengine's format without training a model.
"""
import os.path as osp
import sys

import pytest
from PIL import Image

from tests.utils import ROOT

PNG_SIGNATURE = b'\x89PNG\r\n\x1a\n'


@pytest.fixture(scope='module')
def demo():
    sys.path.insert(0, osp.join(ROOT, 'tools'))
    import demo
    return demo


def write_log(work_dir, train=True, val=True):
    """A run's scalar log, as the runner writes it: ``<work_dir>/
    <timestamp>/vis_data/scalars.json`` (and ``<timestamp>.json``)."""
    from mmengine.visualization import LocalVisBackend
    timestamp = '20240102_030405'
    backend = LocalVisBackend(
        save_dir=osp.join(work_dir, timestamp, 'vis_data'))
    for step in (10, 20, 30) if train else ():
        backend.add_scalars(
            dict(lr=1e-4, loss=2.0 - step / 100, loss_cls=1.5 - step / 100,
                 loss_bbox=0.5, time=0.7, epoch=1, iter=step),
            step=step, file_path=f'{timestamp}.json')
    if val:  # the validation line: metrics, its step is the epoch
        backend.add_scalars({'coco/bbox_mAP': 0.01, 'time': 0.4}, step=1,
                            file_path=f'{timestamp}.json')
    backend.close()
    return osp.join(work_dir, timestamp, 'vis_data', 'scalars.json')


def test_reads_training_losses(demo, tmp_path):
    scalars = write_log(str(tmp_path))
    assert demo.train_scalars(str(tmp_path)) == scalars
    curves = demo.read_loss_curves(scalars)
    # the loss and its terms per logged iteration; the validation line
    # (no loss) is left out
    assert sorted(curves) == ['loss', 'loss_bbox', 'loss_cls']
    for key, values in (('loss', [1.9, 1.8, 1.7]),
                        ('loss_cls', [1.4, 1.3, 1.2]),
                        ('loss_bbox', [0.5, 0.5, 0.5])):
        assert curves[key][0] == [10, 20, 30], key
        assert curves[key][1] == pytest.approx(values), key


def test_plots_a_png(demo, tmp_path):
    scalars = write_log(str(tmp_path))
    out = str(tmp_path / 'loss_curve.png')
    assert demo.plot_loss_curve(scalars, out) == out
    with open(out, 'rb') as f:
        assert f.read(8) == PNG_SIGNATURE
    with Image.open(out) as img:
        assert img.format == 'PNG' and img.size == (600, 400)
        # something drawn: not one colour
        assert len(img.convert('RGB').getcolors(maxcolors=2**16)) > 2


def test_demo_writes_the_curve_into_its_work_dir(demo, tmp_path):
    write_log(str(tmp_path / 'run'))
    curve = demo.loss_curve(str(tmp_path / 'run'))
    assert curve == str(tmp_path / 'run' / 'loss_curve.png')
    with Image.open(curve) as img:
        assert img.format == 'PNG'


@pytest.mark.parametrize('case', ['validation only', 'empty'])
def test_no_loss_is_an_error(demo, tmp_path, case):
    scalars = write_log(str(tmp_path), train=False)
    found = 'coco/bbox_mAP, step, time'
    if case == 'empty':  # the run stopped before its first log line
        open(scalars, 'w').close()
        found = 'none'
    out = tmp_path / 'loss_curve.png'
    with pytest.raises(ValueError) as e:
        demo.plot_loss_curve(scalars, str(out))
    message = str(e.value)
    # what was given, what is needed and where it comes from
    assert scalars in message and 'no training loss' in message
    assert f'(keys found: {found})' in message
    assert 'vis_data' in message and 'default_hooks.logger.interval' in \
        message
    assert not out.exists()
    # the demo itself says so and goes on without a curve
    assert demo.loss_curve(str(tmp_path)) is None


def test_bad_line_is_named(demo, tmp_path):
    scalars = write_log(str(tmp_path))
    with open(scalars, 'a') as f:
        f.write('{"loss": 1.0, "step": 40\n')  # cut off
    with pytest.raises(ValueError, match=r'scalars\.json, line 5: not JSON'):
        demo.read_loss_curves(scalars)


def test_no_log_in_work_dir(demo, tmp_path, capsys):
    assert demo.train_scalars(str(tmp_path)) is None
    assert demo.loss_curve(str(tmp_path)) is None
    err = capsys.readouterr().err
    assert 'no loss curve' in err and 'scalars.json' in err, err
