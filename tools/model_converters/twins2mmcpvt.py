"""Convert an official Twins PCPVT, timm ``twins_pcpvt_*`` or mmpretrain
``twins-pcpvt-*`` checkpoint into an mmcpvt ImageClassifier checkpoint
(``PVTPEG`` backbone, GAP head); docs/model_zoo.md lists the files.

pcpvt small / base / large = PVT-small / medium / large + PEG + GAP:

    python tools/model_converters/twins2mmcpvt.py pcpvt_small.pth \\
        checkpoints/twins-pcpvt-s_in1k.pth
"""
from mmcpvt.apis.convert import cli

if __name__ == '__main__':
    cli('twins', __doc__)
