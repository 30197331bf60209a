"""Generate a small segmentation data set in the ADE20K layout:
:func:`mmcpvt.datasets.synthetic.ade20k.make_ade20k` from the command line
(``--help``: what it writes, and an example)."""
import argparse
import sys

from mmcpvt.datasets.synthetic import ade20k


def main():
    parser = argparse.ArgumentParser(
        description=ade20k.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    add = parser.add_argument
    add('--out', required=True, help='Output directory; the data root of a '
        'config is OUT/ADEChallengeData2016')
    add('--num-train', type=int, default=200,
        help='Training images, at least 1. Defaults to %(default)s.')
    add('--num-val', type=int, default=50,
        help='Validation images, at least 1. Defaults to %(default)s.')
    add('--size', type=int, default=256, help='Nominal image side; each '
        'side is 0.75x to 1.25x of it. Defaults to %(default)s.')
    add('--num-classes', type=int, default=4, help='Object classes, 1 to '
        '150 (ADE20K classes 1..K). Defaults to %(default)s.')
    add('--seed', type=int, default=0, help='Defaults to %(default)s.')
    add('--overwrite', action='store_true', help='Replace a data set this '
        'tool made (only the files it wrote)')
    add('--no-progress', action='store_true', help='No progress bar (none '
        'either when stdout is not a terminal)')
    args = parser.parse_args()
    try:
        info = ade20k.make_ade20k(
            args.out, args.num_train, args.num_val, args.size,
            args.num_classes, args.seed, args.overwrite,
            progress=not args.no_progress and sys.stdout.isatty())
    except (ValueError, OSError) as e:
        raise SystemExit(f'make_ade20k.py: error: {e}')
    print(f'Wrote {args.num_train} training and {args.num_val} validation '
          f'images of {args.num_classes} classes to {info["data_root"]}\n'
          'Configs must set num_classes and metainfo=dict(classes=...) '
          'accordingly; see configs/pvt_peg/README.md')


if __name__ == '__main__':
    main()
