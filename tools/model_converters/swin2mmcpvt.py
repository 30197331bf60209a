"""Convert an official Swin or timm ``swin_*`` checkpoint into an mmcpvt
ImageClassifier checkpoint (``SwinPEG`` backbone; its PEGs are new and keep
their initialisation).

    python tools/model_converters/swin2mmcpvt.py swin_tiny.pth out.pth
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
    args = parser.parse_args(argv)
    print(convert_file(args.src, args.dst, 'swin'))


if __name__ == '__main__':
    main()
