"""Convert an official Twins PCPVT or timm ``twins_pcpvt_*`` checkpoint into
an mmcpvt ImageClassifier checkpoint (``PVTPEG`` backbone, GAP head).

pcpvt small / base / large = PVT-small / medium / large + PEG + GAP:

    python tools/model_converters/twins2mmcpvt.py pcpvt_small.pth \\
        checkpoints/pvt-s-peg-gap_in1k.pth
"""
from convert_cli import cli

if __name__ == '__main__':
    cli('twins', __doc__)
