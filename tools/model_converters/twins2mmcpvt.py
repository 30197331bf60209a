"""Convert an official Twins PCPVT, timm ``twins_pcpvt_*`` or mmpretrain
``twins-pcpvt-*`` checkpoint into an mmcpvt ImageClassifier checkpoint
(``PVTPEG`` backbone, GAP head); docs/model_zoo.md lists the files.

pcpvt small / base / large = PVT-small / medium / large + PEG + GAP:

    python tools/model_converters/twins2mmcpvt.py pcpvt_small.pth \\
        checkpoints/twins-pcpvt-s_in1k.pth
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
    print(convert_file(args.src, args.dst, 'twins'))


if __name__ == '__main__':
    main()
