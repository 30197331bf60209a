"""Generate a small detection data set in the COCO 2017 layout:
:func:`mmcpvt.datasets.synthetic.coco.make_coco` from the command line
(``--help``: what it writes, and an example)."""
import argparse
import sys

from mmcpvt.datasets.synthetic import coco


def main():
    parser = argparse.ArgumentParser(
        description=coco.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    add = parser.add_argument
    add('--out', required=True, help='The data root (data_root of a config)')
    add('--num-train', type=int, default=200,
        help='Training images; 0 makes a test set. Defaults to %(default)s.')
    add('--num-val', type=int, default=50,
        help='Validation images, at least 1. Defaults to %(default)s.')
    add('--size', type=int, default=320, help='Nominal image side; each '
        'side is 0.75x to 1.25x of it. Defaults to %(default)s.')
    add('--num-classes', type=int, default=4, help='Categories, 1 to 80: '
        'the first ones of COCO. Defaults to %(default)s.')
    add('--seed', type=int, default=0, help='Defaults to %(default)s.')
    add('--overwrite', action='store_true', help='Replace a data set this '
        'tool made (only the files it wrote)')
    add('--object-scale', type=float, nargs=2, default=(0.08, 0.4),
        metavar=('LOW', 'HIGH'), help='Range of an object\'s extent, a '
        'fraction of the shorter image side. Defaults to %(default)s.')
    add('--objects-per-image', type=int, nargs=2, default=(1, 5),
        metavar=('MIN', 'MAX'), help='Objects placed in an image (fewer '
        'where no free place is found). Defaults to %(default)s.')
    add('--canvas-scale', type=float, default=1.0, help='Images this many '
        'times larger than --size, objects of the size they have at --size. '
        'Defaults to %(default)s.')
    add('--no-progress', action='store_true', help='No progress bar (none '
        'either when stdout is not a terminal)')
    args = parser.parse_args()
    try:
        info = coco.make_coco(
            args.out, args.num_train, args.num_val, args.size,
            args.num_classes, args.seed, args.overwrite, args.object_scale,
            args.objects_per_image, canvas_scale=args.canvas_scale,
            progress=not args.no_progress and sys.stdout.isatty())
    except (ValueError, OSError) as e:
        raise SystemExit(f'make_coco.py: error: {e}')
    print(f'Wrote {args.num_train} train and {args.num_val} val images '
          f'({info["num_objects"]["train2017"]} and '
          f'{info["num_objects"]["val2017"]} objects) of {args.num_classes} '
          f'classes {info["classes"]} to {args.out}\nConfigs must set '
          'metainfo=dict(classes=...) and num_classes accordingly; see '
          'configs/pvt_peg/README.md')


if __name__ == '__main__':
    main()
