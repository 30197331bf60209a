"""Checks of loaded annotations, placed in a pipeline right after mmseg's
``LoadAnnotations``.

mmseg loads an image and its label map separately and its transforms
(``RandomResize``, ``RandomCrop``, ``Resize``) resize each on its own: a label
map of another size than its image trains without a word, its classes no
longer on the pixels they belong to. :class:`CheckSegMap` stops at the pair
with an error that names both files and both sizes.

``LoadAnnotations`` also casts the label map to uint8 as it loads it: a
16-bit PNG's 300 becomes 44, another class. :class:`CheckSegMap` opens a
label map file again when it is stored with more than 8 bits (its header
says so; 8-bit maps are not read again) and refuses values outside 0-255.
"""
from typing import Optional

import numpy as np
from mmcv.transforms import BaseTransform
from PIL import Image

from mmcpvt.registry import register_transform

# PIL modes of single-channel images with more than 8 bits a pixel
WIDE_MODES = ('I', 'I;16', 'I;16B', 'I;16L', 'I;16N', 'F')


@register_transform
class CheckSegMap(BaseTransform):
    """Check a semantic segmentation label map against its image.

    Put it right after ``LoadAnnotations`` in every pipeline that loads
    label maps (``dict(type='mmcpvt.CheckSegMap')``); our ADE20K configs do
    (``configs/_base_/datasets/ade20k.py``). It changes nothing and raises a
    ValueError naming both files when

    - the label map is not single-channel ((H, W) class indices: a colour
      rendering or an RGB-saved map is (H, W, 3));
    - its height and width differ from those of its image as loaded
      (``ori_shape``: ``LoadAnnotations`` may come after ``Resize``, as in
      mmseg's test pipelines);
    - its file (a local one that PIL reads) is stored with more than 8
      bits and holds a value outside 0-255, which ``LoadAnnotations``'
      cast to uint8 has wrapped into another label (300 becomes 44);
    - with ``num_classes`` set, it holds a value outside ``[0,
      num_classes)`` other than ``ignore_index``, after ``reduce_zero_label``
      and the data set's label map (a value the loss cannot take).

    Results without ``gt_seg_map`` pass unchecked: the inferencers remove
    ``LoadAnnotations`` from the test pipeline.

    Required Keys:

    - gt_seg_map (np.uint8), seg_map_path
    - ori_shape, img_path (optional: without ``ori_shape`` the size is not
      checked)

    Args:
        num_classes (int, optional): Number of classes of the model
            (``decode_head.num_classes``). None leaves the label values
            unchecked. Defaults to None.
        ignore_index (int): The label value the loss ignores (mmseg's
            ``ignore_index``). Defaults to 255.
    """

    def __init__(self, num_classes: Optional[int] = None,
                 ignore_index: int = 255):
        if num_classes is not None and num_classes < 1:
            raise ValueError(f'CheckSegMap: num_classes must be None or >= 1, '
                             f'got {num_classes}')
        self.num_classes = num_classes
        self.ignore_index = ignore_index

    def transform(self, results: dict) -> dict:
        seg = results.get('gt_seg_map')
        if seg is None:
            return results
        seg_path = results.get('seg_map_path', '<label map>')
        img_path = results.get('img_path', '<image>')
        if seg.ndim != 2:
            raise ValueError(
                f'label map {seg_path} loads as an array of shape '
                f'{seg.shape}, not (height, width): a label map is one '
                f'channel of class indices, as the PNGs of ADE20K. Convert a '
                f'colour or RGB-saved map to its class indices; for a '
                f"palette ('P' mode) PNG whose indices are the classes, set "
                f"LoadAnnotations(imdecode_backend='pillow') in the "
                f'pipeline.')
        self._check_stored_values(seg_path)
        ori_shape = results.get('ori_shape')
        if ori_shape is not None and tuple(seg.shape) != tuple(ori_shape[:2]):
            (h, w), (img_h, img_w) = seg.shape, ori_shape[:2]
            hint = (' The sizes are transposed: the image probably carries '
                    'an EXIF orientation, which the image loader applies; '
                    'save it upright (PIL.ImageOps.exif_transpose).'
                    if (h, w) == (img_w, img_h) else '')
            raise ValueError(
                f'label map {seg_path} is {h}x{w} (height x width) but its '
                f'image {img_path} is {img_h}x{img_w}: mmseg resizes and '
                f'crops the two separately, so the labels would not lie on '
                f'their pixels. Make each label map the size of its image, '
                f'or leave the pair out of the data set.{hint}')
        if self.num_classes is not None:
            bad = (seg >= self.num_classes) & (seg != self.ignore_index)
            if bad.any():
                values = np.unique(seg[bad]).tolist()
                reduced = results.get('reduce_zero_label', False)
                hint = (' If 0 is "other" in these maps (as in ADE20K), set '
                        'reduce_zero_label=True in the dataset.'
                        if not reduced and values == [self.num_classes]
                        else '')
                raise ValueError(
                    f'label map {seg_path} holds the labels {values[:10]} '
                    f'(after reduce_zero_label={reduced} and the data set\'s '
                    f'label map), outside [0, {self.num_classes}) and not '
                    f'the ignore index {self.ignore_index}: the loss cannot '
                    f'take them. Fix the map, or, if the model has more '
                    f'classes, set num_classes of CheckSegMap in the '
                    f'pipeline to its decode_head.num_classes.{hint}')
        return results

    def _check_stored_values(self, seg_path: str):
        """Values of a label map file of more than 8 bits are in 0-255:
        ``LoadAnnotations`` has cast them to uint8, wrapping the others."""
        try:
            with Image.open(seg_path) as stored:
                if stored.mode not in WIDE_MODES:
                    return
                mode, values = stored.mode, np.asarray(stored)
        except (OSError, ValueError):  # not a local file (another backend)
            return
        bad = np.unique(values[(values < 0) | (values > 255)])
        if bad.size:
            value = bad[-1].item()
            raise ValueError(
                f'label map {seg_path} holds the value {value}, outside the '
                f'0 to 255 a label map may hold (a {values.dtype} image, PIL '
                f'mode {mode!r}; its values outside: {bad[:10].tolist()}). '
                f"mmseg's LoadAnnotations casts label maps to uint8, so "
                f'{value} would become {int(value) % 256}, another label. '
                f'Save the map as an 8-bit single-channel PNG of class ids '
                f'0 to 255 (255: ignored).')

    def __repr__(self) -> str:
        return (f'{self.__class__.__name__}(num_classes={self.num_classes}, '
                f'ignore_index={self.ignore_index})')
