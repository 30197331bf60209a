"""Convert an official DeiT or timm ``deit_*`` checkpoint into an mmcpvt
ImageClassifier checkpoint (``CPVT`` backbone with ``pos_embed='learned'``:
the same network). With ``--drop-pos-embed`` the position table is left
out: a warm start for CPVT.

    python tools/model_converters/deit2mmcpvt.py deit_tiny.pth out.pth
"""
import argparse

from mmcpvt.apis.convert import convert_file


def main(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument(
        'src', help='official / timm checkpoint (.pth, .pt, .bin or '
        '.safetensors)')
    parser.add_argument(
        'dst', help='where to write the mmcpvt checkpoint (not src)')
    parser.add_argument(
        '--drop-pos-embed', action='store_true',
        help='leave the learned position table out (warm start for CPVT)')
    args = parser.parse_args(argv)
    print(convert_file(args.src, args.dst, 'deit',
                       drop_pos_embed=args.drop_pos_embed))


if __name__ == '__main__':
    main()
