"""tools/analysis_tools/cost_curve.py: the exponent fit, and the tool end to
end on tiny sides, with a side a model refuses and one skipped by
--max-seconds."""
import json

import pytest

from tests.test_tools.test_analysis_tools import load_tool, run_tool
from tests.utils import explain


@pytest.fixture(scope='module')
def cost_curve():
    return load_tool('cost_curve')


@pytest.mark.parametrize('exponent', [0.5, 1.0, 1.37, 2.0])
def test_fit_exponent_power_law(cost_curve, exponent):
    tokens = [(s / 16) ** 2 for s in (224, 384, 512, 768, 1024)]
    ms = [3.5 * t ** exponent for t in tokens]
    assert cost_curve.fit_exponent(tokens, ms) == pytest.approx(exponent)
    assert cost_curve.fit_exponent(tokens[-2:], ms[-2:]) == pytest.approx(
        exponent)
    # a cost of 0 is no point; under two points there is no slope
    assert cost_curve.fit_exponent(tokens[:2], [5., 0.]) is None
    assert cost_curve.fit_exponent([], []) is None


def test_cost_curve_cli(cost_curve, tmp_path):
    out = run_tool('cost_curve', '--models', 'cpvt-tiny', 'pvt-tiny@mmdet',
                   '--sizes', '64', '16', '96', '--repeats', '1',
                   '--min-time', '0', '--threads', '1',
                   '--json', str(tmp_path / 'cost.json'),
                   '--plot', str(tmp_path / 'cost.svg'))
    assert out.returncode == 0, explain(out)
    lines = out.stdout.splitlines()
    assert '| forward, ms | 16px | 64px | 96px | exponent (time) | ' \
        'exponent (time last two) |' in lines, out.stdout
    assert '| peak memory, MiB | 16px | 64px | 96px | exponent (memory) |' \
        in lines, out.stdout
    # mmdet's PVT-T refuses 16 px (its 8 x 8 reduction on 4 x 4 tokens)
    row = next(line for line in lines if line.startswith('| pvt-tiny@mmdet'))
    assert row.split(' | ')[1] == 'failed (exit 1)', row
    assert any(line.startswith('- pvt-tiny@mmdet 16px: failed')
               for line in lines), out.stdout

    result = json.loads((tmp_path / 'cost.json').read_text())
    assert {'date', 'torch', 'machine', 'device', 'threads', 'batch',
            'repeats', 'sides', 'tokens', 'points', 'exponents'} <= set(result)
    assert result['sides'] == [16, 64, 96] and result['threads'] == 1
    points = {(p['model'], p['side']): p for p in result['points']}
    assert len(points) == 6
    for (model, side), p in points.items():
        assert p['tokens'] == (side / 16) ** 2
        if (model, side) == ('pvt-tiny@mmdet', 16):
            assert p['note'].startswith('failed') and p['ms'] == []
            assert p['ms_median'] is None
            continue
        assert p['note'] is None and len(p['ms']) == len(p['mib']) == 1
        assert p['ms_median'] > 0 and p['mib_median'] >= 0
    for model, fit in result['exponents'].items():
        pts = [p for p in result['points']
               if p['model'] == model and p['ms_median']]
        x = [p['tokens'] for p in pts]
        assert fit['time'] == pytest.approx(
            cost_curve.fit_exponent(x, [p['ms_median'] for p in pts]))
    assert (tmp_path / 'cost.svg').read_text().lstrip().startswith('<?xml')


def test_cost_curve_max_seconds_skips_larger_sides():
    out = run_tool('cost_curve', '--models', 'swin-tiny@mmdet', '--sizes',
                   '32', '48', '--repeats', '2', '--max-seconds', '0',
                   '--threads', '1')
    assert out.returncode == 0, explain(out)
    assert '| swin-tiny@mmdet | skipped | skipped | n/a | n/a |' \
        in out.stdout, explain(out)
    assert '- swin-tiny@mmdet 48px: skipped: ' in out.stdout
    # one process: none for the second repeat, none for the larger side
    assert out.stderr.count('swin-tiny@mmdet 32px') == 1, explain(out)
    assert 'swin-tiny@mmdet 48px' not in out.stderr


@pytest.mark.parametrize('option', ['--min-time', '--max-seconds'])
@pytest.mark.parametrize('value', ['-1', 'nan'])
def test_cost_curve_refuses_times_out_of_range(cost_curve, capsys, option,
                                               value):
    with pytest.raises(SystemExit):
        cost_curve.parse_args([option, value])
    assert f'argument {option}: must be >= 0, got {value}' \
        in capsys.readouterr().err


@pytest.mark.parametrize('argv, error', [
    (['--plot', 'x.txt'], 'argument --plot: x.txt: it takes an .svg or .png'),
    (['--json', '.'], '--json . is a directory'),
])
def test_cost_curve_refuses_its_outputs_before_measuring(cost_curve, capsys,
                                                         argv, error):
    with pytest.raises(SystemExit):
        cost_curve.parse_args(argv)
    assert error in capsys.readouterr().err
