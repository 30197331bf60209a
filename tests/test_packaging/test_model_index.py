"""The model-index and its metafiles, and mmcpvt's models in mmpretrain's
hub (mmcpvt/apis/model_index.py). mmcpvt releases no weights, so
``Results`` name the task and data set with no metric (mim's table has none),
and the paper's numbers are ``Paper Results``. ``import mmcpvt`` makes
``mmpretrain.list_models`` list our image classification models and
``get_model`` / ``inference_model`` build and run them by name; detection
and segmentation models stay out, and mmpretrain's own names keep
mmpretrain's models. mmcpvt still imports without mmpretrain.
"""
import os.path as osp

import numpy as np
import pytest
import yaml

import mmcpvt  # noqa: F401  (adds our models to mmpretrain's hub)
from mmcpvt.apis import model_index
from tests.utils import ROOT, explain, run_tool

TASK = 'Image Classification'


def _metafiles():
    """The metafiles that model-index.yml imports, by path."""
    with open(osp.join(ROOT, 'model-index.yml')) as f:
        imports = yaml.safe_load(f)['Import']
    out = {}
    for path in imports:
        with open(osp.join(ROOT, path)) as f:
            out[path] = yaml.safe_load(f)
    return out


def _metafile_models():
    return {m['Name']: m for meta in _metafiles().values()
            for m in meta['Models']}


def test_results_have_no_metric_and_paper_results_have_the_numbers():
    n_paper = 0
    for path, meta in _metafiles().items():
        for model in meta['Models']:
            name = f'{path}: {model["Name"]}'
            assert model['Weights'] is None, name
            results = model['Results']
            assert len(results) == 1, name
            assert results[0]['Metrics'] == {}, name
            assert results[0]['Task'] and results[0]['Dataset'], name
            for paper in model.get('Paper Results', []):
                n_paper += 1
                assert (paper['Task'], paper['Dataset']) == (
                    results[0]['Task'], results[0]['Dataset']), name
                assert paper['Metrics'] and all(
                    isinstance(v, float) for v in paper['Metrics'].values())
    # every model but Swin+PEG RetinaNet (no number in the paper)
    assert n_paper == 40


def test_model_index_parses_and_mim_search_shows_no_metric():
    """modelindex reads every model with its task; mim's table (``mim
    search mmcpvt``) has every model and no metric column (it would show
    the paper's numbers as ours)."""
    from mim.commands.search import convert2df
    from modelindex.load_model_index import load
    index = load(osp.join(ROOT, 'model-index.yml'))
    index.build_models_with_collections()
    # modelindex's own check: only the README paths, which follow
    # OpenMMLab's convention (from the repository root, as mmpretrain's)
    errors = index.check(silent=True)
    assert errors and all('Path to README file configs/' in e
                          for e in errors), errors
    tasks = {m.name: {r.task for r in m.results} for m in index.models}
    assert tasks['cpvt-tiny_4xb256_in1k'] == {'Image Classification'}
    assert tasks['retinanet_pvt-t-peg_fpn_1x_coco'] == {'Object Detection'}
    assert tasks['fpn_pvt-t-peg_4xb4-80k_ade20k-512x512'] == {
        'Semantic Segmentation'}
    for model in index.models:
        assert osp.isfile(osp.join(ROOT, model.config)), model.config
    df = convert2df(index)
    assert set(df.index) == {m.name for m in index.models}
    assert len(df.index) == 45
    metric_words = ('accuracy', 'box_ap', 'miou', 'top_1', 'top_5')
    assert not [c for c in df.columns
                if any(w in c.lower() for w in metric_words)], df.columns
    assert df.loc['cpvt-tiny_4xb256_in1k', 'parameters'] == 5681512


def test_list_models_lists_our_classifiers_only_once():
    """Our classifiers, registered once through mmpretrain's public
    register_model_index (mmpretrain's own methods left as they are); our
    DeiT baselines repeat mmpretrain's recipes under its names: they stay
    out of the hub (configs/cpvt/metafile_deit.yml, listed by
    model-index.yml for mim only), and mmpretrain's entries keep theirs."""
    from importlib.metadata import distribution

    from mmpretrain import list_models
    from mmpretrain.apis.model import ModelHub
    from modelindex.load_model_index import load
    models = _metafile_models()
    ours = {n for n, m in models.items()
            if m['Results'][0]['Task'] == TASK}
    dense = set(models) - ours
    assert len(ours) == 24 and {'cpvt-tiny_4xb256_in1k',
                                'swin-t-peg_16xb64_in1k',
                                'pvt-t-peg-gap_8xb128_in1k'} <= ours
    assert any(n.startswith('retinanet_') for n in dense)
    assert any(n.startswith('fpn_pvt') for n in dense)
    listed = set(list_models())
    deit = {'deit-tiny_4xb256_in1k', 'deit-small_4xb256_in1k',
            'deit-base_4xb256_in1k'}  # configs/cpvt/metafile_deit.yml
    assert ours - deit <= listed, sorted(ours - deit - listed)
    assert not dense & listed, sorted(dense & listed)
    cpvt = {n for n in ours if n.startswith('cpvt')}
    assert len(cpvt) == 10 and cpvt <= set(list_models('*cpvt*'))
    assert set(list_models('cpvt', task=TASK)) == cpvt

    # mmpretrain's model-index alone, read without the hub
    root = distribution('mmpretrain').locate_file('mmpretrain')
    theirs = load(str(root / '.mim' / 'model-index.yml')).models
    clashes = set(_metafile_models()) & {m.name.lower() for m in theirs}
    assert clashes == {'deit-tiny_4xb256_in1k', 'deit-small_4xb256_in1k'}
    for name in clashes:
        meta = ModelHub._models_dict[name]
        assert meta.weights is not None and meta.weights.startswith('http')
        assert osp.join('mmpretrain', '.mim', 'configs') in meta.config
    assert 'deit-base_4xb256_in1k' not in list_models()

    before = list_models()
    assert model_index.register_mmpretrain_models() is False
    assert list_models() == before
    assert ModelHub.__dict__['_register_mmpretrain_models'].__func__ \
        .__module__ == 'mmpretrain.apis.model'


def test_get_model_and_inference_model_by_name_without_weights():
    """mmpretrain picks the inferencer from the task in ``Results``."""
    from mmpretrain import get_model, inference_model
    from mmpretrain.apis.model import ModelHub
    name = 'cpvt-tiny_4xb256_in1k'
    meta = ModelHub.get(name)
    assert meta.weights is None
    assert meta.config.filename == osp.join(ROOT, 'configs', 'cpvt',
                                            name + '.py')
    with pytest.warns(UserWarning, match='Unable to find pre-defined'):
        model = get_model(name, pretrained=True)
    assert type(model.backbone).__name__ == 'CPVT'
    n = sum(p.numel() for p in model.parameters())
    assert n == _metafile_models()[name]['Metadata']['Parameters']
    img = np.random.RandomState(0).randint(0, 256, (40, 56, 3), np.uint8)
    result = inference_model(name, img)
    assert result['pred_scores'].shape == (1000, )
    assert 0 <= result['pred_label'] < 1000


def test_mim_root_is_the_checkout_or_says_where_it_looked(tmp_path,
                                                          monkeypatch):
    assert model_index.get_mim_root() == ROOT
    monkeypatch.setattr(model_index, 'PACKAGE_DIR',
                        str(tmp_path / 'site' / 'mmcpvt'))
    with pytest.raises(FileNotFoundError) as e:
        model_index.get_mim_root()
    msg = str(e.value)
    assert str(tmp_path / 'site') in msg
    assert str(tmp_path / 'site' / 'mmcpvt' / '.mim') in msg
    assert 'pip install .' in msg


def test_broken_mmpretrain_warns_and_mmcpvt_imports(monkeypatch):
    def broken():
        raise AssertionError('MMCV==9.0.0 is used but incompatible')

    monkeypatch.setattr(model_index, 'register_mmpretrain_models', broken)
    with pytest.warns(UserWarning, match='does not import.*MMCV==9.0.0'):
        assert model_index.register_mmpretrain_models_if_installed() is False


@pytest.mark.parametrize('blocked', [('mmpretrain', ),
                                     ('mmdet', 'mmseg', 'mmpretrain')])
def test_import_without_downstream_libraries(blocked):
    """``None`` in sys.modules makes an import fail and find_spec return
    None, as when it is not installed: ``import mmcpvt`` works, adds nothing
    to the hub and builds its backbones and ``mmcpvt.CheckSegMap`` (the COCO
    data set is imported only when a config names it)."""
    code = (f'import sys\nsys.modules.update(dict.fromkeys({blocked}))\n'
            'import mmcpvt\n'
            'from mmcpvt.apis import register_mmpretrain_models_if_installed'
            ' as r\n'
            'assert r() is False\n'
            'assert sys.modules["mmpretrain"] is None\n'
            'from mmengine.registry import MODELS, TRANSFORMS\n'
            'print(type(MODELS.build(dict(type="mmcpvt.CPVT", arch=dict('
            'embed_dims=32, num_layers=1, num_heads=2, '
            'feedforward_channels=64)))).__name__, type(TRANSFORMS.build('
            'dict(type="mmcpvt.CheckSegMap", num_classes=3))).__name__, '
            '"mmcpvt.datasets.coco" in sys.modules)\n')
    proc = run_tool('-c', code)
    assert proc.returncode == 0, explain(proc)
    assert proc.stdout.split()[-3:] == ['CPVT', 'CheckSegMap', 'False']
