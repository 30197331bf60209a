"""The metafiles (configs/*/metafile*.yml, gathered by model-index.yml) do
not pass the paper's numbers off as ours: mmcpvt releases no weights, so
``Results`` name the task and data set with no metric, and the paper's
numbers are ``Paper Results``. mim and mmpretrain parse the format: mim's
table has no metric, mmpretrain reads the task."""
import os.path as osp

import yaml

from tests.utils import ROOT


def _index():
    from modelindex.load_model_index import load
    index = load(osp.join(ROOT, 'model-index.yml'))
    index.build_models_with_collections()
    return index


def _metafiles():
    with open(osp.join(ROOT, 'model-index.yml')) as f:
        imports = yaml.safe_load(f)['Import']
    out = {}
    for path in imports:
        with open(osp.join(ROOT, path)) as f:
            out[path] = yaml.safe_load(f)
    return out


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


def test_model_index_parses_with_the_tasks():
    index = _index()
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
        assert all(r.metrics == {} for r in model.results), model.name
        assert osp.isfile(osp.join(ROOT, model.config)), model.config


def test_mim_search_shows_no_metric():
    """mim's table (``mim search mmcpvt``) of our model-index: every model,
    no metric column (it would show the paper's numbers as ours)."""
    from mim.commands.search import convert2df
    index = _index()
    df = convert2df(index)
    assert set(df.index) == {m.name for m in index.models}
    assert len(df.index) == 44
    metric_words = ('accuracy', 'box_ap', 'miou', 'top_1', 'top_5')
    assert not [c for c in df.columns
                if any(w in c.lower() for w in metric_words)], df.columns
    assert df.loc['cpvt-tiny_4xb256_in1k', 'parameters'] == 5681512
