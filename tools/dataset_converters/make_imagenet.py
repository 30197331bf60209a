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
    add('--out', required=True, help='The data root (data_root of a config)')
    add('--num-classes', type=int, default=10,
        help='Classes, 1 to 1000. Defaults to %(default)s.')
    add('--train-per-class', type=int, default=100, help='Training images '
        'per class; 0 makes a test set. Defaults to %(default)s.')
    add('--val-per-class', type=int, default=20, help='Validation images '
        'per class, at least 1. Defaults to %(default)s.')
    add('--size', type=int, default=64,
        help='Side of the square images. Defaults to %(default)s.')
    add('--seed', type=int, default=0, help='Defaults to %(default)s.')
    add('--overwrite', action='store_true', help='Replace a data set this '
        'tool made (only the files it wrote)')
    add('--canvas-scale', type=float, default=1.0, help='Images this many '
        'times larger than --size, the object of the size it has at --size. '
        'Defaults to %(default)s.')
    add('--no-progress', action='store_true', help='No progress bar (none '
        'either when stdout is not a terminal)')
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
