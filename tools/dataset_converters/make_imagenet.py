"""Generate a small data set in the ImageNet-1k layout:
:func:`mmcpvt.datasets.synthetic.imagenet.make_imagenet` from the command
line (``--help``: what it writes, and an example)."""
import argparse
import sys

from mmcpvt.datasets.synthetic import imagenet


def main():
    parser = argparse.ArgumentParser(
        description=imagenet.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    add = parser.add_argument
    add('--out', required=True, help='the data root (data_root of the '
        'config)')
    add('--num-classes', type=int, default=10, help='number of classes, 1 '
        'to 1000. Defaults to %(default)s.')
    add('--train-per-class', type=int, default=100, help='training images '
        'per class; 0 makes a test set (an empty meta/train.txt, no '
        'train/). Defaults to %(default)s.')
    add('--val-per-class', type=int, default=20, help='validation images '
        'per class, at least 1. Defaults to %(default)s.')
    add('--size', type=int, default=64, help='side of the square images in '
        'pixels. Defaults to %(default)s.')
    add('--seed', type=int, default=0, help='random seed. Defaults to 0.')
    add('--overwrite', action='store_true', help='replace a data set made '
        'by this tool before (only the files it wrote; see '
        'docs/get_started.md)')
    add('--canvas-scale', type=float, default=1.0, help='images of side '
        'round(size * canvas_scale) with the object of the size in pixels '
        'it has at --size, anywhere on them: a test set of larger inputs '
        'with objects at the training scale. Defaults to 1.')
    add('--no-progress', action='store_true', help='no progress bar (none '
        'is shown either when stdout is not a terminal)')
    args = parser.parse_args()
    try:
        info = imagenet.make_imagenet(
            args.out, args.num_classes, args.train_per_class,
            args.val_per_class, args.size, args.seed, args.overwrite,
            canvas_scale=args.canvas_scale,
            progress=not args.no_progress and sys.stdout.isatty())
    except (ValueError, OSError) as e:
        raise SystemExit(f'make_imagenet.py: error: {e}')
    print(f'Wrote {info["num_train"]} train and {info["num_val"]} val '
          f'images of {args.num_classes} classes ({args.size} px, canvas '
          f'{args.canvas_scale}x) to {args.out}')


if __name__ == '__main__':
    main()
