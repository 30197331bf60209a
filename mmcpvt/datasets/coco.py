"""mmdet's ``CocoDataset`` with clear errors and warnings for bad files.

mmdet's ``CocoDataset`` reads a COCO json as it is:

- a training file without annotations leaves no image after
  ``filter_cfg=dict(filter_empty_gt=True)``, and mmengine then fails with
  "need at least one array to concatenate";
- a file without ``'images'`` or ``'categories'`` reads as an empty set (the
  same error), one whose annotations lack ``'area'`` or ``'bbox'`` fails
  with a bare ``KeyError``;
- two images with the same ``id`` (as when two files are merged) become
  one: pycocotools keeps the last and gives it the annotations of both;
- annotations whose box lies outside its image, has a negative or zero
  width or height, or whose ``category_id`` is not a category of the file
  are dropped without a word, as are annotations of an ``image_id`` that is
  not in ``'images'``;
- ``metainfo=dict(classes=...)`` names that are not categories of the file
  are skipped, and the classes are numbered in the file's order: the class
  names then no longer match the labels.

:class:`CheckedCocoDataset` is the same data set (it overrides nothing that
mmdet computes) with an error naming the file and what is expected for each
of those, and one warning per file that counts the dropped annotations per
reason. mmdet's filtering (``filter_cfg``) is unchanged.
"""
import json
import logging
from collections import defaultdict
from typing import Dict, List

from mmdet.datasets import CocoDataset
from mmdet.datasets.api_wrappers import COCO
from mmengine.logging import print_log

from mmcpvt.registry import register_dataset

IMAGE_KEYS = ('id', 'file_name', 'height', 'width')
ANNOTATION_KEYS = ('id', 'image_id', 'category_id', 'bbox', 'area')
LAYOUT = ("a COCO detection file is a dict with images=[dict(id, file_name, "
          "height, width)], annotations=[dict(id, image_id, category_id, "
          "bbox=[x, y, w, h], area, iscrowd)] and categories=[dict(id, "
          "name)], as COCO's annotations/instances_train2017.json")
# Why mmdet drops an annotation, in the words of the warning.
REASONS = {
    'size': 'with a negative or zero box width or height',
    'outside': 'whose box lies outside its image',
    'tiny': 'whose box is under 1 px wide or high, or whose area is <= 0',
    'category': "whose category_id is not one of the file's categories",
    'image': "whose image_id is not one of the file's images",
}
SHOWN = 5  # ids shown per reason


def _some(items, n=SHOWN) -> str:
    items = list(items)
    more = f' and {len(items) - n} more' if len(items) > n else ''
    return ', '.join(map(str, items[:n])) + more


class CheckedCOCO(COCO):
    """mmdet's COCO api that checks the file's layout before indexing it.

    Args:
        annotation_file (str): The json file to read.
        name (str, optional): The file's name in messages. Defaults to
            ``annotation_file``.

    Attributes:
        found (dict): What the check found: ``num_images``,
            ``num_annotations``, ``has_annotations`` (the file has an
            ``'annotations'`` key), ``categories`` (id -> name) and
            ``orphans`` (ids of annotations whose ``image_id`` is not an
            image of the file).
    """

    def __init__(self, annotation_file: str, name: str = None):
        self.name = name or annotation_file
        self.found = dict(num_images=0, num_annotations=0,
                          has_annotations=False, categories={}, orphans=[])
        try:
            super().__init__(annotation_file)
        except json.JSONDecodeError as e:
            raise ValueError(f'{self.name} is not a json file ({e}); '
                             f'{LAYOUT}') from e
        except AssertionError as e:  # pycocotools: the json is not a dict
            raise ValueError(f'{self.name} holds no COCO data set ({e}); '
                             f'{LAYOUT}') from e

    def createIndex(self):  # noqa: N802  (pycocotools' name)
        self._check_layout(self.dataset)
        super().createIndex()

    def _check_layout(self, data: dict):
        for key in ('images', 'categories'):
            if not isinstance(data.get(key), list):
                got = 'has none' if key not in data else \
                    f'is a {type(data[key]).__name__}'
                raise ValueError(
                    f"{self.name} has no {key!r} list (its {key!r} {got}; "
                    f'its keys: {sorted(data)}): {LAYOUT}')
        annotations = data.get('annotations', [])
        if not isinstance(annotations, list):
            raise ValueError(f"{self.name}: 'annotations' is a "
                             f'{type(annotations).__name__}, not a list: '
                             f'{LAYOUT}')
        self._check_items(data['images'], 'images', IMAGE_KEYS)
        self._check_items(annotations, 'annotations', ANNOTATION_KEYS)
        bad = [i for i, ann in enumerate(annotations)
               if not isinstance(ann['bbox'], (list, tuple))
               or len(ann['bbox']) != 4]
        if bad:
            ann = annotations[bad[0]]
            raise ValueError(
                f'{self.name}: {len(bad)} annotations have a bbox that is '
                f'not 4 numbers [x, y, w, h] (annotations #{_some(bad)}; '
                f"the first, id {ann['id']}: bbox={ann['bbox']!r})")
        self._check_items(data['categories'], 'categories', ('id', 'name'))
        image_ids = {}
        for img in data['images']:
            first = image_ids.setdefault(img['id'], img)
            if first is not img:
                raise ValueError(
                    f"{self.name}: the images {first['file_name']} and "
                    f"{img['file_name']} share the id {img['id']}: "
                    f'pycocotools keeps the last image of an id and gives it '
                    f'the annotations of both, so boxes would land on the '
                    f"wrong image. Give each image of 'images' an id of its "
                    f"own (and its annotations that image_id); files merged "
                    f'from two sets need their ids renumbered.')
        self.found = dict(
            num_images=len(data['images']),
            num_annotations=len(annotations),
            has_annotations='annotations' in data,
            categories={c['id']: c['name'] for c in data['categories']},
            orphans=[a['id'] for a in annotations
                     if a['image_id'] not in image_ids])

    def _check_items(self, items: List[dict], key: str, required: tuple):
        """Every item of ``data[key]`` is a dict with the ``required``
        keys."""
        bad = [i for i, item in enumerate(items)
               if not isinstance(item, dict) or not item.keys() >= set(
                   required)]
        if bad:
            first = items[bad[0]]
            missing = (sorted(set(required) - first.keys())
                       if isinstance(first, dict) else list(required))
            raise ValueError(
                f'{self.name}: {len(bad)} of the {len(items)} {key} lack '
                f'keys that mmdet reads ({key} #{_some(bad)}; the first '
                f'lacks {missing}: {str(first)[:200]}). Each of {key} needs '
                f'{list(required)}: {LAYOUT}')


@register_dataset
class CheckedCocoDataset(CocoDataset):
    """mmdet's ``CocoDataset`` that refuses unusable files and says what it
    drops.

    Takes ``CocoDataset``'s arguments and gives the same data list. In
    addition, when the annotation file is loaded:

    - an error (ValueError naming the file and what is expected) for a file
      that is not a COCO detection file (no ``'images'`` or
      ``'categories'`` list, images or annotations without the keys mmdet
      reads, a bbox that is not 4 numbers), two images sharing an id, a
      file without images, a training file (``test_mode=False``) without
      annotations, no image left after ``filter_cfg``, and ``metainfo``
      classes that are not categories of the file or not in its order;
    - a warning (mmengine's current logger) with the number of annotations
      mmdet leaves out, per reason, with their ids: box outside the image,
      negative or zero width or height, under 1 px or area <= 0, unknown
      ``category_id``, ``image_id`` not in ``'images'``. Annotations marked
      ``ignore`` and those of categories that are not in ``metainfo``
      classes are left out on purpose and not warned about (the latter is
      logged at INFO level).

    A file of images only (COCO test-dev's ``image_info``) is fine with
    ``test_mode=True``.
    """
    def load_data_list(self) -> List[dict]:
        self._found = None
        self._dropped: Dict[str, list] = defaultdict(list)
        self._unused = 0  # annotations of categories not in the classes
        self._unknown_categories = set()
        data_list = super().load_data_list()
        found = self._found
        if not found['num_images']:
            raise ValueError(
                f"{self.ann_file} lists no images ('images' is empty): "
                f'there is nothing to {"test" if self.test_mode else "train"}'
                f' on. Point ann_file at a file with images; {LAYOUT}')
        if not self.test_mode and not found['num_annotations']:
            raise ValueError(
                f'{self.ann_file} holds {found["num_images"]} images and no '
                f"annotations ('annotations' is "
                f'{"empty" if found["has_annotations"] else "missing"}): a '
                f'training set needs boxes. Point ann_file at a file whose '
                f"'annotations' list has dict(id, image_id, category_id, "
                f'bbox=[x, y, w, h], area, iscrowd=0) items; a file of '
                f'images only (COCO test-dev) can be used with '
                f'test_mode=True, for testing.')
        self._check_classes(found['categories'])
        self._dropped['image'] = list(found['orphans'])
        self._report_dropped()
        return data_list

    def COCOAPI(self, annotation_file: str) -> CheckedCOCO:  # noqa: N802
        """The COCO api that mmdet's ``load_data_list`` builds (as
        ``self.COCOAPI(path)``): :class:`CheckedCOCO`, whose findings are
        kept for the checks that follow."""
        coco = CheckedCOCO(annotation_file, name=self.ann_file)
        self._found = coco.found
        return coco

    def parse_data_info(self, raw_data_info: dict) -> dict:
        image = raw_data_info['raw_img_info']
        for ann in raw_data_info['raw_ann_info']:
            reason = self._drop_reason(ann, image)
            if reason == 'unused':
                self._unused += 1
            elif reason is not None:
                self._dropped[reason].append(ann['id'])
        return super().parse_data_info(raw_data_info)

    def _drop_reason(self, ann: dict, image: dict):
        """Why mmdet's ``CocoDataset.parse_data_info`` leaves ``ann`` out
        (its conditions, in its order), or None if it keeps it."""
        if ann.get('ignore', False):
            return None  # on purpose
        x, y, w, h = ann['bbox']
        inter_w = max(0, min(x + w, image['width']) - max(x, 0))
        inter_h = max(0, min(y + h, image['height']) - max(y, 0))
        if inter_w * inter_h == 0:
            return 'size' if w <= 0 or h <= 0 else 'outside'
        if ann['area'] <= 0 or w < 1 or h < 1:
            return 'tiny'
        if ann['category_id'] not in self.cat_ids:
            if ann['category_id'] in self._found['categories']:
                return 'unused'
            self._unknown_categories.add(ann['category_id'])
            return 'category'
        return None

    def _check_classes(self, categories: Dict[int, str]):
        """The ``metainfo`` classes are categories of the file, in its
        order: mmdet numbers the classes it finds in the file's order, so
        any other gives labels under another class's name."""
        classes = list(self.metainfo['classes'])
        names = list(categories.values())
        missing = [c for c in classes if c not in names]
        if missing:
            raise ValueError(
                f'metainfo classes {_some(missing, 10)} are not categories '
                f'of {self.ann_file} (its {len(names)} categories: '
                f'{_some(names, 20)}). mmdet would skip them and number the '
                f'other classes from 0, so that labels and class names no '
                f'longer match. Set metainfo=dict(classes=(...)) of the '
                f"config's dataset to category names of the file.")
        found = [categories[i] for i in self.cat_ids]
        if found != classes:
            raise ValueError(
                f'metainfo classes {tuple(classes)} are not in the order of '
                f"the categories of {self.ann_file}: mmdet numbers them in "
                f"the file's order, {tuple(found)}, so labels would carry "
                f'the wrong class names. Set metainfo=dict(classes='
                f"{tuple(found)}) in the config's dataset.")

    def _report_dropped(self):
        dropped = {k: self._dropped[k] for k in REASONS if self._dropped[k]}
        if dropped:
            total = sum(map(len, dropped.values()))
            unknown = sorted(self._unknown_categories)
            reasons = '; '.join(
                f'{len(ids)} {REASONS[k]} (' +
                (f'category_id {_some(unknown)}; ' if k == 'category' else '')
                + f'annotation ids {_some(ids)})'
                for k, ids in dropped.items())
            print_log(
                f'{self.ann_file}: {total} of {self._found["num_annotations"]}'
                f' annotations are left out: {reasons}. mmdet\'s CocoDataset '
                f'drops these without a word; correct them in the file to '
                f'use them.',
                logger='current',
                level=logging.WARNING)
        if self._unused:
            print_log(
                f'{self.ann_file}: {self._unused} annotations of categories '
                f'that are not in metainfo classes are not used.',
                logger='current',
                level=logging.INFO)

    def filter_data(self) -> List[dict]:
        data_list = super().filter_data()
        if data_list or self.test_mode or not self.data_list:
            return data_list
        ids_in_classes = set()
        for cat_id in self.cat_ids:
            ids_in_classes |= set(self.cat_img_map[cat_id])
        min_size = self.filter_cfg.get('min_size', 0)
        large = sum(
            min(d['width'], d['height']) >= min_size for d in self.data_list)
        raise ValueError(
            f'no image of {self.ann_file} is left for training after '
            f'filter_cfg={dict(self.filter_cfg)}: of its '
            f'{len(self.data_list)} images, {len(ids_in_classes)} have '
            f'annotations of the classes {tuple(self.metainfo["classes"])} '
            f'and {large} are at least min_size={min_size} px on their '
            f'shorter side. Check metainfo classes and filter_cfg of the '
            f"config's dataset against the file.")
