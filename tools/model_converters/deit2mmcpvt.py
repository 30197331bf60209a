"""Convert an official DeiT or timm ``deit_*`` checkpoint into an mmcpvt
ImageClassifier checkpoint (``CPVT`` backbone with ``pos_embed='learned'``:
the same network). With ``--drop-pos-embed`` the position table is left
out: a warm start for CPVT.

    python tools/model_converters/deit2mmcpvt.py deit_tiny.pth out.pth
"""
from mmcpvt.apis.convert import cli

if __name__ == '__main__':
    cli('deit', __doc__)
