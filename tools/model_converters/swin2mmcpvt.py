"""Convert an official Swin or timm ``swin_*`` checkpoint into an mmcpvt
ImageClassifier checkpoint (``SwinPEG`` backbone; its PEGs are new and keep
their initialisation).

    python tools/model_converters/swin2mmcpvt.py swin_tiny.pth out.pth
"""
from mmcpvt.apis.convert import cli

if __name__ == '__main__':
    cli('swin', __doc__)
