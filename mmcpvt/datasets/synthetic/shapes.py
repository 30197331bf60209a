"""Render synthetic scenes of learnable objects for detection/segmentation
(:mod:`.coco`, :mod:`.ade20k`; :mod:`.imagenet` draws one object with its
parts).

A scene is a noisy, textured background with a few objects; class ``k`` is
one shape (disc, square, triangle, ...; they cycle past ten classes) in its
own hue, with a random position, size, small rotation and colour jitter.
Objects never overlap, so each object's box, polygon and mask are exact.
All randomness comes from the ``numpy.random.Generator`` passed in.

Example::

    scene = render_scene(np.random.default_rng(0), 160, 200, num_classes=4)
    scene.image      # (160, 200, 3) uint8, RGB
    scene.boxes      # (N, 4) float32, COCO (x, y, w, h) in pixels
    scene.class_map  # (160, 200) uint8: 0 background, k + 1 for class k
"""
import colorsys
from dataclasses import dataclass
from typing import List, Tuple

import numpy as np
from matplotlib.path import Path


def _regular(n: int, radius: float = 1.,
             start: float = -np.pi / 2) -> np.ndarray:
    t = start + np.arange(n) * 2 * np.pi / n
    return np.stack([radius * np.cos(t), radius * np.sin(t)], 1)


# Each shape as a polygon inside the unit circle, centred at the origin,
# y pointing down (image coordinates).
UNIT_POLYGONS = {
    'disc': _regular(32),
    'square': np.array([[-.7, -.7], [.7, -.7], [.7, .7], [-.7, .7]]),
    'triangle': _regular(3),
    'cross': np.array([[-.3, -.95], [.3, -.95], [.3, -.3], [.95, -.3],
                       [.95, .3], [.3, .3], [.3, .95], [-.3, .95],
                       [-.3, .3], [-.95, .3], [-.95, -.3], [-.3, -.3]]),
    'diamond': np.array([[0., -1.], [.6, 0.], [0., 1.], [-.6, 0.]]),
    'star': np.stack([_regular(5), _regular(5, .45, -np.pi / 2 + np.pi / 5)],
                     1).reshape(-1, 2),  # outer and inner points in turn
    'hexagon': _regular(6, start=0.),
    'ellipse': _regular(32, start=0.) * (1., .5),
    'lshape': np.array([[-.7, -.7], [-.2, -.7], [-.2, .2], [.7, .2],
                        [.7, .7], [-.7, .7]]),
    'chevron': np.array([[-.8, -.6], [0., .2], [.8, -.6], [.8, .1],
                         [0., .9], [-.8, .1]]),
}
SHAPES = tuple(UNIT_POLYGONS)  # class k is SHAPES[k % 10]


@dataclass
class Scene:
    """One rendered scene of N objects (see the module's docstring);
    ``labels`` (N, ) int64; ``polygons`` (V, 2) float32 ``(x, y)`` in COCO's
    continuous coordinates (pixel ``(i, j)`` covers ``[j, j + 1) x [i, i +
    1)``), whose pixel centres make the masks; ``areas`` (N, ) int64 mask
    areas; ``boxes`` the tight boxes of the masks."""
    image: np.ndarray
    boxes: np.ndarray
    labels: np.ndarray
    polygons: List[np.ndarray]
    areas: np.ndarray
    class_map: np.ndarray


def class_style(label: int) -> Tuple[str, float]:
    """The (shape, hue) of class ``label``: shapes cycle, hues spread (the
    golden ratio keeps neighbouring labels far apart)."""
    hue = (label * 0.618033988749895 + 0.1 * (label // len(SHAPES))) % 1.
    return SHAPES[label % len(SHAPES)], hue


def render_background(rng: np.random.Generator, height: int,
                      width: int) -> np.ndarray:
    """A low-saturation colour gradient with a faint stripe texture and
    pixel noise, (H, W, 3) float32 in [0, 255]."""
    corners = rng.uniform(60, 200, size=(2, 2, 1)) + rng.uniform(
        -30, 30, size=(2, 2, 3))
    t = np.linspace(0, 1, height)[:, None, None]
    s = np.linspace(0, 1, width)[None, :, None]
    top = corners[0, 0] * (1 - s) + corners[0, 1] * s
    bottom = corners[1, 0] * (1 - s) + corners[1, 1] * s
    img = top * (1 - t) + bottom * t  # (H, W, 3)
    ys, xs = np.mgrid[0:height, 0:width]
    for _ in range(2):  # two random gratings as texture
        freq, angle = rng.uniform(0.02, 0.15), rng.uniform(0, np.pi)
        phase = rng.uniform(0, 2 * np.pi)
        wave = np.sin(2 * np.pi * freq *
                      (xs * np.cos(angle) + ys * np.sin(angle)) + phase)
        img = img + rng.uniform(5, 15) * wave[..., None]
    img = img + rng.normal(0, 12, size=img.shape)
    return img.astype(np.float32)


def polygon_mask(poly: np.ndarray, height: int, width: int) -> np.ndarray:
    """(H, W) bool mask of the pixels whose centre lies inside ``poly``
    ((V, 2) ``(x, y)`` in COCO's continuous coordinates), so the mask, its
    box and the polygon agree."""
    mask = np.zeros((height, width), bool)
    x0, y0 = np.clip(np.floor(poly.min(0)).astype(int), 0, (width, height))
    x1, y1 = np.clip(np.ceil(poly.max(0)).astype(int), (x0, y0),
                     (width, height))
    ys, xs = np.mgrid[y0:y1, x0:x1] + 0.5  # the pixel centres of its box
    mask[y0:y1, x0:x1] = Path(poly).contains_points(
        np.stack([xs.ravel(), ys.ravel()], 1)).reshape(xs.shape)
    return mask


def outline(rng: np.random.Generator, label: int, radius: float, cx: float,
            cy: float) -> np.ndarray:
    """The (V, 2) polygon of class ``label``'s shape of ``radius`` centred
    at ``(cx, cy)``, rotated by up to 20 degrees either way (a square stays
    distinct from a diamond)."""
    theta = np.deg2rad(rng.uniform(-20, 20))
    rot = np.array([[np.cos(theta), -np.sin(theta)],
                    [np.sin(theta), np.cos(theta)]])
    return UNIT_POLYGONS[class_style(label)[0]] @ rot.T * radius + (cx, cy)


def paint(rng: np.random.Generator, img: np.ndarray, mask: np.ndarray,
          label: int):
    """Fill ``img`` (float) under ``mask`` with class ``label``'s hue,
    jittered, and pixel noise."""
    hue = class_style(label)[1]
    colour = np.array(colorsys.hsv_to_rgb(
        (hue + rng.normal(0, 0.02)) % 1., rng.uniform(0.7, 1.),
        rng.uniform(0.75, 1.))) * 255
    img[mask] = colour + rng.normal(0, 10, size=(int(mask.sum()), 3))


def render_scene(rng: np.random.Generator,
                 height: int,
                 width: int,
                 num_classes: int,
                 num_objects: Tuple[int, int] = (1, 5),
                 scale_range: Tuple[float, float] = (0.08, 0.4)) -> Scene:
    """One scene of ``height`` x ``width`` (>= 16) pixels with objects of
    ``num_classes`` (>= 1) classes: ``num_objects`` (inclusive range) are
    tried, those that find no free place dropped (the first always fits),
    each of an extent (the diameter of its enclosing circle) of
    ``scale_range`` (0 < low <= high <= 1) times the shorter side, drawn
    log-uniformly."""
    lo, hi = scale_range
    if min(height, width) < 16 or num_classes < 1 or not 0 < lo <= hi <= 1:
        raise ValueError(f'render_scene takes an image of at least 16x16, '
                         f'num_classes >= 1 and 0 < low <= high <= 1 of '
                         f'scale_range, got {height}x{width}, {num_classes} '
                         f'and {scale_range}')
    img = render_background(rng, height, width)
    class_map = np.zeros((height, width), np.uint8)
    taken, labels, polygons, masks, boxes = [], [], [], [], []
    for _ in range(rng.integers(num_objects[0], num_objects[1] + 1)):
        label = int(rng.integers(num_classes))
        extent = min(height, width) * np.exp(rng.uniform(np.log(lo),
                                                         np.log(hi)))
        # radius >= 3: every shape then covers a pixel centre
        radius = max(extent / 2, 3.)
        # 30 tries of a centre whose circle lies inside the image and whose
        # bounding square (plus a 2 px gap) meets no box taken
        for _ in range(30):
            cx = rng.uniform(radius, width - radius)
            cy = rng.uniform(radius, height - radius)
            box = (cx - radius - 2, cy - radius - 2, cx + radius + 2,
                   cy + radius + 2)
            if all(box[2] <= b[0] or b[2] <= box[0] or box[3] <= b[1]
                   or b[3] <= box[1] for b in taken):
                break
        else:
            continue
        poly = outline(rng, label, radius, cx, cy)
        mask = polygon_mask(poly, height, width)
        ys, xs = np.nonzero(mask)
        boxes.append([xs.min(), ys.min(), xs.max() - xs.min() + 1,
                      ys.max() - ys.min() + 1])
        class_map[mask] = label + 1
        taken.append(box)
        labels.append(label)
        polygons.append(poly.astype(np.float32))
        masks.append(mask)
    # painted once all are placed: the rng's draws keep their order
    for label, mask in zip(labels, masks):
        paint(rng, img, mask, label)
    return Scene(
        image=np.clip(img, 0, 255).astype(np.uint8),
        boxes=np.array(boxes, np.float32).reshape(-1, 4),
        labels=np.array(labels, np.int64), polygons=polygons,
        areas=np.array([m.sum() for m in masks], np.int64),
        class_map=class_map)


def scenes(seed: int, split_id: int, count: int, size: int, num_classes: int,
           canvas_scale: float = 1., **kwargs):
    """The ``count`` scenes of a split, scene ``index`` seeded from ``(seed,
    split_id, index)``, each side ``size * canvas_scale`` times 0.75 to
    1.25; ``kwargs`` go to :func:`render_scene`."""
    for index in range(count):
        rng = np.random.default_rng([seed, split_id, index])
        height, width = (int(round(size * canvas_scale * f))
                         for f in rng.uniform(0.75, 1.25, size=2))
        yield render_scene(rng, height, width, num_classes, **kwargs)
