"""mmdet's ``CocoDataset`` with clear errors and warnings for bad files.

mmdet reads a COCO json as it is: a file it cannot use fails late, with an
error that names neither the file nor the fault ("need at least one array to
concatenate", a bare ``KeyError``) or with none (two images with one id
become one), and annotations it cannot use are dropped without a word.
"""
import logging
from collections import defaultdict
from typing import Dict, List

from mmdet.datasets import CocoDataset
from mmdet.datasets.api_wrappers import COCO
from mmengine.logging import print_log

from mmcpvt.datasets.transforms import refuse
from mmcpvt.registry import register_dataset
from mmcpvt.utils.text import some

# The keys mmdet reads of the items of each list of a COCO file.
KEYS = {
    'images': ('id', 'file_name', 'height', 'width'),
    'annotations': ('id', 'image_id', 'category_id', 'bbox', 'area'),
    'categories': ('id', 'name'),
}
LAYOUT = ('A COCO detection file is a dict with images=[dict(id, file_name, '
          'height, width)], annotations=[dict(id, image_id, category_id, '
          'bbox=[x, y, w, h], area, iscrowd)] and categories=[dict(id, '
          "name)], as COCO's annotations/instances_train2017.json.")
# Why mmdet drops an annotation, in the words of the warning.
REASONS = {
    'size': 'with a negative or zero box width or height',
    'outside': 'whose box lies outside its image',
    'tiny': 'whose box is under 1 px wide or high, or whose area is <= 0',
    'category': "whose category_id is not one of the file's categories",
    'image': "whose image_id is not one of the file's images",
}


def check_layout(data: dict, name: str):
    """Refuse a COCO file whose lists or items lack what mmdet reads, or
    whose images share an id."""
    for key, required in KEYS.items():
        items = data.get(key, [] if key == 'annotations' else None)
        if not isinstance(items, list):
            got = f'is a {type(items).__name__}' if key in data else 'has none'
            raise refuse(name, f'has no {key!r} list (its {key!r} {got}; '
                         f'its keys: {sorted(data)})', LAYOUT)
        bad = [i for i, item in enumerate(items) if not isinstance(
            item, dict) or not item.keys() >= set(required)]
        if bad:
            first = items[bad[0]]
            missing = sorted(set(required) - set(
                first if isinstance(first, dict) else ()))
            raise refuse(
                name, f'{len(bad)} of the {len(items)} {key} lack keys that '
                f'mmdet reads ({key} #{some(bad, 5)}; the first lacks '
                f'{missing}: {str(first)[:200]})', LAYOUT)
    if not data['images']:
        raise refuse(name, "'images' is empty: there is nothing to train or "
                     'test on', 'Point ann_file at a file with images.')
    annotations = data.get('annotations', [])
    bad = [i for i, ann in enumerate(annotations)
           if not isinstance(ann['bbox'], (list, tuple))
           or len(ann['bbox']) != 4]
    if bad:
        ann = annotations[bad[0]]
        raise refuse(
            name, f'{len(bad)} annotations have a bbox that is not 4 numbers '
            f'[x, y, w, h] (annotations #{some(bad, 5)}; the first, id '
            f"{ann['id']}: bbox={ann['bbox']!r})", LAYOUT)
    first_of_id = {}
    for img in data['images']:
        first = first_of_id.setdefault(img['id'], img)
        if first is not img:
            raise refuse(
                name, f"the images {first['file_name']} and "
                f"{img['file_name']} share the id {img['id']}: pycocotools "
                'keeps the last image of an id and gives it the annotations '
                'of both, so boxes would land on the wrong image',
                'Give each image an id of its own (files merged from two sets '
                'need their ids renumbered), and its annotations that id.')


def _drop_reason(ann: dict, images: dict, categories: dict):
    """Why mmdet leaves ``ann`` out (a key of ``REASONS``, by the conditions
    of ``CocoDataset.parse_data_info``), or None: kept, or left on purpose."""
    image = images.get(ann['image_id'])
    if image is None:
        return 'image'  # never indexed
    if ann.get('ignore', False):
        return None
    x, y, w, h = ann['bbox']
    inter_w = max(0, min(x + w, image['width']) - max(x, 0))
    inter_h = max(0, min(y + h, image['height']) - max(y, 0))
    if inter_w * inter_h == 0:
        return 'size' if w <= 0 or h <= 0 else 'outside'
    if ann['area'] <= 0 or w < 1 or h < 1:
        return 'tiny'
    return 'category' if ann['category_id'] not in categories else None


class CheckedCOCO(COCO):
    """mmdet's COCO api that checks the file before pycocotools indexes
    it."""

    def __init__(self, annotation_file: str, name: str):
        self.name = name
        super().__init__(annotation_file)

    def createIndex(self):  # noqa: N802  (pycocotools' name)
        check_layout(self.dataset, self.name)
        super().createIndex()


@register_dataset
class CheckedCocoDataset(CocoDataset):
    """mmdet's ``CocoDataset`` that refuses unusable files and says what it
    drops.

    Takes ``CocoDataset``'s arguments and gives the same data list (it
    overrides nothing that mmdet computes, ``filter_cfg`` included). A
    ValueError names the file, what is wrong and what is allowed; a warning
    (mmengine's current logger) counts the annotations mmdet drops, per
    reason (``REASONS``), with their ids.
    """

    def COCOAPI(self, annotation_file: str) -> CheckedCOCO:  # noqa: N802
        # what mmdet's load_data_list builds; its data kept for the checks
        # that follow (mmdet deletes self.coco)
        coco = CheckedCOCO(annotation_file, name=self.ann_file)
        self._file = coco.dataset
        return coco

    def load_data_list(self) -> List[dict]:
        data_list = super().load_data_list()
        data, self._file = self._file, None
        if not self.test_mode and not data.get('annotations'):
            raise refuse(
                self.ann_file, f"holds {len(data['images'])} images and no "
                "annotations ('annotations' is "
                f"{'empty' if 'annotations' in data else 'missing'}): a "
                'training set needs boxes', 'Point ann_file at a file with '
                'annotations, or set test_mode=True to test on a file of '
                'images only (COCO test-dev). ' + LAYOUT)
        categories = {c['id']: c['name'] for c in data['categories']}
        self._check_classes(categories)
        self._report_dropped(data, categories)
        return data_list

    def _check_classes(self, categories: Dict[int, str]):
        classes, names = list(self.metainfo['classes']), list(
            categories.values())
        missing = [c for c in classes if c not in names]
        if missing:
            raise refuse(
                self.ann_file, f'metainfo classes {some(missing, 10)} are '
                f'not categories of the file (its {len(names)} categories: '
                f'{some(names, 20)}): mmdet would skip them and number the '
                'other classes from 0, so that labels and class names no '
                'longer match', 'Set metainfo=dict(classes=(...)) of the '
                "config's dataset to category names of the file.")
        found = [categories[i] for i in self.cat_ids]
        if found != classes:
            raise refuse(
                self.ann_file, f'metainfo classes {tuple(classes)} are not in '
                'the order of the categories of the file: mmdet numbers them '
                f"in the file's order, {tuple(found)}, so labels would carry "
                'the wrong class names', 'Set metainfo=dict(classes='
                f"{tuple(found)}) in the config's dataset.")

    def _report_dropped(self, data: dict, categories: Dict[int, str]):
        images = {img['id']: img for img in data['images']}
        dropped = defaultdict(list)  # reason (None: kept) -> annotations
        for ann in data.get('annotations', []):
            dropped[_drop_reason(ann, images, categories)].append(ann)
        reasons = []
        for key in [k for k in REASONS if dropped[k]]:
            anns = dropped[key]
            cats = sorted({a['category_id'] for a in anns})
            cats = (f'category_id {some(cats, 5)}; ' if key == 'category'
                    else '')
            reasons.append(f'{len(anns)} {REASONS[key]} ({cats}annotation '
                           f"ids {some((a['id'] for a in anns), 5)})")
        if reasons:
            print_log(
                f'{self.ann_file}: {sum(len(dropped[k]) for k in REASONS)} of '
                f"{len(data['annotations'])} annotations are left out: "
                f"{'; '.join(reasons)}. mmdet's CocoDataset drops these "
                'without a word; correct them in the file to use them.',
                logger='current', level=logging.WARNING)

    def filter_data(self) -> List[dict]:
        data_list = super().filter_data()
        if data_list or self.test_mode or not self.data_list:
            return data_list
        ids_in_classes = set().union(
            *(self.cat_img_map[cat_id] for cat_id in self.cat_ids))
        min_size = self.filter_cfg.get('min_size', 0)
        large = sum(
            min(d['width'], d['height']) >= min_size for d in self.data_list)
        raise refuse(
            self.ann_file, 'no image is left for training after '
            f'filter_cfg={dict(self.filter_cfg)}: of its '
            f'{len(self.data_list)} images, {len(ids_in_classes)} have '
            f'annotations of the classes {tuple(self.metainfo["classes"])} '
            f'and {large} are at least min_size={min_size} px on their '
            "shorter side", "Check metainfo classes and filter_cfg of the "
            "config's dataset against the file.")
