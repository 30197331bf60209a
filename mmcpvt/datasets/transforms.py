"""Checks of loaded annotations, placed in a pipeline right after mmseg's
``LoadAnnotations``, which neither checks a label map against its image nor
says when its cast to uint8 changes a label."""
from typing import Optional

import numpy as np
from mmcv.transforms import BaseTransform
from PIL import Image

from mmcpvt.registry import register_transform

# PIL modes of single-channel images with more than 8 bits a pixel
WIDE_MODES = ('I', 'I;16', 'I;16B', 'I;16L', 'I;16N', 'F')


def refuse(file: str, what: str, allowed: str) -> ValueError:
    """The error for a data file that cannot be used: the file, what is
    wrong in it (with the values found), what is allowed and where to change
    it. Shared by the checks of this package."""
    return ValueError(f'{file}: {what}. {allowed}')


@register_transform
class CheckSegMap(BaseTransform):
    """Check a semantic segmentation label map against its image.

    Put right after ``LoadAnnotations`` (``dict(type='mmcpvt.CheckSegMap')``,
    as our ADE20K configs do), it changes nothing and raises a ValueError
    naming the files when the label map is not one channel, differs in size
    from its image, is a local file of more than 8 bits holding a value
    outside 0-255 (which the cast to uint8 has wrapped into another label),
    or, with ``num_classes`` set, holds a label outside ``[0, num_classes)``
    other than ``ignore_index``.

    Args:
        num_classes (int, optional): Number of classes of the model
            (``decode_head.num_classes``). None leaves the label values
            unchecked. Defaults to None.
        ignore_index (int): The label value the loss ignores (mmseg's
            ``ignore_index``). Defaults to 255.
    """

    def __init__(self, num_classes: Optional[int] = None,
                 ignore_index: int = 255):
        self.num_classes = num_classes
        self.ignore_index = ignore_index

    def transform(self, results: dict) -> dict:
        seg = results.get('gt_seg_map')
        if seg is None:
            return results
        seg_path = results.get('seg_map_path', '<label map>')
        name = f'label map {seg_path}'
        if seg.ndim != 2:
            raise refuse(
                name, f'loads as an array of shape {seg.shape}, not '
                '(height, width): a label map is one channel of class '
                'indices, as the PNGs of ADE20K', 'Convert a colour or '
                "RGB-saved map to its class indices; for a palette ('P' "
                'mode) PNG whose indices are the classes, set '
                "LoadAnnotations(imdecode_backend='pillow') in the pipeline.")
        self._check_stored_values(seg_path)
        ori_shape = results.get('ori_shape')
        if ori_shape is not None and tuple(seg.shape) != tuple(ori_shape[:2]):
            (h, w), (img_h, img_w) = seg.shape, ori_shape[:2]
            hint = (' The sizes are transposed: the image probably carries '
                    'an EXIF orientation, which the image loader applies; '
                    'save it upright (PIL.ImageOps.exif_transpose).'
                    if (h, w) == (img_w, img_h) else '')
            raise refuse(
                name, f'{h}x{w} (height x width), but its image '
                f"{results.get('img_path', '<image>')} is {img_h}x{img_w}: "
                'mmseg resizes and crops the two separately, so the labels '
                'would not lie on their pixels', 'Make each label map the '
                f'size of its image, or leave the pair out of the data '
                f'set.{hint}')
        if self.num_classes is not None:
            bad = (seg >= self.num_classes) & (seg != self.ignore_index)
            if bad.any():
                values = np.unique(seg[bad]).tolist()
                reduced = results.get('reduce_zero_label', False)
                hint = (' If 0 is "other" in these maps (as in ADE20K), set '
                        'reduce_zero_label=True in the dataset.'
                        if not reduced and values == [self.num_classes]
                        else '')
                raise refuse(
                    name, f'holds the labels {values[:10]} (after '
                    f"reduce_zero_label={reduced} and the data set's label "
                    f'map), outside [0, {self.num_classes}) and not the '
                    f'ignore index {self.ignore_index}: the loss cannot take '
                    'them', 'Fix the map, or, if the model has more classes, '
                    'set num_classes of CheckSegMap in the pipeline to its '
                    f'decode_head.num_classes.{hint}')
        return results

    def _check_stored_values(self, seg_path: str):
        try:
            with Image.open(seg_path) as stored:
                if stored.mode not in WIDE_MODES:
                    return  # 8-bit files are not decoded again
                mode, values = stored.mode, np.asarray(stored)
        except (OSError, ValueError):  # not a local file (another backend)
            return
        bad = np.unique(values[(values < 0) | (values > 255)])
        if bad.size:
            value = bad[-1].item()
            raise refuse(
                f'label map {seg_path}', f'holds the value {value}, outside '
                f'the 0 to 255 a label map may hold (a {values.dtype} image, '
                f'PIL mode {mode!r}; its values outside: {bad[:10].tolist()})'
                ": mmseg's LoadAnnotations casts label maps to uint8, so "
                f'{value} would become {int(value) % 256}, another label',
                'Save the map as an 8-bit single-channel PNG of class ids 0 '
                'to 255 (255: ignored).')

    def __repr__(self) -> str:
        return (f'{self.__class__.__name__}(num_classes={self.num_classes}, '
                f'ignore_index={self.ignore_index})')
